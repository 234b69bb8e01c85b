package analyze

import (
	"math"
	"testing"

	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

const ms = int64(1e6)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

// TestHandTrace uses ingest/testdata/gpipe2.csv, a 2-stage GPipe step of 2
// micro-batches (F 1 ms, B 2 ms, OPT 0.5 ms) whose numbers are worked out
// by hand in ingest/testdata/README.md:
//
//	stage 0: F0 0-1, F1 1-2, B0 5-7, B1 7-9   busy 6, idle 3 (steady)
//	stage 1: F0 1-2, F1 2-3, B0 3-5, B1 5-7   busy 6, idle 1 warmup + 2 cooldown
//	window 0-9 ms: bubble 1 - 6/9 = 1/3, balance 1; step 0-9.5 ms with OPT.
func TestHandTrace(t *testing.T) {
	tr, _, _, err := ingest.ReadFile("../ingest/testdata/gpipe2.csv")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"bubble", rep.Bubble.Measured, 1.0 / 3},
		{"balance", rep.Utilization.Balance, 1},
		{"pipeline", rep.Utilization.Pipeline, 2.0 / 3},
		{"warmup", rep.Bubble.Warmup, 1.0 / 18},
		{"cooldown", rep.Bubble.Cooldown, 2.0 / 18},
		{"steady", rep.Bubble.Steady, 3.0 / 18},
		{"step_ms", rep.StepMs, 9.5},
		{"stage0 busy", rep.Stages[0].BusyMs, 6},
		{"stage1 idle", rep.Stages[1].IdleMs, 3},
		{"stage0 fwd", rep.Stages[0].FwdMs, 1},
		{"stage1 bwd", rep.Stages[1].BwdMs, 2},
		{"window", rep.Steps[0].WindowMs(), 9},
		// The RECV_B of stage 0 is posted at 2 ms but its send comes at 5:
		// waiting on the peer, not transferring, so a replay of the
		// measured durations is exact and the stages are already balanced.
		{"balanced step", rep.Imbalance.BalancedStepMs, 9.5},
		{"gap p2p", rep.Bubble.Gap.P2P, 0},
		{"gap other", rep.Bubble.Gap.Other, 0},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if rep.Stages[0].PeakLiveMicroBatches != 2 || rep.Stages[1].PeakLiveMicroBatches != 2 {
		t.Errorf("peak live %d %d, want 2 2", rep.Stages[0].PeakLiveMicroBatches, rep.Stages[1].PeakLiveMicroBatches)
	}
	if rep.Job.PP != 2 || rep.Job.MicroBatches != 2 || rep.Job.Steps != 1 || rep.Job.WorldSize != 2 {
		t.Errorf("job %+v", rep.Job)
	}
	// The op order is GPipe's (stage 1 runs F0 F1 B0 B1), so the schedule is
	// identified without metadata and its theory is (p-1)/(m+p-1) = 1/3.
	if rep.Schedule.Identified != "gpipe" || rep.Bubble.Theoretical == nil || !near(*rep.Bubble.Theoretical, 1.0/3) {
		t.Errorf("identified %q, theory %v; want gpipe, 1/3", rep.Schedule.Identified, rep.Bubble.Theoretical)
	}
	if rep.Utilization.Compute != nil {
		t.Error("compute must be unknown without flops")
	}
}

func add(tr *trace.Trace, rank trace.Rank, stage trace.Stage, tp int32, step int64, k trace.Kind, mb trace.MicroBatch, s, e int64) {
	seq := int64(0)
	for i := tr.Len() - 1; i >= 0; i-- {
		if tr.Rank[i] == rank {
			seq = tr.Seq[i] + 1
			break
		}
	}
	tr.Append(trace.Event{Rank: rank, Stage: stage, TPRank: tp, Step: step, Kind: k, MicroBatch: mb,
		Seq: seq, IssueNs: s, StartNs: s, EndNs: e, Peer: trace.NoRank})
}

// TestTPRanksAreOneStage: two TP ranks of stage 0 with overlapping F count
// once (the union), not twice.
func TestTPRanksAreOneStage(t *testing.T) {
	tr := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	add(tr, 0, 0, 0, 0, trace.F, 0, 0, 10*ms)
	add(tr, 1, 0, 1, 0, trace.F, 0, 5*ms, 15*ms)
	add(tr, 2, 1, 0, 0, trace.F, 0, 20*ms, 30*ms)
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	// busy = [15, 10] in a 30 ms window.
	if !near(rep.Bubble.Measured, 0.5) || !near(rep.Utilization.Balance, 12.5/15) || !near(rep.Utilization.Pipeline, 25.0/60) {
		t.Errorf("bubble %v balance %v U %v", rep.Bubble.Measured, rep.Utilization.Balance, rep.Utilization.Pipeline)
	}
}

// TestIncompleteStep: a step with a pending op is left out of the factors
// and reported.
func TestIncompleteStep(t *testing.T) {
	tr := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	add(tr, 0, 0, 0, 0, trace.F, 0, 0, 10*ms)
	add(tr, 1, 1, 0, 0, trace.F, 0, 10*ms, 20*ms)
	add(tr, 0, 0, 0, 1, trace.F, 0, 30*ms, 40*ms)
	add(tr, 1, 1, 0, 1, trace.F, 0, 40*ms, trace.NoTime)
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Steps) != 2 || !rep.Steps[0].Complete || rep.Steps[1].Complete {
		t.Fatalf("steps %+v", rep.Steps)
	}
	if !near(rep.Bubble.Measured, 0.5) {
		t.Errorf("bubble %v, want 0.5 from step 0 alone", rep.Bubble.Measured)
	}
	incomplete := 0
	for _, f := range rep.Findings {
		if f.Code == CodeIncompleteStep {
			incomplete++
		}
	}
	if incomplete != 1 {
		t.Errorf("want one %s finding (step 1), got %+v", CodeIncompleteStep, rep.Findings)
	}
	one, err := Run(tr, Options{Step: 0})
	if err != nil || len(one.Steps) != 1 || one.Job.Steps != 1 {
		t.Errorf("--step 0: %v %+v", err, one)
	}
	if _, err := Run(tr, Options{Step: 7}); err == nil {
		t.Error("a step with no events must be an error")
	}
}

// TestInvariants checks properties that hold on any trace: factors in
// [0, 1], multiply back, idle parts add up, busy + idle = window.
func TestInvariants(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		scheds := []string{"gpipe", "1f1b", "interleaved", "zb-h1"}
		c := sim.Config{Schedule: scheds[seed%4], Stages: 2 + int(seed%5), MicroBatches: 4 + int(seed%9),
			Steps: 2, DP: 1 + int(seed%2), TP: 1 + int(seed/2%2), Jitter: 0.3, Seed: seed,
			SlowStage: int(seed % 2), SlowFactor: 1.5, P2PLatencyUs: 20, P2PGbps: 100, OptMs: 1}
		if c.Schedule == "interleaved" {
			c.MicroBatches = c.Stages * 2
		}
		tr, err := sim.Run(c)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		rep, err := Run(tr, Options{Step: AllSteps})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		u := rep.Utilization
		for name, x := range map[string]float64{"bubble": u.Bubble, "balance": u.Balance, "pipeline": u.Pipeline} {
			if x < 0 || x > 1 {
				t.Errorf("seed %d: %s = %v outside [0,1]", seed, name, x)
			}
		}
		if !near((1-u.Bubble)*u.Balance, u.Pipeline) {
			t.Errorf("seed %d: (1-%v)*%v != %v", seed, u.Bubble, u.Balance, u.Pipeline)
		}
		b := rep.Bubble
		if math.Abs(b.Warmup+b.Cooldown+b.Steady-(1-u.Pipeline)) > 1e-9 {
			t.Errorf("seed %d: idle parts %v+%v+%v != 1-U %v", seed, b.Warmup, b.Cooldown, b.Steady, 1-u.Pipeline)
		}
		for _, s := range rep.Stages {
			win := 0.0
			for _, w := range rep.Steps {
				win += w.WindowMs()
			}
			win /= float64(len(rep.Steps))
			if math.Abs(s.BusyMs+s.IdleMs-win) > 1e-9*win {
				t.Errorf("seed %d stage %d: busy %v + idle %v != window %v", seed, s.Stage, s.BusyMs, s.IdleMs, win)
			}
		}
		if c.SlowStage >= 0 && rep.Stages[c.SlowStage].BusyMs < rep.Stages[1-c.SlowStage].BusyMs {
			t.Errorf("seed %d: slow stage %d is not the busiest", seed, c.SlowStage)
		}
	}
}

// TestHostileMetadata: metadata is untrusted input; a claim of a billion
// micro-batches must not build a billion-action schedule.
func TestHostileMetadata(t *testing.T) {
	tr, _, _, err := ingest.ReadFile("../ingest/testdata/gpipe2.csv")
	if err != nil {
		t.Fatal(err)
	}
	tr.Meta.MicroBatches = 1_000_000_000
	tr.Meta.PP = 2
	tr.Meta.Schedule = "1f1b"
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	if !near(rep.Bubble.Measured, 1.0/3) {
		t.Errorf("bubble %v, want 1/3", rep.Bubble.Measured)
	}
}
