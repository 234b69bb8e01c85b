package analyze

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// scenarioOf runs the what-if of tr and returns the named scenario.
func scenarioOf(t *testing.T, wi *WhatIf, name string) Scenario {
	t.Helper()
	for _, sc := range wi.Scenarios {
		if sc.Name == name {
			return sc
		}
	}
	t.Fatalf("no scenario %q in %+v", name, wi.Scenarios)
	return Scenario{}
}

func simStepMs(t *testing.T, c sim.Config) float64 {
	t.Helper()
	_, rep := mustRun(t, c)
	return rep.StepMs
}

// TestWhatIfMatchesSim: each prediction made from a simulated trace is
// within 2% of simulating the changed job for real. The changed job:
//
//	balanced             the slow stage at the others' speed (the median stage)
//	no_stragglers        the same job without its stragglers
//	free_p2p             P2P latency and bandwidth cost 0
//	slow_worker_fixed    the same job without its slow rank
//	double_microbatches  2m micro-batches, F and B halved, half the payload (SeqLen / 2)
//	interleave_v2        interleaved with 2 chunks (the sim splits F and B by v)
//	zb_h1                ZB-H1 (the sim splits B half and half into B and W)
//
// Without jitter the predictions are exact up to ns rounding (the sim and
// the replay follow the same rules); with jitter the replay keeps every
// op's jitter while the changes use medians.
func TestWhatIfMatchesSim(t *testing.T) {
	base := func(sched string, m int) sim.Config {
		return sim.Config{Schedule: sched, Stages: 4, MicroBatches: m, Steps: 3, Hidden: 1024,
			P2PLatencyUs: 20, P2PGbps: 400, OptMs: 0.5}
	}
	with := func(c sim.Config, f func(*sim.Config)) sim.Config { f(&c); return c }
	type tc struct {
		name     string
		scenario string
		job      sim.Config
		changed  sim.Config
		exact    bool
	}
	var cases []tc
	for _, sched := range []string{"gpipe", "1f1b", "interleaved", "zb-h1"} {
		slow := with(base(sched, 8), func(c *sim.Config) { c.SlowStage, c.SlowFactor = 3, 1.5 })
		cases = append(cases, tc{"balanced/" + sched, ScenarioBalanced, slow,
			with(slow, func(c *sim.Config) { c.SlowStage, c.SlowFactor = -1, 1 }), true})
		strag := with(base(sched, 8), func(c *sim.Config) {
			c.Stragglers = []sim.Straggler{{Step: -1, MicroBatch: 2, Stage: 1, Factor: 3}, {Step: 1, MicroBatch: 6, Stage: -1, Factor: 2}}
		})
		cases = append(cases, tc{"no_stragglers/" + sched, ScenarioNoStragglers, strag,
			with(strag, func(c *sim.Config) { c.Stragglers = nil }), true})
		p2p := with(base(sched, 8), func(c *sim.Config) { c.P2PLatencyUs, c.P2PGbps = 200, 50 })
		cases = append(cases, tc{"free_p2p/" + sched, ScenarioFreeP2P, p2p,
			with(p2p, func(c *sim.Config) { c.P2PLatencyUs, c.P2PGbps = 0, 0 }), true})
		worker := with(base(sched, 8), func(c *sim.Config) {
			c.DP, c.SlowRanks = 2, []sim.SlowRank{{Pipeline: 1, Stage: 2, Factor: 1.5}}
		})
		cases = append(cases, tc{"slow_worker_fixed/" + sched, ScenarioSlowWorkerFixed, worker,
			with(worker, func(c *sim.Config) { c.SlowRanks = nil }), true})
		dbl := with(base(sched, 4), func(c *sim.Config) { c.P2PLatencyUs = 0 })
		cases = append(cases, tc{"double_microbatches/" + sched, ScenarioDoubleMicroBatches, dbl,
			with(dbl, func(c *sim.Config) { c.MicroBatches, c.FwdMs, c.BwdMs, c.SeqLen = 8, 0.5, 1, 2048 }), true})
	}
	for _, sched := range []string{"gpipe", "1f1b"} {
		cases = append(cases,
			tc{"interleave_v2/" + sched, ScenarioInterleaveV2, base(sched, 8),
				with(base(sched, 8), func(c *sim.Config) { c.Schedule = "interleaved" }), true},
			tc{"zb_h1/" + sched, ScenarioZBH1, base(sched, 8),
				with(base(sched, 8), func(c *sim.Config) { c.Schedule = "zb-h1" }), true})
	}
	cases = append(cases,
		tc{"interleave_v2/zb-h1", ScenarioInterleaveV2, base("zb-h1", 8),
			with(base("zb-h1", 8), func(c *sim.Config) { c.Schedule = "interleaved" }), true},
		tc{"zb_h1/interleaved", ScenarioZBH1, base("interleaved", 8),
			with(base("interleaved", 8), func(c *sim.Config) { c.Schedule, c.Virtual = "zb-h1", 0 }), true},
		tc{"double_microbatches/latency", ScenarioDoubleMicroBatches, base("1f1b", 4),
			with(base("1f1b", 4), func(c *sim.Config) { c.MicroBatches, c.FwdMs, c.BwdMs, c.SeqLen = 8, 0.5, 1, 2048 }), false},
	)
	// Replicas, TP, jitter.
	big := func(sched string) sim.Config {
		c := base(sched, 8)
		c.DP, c.TP, c.Jitter, c.Seed = 2, 2, 0.05, 7
		return c
	}
	for _, sched := range []string{"1f1b", "interleaved"} {
		slow := with(big(sched), func(c *sim.Config) { c.SlowStage, c.SlowFactor = 1, 1.4 })
		strag := with(big(sched), func(c *sim.Config) { c.Stragglers = []sim.Straggler{{Step: 2, MicroBatch: 3, Stage: 2, Factor: 3}} })
		worker := with(big(sched), func(c *sim.Config) { c.DP, c.SlowRanks = 4, []sim.SlowRank{{Pipeline: 2, Stage: 0, Factor: 1.6}} })
		p2p := with(big(sched), func(c *sim.Config) { c.P2PLatencyUs, c.P2PGbps = 200, 50 })
		cases = append(cases,
			tc{"balanced/jitter/" + sched, ScenarioBalanced, slow, with(slow, func(c *sim.Config) { c.SlowStage = -1 }), false},
			tc{"no_stragglers/jitter/" + sched, ScenarioNoStragglers, strag, with(strag, func(c *sim.Config) { c.Stragglers = nil }), false},
			tc{"slow_worker_fixed/jitter/" + sched, ScenarioSlowWorkerFixed, worker, with(worker, func(c *sim.Config) { c.SlowRanks = nil }), false},
			tc{"free_p2p/jitter/" + sched, ScenarioFreeP2P, p2p, with(p2p, func(c *sim.Config) { c.P2PLatencyUs, c.P2PGbps = 0, 0 }), true},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := sim.Run(c.job)
			if err != nil {
				t.Fatal(err)
			}
			wi, err := RunWhatIf(tr, WhatIfOptions{Step: AllSteps})
			if err != nil {
				t.Fatal(err)
			}
			sc := scenarioOf(t, wi, c.scenario)
			want := simStepMs(t, c.changed)
			if !sc.Available {
				t.Fatalf("%s unavailable: %s", c.scenario, sc.Detail)
			}
			rel := (sc.StepMs - want) / want
			t.Logf("%-20s measured %8.4g ms, predicted %8.4g ms, sim of the changed job %8.4g ms: error %+.3f%% (%s)",
				c.scenario, wi.StepMs, sc.StepMs, want, 100*rel, sc.Detail)
			if math.Abs(rel) > 0.02 {
				t.Errorf("predicted %v ms, the changed job simulates to %v ms (%+.2f%%)", sc.StepMs, want, 100*rel)
			}
			if c.exact && math.Abs(rel) > 1e-6 {
				t.Errorf("predicted %v ms, want exactly %v ms (%+.2g%%)", sc.StepMs, want, 100*rel)
			}
			if !near(wi.ReplayStepMs, wi.StepMs) {
				t.Errorf("baseline replay %v ms, measured %v ms", wi.ReplayStepMs, wi.StepMs)
			}
		})
	}
}

// TestWhatIfVerdict: a slow rank is told from a slow stage.
func TestWhatIfVerdict(t *testing.T) {
	c := sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, DP: 2, P2PLatencyUs: 20, OptMs: 0.5}
	stage, worker, none := c, c, c
	stage.SlowStage, stage.SlowFactor = 3, 1.5
	worker.SlowRanks = []sim.SlowRank{{Pipeline: 1, Stage: 2, Factor: 1.5}}
	for _, tc := range []struct {
		name  string
		c     sim.Config
		kind  string
		words []string
	}{
		{"stage", stage, VerdictSlowStage, []string{"stage 3", "every replica", "partitioning"}},
		{"worker", worker, VerdictSlowWorker, []string{"pipeline 1 stage 2", "rank 5", "1.5x", "slow GPU"}},
		{"none", none, VerdictNone, []string{"no stage"}},
	} {
		tr, err := sim.Run(tc.c)
		if err != nil {
			t.Fatal(err)
		}
		wi, err := RunWhatIf(tr, WhatIfOptions{Step: AllSteps})
		if err != nil {
			t.Fatal(err)
		}
		vd := wi.Verdict
		t.Logf("%s: %s", tc.name, vd.Message)
		if vd.Kind != tc.kind {
			t.Errorf("%s: verdict %q, want %q: %+v", tc.name, vd.Kind, tc.kind, vd)
		}
		for _, w := range tc.words {
			if !strings.Contains(vd.Message, w) {
				t.Errorf("%s: message %q lacks %q", tc.name, vd.Message, w)
			}
		}
		switch tc.kind {
		case VerdictSlowStage:
			if vd.BalancedSavedMs <= 0 || vd.WorkerSavedMs != 0 || vd.Stage != 3 || !near(vd.StageFactor, 1.5) {
				t.Errorf("%s: %+v", tc.name, vd)
			}
		case VerdictSlowWorker:
			if vd.WorkerSavedMs <= 0 || vd.WorkerPipeline != 1 || vd.WorkerStage != 2 || !near(vd.WorkerFactor, 1.5) {
				t.Errorf("%s: %+v", tc.name, vd)
			}
		}
	}
}

// TestWhatIfOptions: scenario selection, unknown names, one replica, one
// step.
func TestWhatIfOptions(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 3, P2PLatencyUs: 20})
	if err != nil {
		t.Fatal(err)
	}
	wi, err := RunWhatIf(tr, WhatIfOptions{Step: 1, Scenarios: []string{ScenarioZBH1, ScenarioFreeP2P}})
	if err != nil {
		t.Fatal(err)
	}
	if len(wi.Scenarios) != 2 || wi.Scenarios[0].Name != ScenarioFreeP2P || wi.Scenarios[1].Name != ScenarioZBH1 || wi.Steps != 1 {
		t.Errorf("scenarios %+v, steps %d", wi.Scenarios, wi.Steps)
	}
	if _, err := RunWhatIf(tr, WhatIfOptions{Step: AllSteps, Scenarios: []string{"faster"}}); err == nil || !strings.Contains(err.Error(), "faster") {
		t.Errorf("unknown scenario: err %v", err)
	}
	wi, err = RunWhatIf(tr, WhatIfOptions{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	sw := scenarioOf(t, wi, ScenarioSlowWorkerFixed)
	if sw.Available || !strings.Contains(sw.Detail, "one pipeline replica") {
		t.Errorf("slow_worker_fixed with one replica: %+v", sw)
	}
	for _, sc := range wi.Scenarios {
		if sc.Available && (sc.StepMs <= 0 || !near(sc.Speedup, wi.ReplayStepMs/sc.StepMs)) {
			t.Errorf("%+v", sc)
		}
		if sc.Name == ScenarioBalanced && !near(sc.StepMs, wi.StepMs) {
			t.Errorf("uniform stages: balanced %v ms, measured %v", sc.StepMs, wi.StepMs)
		}
	}
}

// TestWhatIfGivenAnalysis: given the trace's analysis (as report has it),
// RunWhatIf answers what it answers when it runs the analysis itself.
func TestWhatIfGivenAnalysis(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "interleaved", Virtual: 2, Stages: 4, MicroBatches: 8, Steps: 3, DP: 2,
		P2PLatencyUs: 20, Jitter: 0.05, Seed: 4, SlowRanks: []sim.SlowRank{{Pipeline: 1, Stage: 2, Factor: 1.4}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []int64{AllSteps, 1} {
		want, err := RunWhatIf(tr, WhatIfOptions{Step: step})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Run(tr, Options{Step: step})
		if err != nil {
			t.Fatal(err)
		}
		got, err := RunWhatIf(tr, WhatIfOptions{Step: step, Analysis: rep})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("step %d: given the analysis\n%+v\nwant\n%+v", step, got, want)
		}
		if want.Schedule != "interleaved" || want.Virtual != 2 {
			t.Errorf("step %d: schedule %q v=%d", step, want.Schedule, want.Virtual)
		}
	}
}

// TestWhatIfGraphMemory: a budget for the step graphs caps how many are
// built at once (at the largest step's graph, at least one) and changes
// nothing in the result.
func TestWhatIfGraphMemory(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 5, DP: 2, TP: 2,
		P2PLatencyUs: 20, Jitter: 0.1, Seed: 9, SlowRanks: []sim.SlowRank{{Pipeline: 0, Stage: 1, Factor: 1.3}}})
	if err != nil {
		t.Fatal(err)
	}
	// The largest step's rows, counted here from the step column.
	perStep := map[int64]int64{}
	for _, s := range tr.Step {
		perStep[s]++
	}
	var largest int64
	for _, n := range perStep {
		largest = max(largest, n)
	}
	graph := largest * GraphNodeBytes
	ix := newIndex(tr, Options{Step: AllSteps})
	all := workers(len(ix.windows))
	for _, c := range []struct {
		budget int64
		want   int
	}{{0, all}, {1, 1}, {graph - 1, 1}, {graph, min(all, 1)}, {2 * graph, min(all, 2)}, {1 << 50, all}} {
		if got := graphWorkers(ix, c.budget); got != c.want {
			t.Errorf("budget %d (a graph: %d bytes): %d graphs at once, want %d", c.budget, graph, got, c.want)
		}
	}
	want, err := RunWhatIf(tr, WhatIfOptions{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	got, err := RunWhatIf(tr, WhatIfOptions{Step: AllSteps, GraphMemory: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("one graph at a time:\n%+v\nwant\n%+v", got, want)
	}
}

// TestWhatIfWeird: odd traces give an answer or an error, never a panic
// or a runaway build: unmatched P2P, chunk ids no schedule has, metadata
// claiming far more micro-batches than the trace holds (100000: Run's
// theoretical bubble builds that schedule itself, so a billion would stop
// there), a crash in one step (the others are still replayed).
func TestWhatIfWeird(t *testing.T) {
	skip := trace.MustKind("OPT_SKIP")
	cases := map[string][]handOp{
		"only unmatched P2P": {{0, trace.SendF, 0, 1, 0, 0, 5}, {1, trace.RecvB, 0, 0, 0, 0, 5}},
		"end before start":   {{0, trace.F, 0, -1, 0, 10, 5}, {1, trace.F, 0, -1, 0, 5, 20}},
		"zero durations":     {{0, trace.F, 0, -1, 0, 0, 0}, {0, trace.B, 0, -1, 0, 0, 0}, {1, trace.F, 0, -1, 0, 0, 0}},
		"other kinds only":   {{0, trace.Opt, -1, -1, 0, 0, 5}, {1, skip, -1, -1, 0, 0, 0}},
		"single op":          {{0, trace.W, 3, -1, 0, 0, 7}},
		"recv before send":   {{0, trace.RecvF, 0, 1, 0, 0, 1}, {1, trace.SendF, 0, 0, 0, 0, 1}},
	}
	checked := 0
	for name, ops := range cases {
		for _, huge := range []bool{false, true} {
			tr := handTrace(ops)
			tr.Meta.Schedule, tr.Meta.PP, tr.Meta.MicroBatches = "1f1b", 2, 1
			if huge {
				tr.Meta.MicroBatches = 100_000
				tr.Chunk[0] = 1 << 30
			}
			wi, err := RunWhatIf(tr, WhatIfOptions{Step: AllSteps})
			if err != nil {
				continue
			}
			for _, sc := range wi.Scenarios {
				if math.IsNaN(sc.StepMs) || math.IsInf(sc.StepMs, 0) || sc.StepMs < 0 {
					t.Errorf("%s (huge %v): %+v", name, huge, sc)
				}
				if huge && sc.Name == ScenarioDoubleMicroBatches {
					checked++
					if sc.Available || !strings.Contains(sc.Detail, "too large") {
						t.Errorf("%s: 100000 micro-batches in the metadata: %+v", name, sc)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Errorf("no odd trace got as far as the schedule scenarios")
	}
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, Steps: 3,
		Faults: []sim.Fault{{Kind: sim.FaultCrash, Rank: 1, Step: 2, MicroBatch: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	wi, err := RunWhatIf(tr, WhatIfOptions{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	if wi.Steps != 2 || wi.SkippedSteps != 1 || !strings.Contains(wi.SkipReason, "never ended") {
		t.Errorf("steps %d, skipped %d (%s)", wi.Steps, wi.SkippedSteps, wi.SkipReason)
	}
	if _, err := RunWhatIf(tr, WhatIfOptions{Step: 2}); err == nil {
		t.Errorf("the crashed step alone: no error")
	}
}
