package hang_test

import (
	"sync"
	"testing"

	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

var (
	bigOnce  sync.Once
	bigTrace *trace.Trace
)

// bigHang is a 4096-rank hang: 1F1B, PP 16 x TP 8 x DP 32, 32 micro-batches,
// 2 steps; rank 1283 (stage 5, pipeline 0, TP rank 3) skips micro-batch 16
// of step 1. About 1.5 million events, simulated once.
func bigHang(b *testing.B) *trace.Trace {
	bigOnce.Do(func() {
		c := sim.Config{Schedule: "1f1b", Stages: 16, TP: 8, DP: 32, MicroBatches: 32, Steps: 2,
			Faults: []sim.Fault{{Kind: sim.FaultSkip, Rank: 5*32*8 + 3, Step: 1, MicroBatch: 16}}}
		bigTrace = mustRun(b, c)
	})
	return bigTrace
}

// BenchmarkRun4096 diagnoses the 4096-rank hang and reports events/s.
func BenchmarkRun4096(b *testing.B) {
	tr := bigHang(b)
	b.ResetTimer()
	var rep *hang.Report
	for b.Loop() {
		rep = run(b, tr, hang.Options{})
	}
	b.ReportMetric(float64(tr.Len())*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if rep.Verdict != hang.VerdictDeadlock || rep.RootCause.Rank != 5*32*8+3 || rep.RootCause.MicroBatch != 16 {
		b.Fatalf("verdict %s root %+v", rep.Verdict, rep.RootCause)
	}
}
