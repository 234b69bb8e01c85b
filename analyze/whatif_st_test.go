package analyze

import (
	"math"
	"os"
	"slices"
	"testing"

	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/trace"
)

// stTrace is the StragglerAnalysis "ST" job (PP 4 x DP 2, 32 steps x 4
// micro-batches, a slow last stage), read by the Megatron timeline reader.
const stTrace = "../../shared/data/megatron_timeline/timeline-ST.json.gz"

// The study's own figures for ST (ms-ST.json), seconds per step.
const (
	stPublishedTori   = 2.172696813310722
	stPublishedTideal = 1.843295824372035
	stPublishedTrem   = 1.7710396162385678
)

func openST(t *testing.T) *trace.Trace {
	t.Helper()
	if _, err := os.Stat(stTrace); err != nil {
		t.Skipf("%s not found (the shared data sets live beside the project): %v", stTrace, err)
	}
	res, err := ingest.Open([]string{stTrace}, ingest.Options{})
	if err != nil {
		t.Fatalf("reading %s: %v", stTrace, err)
	}
	return res.Trace
}

// STBalancedTolerance is how far the balanced prediction on ST may be from
// the independent computation of TestWhatIfST (docs/whatif.md explains
// the gap: the independent one has free P2P, no joins and no launch
// delays, and its step is (m + p - 1) stage slots plus the measured tail).
const STBalancedTolerance = 0.05

// TestWhatIfST: on the ST sample the balanced prediction is reported and
// compared with
//
//  1. an independent computation: schedule.Replay (the schedule package's
//     own executor, not the step graph) of 1F1B with p = 4, m = 4 and
//     every stage's F and B at its median, capped at the median stage's,
//     from the trace's rows, plus the measured time outside the pipeline
//     window (median over steps): within STBalancedTolerance;
//  2. the study's published figures, logged; and the study's method
//     reproduced on the step graph (no launch delays; ideal = every compute
//     op at its kind's mean over all stages, replicas and steps, every
//     other op at its kind's median; trem = only the last stage's ops at
//     the ideal; means over steps): within 1% of tori, tideal and trem.
func TestWhatIfST(t *testing.T) {
	tr := openST(t)
	wi, err := RunWhatIf(tr, WhatIfOptions{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	var bal Scenario
	for _, sc := range wi.Scenarios {
		if sc.Name == ScenarioBalanced {
			bal = sc
		}
	}
	if !bal.Available || wi.Steps != 32 || wi.Stages != 4 || wi.Replicas != 2 || wi.MicroBatches != 4 {
		t.Fatalf("what-if %+v", wi)
	}
	t.Logf("ST: measured step %.1f ms (median of %d), replayed %.1f ms; balanced %.1f ms (%.1f%% faster)",
		wi.StepMs, wi.Steps, wi.ReplayStepMs, bal.StepMs, 100*(1-bal.StepMs/wi.StepMs))
	t.Logf("published: tori %.1f ms, trem %.1f ms (%.1f%% faster), tideal %.1f ms",
		1e3*stPublishedTori, 1e3*stPublishedTrem, 100*(1-stPublishedTrem/stPublishedTori), 1e3*stPublishedTideal)
	if wi.Verdict.Kind != VerdictSlowStage || wi.Verdict.Stage != 3 {
		t.Errorf("verdict %+v, want the last stage slow on every replica", wi.Verdict)
	}
	if math.Abs(wi.ReplayStepMs-wi.StepMs) > 0.01*wi.StepMs {
		t.Errorf("baseline replay %.1f ms, measured %.1f ms: more than 1%% apart", wi.ReplayStepMs, wi.StepMs)
	}

	// 1. Independent computation.
	indep := stIndependentBalanced(t, tr)
	rel := (bal.StepMs - indep) / indep
	t.Logf("independent (schedule.Replay of balanced medians + measured tail): %.1f ms; the what-if is %+.2f%% off", indep, 100*rel)
	if math.Abs(rel) > STBalancedTolerance {
		t.Errorf("balanced %.1f ms, independent computation %.1f ms: %+.1f%%, tolerance %.0f%%", bal.StepMs, indep, 100*rel, 100*STBalancedTolerance)
	}

	// 2. The study's method on the step graph.
	tori, tideal, trem := stStudyMethod(t, tr)
	t.Logf("study method on the step graph: tori %.1f ms, tideal %.1f ms, trem %.1f ms", tori, tideal, trem)
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"tori", tori, stPublishedTori}, {"tideal", tideal, stPublishedTideal}, {"trem", trem, stPublishedTrem}} {
		if r := (c.got - 1e3*c.want) / (1e3 * c.want); math.Abs(r) > 0.01 {
			t.Errorf("%s: %.1f ms, published %.1f ms (%+.2f%%)", c.name, c.got, 1e3*c.want, 100*r)
		}
	}
}

// stIndependentBalanced computes the balanced step of tr from its rows
// alone (see TestWhatIfST), ms.
func stIndependentBalanced(t *testing.T, tr *trace.Trace) float64 {
	t.Helper()
	p := 0
	durs := map[[2]int][]float64{} // (stage, 0 F / 1 B) -> ms
	type span struct{ s, e int64 }
	step := map[int64]*span{}
	win := map[[2]int64]*span{} // (step, pipeline)
	widen := func(sp *span, s, e int64) {
		sp.s, sp.e = min(sp.s, s), max(sp.e, e)
	}
	for i := 0; i < tr.Len(); i++ {
		p = max(p, int(tr.Stage[i])+1)
		k := tr.Kind[i]
		s, e := tr.StartNs[i], tr.EndNs[i]
		if st := step[tr.Step[i]]; st == nil {
			step[tr.Step[i]] = &span{s, e}
		} else {
			widen(st, s, e)
		}
		if k.IsCompute() || k.IsP2P() {
			key := [2]int64{tr.Step[i], int64(tr.Pipeline[i])}
			if w := win[key]; w == nil {
				win[key] = &span{s, e}
			} else {
				widen(w, s, e)
			}
		}
		if k == trace.F || k == trace.B {
			x := 0
			if k == trace.B {
				x = 1
			}
			durs[[2]int{int(tr.Stage[i]), x}] = append(durs[[2]int{int(tr.Stage[i]), x}], float64(e-s)/1e6)
		}
	}
	med := func(xs []float64) float64 {
		xs = slices.Clone(xs)
		slices.Sort(xs)
		n := len(xs)
		if n%2 == 1 {
			return xs[n/2]
		}
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	cost := make([][2]float64, p)
	for x := range 2 {
		var stages []float64
		for s := range p {
			cost[s][x] = med(durs[[2]int{s, x}])
			stages = append(stages, cost[s][x])
		}
		target := med(stages)
		for s := range p {
			cost[s][x] = min(cost[s][x], target)
		}
	}
	var tails []float64
	for st, sp := range step {
		var longest int64
		for key, w := range win {
			if key[0] == st {
				longest = max(longest, w.e-w.s)
			}
		}
		tails = append(tails, float64(sp.e-sp.s-longest)/1e6)
	}
	s := schedule.OneFOneB(p, tr.Meta.MicroBatches)
	tl, err := s.Replay(func(stage int, a schedule.Action) float64 {
		if a.Kind == trace.F {
			return cost[stage][0]
		}
		return cost[stage][1]
	})
	if err != nil {
		t.Fatal(err)
	}
	return tl.StepTime + med(tails)
}

// stStudyMethod re-times tr's step graphs as the study does (see
// TestWhatIfST) and returns the mean tori, tideal and trem, ms.
func stStudyMethod(t *testing.T, tr *trace.Trace) (tori, tideal, trem float64) {
	t.Helper()
	ix := newIndex(tr, Options{Step: AllSteps})
	var graphs []*stepGraph
	sum, n := map[trace.Kind]float64{}, map[trace.Kind]int{}
	all := map[trace.Kind][]float64{}
	timed := func(g *stepGraph, v int) bool {
		c := g.class[v]
		return c != ncArrive && c != ncBarrier && c != ncSend
	}
	forSteps(ix, func(ws []int, _ int64) {
		g, err := buildStepGraph(ix, ws)
		if err != nil {
			t.Fatal(err)
		}
		graphs = append(graphs, g)
		for v := range g.meas {
			if timed(g, v) {
				k := g.kind[v]
				sum[k] += float64(g.meas[v])
				n[k]++
				all[k] = append(all[k], float64(g.meas[v]))
			}
		}
	})
	ideal := map[trace.Kind]int64{}
	for k := range n {
		if k.IsCompute() {
			ideal[k] = roundNs(sum[k] / float64(n[k]))
		} else {
			ideal[k] = roundNs(median(all[k]))
		}
	}
	for _, g := range graphs {
		s, e := g.run(g.meas, nil)
		tori += float64(e - s)
		id, rem := slices.Clone(g.meas), slices.Clone(g.meas)
		for v := range id {
			if !timed(g, v) {
				continue
			}
			id[v] = ideal[g.kind[v]]
			if int(g.stage[v]) == ix.p-1 {
				rem[v] = id[v]
			}
		}
		s, e = g.run(id, nil)
		tideal += float64(e - s)
		s, e = g.run(rem, nil)
		trem += float64(e - s)
	}
	k := 1e6 * float64(len(graphs))
	return tori / k, tideal / k, trem / k
}
