package trace_test

import (
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// fleetLike is two steps of two replicas of the fleet job (docs/
// performance.md): PP 16 x TP 8, interleaved, 64 micro-batches, jitter.
func fleetLike(tb testing.TB) *trace.Trace {
	tr, err := sim.Run(sim.Config{Schedule: "interleaved", Stages: 16, TP: 8, DP: 2, MicroBatches: 64,
		Steps: 2, Jitter: 0.05, P2PLatencyUs: 10, P2PGbps: 400, OptMs: 2, PeakFlops: 1e15, Seed: 3})
	if err != nil {
		tb.Fatal(err)
	}
	tr.SortByRankSeq()
	return tr
}

// TestPackFleetSize checks the packed size of a fleet-like job against the
// issue's 48 bytes per event, and that it round-trips.
func TestPackFleetSize(t *testing.T) {
	tr := fleetLike(t)
	p := trace.Pack(tr)
	per := float64(p.Bytes()) / float64(tr.Len())
	t.Logf("%d events, %.1f bytes/event packed", tr.Len(), per)
	if per > 48 {
		t.Errorf("packed fleet job: %.1f bytes/event, want <= 48", per)
	}
	if d := trace.Diff(tr, p.Unpack(nil)); d != "" {
		t.Fatal(d)
	}
}

func BenchmarkPackFleet(b *testing.B) {
	tr := fleetLike(b)
	b.SetBytes(int64(tr.Len())) // "MB/s" is millions of events per second
	for b.Loop() {
		trace.Pack(tr)
	}
}

func BenchmarkUnpackFleet(b *testing.B) {
	tr := fleetLike(b)
	p := trace.Pack(tr)
	dst := p.Unpack(nil)
	b.ReportMetric(float64(p.Bytes())/float64(tr.Len()), "B/event")
	b.SetBytes(int64(tr.Len()))
	for b.Loop() {
		p.Unpack(dst)
	}
}
