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

// BenchmarkStepGraphs builds the graph of every step of the same trace
// one after another in one graphMem, as the what-if's workers do: with
// each step's structure kept from the step before (reshape) and built
// afresh every time.
//
//	go test -run XXX -bench StepGraphs -count 5 ./analyze/
func BenchmarkStepGraphs(b *testing.B) {
	t, err := largeSim()
	if err != nil {
		b.Fatal(err)
	}
	ix := newIndex(t, Options{Step: AllSteps})
	var steps [][]int
	forSteps(ix, func(ws []int, _ int64) { steps = append(steps, ws) })
	for _, reuse := range []bool{false, true} {
		name := "fresh"
		if reuse {
			name = "reshaped"
		}
		b.Run(name, func(b *testing.B) {
			defer func(r bool) { graphReuse = r }(graphReuse)
			graphReuse = reuse
			var m graphMem
			for b.Loop() {
				for _, ws := range steps {
					if _, err := m.buildStepGraph(ix, ws); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(t.Len())*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
