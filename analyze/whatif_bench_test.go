package analyze

import (
	"testing"
)

// BenchmarkWhatIfLarge runs the whole what-if (the analysis it starts
// from included) on the 10M-event simulated trace of BenchmarkAnalyzeLarge.
//
//	go test -run XXX -bench WhatIfLarge -benchtime 1x ./analyze/
func BenchmarkWhatIfLarge(b *testing.B) {
	t, err := largeSim()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := RunWhatIf(t, WhatIfOptions{Step: AllSteps}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(t.Len())*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
