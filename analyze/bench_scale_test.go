package analyze

import (
	"fmt"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// fleetTrace is sim.Fleet's job gathered in memory: PP 16 x TP 8 with dp
// replicas, interleaved v=2, 64 micro-batches, jitter and P2P costs.
func fleetTrace(b *testing.B, dp, steps int) *trace.Trace {
	c := sim.Config{Schedule: "interleaved", Stages: 16, TP: 8, DP: dp, MicroBatches: 64, Steps: steps,
		Jitter: 0.05, P2PLatencyUs: 10, P2PGbps: 400, OptMs: 2, Seed: 1}
	t := &trace.Trace{}
	if _, _, err := sim.Fleet(c, func(rows *trace.Trace) error {
		t.Meta = rows.Meta
		t.AppendRows(rows, 0, rows.Len())
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	t.SortByRankSeq()
	return t
}

// BenchmarkAnalyzeRanks compares the cost per event of Run at 256 and 4096
// ranks on the same number of events (3.1M) and windows (32): DP 2 over 16
// steps against DP 32 over one step. ns/event should not grow with ranks
// (issue 8: at most 1.2x from 256 to 4096).
//
//	go test -run XXX -bench AnalyzeRanks -benchtime 3x ./analyze/
func BenchmarkAnalyzeRanks(b *testing.B) {
	for _, s := range []struct{ dp, steps int }{{2, 16}, {32, 1}} {
		b.Run(fmt.Sprintf("ranks=%d", 16*8*s.dp), func(b *testing.B) {
			t := fleetTrace(b, s.dp, s.steps)
			b.ResetTimer()
			for b.Loop() {
				if _, err := Run(t, Options{Step: AllSteps}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(t.Len()), "ns/event")
			b.ReportMetric(float64(t.Len())*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
