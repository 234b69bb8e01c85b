package analyze

import (
	"math/rand"
	"reflect"
	"testing"

	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// TestMemoryPeakLive: on simulated traces with jitter, TP and DP, the peak
// of live micro-batches per stage is the schedule's: p - stage capped at m
// for 1F1B, m for GPipe (the closed forms, written here), and for
// interleaved and ZB-H1 the peak of the action list (schedule.PeakLive,
// which walks the list rather than timing it). The reported bound is
// schedule.LiveBound, min(p, m) for ZB-H1.
func TestMemoryPeakLive(t *testing.T) {
	cases := []struct {
		sched   string
		p, m, v int
	}{
		{"1f1b", 2, 2, 1}, {"1f1b", 4, 8, 1}, {"1f1b", 4, 2, 1}, {"1f1b", 3, 7, 1}, {"1f1b", 1, 3, 1},
		{"gpipe", 2, 2, 1}, {"gpipe", 4, 8, 1}, {"gpipe", 3, 5, 1},
		{"interleaved", 4, 8, 2}, {"interleaved", 2, 4, 3}, {"interleaved", 4, 6, 2},
		{"zb-h1", 4, 8, 1}, {"zb-h1", 4, 2, 1}, {"zb-h1", 3, 3, 1},
	}
	for _, c := range cases {
		_, rep := statsRun(t, sim.Config{Schedule: c.sched, Stages: c.p, MicroBatches: c.m, Virtual: c.v,
			Steps: 2, DP: 2, TP: 2, Jitter: 0.3, Seed: 5, P2PLatencyUs: 10, P2PGbps: 400})
		s, err := schedule.New(c.sched, c.p, c.m, c.v)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Memory.Stages) != c.p {
			t.Fatalf("%+v: %d stages in memory", c, len(rep.Memory.Stages))
		}
		for st, got := range rep.Memory.Stages {
			var want, bound int
			switch c.sched {
			case "1f1b":
				want, bound = min(c.p-st, c.m), min(c.p-st, c.m)
			case "gpipe":
				want, bound = c.m, c.m
			case "zb-h1":
				want, bound = s.PeakLive(st), min(c.p, c.m)
			default:
				want, bound = s.PeakLive(st), s.LiveBound(st)
			}
			if got.Peak != want || got.Bound != bound {
				t.Errorf("%+v stage %d: peak %d bound %d, want %d and %d", c, st, got.Peak, got.Bound, want, bound)
			}
			if ss := rep.Stages[st]; ss.PeakLiveMicroBatches != got.Peak || ss.LiveBound != got.Bound {
				t.Errorf("%+v stage %d: summary peak %d bound %d, memory %d %d", c, st, ss.PeakLiveMicroBatches, ss.LiveBound, got.Peak, got.Bound)
			}
		}
		if f := memoryFindings(nil, rep); len(f) != 0 {
			t.Errorf("%+v: findings %+v on a trace that keeps to its schedule", c, f)
		}
	}
}

// TestMemoryActivationBytes: the simulator sends activations of SeqLen x
// MicroBatchSize x Hidden elements (here 128 x 2 x 64 fp32 = 65536 bytes),
// so a 1F1B stage holds (p - stage) of them at its peak; the last stage,
// which sends no activations, counts what it received. An interleaved
// stage counts a payload per live (micro-batch, chunk).
func TestMemoryActivationBytes(t *testing.T) {
	const v = int64(128 * 2 * 64 * 4)
	_, rep := statsRun(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, SeqLen: 128, MicroBatchSize: 2, Hidden: 64, Dtype: "fp32"})
	for st, m := range rep.Memory.Stages {
		if want := int64(4-st) * v; m.PeakActivationBytes != want || rep.Stages[st].PeakActivationBytes != want {
			t.Errorf("1f1b stage %d: peak bytes %d (summary %d), want %d", st, m.PeakActivationBytes, rep.Stages[st].PeakActivationBytes, want)
		}
		if m.PeakMemBytes != 0 {
			t.Errorf("stage %d: mem_bytes peak %d, but the sim records none", st, m.PeakMemBytes)
		}
	}
	c := sim.Config{Schedule: "interleaved", Stages: 4, MicroBatches: 8, Virtual: 2, SeqLen: 128, MicroBatchSize: 2, Hidden: 64, Dtype: "fp32"}
	_, rep = statsRun(t, c)
	s, err := schedule.New(c.Schedule, c.Stages, c.MicroBatches, c.Virtual)
	if err != nil {
		t.Fatal(err)
	}
	for st, m := range rep.Memory.Stages {
		if want := int64(s.PeakLive(st)) * v; m.PeakActivationBytes != want {
			t.Errorf("interleaved stage %d: peak bytes %d, want %d", st, m.PeakActivationBytes, want)
		}
	}
}

// TestMemoryLiveSeriesByHand uses ingest/testdata/gpipe2.csv: stage 0 ends
// F0 at 1 ms, F1 at 2, B0 at 7, B1 at 9; stage 1 ends F0 at 2, F1 at 3, B0
// at 5, B1 at 7. Each micro-batch carries 8192 bytes. No schedule in the
// metadata: bound 0, no finding.
func TestMemoryLiveSeriesByHand(t *testing.T) {
	tr, _, _, err := ingest.ReadFile("../ingest/testdata/gpipe2.csv")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]LivePoint{
		{{1 * ms, 1, 8192}, {2 * ms, 2, 16384}, {7 * ms, 1, 8192}, {9 * ms, 0, 0}},
		{{2 * ms, 1, 8192}, {3 * ms, 2, 16384}, {5 * ms, 1, 8192}, {7 * ms, 0, 0}},
	}
	for st, m := range rep.Memory.Stages {
		if m.LiveRank != st || m.LiveStep != 0 || m.Peak != 2 || m.Bound != 0 || m.PeakActivationBytes != 16384 {
			t.Errorf("stage %d: %+v", st, m)
		}
		if len(m.Live) != len(want[st]) {
			t.Errorf("stage %d live %+v, want %+v", st, m.Live, want[st])
			continue
		}
		for i := range want[st] {
			if m.Live[i] != want[st][i] {
				t.Errorf("stage %d live[%d] = %+v, want %+v", st, i, m.Live[i], want[st][i])
			}
		}
	}
	if f := memoryFindings(nil, rep); len(f) != 0 {
		t.Errorf("findings %+v without a known schedule", f)
	}
}

// TestMemoryLiveSeriesWindow: the series comes from the first complete
// window of the lowest pipeline, on the lowest rank of each stage. Step 0
// of pipeline 0 is incomplete (a pending B), so the series is step 1's; the
// peak still counts step 0, where the pending B keeps both micro-batches
// live. Ranks 0 and 1 are TP ranks of stage 0; rank 1 runs F0 later and
// ends earlier, but the series is rank 0's. mem_bytes on rank 1 sets the
// stage's PeakMemBytes.
func TestMemoryLiveSeriesWindow(t *testing.T) {
	tr := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	// step 0: rank 0 F0 0-1, F1 1-2, B0 2-3, B1 pending.
	add(tr, 0, 0, 0, 0, trace.F, 0, 0, 1*ms)
	add(tr, 0, 0, 0, 0, trace.F, 1, 1*ms, 2*ms)
	add(tr, 0, 0, 0, 0, trace.B, 0, 2*ms, 3*ms)
	add(tr, 0, 0, 0, 0, trace.B, 1, 3*ms, trace.NoTime)
	// step 1: rank 0 F0 10-11, B0 11-13; rank 1 F0 10-12, B0 12-13.
	add(tr, 0, 0, 0, 1, trace.F, 0, 10*ms, 11*ms)
	add(tr, 0, 0, 0, 1, trace.B, 0, 11*ms, 13*ms)
	add(tr, 1, 0, 1, 1, trace.F, 0, 10*ms, 12*ms)
	add(tr, 1, 0, 1, 1, trace.B, 0, 12*ms, 13*ms)
	tr.MemBytes[tr.Len()-1] = 5 << 30
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Memory.Stages[0]
	want := []LivePoint{{11 * ms, 1, 0}, {13 * ms, 0, 0}}
	if m.LiveRank != 0 || m.LiveStep != 1 || len(m.Live) != 2 || m.Live[0] != want[0] || m.Live[1] != want[1] {
		t.Errorf("series rank %d step %d %+v, want rank 0 step 1 %+v", m.LiveRank, m.LiveStep, m.Live, want)
	}
	if m.Peak != 2 || m.PeakMemBytes != 5<<30 || m.PeakActivationBytes != 0 {
		t.Errorf("peak %d mem %d act %d, want 2, 5 GiB, 0", m.Peak, m.PeakMemBytes, m.PeakActivationBytes)
	}
}

// TestMemoryOverBound: a GPipe trace whose metadata claims 1F1B holds m = 8
// live micro-batches on every stage, above 1F1B's p - stage bound (4, 3, 2,
// 1): ACTIVATION_OVER_BOUND names stage 3, 7 over its bound of 1, and all 4
// stages. The genuine 1F1B trace of the same job does not trigger it.
func TestMemoryOverBound(t *testing.T) {
	c := sim.Config{Schedule: "gpipe", Stages: 4, MicroBatches: 8, SeqLen: 128, Hidden: 64}
	tr, err := sim.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	tr.Meta.Schedule = "1f1b"
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	fs := memoryFindings(nil, rep)
	if len(fs) != 1 || fs[0].Code != CodeActivationOverBound || fs[0].Severity != "warning" {
		t.Fatalf("findings %+v, want one ACTIVATION_OVER_BOUND warning", fs)
	}
	const msg = "stage 3 held up to 8 live micro-batches, above the 1f1b bound of 1 (4 of 4 stages over the bound)"
	if got := fs[0].Message; len(got) < len(msg) || got[:len(msg)] != msg {
		t.Errorf("message %q, want it to start %q", got, msg)
	}
	c.Schedule = "1f1b"
	_, rep = statsRun(t, c)
	if fs := memoryFindings(nil, rep); len(fs) != 0 {
		t.Errorf("findings %+v on a genuine 1f1b trace", fs)
	}
}

// TestMemoryP2PRowOrderAndSparseIDs: the passes take fast paths for rows in
// (rank, seq) order and small micro-batch ids. A trace whose rows are
// shuffled, and one whose micro-batch ids are spread far apart (too sparse
// for the per-rank table), give the same memory, P2P and idle numbers as
// the plain trace.
func TestMemoryP2PRowOrderAndSparseIDs(t *testing.T) {
	base, err := sim.Run(sim.Config{Schedule: "interleaved", Stages: 4, MicroBatches: 8, Virtual: 2, DP: 2, TP: 2,
		Jitter: 0.2, Seed: 4, P2PLatencyUs: 30, P2PGbps: 200, Hidden: 256})
	if err != nil {
		t.Fatal(err)
	}
	want, err := Run(base, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	idx := rand.New(rand.NewSource(1)).Perm(base.Len())
	shuffled := base.Permute(idx)
	sparse := base.Permute(nil)
	sparse.AppendRows(base, 0, base.Len())
	for i, mb := range sparse.MicroBatch {
		if mb >= 0 {
			sparse.MicroBatch[i] = mb * 100003
		}
	}
	for name, tr := range map[string]*trace.Trace{"shuffled": shuffled, "sparse ids": sparse} {
		got, err := Run(tr, Options{Step: AllSteps})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Memory, want.Memory) {
			t.Errorf("%s: memory %+v, want %+v", name, got.Memory, want.Memory)
		}
		if !reflect.DeepEqual(got.P2P, want.P2P) {
			t.Errorf("%s: p2p %+v, want %+v", name, got.P2P, want.P2P)
		}
		for st := range want.Stages {
			g, w := got.Stages[st], want.Stages[st]
			if g.F != w.F || g.B != w.B || g.SteadyMs != w.SteadyMs || g.P2PWaitMs != w.P2PWaitMs {
				t.Errorf("%s stage %d: %+v, want %+v", name, st, g, w)
			}
		}
	}
}
