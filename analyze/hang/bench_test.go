package hang_test

import (
	"testing"

	"github.com/ppprof/ppprof/analyze/hang"
)

// BenchmarkRun4096 diagnoses the 4096-rank hang (hang.BigHang: 1F1B, PP 16
// x TP 8 x DP 32, 32 micro-batches, 2 steps, one rank skipping a
// micro-batch; about 1.5 million events) and reports events/s and P2P
// ops/s. BenchmarkMatch4096 times the matching step alone.
func BenchmarkRun4096(b *testing.B) {
	tr := hang.BigHang(b)
	ops := 0
	for _, k := range tr.Kind {
		if k.IsP2P() {
			ops++
		}
	}
	b.ResetTimer()
	var rep *hang.Report
	cpu0 := hang.CPUTime()
	for b.Loop() {
		rep = run(b, tr, hang.Options{})
	}
	hang.ReportCPU(b, cpu0, ops)
	b.ReportMetric(float64(tr.Len())*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(ops)*float64(b.N)/b.Elapsed().Seconds(), "p2p-ops/s")
	if rep.Verdict != hang.VerdictDeadlock || rep.RootCause.Rank != 5*32*8+3 || rep.RootCause.MicroBatch != 16 {
		b.Fatalf("verdict %s root %+v", rep.Verdict, rep.RootCause)
	}
}
