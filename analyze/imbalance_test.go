package analyze

import (
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// TestImbalanceSlowStage: p = 4 stages, m = 8 micro-batches, F 1 ms and B
// 2 ms per micro-batch and stage, stage 2 slowed by x = 1.5. Every
// schedule does m (F + B) of compute per stage and step (zb-h1 splits B
// into B and W, interleaved into chunks, the sum is the same), so by hand:
//
//	busy of stage 2     = m (f+b) x           = 8 * 3 * 1.5  = 36 ms
//	busy of the others  = m (f+b)             = 24 ms
//	mean busy           = (36 + 3*24) / 4     = 27 ms
//	excess              = 9 ms, 9/27 = 1/3 of the mean
//	compute per mb      = (f+b) x = 4.5 ms on stage 2, mean (f+b)(x+p-1)/p = 3.375 ms
//
// Balanced, every stage costs the mean stage: factor (x + p - 1)/p = 1.125
// on every stage, which is the same job simulated with F 1.125 ms, B 2.25
// ms and no slow stage. Its step time (window + OPT, as the analysis
// measures it) is what BalancedStepMs must predict: within 2% (exact up to
// ns rounding without jitter; with jitter the replay keeps each op's
// jitter while the scaling uses per-stage means, hence the tolerance).
func TestImbalanceSlowStage(t *testing.T) {
	for _, sched := range []string{"gpipe", "1f1b", "interleaved", "zb-h1"} {
		for _, jitter := range []float64{0, 0.1} {
			c := sim.Config{Schedule: sched, Stages: 4, MicroBatches: 8, Steps: 3, DP: 2, TP: 2, P2PLatencyUs: 20,
				P2PGbps: 400, OptMs: 0.5, SlowStage: 2, SlowFactor: 1.5, Jitter: jitter, Seed: 3}
			_, rep := mustRun(t, c)
			im := rep.Imbalance
			if im.SlowestStage != 2 || im.SlowestStageByFB != 2 {
				t.Errorf("%s j%v: slowest %d / by FB %d, want 2", sched, jitter, im.SlowestStage, im.SlowestStageByFB)
			}
			tol := 1e-9
			if jitter > 0 {
				tol = 0.05 // the mean of 8 x 6 jittered ops per stage
			}
			checks := []struct {
				name      string
				got, want float64
			}{
				{"busy", im.BusyMs, 36}, {"mean busy", im.MeanBusyMs, 27}, {"excess", im.ExcessMs, 9},
				{"excess frac", im.ExcessFrac, 1.0 / 3}, {"fb", im.FBMs, 4.5}, {"mean fb", im.MeanFBMs, 3.375},
			}
			for _, x := range checks {
				if !within(x.got, x.want, tol) {
					t.Errorf("%s j%v: %s = %v, want %v", sched, jitter, x.name, x.got, x.want)
				}
			}
			bal := c
			bal.SlowStage, bal.SlowFactor = -1, 1
			bal.FwdMs, bal.BwdMs = 1.125, 2.25
			_, want := mustRun(t, bal)
			if !within(im.BalancedStepMs, want.StepMs, 0.02) {
				t.Errorf("%s j%v: balanced step %v ms, the balanced sim takes %v", sched, jitter, im.BalancedStepMs, want.StepMs)
			}
			if jitter == 0 && !within(im.BalancedStepMs, want.StepMs, 1e-6) {
				t.Errorf("%s: balanced step %v ms, the balanced sim takes exactly %v", sched, im.BalancedStepMs, want.StepMs)
			}
			if im.MeasuredStepMs != rep.StepMs {
				t.Errorf("%s j%v: measured step %v, report %v", sched, jitter, im.MeasuredStepMs, rep.StepMs)
			}
		}
	}
}

// TestImbalanceUniform: equal stages have no excess, and balancing
// predicts the measured step.
func TestImbalanceUniform(t *testing.T) {
	_, rep := mustRun(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, P2PLatencyUs: 20, OptMs: 1})
	im := rep.Imbalance
	if im.ExcessMs != 0 || im.ExcessFrac != 0 || im.SlowestStage != 0 || !near(im.BalancedStepMs, rep.StepMs) ||
		!near(im.BusyMs, 24) {
		t.Errorf("imbalance %+v, step %v", im, rep.StepMs)
	}
}

// TestImbalanceFindings: stage 2 at 1.5x raises STAGE_IMBALANCE costing
// the step minus the balanced step; at 1.04x (excess 0.04*3/4 / 1.01 = 3%
// of the mean) and on a uniform job it does not.
func TestImbalanceFindings(t *testing.T) {
	c := sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, SlowStage: 2, SlowFactor: 1.5}
	_, rep := mustRun(t, c)
	fs := imbalanceFindings(nil, rep)
	if len(fs) != 1 || fs[0].Code != CodeStageImbalance || fs[0].Severity != "warning" {
		t.Fatalf("findings %+v", fs)
	}
	if want := rep.Imbalance.MeasuredStepMs - rep.Imbalance.BalancedStepMs; !near(fs[0].ImpactMs, want) || want <= 0 {
		t.Errorf("impact %v, want %v > 0", fs[0].ImpactMs, want)
	}
	c.SlowFactor = 1.04
	_, rep = mustRun(t, c)
	if !within(rep.Imbalance.ExcessFrac, 0.04*0.75/1.01, 1e-6) {
		t.Errorf("excess frac %v", rep.Imbalance.ExcessFrac)
	}
	if fs := imbalanceFindings(nil, rep); len(fs) != 0 {
		t.Errorf("findings %+v at 3%% excess", fs)
	}
	c.SlowStage = -1
	_, rep = mustRun(t, c)
	if fs := imbalanceFindings(nil, rep); len(fs) != 0 {
		t.Errorf("findings %+v on a uniform job", fs)
	}
}

// TestImbalanceRobust: one stage, only pending ops, zero durations: no
// panic, no finding, SlowestStage -1 when nothing is complete.
func TestImbalanceRobust(t *testing.T) {
	one := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	add(one, 0, 0, 0, 0, trace.F, 0, 0, 3*ms)
	add(one, 0, 0, 0, 0, trace.B, 0, 3*ms, 9*ms)
	rep, err := Run(one, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	if im := rep.Imbalance; im.SlowestStage != 0 || im.ExcessMs != 0 || !near(im.BalancedStepMs, 9) || !near(im.FBMs, 9) {
		t.Errorf("single stage: %+v", im)
	}
	pend := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	add(pend, 0, 0, 0, 0, trace.F, 0, 0, trace.NoTime)
	add(pend, 1, 1, 0, 0, trace.F, 0, 0, trace.NoTime)
	rep, err = Run(pend, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	if im := rep.Imbalance; im.SlowestStage != -1 || im.BalancedStepMs != 0 || len(imbalanceFindings(nil, rep)) != 0 {
		t.Errorf("pending: %+v", im)
	}
	zero := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	add(zero, 0, 0, 0, 0, trace.F, 0, 0, 0)
	add(zero, 1, 1, 0, 0, trace.F, 0, 0, 1)
	if _, err := Run(zero, Options{Step: AllSteps}); err != nil {
		t.Fatal(err)
	}
}
