package analyze

import (
	"math"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

func gapOf(t *testing.T, c sim.Config) (*Report, *GapAttribution) {
	t.Helper()
	_, rep := mustRun(t, c)
	if rep.Bubble.Gap == nil {
		t.Fatalf("%+v: no gap attribution (theory %v)", c, rep.Bubble.Theoretical)
	}
	return rep, rep.Bubble.Gap
}

func partsSum(g *GapAttribution) float64 {
	return g.P2P + g.Overhead + g.Jitter + g.Imbalance + g.Other
}

// TestGapUniform: a uniform job with free communication runs at the
// theory (DESIGN.md): gap 0 and every part 0, on every schedule.
func TestGapUniform(t *testing.T) {
	for _, sched := range []string{"gpipe", "1f1b", "interleaved", "zb-h1"} {
		_, g := gapOf(t, sim.Config{Schedule: sched, Stages: 4, MicroBatches: 8, Steps: 2, DP: 2, TP: 2, OptMs: 1})
		for name, v := range map[string]float64{"gap": g.Gap, "p2p": g.P2P, "overhead": g.Overhead, "jitter": g.Jitter,
			"imbalance": g.Imbalance, "other": g.Other} {
			if math.Abs(v) > 1e-9 {
				t.Errorf("%s: %s = %v, want 0", sched, name, v)
			}
		}
	}
}

// TestGapP2P: P2P latency and bandwidth alone: once transfers are free the
// replay is the uniform schedule, so the P2P part is the whole gap and the
// rest is 0.
func TestGapP2P(t *testing.T) {
	for _, sched := range []string{"gpipe", "1f1b", "interleaved", "zb-h1"} {
		_, g := gapOf(t, sim.Config{Schedule: sched, Stages: 4, MicroBatches: 8, Steps: 2, P2PLatencyUs: 200, P2PGbps: 50})
		if g.Gap < 0.01 || math.Abs(g.P2P-g.Gap) > 1e-9 || math.Abs(g.Other) > 1e-9 || g.Jitter != 0 || g.Imbalance != 0 {
			t.Errorf("%s: %+v, want P2P = gap > 0.01, others 0", sched, *g)
		}
	}
}

// TestGapJitter: jitter alone: the jitter part is positive and the
// largest (the per-stage medians still differ a little, a small imbalance
// part; P2P and overhead are 0). Interleaved hides most jitter (its gap is
// within noise of 0), so it is left to TestGapPartsAddUp.
func TestGapJitter(t *testing.T) {
	for _, sched := range []string{"gpipe", "1f1b", "zb-h1"} {
		for seed := int64(1); seed <= 3; seed++ {
			_, g := gapOf(t, sim.Config{Schedule: sched, Stages: 4, MicroBatches: 16, Steps: 8, Jitter: 0.3, Seed: seed})
			if !(g.Jitter > 0.01) || math.Abs(g.Jitter) < 1.5*math.Abs(g.Imbalance) || math.Abs(g.Jitter) < 5*math.Abs(g.Other) ||
				g.P2P != 0 || g.Overhead != 0 {
				t.Errorf("%s seed %d: %+v, want jitter > 0.01 and the largest part", sched, seed, *g)
			}
		}
	}
}

// TestGapSlowStage: one slow stage alone: the imbalance part is the whole
// gap (every stage's ops are uniform within the stage, so medians change
// nothing). The gap is negative: the bubble is the slowest stage's idle
// share, and a slow stage idles less than the schedule's bubble (the other
// stages wait on it: that loss is in balance, not in the bubble).
func TestGapSlowStage(t *testing.T) {
	for _, sched := range []string{"gpipe", "1f1b", "interleaved", "zb-h1"} {
		_, g := gapOf(t, sim.Config{Schedule: sched, Stages: 4, MicroBatches: 8, Steps: 2, SlowStage: 1, SlowFactor: 1.6})
		if g.Gap > -0.01 || math.Abs(g.Imbalance-g.Gap) > 1e-9 || g.Jitter != 0 || g.P2P != 0 {
			t.Errorf("%s: %+v, want imbalance = gap < -0.01", sched, *g)
		}
	}
}

// TestGapOverhead: the hand-timed 2-stage GPipe step of gpipe2P2P with
// free transfers and a 6 ns LOSS op on stage 1 between F1 and B0:
//
//	stage 0: F0 0-10, F1 10-20, B0 56-76, B1 76-96
//	stage 1: F0 10-20, F1 20-30, LOSS 30-36, B0 36-56, B1 56-76
//
// window 0-96, busy 60: bubble 1 - 60/96 = 0.375 against the theory
// (p-1)/(m+p-1) = 1/3; without LOSS the window is 90 and the bubble 1/3,
// so the overhead part is the whole gap, 1/24.
func TestGapOverhead(t *testing.T) {
	loss := trace.MustKind("LOSS")
	tr := handTrace([]handOp{
		{0, trace.F, 0, -1, 0, 0, 10},
		{0, trace.SendF, 0, 1, 10, 10, 10},
		{0, trace.F, 1, -1, 10, 10, 20},
		{0, trace.SendF, 1, 1, 20, 20, 20},
		{0, trace.RecvB, 0, 1, 20, 56, 56},
		{0, trace.B, 0, -1, 56, 56, 76},
		{0, trace.RecvB, 1, 1, 76, 76, 76},
		{0, trace.B, 1, -1, 76, 76, 96},
		{1, trace.RecvF, 0, 0, 0, 10, 10},
		{1, trace.F, 0, -1, 10, 10, 20},
		{1, trace.RecvF, 1, 0, 20, 20, 20},
		{1, trace.F, 1, -1, 20, 20, 30},
		{1, loss, -1, -1, 30, 30, 36},
		{1, trace.B, 0, -1, 36, 36, 56},
		{1, trace.SendB, 0, 0, 56, 56, 56},
		{1, trace.B, 1, -1, 56, 56, 76},
		{1, trace.SendB, 1, 0, 76, 76, 76},
	})
	tr.Meta.Schedule, tr.Meta.PP, tr.Meta.MicroBatches = "gpipe", 2, 2
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	if !near(rep.Bubble.Measured, 0.375) || rep.Bubble.Theoretical == nil || !near(*rep.Bubble.Theoretical, 1.0/3) {
		t.Fatalf("bubble %v theory %v", rep.Bubble.Measured, rep.Bubble.Theoretical)
	}
	g := rep.Bubble.Gap
	if !near(g.Gap, 1.0/24) || !near(g.Overhead, 1.0/24) || math.Abs(g.Other) > 1e-12 || g.P2P != 0 || g.Jitter != 0 || g.Imbalance != 0 {
		t.Errorf("gap %+v, want overhead = gap = 1/24", *g)
	}
}

// TestGapPartsAddUp: on random jobs (every schedule, DP, TP, jitter, slow
// stage, straggler, P2P cost, variable sequence lengths, some with a
// fault that leaves windows incomplete) the parts add up to the gap.
func TestGapPartsAddUp(t *testing.T) {
	scheds := []string{"gpipe", "1f1b", "interleaved", "zb-h1"}
	for seed := int64(1); seed <= 24; seed++ {
		c := sim.Config{Schedule: scheds[seed%4], Stages: 2 + int(seed%4), MicroBatches: 4 + int(seed%5), Steps: 2,
			DP: 1 + int(seed%2), TP: 1 + int(seed/2%2), Jitter: 0.2, Seed: seed, SlowStage: int(seed % 2), SlowFactor: 1.4,
			P2PLatencyUs: float64(seed * 10), P2PGbps: 100, OptMs: 0.5, VarSeqLen: seed%3 == 0,
			Stragglers: []sim.Straggler{{Step: -1, MicroBatch: 1, Stage: -1, Factor: 2}}}
		if c.Schedule == "interleaved" {
			c.MicroBatches = 2 * c.Stages
		}
		if seed%5 == 0 {
			c.Faults = []sim.Fault{{Kind: sim.FaultCrash, Rank: 0, Step: 1, MicroBatch: 1}}
		}
		_, g := gapOf(t, c)
		if d := math.Abs(partsSum(g) - g.Gap); d > 1e-9 {
			t.Errorf("seed %d: parts add to %v, gap %v", seed, partsSum(g), g.Gap)
		}
	}
}

// TestGapNone: no theory (no schedule named or identified) or no complete
// window: no attribution, no panic.
func TestGapNone(t *testing.T) {
	pend := &trace.Trace{Meta: trace.Meta{Schema: 1, Schedule: "1f1b", PP: 2, MicroBatches: 1}}
	add(pend, 0, 0, 0, 0, trace.F, 0, 0, trace.NoTime)
	rep, err := Run(pend, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Bubble.Gap != nil {
		t.Errorf("pending trace: gap %+v", *rep.Bubble.Gap)
	}
	if fs := gapFindings(newIndex(pend, Options{Step: AllSteps}), rep); len(fs) != 0 {
		t.Errorf("pending trace: findings %+v", fs)
	}
}

// TestGapFindings: BUBBLE_HIGH is a warning naming the largest part when
// the bubble is more than 0.05 above theory, costing T gap / (1 - theory)
// per step; nothing on a uniform job with a low theory, nor with a slow
// stage (its bubble is below theory); info when the theory itself is above
// 0.3.
func TestGapFindings(t *testing.T) {
	c := sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 16, Steps: 2, P2PLatencyUs: 500}
	tr, rep := mustRun(t, c)
	fs := gapFindings(newIndex(tr, Options{Step: AllSteps}), rep)
	if len(fs) != 1 || fs[0].Code != CodeBubbleHigh || fs[0].Severity != "warning" || !strings.Contains(fs[0].Message, "P2P") {
		t.Fatalf("findings %+v", fs)
	}
	// Each stage is busy 16 * 3 ms = 48 ms; at the theory's bubble
	// (p-1)/(m+p-1) = 3/19 that needs a window of 48 / (16/19) = 57 ms;
	// the loss is T - 57 (T gap / (1 - theory) is the same).
	T := rep.Steps[0].WindowMs()
	if want := T - 57; !within(fs[0].ImpactMs, want, 1e-9) || want < 1 {
		t.Errorf("impact %v, want %v", fs[0].ImpactMs, want)
	}
	for _, x := range []sim.Config{
		{Schedule: "1f1b", Stages: 4, MicroBatches: 16, Steps: 2},
		{Schedule: "1f1b", Stages: 4, MicroBatches: 16, Steps: 2, SlowStage: 1, SlowFactor: 2},
	} {
		tr, rep = mustRun(t, x)
		if fs := gapFindings(newIndex(tr, Options{Step: AllSteps}), rep); len(fs) != 0 {
			t.Errorf("%+v: findings %+v", x, fs)
		}
	}
	tr, rep = mustRun(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 4, Steps: 2}) // theory 3/7 > 0.3
	fs = gapFindings(newIndex(tr, Options{Step: AllSteps}), rep)
	if len(fs) != 1 || fs[0].Severity != "info" || fs[0].ImpactMs != 0 {
		t.Errorf("high theory: findings %+v", fs)
	}
}

// TestGapFindingsNoTheory: without a theory, a bubble above 0.3 is a
// warning and one below is nothing. gpipe2P2P has bubble 1 - 60/98 = 0.388.
func TestGapFindingsNoTheory(t *testing.T) {
	tr := gpipe2P2P()
	ix := newIndex(tr, Options{Step: AllSteps})
	rep := &Report{Bubble: Bubble{Measured: 1 - 60.0/98}}
	fs := gapFindings(ix, rep)
	if len(fs) != 1 || fs[0].Severity != "warning" || fs[0].Code != CodeBubbleHigh || fs[0].ImpactMs != 0 {
		t.Errorf("findings %+v", fs)
	}
	rep.Bubble.Measured = 0.25
	if fs := gapFindings(ix, rep); len(fs) != 0 {
		t.Errorf("bubble 0.25: findings %+v", fs)
	}
}

// BenchmarkReplayPasses times imbalance, stragglers and gap attribution
// (about eight replays of every window) on a 1F1B trace of 8 stages, 64
// micro-batches, 32 steps, DP 2, TP 2 (about 530k rows).
func BenchmarkReplayPasses(b *testing.B) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 8, MicroBatches: 64, Steps: 32, DP: 2, TP: 2, Jitter: 0.1,
		P2PLatencyUs: 20, P2PGbps: 100, SlowStage: 3, SlowFactor: 1.2,
		Stragglers: []sim.Straggler{{Step: -1, MicroBatch: 7, Stage: 3, Factor: 3}}})
	if err != nil {
		b.Fatal(err)
	}
	ix := newIndex(tr, Options{Step: AllSteps})
	th := 7.0 / 71
	b.ReportMetric(float64(tr.Len()), "rows")
	b.ResetTimer()
	for range b.N {
		rep := Report{Bubble: Bubble{Theoretical: &th}}
		analyzeImbalance(ix, &rep)
		analyzeStragglers(ix, &rep)
		attributeGap(ix, &rep)
	}
}

// TestReplayPassesWeird: imbalance, stragglers and the gap attribution
// degrade gracefully on traces the replay cannot or can barely re-time.
func TestReplayPassesWeird(t *testing.T) {
	skip := trace.MustKind("OPT_SKIP")
	cases := map[string][]handOp{
		"only unmatched P2P": {{0, trace.SendF, 0, 1, 0, 0, 5}, {1, trace.RecvB, 0, 0, 0, 0, 5}},
		"end before start":   {{0, trace.F, 0, -1, 0, 10, 5}, {1, trace.F, 0, -1, 0, 5, 20}},
		"zero durations":     {{0, trace.F, 0, -1, 0, 0, 0}, {0, trace.B, 0, -1, 0, 0, 0}, {1, trace.F, 0, -1, 0, 0, 0}},
		"other kinds only":   {{0, trace.Opt, -1, -1, 0, 0, 5}, {1, skip, -1, -1, 0, 0, 0}},
		"single op":          {{0, trace.W, 3, -1, 0, 0, 7}},
		"self send":          {{0, trace.SendF, 0, 0, 0, 0, 1}, {0, trace.RecvF, 0, 0, 0, 0, 1}, {0, trace.F, 0, -1, 1, 1, 4}},
		"recv before send":   {{0, trace.RecvF, 0, 0, 0, 0, 1}, {0, trace.SendF, 0, 0, 0, 0, 1}},
	}
	for name, ops := range cases {
		tr := handTrace(ops)
		tr.Meta.Schedule, tr.Meta.PP, tr.Meta.MicroBatches = "1f1b", 2, 1
		tr.Chunk[0] = 1 << 20 // a chunk id no schedule has
		rep, err := Run(tr, Options{Step: AllSteps})
		if err != nil {
			continue
		}
		ix := newIndex(tr, Options{Step: AllSteps})
		_ = imbalanceFindings(ix, rep)
		_ = stragglersFindings(ix, rep)
		_ = gapFindings(ix, rep)
		if g := rep.Bubble.Gap; g != nil && math.Abs(partsSum(g)-g.Gap) > 1e-9 {
			t.Errorf("%s: parts %v != gap %v", name, partsSum(g), g.Gap)
		}
		if im := rep.Imbalance; math.IsNaN(im.ExcessFrac) || math.IsNaN(im.BalancedStepMs) || math.IsInf(im.FBMs, 0) {
			t.Errorf("%s: imbalance %+v", name, im)
		}
	}
}
