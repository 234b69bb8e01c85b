package analyze

import (
	"fmt"
	"math/rand"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// conformanceOf runs the conformance pass alone on tr (every step), so these
// tests do not depend on the other passes.
func conformanceOf(t *testing.T, tr *trace.Trace) *Report {
	t.Helper()
	ix := newIndex(tr, Options{Step: AllSteps})
	rep := &Report{Job: jobOf(ix)}
	analyzeConformance(ix, rep)
	return rep
}

// simTrace runs c and checks the trace passes the validity gate.
func simTrace(t *testing.T, c sim.Config) *trace.Trace {
	t.Helper()
	tr, err := sim.Run(c)
	if err != nil {
		t.Fatalf("sim.Run(%+v): %v", c, err)
	}
	if err := tr.Validate(); err != nil {
		t.Fatalf("sim trace invalid: %v", err)
	}
	return tr
}

func simFaults(t *testing.T, specs ...string) []sim.Fault {
	t.Helper()
	var out []sim.Fault
	for _, s := range specs {
		f, err := sim.ParseFault(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

func findingCodes(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Code)
	}
	return out
}

func violationStrings(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, fmt.Sprintf("%s step=%d rank=%d stage=%d mb=%d op=%s", v.Code, v.Step, v.Rank, v.Stage, v.MicroBatch, v.Op))
	}
	return out
}

// TestConformanceIdentifiesSimSchedules: the simulator runs each schedule's
// action lists, so its compute order is the schedule's. With the metadata's
// schedule name removed, the pass must name the simulated schedule (and
// its v), find no deviation or violation, and report nothing; every other
// candidate must deviate (the identification is not a tie).
func TestConformanceIdentifiesSimSchedules(t *testing.T) {
	cases := []sim.Config{
		{Schedule: "gpipe", Stages: 4, MicroBatches: 8},
		{Schedule: "gpipe", Stages: 2, MicroBatches: 3, DP: 2, TP: 2},
		{Schedule: "gpipe", Stages: 1, MicroBatches: 3},
		{Schedule: "1f1b", Stages: 4, MicroBatches: 8, TP: 2},
		{Schedule: "1f1b", Stages: 3, MicroBatches: 5, DP: 2},
		{Schedule: "1f1b", Stages: 5, MicroBatches: 3},
		{Schedule: "interleaved", Stages: 4, MicroBatches: 8, Virtual: 2},
		{Schedule: "interleaved", Stages: 2, MicroBatches: 4, Virtual: 3, DP: 2},
		{Schedule: "interleaved", Stages: 3, MicroBatches: 7, Virtual: 4, TP: 2},
		{Schedule: "zb-h1", Stages: 4, MicroBatches: 8},
		{Schedule: "zb-h1", Stages: 3, MicroBatches: 2, DP: 2},
	}
	for i, c := range cases {
		c.Steps, c.Jitter, c.Seed, c.P2PLatencyUs, c.P2PGbps, c.OptMs = 2, 0.3, int64(i+1), 10, 200, 0.5
		wantV := max(c.Virtual, 1)
		name := fmt.Sprintf("%s/p%d/m%d/v%d/dp%d/tp%d", c.Schedule, c.Stages, c.MicroBatches, wantV, c.DP, c.TP)
		t.Run(name, func(t *testing.T) {
			tr := simTrace(t, c)
			tr.Meta.Schedule = ""
			rep := conformanceOf(t, tr)
			got := rep.Schedule
			if got.Identified != c.Schedule || got.Virtual != wantV {
				t.Fatalf("identified %q v%d, want %q v%d; candidates %+v", got.Identified, got.Virtual, c.Schedule, wantV, got.Candidates)
			}
			if got.DeviationCount != 0 || len(got.Deviations) != 0 || got.ViolationCount != 0 || len(got.Violations) != 0 {
				t.Errorf("clean trace: %d deviations %+v, %d violations %v", got.DeviationCount, got.Deviations, got.ViolationCount, violationStrings(got.Violations))
			}
			if fs := conformanceFindings(nil, rep); len(fs) != 0 {
				t.Errorf("clean trace: findings %+v", fs)
			}
			if len(got.Candidates) < 3 || got.Candidates[0].Fraction != 0 {
				t.Fatalf("candidates %+v", got.Candidates)
			}
			for _, c := range got.Candidates[1:] {
				if c.Fraction == 0 {
					t.Errorf("%s fits as well as %s: %+v", c.Name, got.Identified, got.Candidates)
				}
			}
		})
	}
}

// TestConformanceTieBreak: with one micro-batch GPipe and 1F1B are the same
// order (F0 then B0 on every stage), so the tie-break decides: the
// metadata's name, else the first of schedule.Names (gpipe).
func TestConformanceTieBreak(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 3, MicroBatches: 1})
	for meta, want := range map[string]string{"": "gpipe", "1f1b": "1f1b", "gpipe": "gpipe", "zb-h1": "gpipe"} {
		tr.Meta.Schedule = meta
		if got := conformanceOf(t, tr).Schedule.Identified; got != want {
			t.Errorf("metadata %q: identified %q, want %q", meta, got, want)
		}
	}
}

// swapCompute swaps the labels (kind, micro-batch, chunk, flops, tokens) of
// the a-th and b-th compute rows of rank in step, keeping every row's times
// and seq: the rank ran the two ops in the other order.
func swapCompute(t *testing.T, tr *trace.Trace, rank trace.Rank, step int64, a, b int) {
	t.Helper()
	var rows []int
	for i := 0; i < tr.Len(); i++ {
		if tr.Rank[i] == rank && tr.Step[i] == step && tr.Kind[i].IsCompute() {
			rows = append(rows, i)
		}
	}
	i, j := rows[a], rows[b]
	tr.Kind[i], tr.Kind[j] = tr.Kind[j], tr.Kind[i]
	tr.MicroBatch[i], tr.MicroBatch[j] = tr.MicroBatch[j], tr.MicroBatch[i]
	tr.Chunk[i], tr.Chunk[j] = tr.Chunk[j], tr.Chunk[i]
	tr.Flops[i], tr.Flops[j] = tr.Flops[j], tr.Flops[i]
	tr.Tokens[i], tr.Tokens[j] = tr.Tokens[j], tr.Tokens[i]
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestConformanceSwap: 1F1B, p = 4, m = 8. Stage 2 warms up with p-2-1 = 1
// forward, so its compute order is
//
//	F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7
//
// Swapping its ops 2 and 3 in step 1 (rank 2 ran F2 before B0) is one op
// out of place: the deviation is at index 2, want B0, got F2. The schedule
// is still 1f1b (1 of 32 x 16 ops deviates). Swapping two ops further apart
// on rank 0 in step 0 (F1 and B1, ops 1 and 6 of F0 F1 F2 F3 B0 F4 B1 ...)
// gives ... F0 B1 F2 F3 B0 F4 F1 ...: B1 and F1 both out of place (2 more).
func TestConformanceSwap(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, Jitter: 0.2, Seed: 3})
	swapCompute(t, tr, 2, 1, 2, 3)
	rep := conformanceOf(t, tr)
	c := rep.Schedule
	if c.Identified != "1f1b" || c.DeviationCount != 1 {
		t.Fatalf("identified %q with %d deviations, want 1f1b with 1", c.Identified, c.DeviationCount)
	}
	want := Deviation{Step: 1, Rank: 2, Stage: 2, Index: 2, Want: "B0", Got: "F2"}
	if len(c.Deviations) != 1 || c.Deviations[0] != want {
		t.Errorf("deviations %+v, want [%+v]", c.Deviations, want)
	}
	if c.ViolationCount != 0 {
		t.Errorf("a swap breaks no synchronous rule: %v", violationStrings(c.Violations))
	}
	fs := conformanceFindings(nil, rep)
	if len(fs) != 1 || fs[0].Code != CodeScheduleDeviation || fs[0].Severity != "warning" {
		t.Fatalf("findings %+v", fs)
	}
	for _, s := range []string{"1 compute op ", "rank 2", "step 1", "F2", "B0"} {
		if !strings.Contains(fs[0].Message, s) {
			t.Errorf("message %q lacks %q", fs[0].Message, s)
		}
	}

	swapCompute(t, tr, 0, 0, 1, 6)
	c = conformanceOf(t, tr).Schedule
	if c.Identified != "1f1b" || c.DeviationCount != 3 {
		t.Fatalf("identified %q with %d deviations, want 1f1b with 3", c.Identified, c.DeviationCount)
	}
	got := []Deviation{}
	for _, d := range c.Deviations {
		if d.Rank == 0 {
			got = append(got, d)
		}
	}
	// Rank 0's order is F0 B1 F2 F3 B0 F4 F1 ...: the longest run in 1F1B
	// order keeps F0 F2 F3 B0 F4 and drops B1 (index 1, where F1 belongs)
	// and F1 (index 6, where B1 belongs).
	wantR0 := []Deviation{{Step: 0, Rank: 0, Stage: 0, Index: 1, Want: "F1", Got: "B1"}, {Step: 0, Rank: 0, Stage: 0, Index: 6, Want: "B1", Got: "F1"}}
	if !slices.Equal(got, wantR0) {
		t.Errorf("rank 0 deviations %+v, want %+v", got, wantR0)
	}
}

// TestConformanceUnidentified: ranks running orders no candidate fits (each
// stage's compute ops reversed: B before F) leave Identified empty, report
// no deviations, and raise no SCHEDULE_DEVIATION.
func TestConformanceUnidentified(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 4})
	for r := trace.Rank(0); r < 2; r++ {
		n := 0
		for i := 0; i < tr.Len(); i++ {
			if tr.Rank[i] == r && tr.Kind[i].IsCompute() {
				n++
			}
		}
		for a := 0; a < n/2; a++ {
			swapCompute(t, tr, r, 0, a, n-1-a)
		}
	}
	rep := conformanceOf(t, tr)
	c := rep.Schedule
	if c.Identified != "" || c.Virtual != 0 || len(c.Deviations) != 0 || c.DeviationCount != 0 {
		t.Errorf("identified %q v%d with %d deviations; candidates %+v", c.Identified, c.Virtual, c.DeviationCount, c.Candidates)
	}
	if len(c.Candidates) == 0 || c.Candidates[0].Fraction <= MaxDeviatingFraction {
		t.Errorf("best candidate fits: %+v", c.Candidates)
	}
	if slices.Contains(findingCodes(conformanceFindings(nil, rep)), CodeScheduleDeviation) {
		t.Error("SCHEDULE_DEVIATION without an identified schedule")
	}
	if c.ViolationCount != 0 {
		t.Errorf("every op ran once: %v", violationStrings(c.Violations))
	}
}

// TestConformanceOptSkip: optskip:rank=5,step=1 in a 4-stage, DP 2 job
// (ranks 0-7): rank 5 alone records OPT_SKIP in step 1; the job carries on.
func TestConformanceOptSkip(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 4, DP: 2, Steps: 3, OptMs: 1,
		Faults: simFaults(t, "optskip:rank=5,step=1")})
	rep := conformanceOf(t, tr)
	c := rep.Schedule
	if c.Identified != "1f1b" {
		t.Errorf("identified %q", c.Identified)
	}
	// rank 5 = (stage*DP + pipeline)*TP + tp = (2*2 + 1)*1: stage 2, pipeline 1.
	want := []string{"optimizer_skip_mismatch step=1 rank=5 stage=2 mb=-1 op="}
	if got := violationStrings(c.Violations); !slices.Equal(got, want) {
		t.Fatalf("violations %v, want %v", got, want)
	}
	if v := c.Violations[0]; !slices.Equal(v.Ranks, []int{5}) || v.Pipeline != 1 {
		t.Errorf("ranks %v pipeline %d, want [5] 1", v.Ranks, v.Pipeline)
	}
	fs := conformanceFindings(nil, rep)
	if len(fs) != 1 || fs[0].Code != CodeOptimizerSkipMismatch || fs[0].Severity != "error" {
		t.Fatalf("findings %+v", fs)
	}
	for _, s := range []string{"step 1 ", "rank 5 ", "7 ranks"} {
		if !strings.Contains(fs[0].Message, s) {
			t.Errorf("message %q lacks %q", fs[0].Message, s)
		}
	}

	// Every rank skipping the same step is one decision: no mismatch.
	var all []string
	for r := 0; r < 8; r++ {
		all = append(all, fmt.Sprintf("optskip:rank=%d,step=1", r))
	}
	tr = simTrace(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 4, DP: 2, Steps: 3, OptMs: 1, Faults: simFaults(t, all...)})
	rep = conformanceOf(t, tr)
	if rep.Schedule.ViolationCount != 0 || len(conformanceFindings(nil, rep)) != 0 {
		t.Errorf("all ranks skipped: %v", violationStrings(rep.Schedule.Violations))
	}

	// Six of eight skipping: the two that ran are the odd ones.
	tr = simTrace(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 4, DP: 2, Steps: 3, OptMs: 1, Faults: simFaults(t, all[:6]...)})
	c = conformanceOf(t, tr).Schedule
	if len(c.Violations) != 1 || !slices.Equal(c.Violations[0].Ranks, []int{6, 7}) || !strings.Contains(c.Violations[0].Message, "ranks 6, 7 ran") {
		t.Errorf("violations %+v", c.Violations)
	}
}

// TestConformanceSkipComplete: with one stage there is no P2P, so a skip
// fault does not hang the job and the trace is complete. skip:rank=1 with
// TP 2 drops F2 and B2 of step 0 on rank 1 only: two missing ops; stage 0
// still ran every micro-batch (rank 0), so no microbatch_count. With TP 1
// the whole stage ran 3 of 4 micro-batches: microbatch_count too.
func TestConformanceSkipComplete(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 1, MicroBatches: 4, TP: 2, Steps: 2, Faults: simFaults(t, "skip:rank=1,step=0,mb=2")})
	for i := 0; i < tr.Len(); i++ {
		if !tr.Completed(i) {
			t.Fatalf("row %d pending: the trace should be complete", i)
		}
	}
	rep := conformanceOf(t, tr)
	c := rep.Schedule
	want := []string{
		"missing_op step=0 rank=1 stage=0 mb=2 op=B2",
		"missing_op step=0 rank=1 stage=0 mb=2 op=F2",
	}
	if got := violationStrings(c.Violations); !slices.Equal(got, want) {
		t.Errorf("violations %v, want %v", got, want)
	}
	if c.Identified != "1f1b" || c.DeviationCount != 0 {
		t.Errorf("identified %q with %d deviations (a missing op is not a deviation)", c.Identified, c.DeviationCount)
	}
	fs := conformanceFindings(nil, rep)
	if len(fs) != 1 || fs[0].Code != CodeSyncViolation || fs[0].Severity != "error" || !strings.Contains(fs[0].Message, "2 missing_op violations") {
		t.Errorf("findings %+v", fs)
	}

	tr = simTrace(t, sim.Config{Schedule: "zb-h1", Stages: 1, MicroBatches: 4, Steps: 2, Faults: simFaults(t, "skip:rank=0,step=1,mb=0")})
	c = conformanceOf(t, tr).Schedule
	want = []string{
		"microbatch_count step=1 rank=-1 stage=0 mb=-1 op=",
		"missing_op step=1 rank=0 stage=0 mb=0 op=B0",
		"missing_op step=1 rank=0 stage=0 mb=0 op=F0",
		"missing_op step=1 rank=0 stage=0 mb=0 op=W0",
	}
	if got := violationStrings(c.Violations); !slices.Equal(got, want) {
		t.Errorf("violations %v, want %v", got, want)
	}
}

// TestConformanceSkipHang: with two stages a skip hangs the job (the
// neighbour's last send or receive never matches). 1F1B, p = 2, m = 4:
//
//   - skip rank 1, step 0, mb 1: rank 1 runs F0 B0 F2 B2 F3 B3 and posts
//     its OPT (it finished the step): F1 and B1 are missing, and stage 1
//     ran 3 of 4 micro-batches. Rank 0 blocks at its last RECV_B: its B3
//     never got to run and is not missing.
//   - skip rank 0, step 1, mb 2: rank 0 finishes step 1 without F2, B2.
//     Rank 1 blocks at RECV_F of F3 after F0 B0 F1 B1 F2 B2: F3 and B3
//     never got to run.
//
// With p = 3, skip rank 0, step 0, mb 1: stage 0's 1F1B order is
// F0 F1 F2 B0 F3 B1 B2 B3 (2 warm-up forwards); rank 0 runs F0 F2 B0 F3 B2
// and blocks at RECV_B before B3 without finishing the step. It ran B2,
// which 1F1B puts after F1 and B1, so those are missing; B3 comes after
// everything it ran and is not. Stage 0 did not finish: no
// microbatch_count.
func TestConformanceSkipHang(t *testing.T) {
	cases := []struct {
		fault  string
		stages int
		want   []string
	}{
		{"skip:rank=1,step=0,mb=1", 2, []string{
			"microbatch_count step=0 rank=-1 stage=1 mb=-1 op=",
			"missing_op step=0 rank=1 stage=1 mb=1 op=B1",
			"missing_op step=0 rank=1 stage=1 mb=1 op=F1",
		}},
		{"skip:rank=0,step=1,mb=2", 2, []string{
			"microbatch_count step=1 rank=-1 stage=0 mb=-1 op=",
			"missing_op step=1 rank=0 stage=0 mb=2 op=B2",
			"missing_op step=1 rank=0 stage=0 mb=2 op=F2",
		}},
		{"skip:rank=0,step=0,mb=1", 3, []string{
			"missing_op step=0 rank=0 stage=0 mb=1 op=B1",
			"missing_op step=0 rank=0 stage=0 mb=1 op=F1",
		}},
	}
	for _, tc := range cases {
		tr := simTrace(t, sim.Config{Schedule: "1f1b", Stages: tc.stages, MicroBatches: 4, Steps: 2, P2PLatencyUs: 5, Faults: simFaults(t, tc.fault)})
		rep := conformanceOf(t, tr)
		c := rep.Schedule
		if got := violationStrings(c.Violations); !slices.Equal(got, tc.want) {
			t.Errorf("%s: violations %v, want %v", tc.fault, got, tc.want)
		}
		if c.Identified != "1f1b" || c.DeviationCount != 0 {
			t.Errorf("%s: identified %q with %d deviations", tc.fault, c.Identified, c.DeviationCount)
		}
		if codes := findingCodes(conformanceFindings(nil, rep)); len(codes) == 0 || codes[0] != CodeSyncViolation {
			t.Errorf("%s: findings %v", tc.fault, codes)
		}
	}
}

// TestConformanceHangNoFalseMissing: crash, exit, shape and dtype faults
// hang the job with ranks blocked mid-step; they skip no op, so no rank
// may be charged with missing ops it never got to.
func TestConformanceHangNoFalseMissing(t *testing.T) {
	for _, f := range []string{"crash:rank=1,step=1,mb=2", "exit:rank=2,step=1", "shape:rank=0,step=0,mb=1", "dtype:rank=2,step=1,mb=3"} {
		for _, sched := range []string{"gpipe", "1f1b", "interleaved", "zb-h1"} {
			tr := simTrace(t, sim.Config{Schedule: sched, Stages: 3, MicroBatches: 6, Steps: 2, DP: 2, Faults: simFaults(t, f)})
			c := conformanceOf(t, tr).Schedule
			if c.ViolationCount != 0 || c.Identified != sched {
				t.Errorf("%s %s: identified %q, violations %v", sched, f, c.Identified, violationStrings(c.Violations))
			}
		}
	}
}

// TestConformanceFBeforeOpt is a hand-made 2-stage trace, one micro-batch,
// two steps, times in ms:
//
//	rank 0: F0 0-1, B0 4-6, OPT 7-8 | F0 8-9,     B0 12-14,   OPT 15-16
//	rank 1: F0 1-2, B0 2-4, OPT 7-8 | F0 7.5-8.5, B0 8.5-10.5, OPT 15-16
//
// Rank 1 starts step 1's F0 at 7.5 ms, 0.5 ms before its OPT of step 0
// ends at 8: one f_before_opt. Rank 0 starts at 8.0, exactly when its OPT
// ends: allowed.
func TestConformanceFBeforeOpt(t *testing.T) {
	tr := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	half := ms / 2
	add(tr, 0, 0, 0, 0, trace.F, 0, 0, 1*ms)
	add(tr, 0, 0, 0, 0, trace.B, 0, 4*ms, 6*ms)
	add(tr, 0, 0, 0, 0, trace.Opt, -1, 7*ms, 8*ms)
	add(tr, 0, 0, 0, 1, trace.F, 0, 8*ms, 9*ms)
	add(tr, 0, 0, 0, 1, trace.B, 0, 12*ms, 14*ms)
	add(tr, 0, 0, 0, 1, trace.Opt, -1, 15*ms, 16*ms)
	add(tr, 1, 1, 0, 0, trace.F, 0, 1*ms, 2*ms)
	add(tr, 1, 1, 0, 0, trace.B, 0, 2*ms, 4*ms)
	add(tr, 1, 1, 0, 0, trace.Opt, -1, 7*ms, 8*ms)
	add(tr, 1, 1, 0, 1, trace.F, 0, 7*ms+half, 8*ms+half)
	add(tr, 1, 1, 0, 1, trace.B, 0, 8*ms+half, 10*ms+half)
	add(tr, 1, 1, 0, 1, trace.Opt, -1, 15*ms, 16*ms)
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	rep := conformanceOf(t, tr)
	c := rep.Schedule
	want := []string{"f_before_opt step=1 rank=1 stage=1 mb=0 op=F0"}
	if got := violationStrings(c.Violations); !slices.Equal(got, want) {
		t.Fatalf("violations %v, want %v", got, want)
	}
	fs := conformanceFindings(nil, rep)
	if len(fs) != 1 || fs[0].Code != CodeSyncViolation || fs[0].Severity != "error" {
		t.Fatalf("findings %+v", fs)
	}
	for _, s := range []string{"rank 1 ", "0.5 ms", "step 1", "step 0"} {
		if !strings.Contains(fs[0].Message, s) {
			t.Errorf("message %q lacks %q", fs[0].Message, s)
		}
	}
}

// TestConformanceDuplicate: rank 1 of a 1F1B trace records F3 twice (its
// F2 relabelled F3): F3 is a duplicate, F2 missing, and stage 1 (rank 1
// alone) ran the forward of 3 distinct micro-batches of 4.
func TestConformanceDuplicate(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 4})
	for i := 0; i < tr.Len(); i++ {
		if tr.Rank[i] == 1 && tr.Kind[i] == trace.F && tr.MicroBatch[i] == 2 {
			tr.MicroBatch[i] = 3
		}
	}
	c := conformanceOf(t, tr).Schedule
	want := []string{
		"microbatch_count step=0 rank=-1 stage=1 mb=-1 op=",
		"duplicate_op step=0 rank=1 stage=1 mb=3 op=F3",
		"missing_op step=0 rank=1 stage=1 mb=2 op=F2",
	}
	if got := violationStrings(c.Violations); !slices.Equal(got, want) {
		t.Errorf("violations %v, want %v", got, want)
	}
	if c.ViolationCounts[ViolationDuplicateOp] != 1 || c.ViolationCounts[ViolationMissingOp] != 1 || c.ViolationCount != 3 {
		t.Errorf("counts %v total %d", c.ViolationCounts, c.ViolationCount)
	}
}

// TestConformanceMetaMicroBatches: a complete trace of 4 micro-batches
// whose metadata claims 6 breaks microbatch_count once per step.
func TestConformanceMetaMicroBatches(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "gpipe", Stages: 2, MicroBatches: 4, Steps: 2})
	tr.Meta.MicroBatches = 6
	c := conformanceOf(t, tr).Schedule
	want := []string{
		"microbatch_count step=0 rank=-1 stage=-1 mb=-1 op=",
		"microbatch_count step=1 rank=-1 stage=-1 mb=-1 op=",
	}
	if got := violationStrings(c.Violations); !slices.Equal(got, want) {
		t.Errorf("violations %v, want %v", got, want)
	}
}

// TestConformanceCaps: a rank whose every step is out of order lists at
// most MaxDeviationsPerRank deviations but counts them all.
func TestConformanceCaps(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "gpipe", Stages: 1, MicroBatches: 40, Steps: 3})
	// Swap F(2k) and F(2k+1) for k < 10 in each step: 10 deviations a step.
	for step := int64(0); step < 3; step++ {
		for k := 0; k < 10; k++ {
			swapCompute(t, tr, 0, step, 2*k, 2*k+1)
		}
	}
	c := conformanceOf(t, tr).Schedule
	if c.Identified != "gpipe" || c.DeviationCount != 30 || len(c.Deviations) != MaxDeviationsPerRank {
		t.Fatalf("identified %q, %d deviations, %d listed", c.Identified, c.DeviationCount, len(c.Deviations))
	}
	if d := c.Deviations[0]; d != (Deviation{Step: 0, Rank: 0, Stage: 0, Index: 0, Want: "F0", Got: "F1"}) {
		t.Errorf("first deviation %+v", d)
	}
}

// TestConformanceCapsAcrossWindows: a rank's listed deviations are its
// first MaxDeviationsPerRank in step order, whichever windows fill the
// cap and in whatever order the windows are compared: step 0 lists 3,
// step 1 the first 5 of its 10; steps 2 (10 more, a window that alone
// fills the cap) and 3 are only counted.
func TestConformanceCapsAcrossWindows(t *testing.T) {
	swaps := []int{3, 10, 10, 1}
	tr := simTrace(t, sim.Config{Schedule: "gpipe", Stages: 1, MicroBatches: 40, Steps: len(swaps)})
	var want []Deviation
	total := 0
	for step, n := range swaps {
		for k := 0; k < n; k++ {
			swapCompute(t, tr, 0, int64(step), 2*k, 2*k+1)
			if len(want) < MaxDeviationsPerRank {
				want = append(want, Deviation{Step: int64(step), Rank: 0, Stage: 0, Index: 2 * k,
					Want: fmt.Sprintf("F%d", 2*k), Got: fmt.Sprintf("F%d", 2*k+1)})
			}
		}
		total += n
	}
	for _, procs := range []int{1, 4} {
		t.Run(fmt.Sprint(procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			c := conformanceOf(t, tr).Schedule
			if c.Identified != "gpipe" || c.DeviationCount != total {
				t.Fatalf("identified %q with %d deviations, want gpipe with %d", c.Identified, c.DeviationCount, total)
			}
			if !slices.Equal(c.Deviations, want) {
				t.Errorf("deviations\n%+v\nwant\n%+v", c.Deviations, want)
			}
		})
	}
}

// TestConformanceCapsMatchUncapped: skipping the deviations of windows
// after one that filled a rank's cap changes nothing: on a trace of many
// windows (DP 3 x 6 steps) whose ranks deviate in several of them, some
// filling the cap, the conformance is the one computed keeping every
// window's deviations (fullWindows disabled), serially and in parallel.
func TestConformanceCapsMatchUncapped(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "gpipe", Stages: 2, DP: 3, MicroBatches: 40, Steps: 6, Jitter: 0.1, Seed: 5})
	rng := rand.New(rand.NewSource(1))
	for r := trace.Rank(0); r < 6; r++ {
		for step := int64(0); step < 6; step++ {
			for k := range rng.Intn(12) {
				swapCompute(t, tr, r, step, 2*k, 2*k+1)
			}
		}
	}
	defer func(m trace.Rank) { fullWindowsMaxRank = m }(fullWindowsMaxRank)
	fullWindowsMaxRank = -1
	want := conformanceOf(t, tr).Schedule
	if want.DeviationCount <= 6*MaxDeviationsPerRank || len(want.Deviations) != 6*MaxDeviationsPerRank {
		t.Fatalf("the trace does not fill the caps: %d deviations, %d listed", want.DeviationCount, len(want.Deviations))
	}
	fullWindowsMaxRank = 1 << 20
	for _, procs := range []int{1, 2, 4} {
		func() {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			if got := conformanceOf(t, tr).Schedule; !reflect.DeepEqual(got, want) {
				t.Errorf("GOMAXPROCS %d: conformance\n%+v\nwant\n%+v", procs, got, want)
			}
		}()
	}
}

// TestFullWindowSet: a rank is full from the least window recorded, in
// whatever order windows record it; other ranks and candidates are not.
func TestFullWindowSet(t *testing.T) {
	tot := &scanTotals{ranks: map[trace.Rank]bool{0: true, 3: true}}
	f := fullWindows(tot, 2)
	f.set(0, 3, 5)
	f.set(0, 3, 7) // later: no change
	for wi, want := range []bool{false, false, false, false, false, false, true, true} {
		if got := f.before(0, 3, wi); got != want {
			t.Errorf("after windows 5 and 7: before(window %d) = %v, want %v", wi, got, want)
		}
	}
	f.set(0, 3, 2) // earlier: now full from 2
	if !f.before(0, 3, 3) || f.before(0, 3, 2) {
		t.Error("after window 2: want full from window 3 on")
	}
	if f.before(1, 3, 9) || f.before(0, 0, 9) || f.before(0, 99, 9) || f.before(0, -1, 9) {
		t.Error("full for another candidate or rank")
	}
	f.set(0, 99, 1) // a rank it has no room for: ignored
	if huge := fullWindows(&scanTotals{ranks: map[trace.Rank]bool{fullWindowsMaxRank: true}}, 1); huge != nil {
		t.Error("room made for a rank past fullWindowsMaxRank")
	}
}

// TestConformanceWeirdTraces: odd inputs degrade gracefully: no panic, no
// made-up violations.
func TestConformanceWeirdTraces(t *testing.T) {
	optOnly := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	add(optOnly, 0, 0, 0, 0, trace.Opt, -1, 0, ms)
	add(optOnly, 1, 0, 1, 0, trace.Opt, -1, 0, ms)

	hugeIDs := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	add(hugeIDs, 0, 0, 0, 0, trace.F, 2_000_000_000, 0, ms)
	add(hugeIDs, 0, 0, 0, 0, trace.B, 0, ms, 2*ms)
	add(hugeIDs, 3, 900, 0, 0, trace.F, 0, ms, 2*ms)

	zero := &trace.Trace{Meta: trace.Meta{Schema: 1, MicroBatches: 1_000_000_000}}
	add(zero, 0, 0, 0, 0, trace.F, 0, 5, 5)
	add(zero, 0, 0, 0, 0, trace.B, 0, 5, 5)
	add(zero, 0, 0, 0, 0, trace.F, -1, 5, 5)
	add(zero, 0, 0, 0, 1, trace.F, 0, 5, trace.NoTime)

	pending := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	add(pending, 0, 0, 0, 0, trace.F, 0, 0, trace.NoTime)
	add(pending, 1, 1, 0, 0, trace.RecvF, 0, 0, trace.NoTime)

	chunky := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	chunky.Append(trace.Event{Rank: 0, Kind: trace.F, Chunk: 1 << 30, Seq: 0, IssueNs: 0, StartNs: 0, EndNs: 1, Peer: trace.NoRank})
	chunky.Append(trace.Event{Rank: 1, Stage: 1, Kind: conformanceOptSkip, MicroBatch: -1, Seq: 0, IssueNs: 0, StartNs: 0, EndNs: 1, Peer: trace.NoRank})

	for name, tr := range map[string]*trace.Trace{"opt-only": optOnly, "huge-ids": hugeIDs, "zero-durations": zero, "pending": pending, "huge-chunk": chunky} {
		t.Run(name, func(t *testing.T) {
			rep := conformanceOf(t, tr)
			_ = conformanceFindings(nil, rep)
			c := rep.Schedule
			switch name {
			case "opt-only", "huge-ids", "huge-chunk":
				if c.Identified != "" || c.ViolationCount != 0 {
					t.Errorf("identified %q, violations %v", c.Identified, violationStrings(c.Violations))
				}
			case "pending":
				if c.ViolationCount != 0 {
					t.Errorf("violations %v", violationStrings(c.Violations))
				}
			}
		})
	}
}

// TestConformanceThroughRun: Run fills Report.Schedule (the pass is wired)
// and leaves Job.Schedule as the metadata says.
func TestConformanceThroughRun(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "zb-h1", Stages: 3, MicroBatches: 6, Steps: 2})
	tr.Meta.Schedule = "custom"
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Schedule.Identified != "zb-h1" || rep.Job.Schedule != "custom" {
		t.Errorf("identified %q, job schedule %q", rep.Schedule.Identified, rep.Job.Schedule)
	}
}

// BenchmarkConformance: 16 stages x 8 replicas, 64 micro-batches, 2 steps
// of interleaved (v 2): about 400k rows.
func BenchmarkConformance(b *testing.B) {
	tr, err := sim.Run(sim.Config{Schedule: "interleaved", Stages: 16, MicroBatches: 64, Virtual: 2, DP: 8, Steps: 2})
	if err != nil {
		b.Fatal(err)
	}
	ix := newIndex(tr, Options{Step: AllSteps})
	for b.Loop() {
		rep := &Report{Job: jobOf(ix)}
		analyzeConformance(ix, rep)
	}
	b.ReportMetric(float64(tr.Len()), "rows")
}

// TestIdentifyReuseMatches: schedule identification reusing the worker's
// window before's comparisons (identifyVisit) gives what comparing every
// window gives, on traces whose windows repeat (then it does reuse), and
// on windows that differ from the one before only in what compare reads:
// an F and a B swapped (labels), a rank's stage, where a rank's labels
// begin (one moved to the next rank), whether a rank finished (a missing
// op after the last one it ran counts only for a rank that finished).
// (The window's m is compared too; windows of the same labels and another
// m are not made here.)
func TestIdentifyReuseMatches(t *testing.T) {
	without := func(tr *trace.Trace, drop func(i int) bool) *trace.Trace {
		out := &trace.Trace{Meta: tr.Meta}
		for i := range tr.Len() {
			if !drop(i) {
				out.Append(tr.At(i))
			}
		}
		return out
	}
	swapped := simTrace(t, sim.Config{Schedule: "gpipe", Stages: 2, DP: 3, MicroBatches: 12, Steps: 6, Jitter: 0.1, Seed: 5})
	rng := rand.New(rand.NewSource(3))
	for r := trace.Rank(0); r < 6; r++ {
		for step := int64(0); step < 6; step++ {
			if rng.Intn(2) == 0 {
				swapCompute(t, swapped, r, step, 2, 20) // an F and a B: every candidate's counts move
			}
		}
	}
	// 1F1B on two stages, 3 steps, rank 0 skipping micro-batch 2 in the
	// last: rank 0 finishes it without F2 and B2, rank 1 runs one
	// micro-batch fewer and hangs: it did not finish. Step 1, cut to the
	// compute ops step 2 ran, has the same labels, but both ranks finished
	// it (they have rows in step 2).
	hung := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 16, Steps: 3, Faults: simFaults(t, "skip:rank=0,step=2,mb=2")})
	type op struct {
		r  trace.Rank
		k  trace.Kind
		mb trace.MicroBatch
	}
	ran := map[op]bool{}
	for i := range hung.Len() {
		if hung.Step[i] == 2 {
			ran[op{hung.Rank[i], hung.Kind[i], hung.MicroBatch[i]}] = true
		}
	}
	cut := without(hung, func(i int) bool {
		return hung.Step[i] == 1 && hung.Kind[i].IsCompute() && !ran[op{hung.Rank[i], hung.Kind[i], hung.MicroBatch[i]}]
	})
	// Stages: in step 2 of a GPipe job rank 0 says it is stage 3 (the
	// same labels, compared against another stage's list: 1F1B warms up
	// with 3 forwards on stage 0, none on stage 3).
	staged := simTrace(t, sim.Config{Schedule: "gpipe", Stages: 4, MicroBatches: 16, Steps: 3})
	for i := range staged.Len() {
		if staged.Step[i] == 2 && staged.Rank[i] == 0 {
			staged.Stage[i] = 3
		}
	}
	// Where a rank's labels begin: two TP ranks of one stage, rank 0's
	// last compute op of step 2 moved to the head of rank 1's (the same
	// labels end to end, cut between the ranks one op earlier).
	tp := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 1, TP: 2, MicroBatches: 16, Steps: 3})
	moved := -1
	for i := range tp.Len() {
		if tp.Rank[i] == 0 && tp.Step[i] == 2 && tp.Kind[i].IsCompute() {
			moved = i
		}
	}
	var evs [2][]trace.Event
	for i := range tp.Len() {
		e := tp.At(i)
		switch {
		case i == moved:
			continue
		case e.Rank == 1 && e.Step == 2 && e.Kind.IsCompute() && moved >= 0:
			m := tp.At(moved)
			m.Rank, m.TPRank = 1, e.TPRank
			evs[1] = append(evs[1], m)
			moved = -1
		}
		evs[e.Rank] = append(evs[e.Rank], e)
	}
	shifted := &trace.Trace{Meta: tp.Meta}
	for r := range evs {
		for k, e := range evs[r] {
			e.Seq = int64(k)
			shifted.Append(e)
		}
	}
	traces := map[string]*trace.Trace{
		"stages":      staged,
		"shifted":     shifted,
		"1f1b":        simTrace(t, sim.Config{Schedule: "1f1b", Stages: 4, DP: 2, TP: 2, MicroBatches: 8, Steps: 4, Jitter: 0.2}),
		"interleaved": simTrace(t, sim.Config{Schedule: "interleaved", Stages: 4, DP: 2, MicroBatches: 8, Steps: 4, Jitter: 0.2}),
		"zb-h1":       simTrace(t, sim.Config{Schedule: "zb-h1", Stages: 4, MicroBatches: 8, Steps: 4}),
		"swapped":     swapped,
		"skips":       simTrace(t, sim.Config{Schedule: "1f1b", Stages: 1, MicroBatches: 4, TP: 2, Steps: 4, Faults: simFaults(t, "skip:rank=1,step=1,mb=2")}),
		"cut":         cut,
	}
	defer func() { identifyReuse = true }()
	for name, tr := range traces {
		tr.Meta.Schedule = "" // every candidate compared in full
		identifyReuse = false
		want := conformanceOf(t, tr).Schedule
		identifyReuse = true
		for _, procs := range []int{1, 2} {
			func() {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				before := identifyReused.Load()
				got := conformanceOf(t, tr).Schedule
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s, GOMAXPROCS %d: reusing\n%+v\nwant\n%+v", name, procs, got, want)
				}
				if n := identifyReused.Load() - before; procs == 1 && name != "cut" && n == 0 {
					t.Errorf("%s: no window reused the one before's comparisons", name)
				}
			}()
		}
	}
}
