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
	benchRanks(b, []struct{ dp, steps int }{{2, 16}, {32, 1}})
}

// BenchmarkAnalyzeRanks16384 is BenchmarkAnalyzeRanks from 4096 to 16384
// ranks, on 12.3M events and 128 windows each: DP 32 over 4 steps against
// DP 128 over one (about 5 GB of memory).
//
//	go test -run XXX -bench AnalyzeRanks16384 -benchtime 2x ./analyze/
func BenchmarkAnalyzeRanks16384(b *testing.B) {
	benchRanks(b, []struct{ dp, steps int }{{32, 4}, {128, 1}})
}

// benchRanks runs Run on the fleet job of each (dp, steps) in turn.
func benchRanks(b *testing.B, shapes []struct{ dp, steps int }) {
	for _, s := range shapes {
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

// BenchmarkRunChunks compares Run with RunChunks on the same trace (DP 8,
// 2 steps of the fleet job: 1.5M events), split one replica per chunk:
// every chunk kept (the passes' own cost of visiting chunk by chunk); none
// kept, read again by every visit (here a slice of the trace, so this
// measures the analysis side of streaming, not the decoding of the reads:
// ppprof analyze --stream measures both, docs/performance.md "Streaming");
// every chunk packed; and every chunk packed for one step of the two.
//
//	go test -run XXX -bench RunChunks -benchtime 3x ./analyze/
func BenchmarkRunChunks(b *testing.B) {
	t := fleetTrace(b, 8, 2)
	var groups [][]int32
	for p := range int32(8) {
		groups = append(groups, []int32{p})
	}
	pc := splitPipelines(t, groups)
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"whole", func() error { _, err := Run(t, Options{Step: AllSteps}); return err }},
		{"chunks-kept", func() error {
			_, err := RunChunks(pc, Options{Step: AllSteps, KeepRows: t.Len()})
			return err
		}},
		{"chunks-reread", func() error { _, err := RunChunks(pc, Options{Step: AllSteps}); return err }},
		{"chunks-packed", func() error {
			_, err := RunChunks(pc, Options{Step: AllSteps, PackBytes: 1 << 40})
			return err
		}},
		// One step of the two: each chunk is cut to that step's rows
		// before it is packed (events/s counts the whole trace's events).
		{"chunks-packed-step1", func() error {
			_, err := RunChunks(pc, Options{Step: 1, PackBytes: 1 << 40})
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			cpu0 := cpuTime()
			for b.Loop() {
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(t.Len())*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/float64(t.Len()), "cpu-ns/event")
		})
	}
}
