package hang_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// layout is one job shape of the matrix.
type layout struct {
	schedule  string
	p, m, v   int
	dp, tp    int
	latencyUs float64
}

func (l layout) String() string {
	s := fmt.Sprintf("%s_p%d_m%d", l.schedule, l.p, l.m)
	if l.v > 1 {
		s += fmt.Sprintf("_v%d", l.v)
	}
	if l.dp > 1 || l.tp > 1 {
		s += fmt.Sprintf("_dp%d_tp%d", l.dp, l.tp)
	}
	return s
}

func (l layout) config(faults ...sim.Fault) sim.Config {
	return sim.Config{Schedule: l.schedule, Stages: l.p, MicroBatches: l.m, Virtual: l.v, DP: l.dp, TP: l.tp,
		Steps: 2, OptMs: 0.5, P2PLatencyUs: l.latencyUs, Faults: faults}
}

// layouts is the matrix of job shapes: every schedule, several (p, m), with
// and without DP replicas and TP ranks.
func layouts() []layout {
	var out []layout
	for _, s := range []string{"gpipe", "1f1b", "zb-h1"} {
		for _, pm := range [][2]int{{2, 4}, {3, 6}, {4, 8}} {
			out = append(out, layout{schedule: s, p: pm[0], m: pm[1], v: 1, dp: 1, tp: 1})
		}
		out = append(out, layout{schedule: s, p: 3, m: 5, v: 1, dp: 2, tp: 2})
	}
	for _, pmv := range [][3]int{{2, 4, 2}, {4, 8, 2}, {3, 6, 3}} {
		out = append(out, layout{schedule: "interleaved", p: pmv[0], m: pmv[1], v: pmv[2], dp: 1, tp: 1})
	}
	out = append(out, layout{schedule: "interleaved", p: 2, m: 4, v: 2, dp: 2, tp: 2})
	return out
}

// expect is what a fault must produce, reasoned from its spec alone.
type expect struct {
	verdicts   []hang.Verdict      // acceptable verdicts
	reasons    []string            // acceptable root-cause reasons
	rank       trace.Rank          // the root cause's rank
	step       int64               // the root cause's step
	mb         trace.MicroBatch    // the root cause's micro-batch (-1: none)
	kinds      []hang.MismatchKind // some mismatch of one of these kinds names rank, step and mb
	mbInKind   bool                // that mismatch carries mb
	rankInPath bool                // the wait-for cycle or chain goes through rank
}

// expectFor reasons what fault f on job l must show:
//
//   - skip: R drops every op of M, so its peers' ops pair with labels
//     shifted by one from M on (order_mismatch, the label M on the peer's
//     side); when M is the last micro-batch and no later chunk follows
//     (v = 1) no shifted pair exists and the ops of M are left without a
//     partner (missing_send / missing_recv). R ends waiting (in a receive or
//     in the optimizer barrier) for ranks that wait for its missing ops: a
//     deadlock through R.
//   - shape, dtype: R's first send of M meets its receive with twice the
//     bytes: the pair can never complete and every blocked rank's chain ends
//     there: verdict mismatch, kind shape/dtype_mismatch, R the sender.
//   - crash: R dies at its first op of M (F or RECV_F): the ranks that need
//     its ops wait for it, a chain ending at R: stalled, root R in the op of
//     M, and a receive or send of a peer left without partner on R.
//   - exit: R records nothing from step S: early_exit of step S (rank_absent
//     for S = 0: no events at all); stalled at R.
//   - reorder: R's sends of M and M+1 swap; the bytes agree, so the job
//     completes with pairs carrying swapped labels: verdict mismatch,
//     order_mismatch on R's sends, the label M on the receiver's side.
//   - optskip: R records OPT_SKIP where the others record OPT; the job
//     completes: verdict mismatch, optimizer_skip_mismatch naming R alone.
func expectFor(l layout, f sim.Fault) expect {
	e := expect{rank: trace.Rank(f.Rank), step: int64(f.Step), mb: trace.MicroBatch(f.MicroBatch), mbInKind: true}
	switch f.Kind {
	case sim.FaultSkip:
		e.verdicts = []hang.Verdict{hang.VerdictDeadlock}
		e.reasons = []string{"skipped_microbatch"}
		e.kinds = []hang.MismatchKind{hang.OrderMismatch}
		if f.MicroBatch == l.m-1 && l.v == 1 {
			e.kinds = []hang.MismatchKind{hang.MissingSend, hang.MissingRecv}
		}
		e.rankInPath = true
	case sim.FaultShape:
		e.verdicts = []hang.Verdict{hang.VerdictMismatch}
		e.reasons = []string{"shape_mismatch"}
		e.kinds = []hang.MismatchKind{hang.ShapeMismatch}
	case sim.FaultDtype:
		e.verdicts = []hang.Verdict{hang.VerdictMismatch}
		e.reasons = []string{"dtype_mismatch"}
		e.kinds = []hang.MismatchKind{hang.DtypeMismatch}
	case sim.FaultCrash:
		e.verdicts = []hang.Verdict{hang.VerdictStalled}
		e.reasons = []string{"stopped_in_compute", "stopped_in_transfer"}
		e.kinds = []hang.MismatchKind{hang.MissingSend, hang.MissingRecv}
		e.mbInKind = false
		e.rankInPath = true
	case sim.FaultExit:
		e.verdicts = []hang.Verdict{hang.VerdictStalled}
		e.reasons = []string{"exited"}
		e.kinds = []hang.MismatchKind{hang.EarlyExit}
		if f.Step == 0 {
			e.reasons = []string{"absent"}
			e.kinds = []hang.MismatchKind{hang.RankAbsent}
			e.step = -1 // rank_absent has no step
		}
		e.mb = -1
		e.rankInPath = true
	case sim.FaultReorder:
		e.verdicts = []hang.Verdict{hang.VerdictMismatch}
		e.reasons = []string{"reordered_ops"}
		e.kinds = []hang.MismatchKind{hang.OrderMismatch}
	case sim.FaultOptSkip:
		e.verdicts = []hang.Verdict{hang.VerdictMismatch}
		e.reasons = []string{"optimizer_skip"}
		e.kinds = []hang.MismatchKind{hang.OptimizerSkipMismatch}
		e.mb = -1
	}
	return e
}

// faultsFor picks faults of every kind on the first, a middle and the last
// stage, in the last pipeline replica and TP rank, at the first, a middle
// and the last micro-batch, in both steps.
func faultsFor(l layout) []sim.Fault {
	c := l.config()
	stages := []int{0, l.p / 2, l.p - 1}
	var out []sim.Fault
	for i, st := range slices.Compact(stages) {
		r := c.Rank(st, l.dp-1, l.tp-1)
		step := i % 2
		for _, mb := range slices.Compact([]int{0, l.m / 2, l.m - 1}) {
			for _, k := range []sim.FaultKind{sim.FaultSkip, sim.FaultShape, sim.FaultDtype, sim.FaultCrash} {
				out = append(out, sim.Fault{Kind: k, Rank: r, Step: step, MicroBatch: mb})
			}
			if mb+1 < l.m {
				out = append(out, sim.Fault{Kind: sim.FaultReorder, Rank: r, Step: step, MicroBatch: mb})
			}
		}
		for s := 0; s < 2; s++ {
			out = append(out, sim.Fault{Kind: sim.FaultExit, Rank: r, Step: s, MicroBatch: -1},
				sim.Fault{Kind: sim.FaultOptSkip, Rank: r, Step: s, MicroBatch: -1})
		}
	}
	return out
}

// TestFaultMatrix runs every fault the simulator injects on every schedule
// and layout of the matrix and checks the diagnosis against what the fault
// spec implies (expectFor).
func TestFaultMatrix(t *testing.T) {
	n := 0
	for _, l := range layouts() {
		t.Run(l.String(), func(t *testing.T) {
			clean := mustRun(t, l.config())
			if rep := run(t, clean, hang.Options{}); rep.Verdict != hang.VerdictOK || len(rep.Mismatches) > 0 {
				t.Errorf("clean run: verdict %s, mismatches %v", rep.Verdict, rep.Mismatches)
			}
			for _, f := range faultsFor(l) {
				n++
				tr := mustRun(t, l.config(f))
				rep := run(t, tr, hang.Options{})
				if msg := check(rep, expectFor(l, f), tr); msg != "" {
					t.Errorf("%s: %s\n%s", f, msg, dump(rep))
				}
			}
		})
	}
	t.Logf("%d faulted runs", n)
}

// TestFaultMatrixLatency repeats the crash and skip faults with P2P latency,
// where a crash can leave transfers in flight. A crash is then still
// diagnosed as stalled at the crashed rank, or, when two ranks are stuck
// in transfers with each other that started at the same time, the crashed
// rank is among the named candidates. A peer may now be stuck in a transfer
// from the crashed rank that started and never ended instead of waiting
// for an op it never posted: its pair agrees on every label, so no
// mismatch need name the crashed rank.
func TestFaultMatrixLatency(t *testing.T) {
	for _, l := range layouts() {
		l.latencyUs = 100
		for _, f := range faultsFor(l) {
			if f.Kind != sim.FaultCrash && f.Kind != sim.FaultSkip {
				continue
			}
			tr := mustRun(t, l.config(f))
			rep := run(t, tr, hang.Options{})
			e := expectFor(l, f)
			if f.Kind == sim.FaultCrash {
				e.kinds = nil
			}
			msg := check(rep, e, tr)
			if msg != "" && f.Kind == sim.FaultCrash && rep.Verdict == hang.VerdictStalled && slices.Contains(rep.RootCause.Candidates, e.rank) {
				msg = ""
			}
			if msg != "" {
				t.Errorf("%s %s: %s\n%s", l, f, msg, dump(rep))
			}
		}
	}
}

// check compares a report with the expectation; "" when it holds.
func check(rep *hang.Report, e expect, tr *trace.Trace) string {
	rc := rep.RootCause
	switch {
	case !slices.Contains(e.verdicts, rep.Verdict):
		return fmt.Sprintf("verdict %s, want %v", rep.Verdict, e.verdicts)
	case !slices.Contains(e.reasons, rc.Reason):
		return fmt.Sprintf("root cause reason %q, want %v", rc.Reason, e.reasons)
	case rc.Rank != e.rank:
		return fmt.Sprintf("root cause rank %d, want %d", rc.Rank, e.rank)
	case e.step >= 0 && rc.Step != e.step:
		return fmt.Sprintf("root cause step %d, want %d", rc.Step, e.step)
	case rc.MicroBatch != e.mb:
		return fmt.Sprintf("root cause micro-batch %d, want %d", rc.MicroBatch, e.mb)
	case rc.Summary == "":
		return "empty summary"
	}
	found := e.kinds == nil
	for _, m := range rep.Mismatches {
		if slices.Contains(e.kinds, m.Kind) && slices.Contains(m.Ranks, e.rank) &&
			(e.step < 0 || m.Step == e.step) && (!e.mbInKind || m.MicroBatch == e.mb) {
			found = true
		}
	}
	if !found {
		return fmt.Sprintf("no mismatch of kind %v naming rank %d, step %d, mb %d", e.kinds, e.rank, e.step, e.mb)
	}
	hung := false
	for i := 0; i < tr.Len(); i++ {
		hung = hung || !tr.Completed(i)
	}
	if hung != (len(rep.Blocked) > 0) {
		return fmt.Sprintf("trace hung=%v but %d blocked ops reported", hung, len(rep.Blocked))
	}
	if e.rankInPath {
		on := false
		for _, n := range rep.Path {
			on = on || !n.Barrier && n.Rank == e.rank
		}
		if !on {
			return fmt.Sprintf("rank %d not on the wait-for path %v", e.rank, rep.Path)
		}
	}
	if rep.Verdict == hang.VerdictDeadlock && !slices.Contains(rep.Cycle, e.rank) {
		return fmt.Sprintf("rank %d not in the cycle %v", e.rank, rep.Cycle)
	}
	return ""
}
