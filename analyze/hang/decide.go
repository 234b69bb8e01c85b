package hang

import (
	"fmt"
	"strings"

	"github.com/ppprof/ppprof/trace"
)

// decide fills the report's ranks and blocked ops, then picks the verdict
// and the root cause:
//
//  1. incomplete: the job is hung and a rank whose events are missing (its
//     file lost bytes, or peers completed ops it has no record of) is on a
//     wait-for path; or nothing is pending, no mismatch stands without the
//     missing events, and some rank's events are missing.
//  2. hung (some op pending): deadlock when the wait-for graph has a cycle;
//     else mismatch when a chain ends at a pair whose byte counts differ
//     (or at a collective whose members disagree); else stalled.
//  3. not hung: mismatch when anything disagrees, else ok.
//
// The root cause is, in order: the lost rank (incomplete); the first
// departure from the schedule (a skipped micro-batch or a reordered send);
// the suspect of the first mismatched pair; the first collective whose
// members disagree; the end of the wait-for chains (an absent rank, an idle
// one, one that stopped, one stuck in compute, one stuck in a collective
// another member completed, one stuck in a transfer: the one that issued
// last, as the others were waiting for it then); the first cycle; the
// first remaining mismatch. A root cause whose rank never joined (or never
// got to) a collective that blocked ranks wait in says which.
func (a *analysis) decide() {
	a.fillRanks()
	rep := a.rep
	rep.Collectives = a.collectiveReport()
	hung := len(rep.Blocked) > 0
	if len(a.cycles) > 0 {
		rep.Cycles = len(a.cycles)
		first := a.cycles[0]
		for _, c := range a.cycles[1:] {
			if minRank(a, c) < minRank(a, first) {
				first = c
			}
		}
		rep.Path = a.simpleCycle(first)
		for _, n := range rep.Path[:len(rep.Path)-1] {
			if n.IsRank() {
				rep.Cycle = append(rep.Cycle, n.Rank)
			}
		}
	}

	// 1. Incomplete.
	if lost := a.lostRoot(hung); lost >= 0 {
		rep.Verdict = VerdictIncomplete
		rep.RootCause = a.lostCause(lost)
		a.setChain(lost)
		return
	}

	for r := range a.ranks {
		if ri := &a.ranks[r]; ri.lost {
			a.note("rank %d's events are missing (%s); no blocked rank waits for it, so the diagnosis does not depend on them", r, ri.lostWhy)
		}
	}

	// 2, 3. The verdict.
	sinks := a.sinks()
	switch {
	case hung && len(a.cycles) > 0:
		rep.Verdict = VerdictDeadlock
	case hung && (a.anyTerm(sinks, termBadPair) || a.anyTerm(sinks, termCollBad)):
		rep.Verdict = VerdictMismatch
	case hung:
		rep.Verdict = VerdictStalled
	case len(rep.Mismatches) > 0:
		rep.Verdict = VerdictMismatch
	default:
		rep.Verdict = VerdictOK
		if len(a.divs) > 0 {
			d := a.firstDivergence()
			rep.Divergence = d
			a.note("rank %d departed from the %s schedule in step %d (the schedule has %s there), but every send and receive matched: the job ran, perhaps on different data",
				d.Rank, rep.Job.Schedule, d.Step, d.Want)
		}
		rep.RootCause = RootCause{Rank: trace.NoRank, Stage: -1, Step: -1, MicroBatch: -1, Reason: "ok",
			Summary: fmt.Sprintf("every op completed and all %d send/recv pairs matched with the same labels", rep.Matched)}
		return
	}

	// The root cause.
	switch {
	case len(a.divs) > 0:
		rep.RootCause = a.divergenceCause(a.firstDivergence())
	case a.firstPairMismatch() != nil:
		rep.RootCause = a.pairCause(a.firstPairMismatch())
	case a.firstCollMismatch() != nil:
		rep.RootCause = a.collMismatchCause(a.firstCollMismatch())
	case rep.Verdict == VerdictDeadlock:
		rep.RootCause = a.cycleCause()
	case hung && len(sinks) > 0:
		rep.RootCause = a.sinkCause(sinks)
	default:
		rep.RootCause = a.mismatchCause(&rep.Mismatches[0])
	}
	a.collContext(&rep.RootCause)
	if rep.Path == nil && hung && rep.RootCause.Rank >= 0 && int(rep.RootCause.Rank) < len(a.ranks) && a.reached[rep.RootCause.Rank] {
		a.setChain(rep.RootCause.Rank)
	}
}

// fillRanks copies the per-rank state and every pending op into the
// report.
func (a *analysis) fillRanks() {
	t, rep := a.t, a.rep
	rep.Ranks = make([]RankState, len(a.ranks))
	pending := 0
	for r := range a.ranks {
		pending += a.ranks[r].pending
	}
	if pending > 0 {
		rep.Blocked = make([]Blocked, 0, pending)
	}
	for r := range a.ranks {
		ri := &a.ranks[r]
		rs := RankState{Rank: trace.Rank(r), Stage: ri.stage, Pipeline: ri.pipe, TPRank: ri.tp, State: ri.state,
			Events: ri.events, Pending: ri.pending, WaitsFor: trace.NoRank,
			Truncated: ri.truncated, BytesLost: ri.bytesLost, Lost: ri.lost, LostReason: ri.lostWhy}
		rs.LastCompleted = a.event(ri.lastDone)
		if ri.block >= 0 {
			rs.Waiting = a.event(ri.block)
		}
		if a.reached[r] || ri.pending > 0 {
			rs.Terminal = terminalNote[ri.term]
		}
		if ri.waitsFor >= 0 {
			if b := a.groupNode(ri.waitsFor); b != nil && b.coll > 0 {
				n := a.node(ri.waitsFor)
				rs.WaitsCollective = &n
				for _, w := range b.waits {
					rs.WaitsOn = append(rs.WaitsOn, trace.Rank(w))
				}
			} else if b != nil {
				rs.WaitsBarrier = true
			} else {
				rs.WaitsFor = trace.Rank(ri.waitsFor)
			}
		}
		rep.Ranks[r] = rs
		rep.States[ri.state]++
		for i, left := ri.firstPending, ri.pending; i < ri.hi && left > 0; i++ {
			if t.EndNs[i] != trace.NoTime {
				continue
			}
			left--
			b := Blocked{Op: t.At(i), WaitNs: max(rep.DumpNs-t.IssueNs[i], 0)}
			if p := a.partner(i); p >= 0 {
				b.Partner = a.event(int(p))
			}
			rep.Blocked = append(rep.Blocked, b)
		}
	}
}

// terminalNote is RankState.Terminal per terminal kind.
var terminalNote = [...]string{
	termNone:     "",
	termCompute:  "never ended",
	termStopped:  "stopped",
	termAbsent:   "no events",
	termStuck:    "transfer never completed",
	termBadPair:  "pair can never complete",
	termBarrier:  "",
	termIdle:     "nothing in flight in its dump",
	termCollDone: "collective completed elsewhere, not here",
	termCollBad:  "collective members disagree",
}

func minRank(a *analysis, comp []int32) int32 {
	m := int32(len(a.ranks))
	for _, v := range comp {
		if !a.isBarrier(v) {
			m = min(m, v)
		}
	}
	return m
}

// lostRoot returns the rank whose missing events decide the verdict, or -1:
// when hung, a lost rank some blocked rank waits for, directly or through
// others (a chain end first); when not, a lost rank if no mismatch stands
// without the missing events.
func (a *analysis) lostRoot(hung bool) trace.Rank {
	waited := make([]bool, a.numNodes())
	for v := int32(0); int(v) < len(waited); v++ {
		for e := 0; a.reached[v]; e++ {
			w, ok := a.succ(v, e)
			if !ok {
				break
			}
			waited[w] = true
		}
	}
	best := trace.Rank(-1)
	for r := range a.ranks {
		ri := &a.ranks[r]
		if !ri.lost {
			continue
		}
		if hung && !waited[r] {
			continue
		}
		if best < 0 || ri.waitsFor < 0 && a.ranks[best].waitsFor >= 0 {
			best = trace.Rank(r)
		}
	}
	if best < 0 || hung {
		return best
	}
	for _, m := range a.rep.Mismatches {
		if !a.explainedByLoss(&m) {
			return -1
		}
	}
	return best
}

// explainedByLoss reports whether m could be an effect of missing events:
// an op without a partner, or an absent or stopped rank, involving a rank
// whose events are missing.
func (a *analysis) explainedByLoss(m *Mismatch) bool {
	switch m.Kind {
	case MissingSend, MissingRecv, RankAbsent, EarlyExit:
		for _, r := range m.Ranks {
			if a.ranks[r].lost {
				return true
			}
		}
	}
	return false
}

// sinks returns the reached nodes that wait for nobody.
func (a *analysis) sinks() []int32 {
	var out []int32
	for v := int32(0); int(v) < a.numNodes(); v++ {
		if !a.reached[v] {
			continue
		}
		if _, ok := a.succ(v, 0); !ok {
			out = append(out, v)
		}
	}
	return out
}

func (a *analysis) anyTerm(nodes []int32, k termKind) bool {
	for _, v := range nodes {
		if !a.isBarrier(v) && a.ranks[v].term == k {
			return true
		}
	}
	return false
}

// setChain records the longest wait-for chain ending at rank r as the
// report's path, unless a cycle is shown.
func (a *analysis) setChain(r trace.Rank) {
	if a.rep.Path == nil && int(r) < len(a.ranks) && a.reached[r] {
		if c := a.chainTo(int32(r)); len(c) > 1 {
			a.rep.Path = c
		}
	}
}

// firstDivergence returns the earliest schedule departure: lowest step,
// then earliest op.
func (a *analysis) firstDivergence() *Divergence {
	best := &a.divs[0]
	at := func(d *Divergence) int64 {
		if d.Got != nil {
			return d.Got.IssueNs
		}
		return a.ranks[d.Rank].maxIssue
	}
	for i := range a.divs[1:] {
		d := &a.divs[i+1]
		if d.Step < best.Step || d.Step == best.Step && at(d) < at(best) {
			best = d
		}
	}
	return best
}

// firstPairMismatch returns the first mismatched pair in report order, or
// nil.
func (a *analysis) firstPairMismatch() *Mismatch {
	for i := range a.rep.Mismatches {
		if category(a.rep.Mismatches[i].Kind) == 0 {
			return &a.rep.Mismatches[i]
		}
	}
	return nil
}

// cause starts a root cause naming rank r.
func (a *analysis) cause(r trace.Rank, reason string) RootCause {
	rc := RootCause{Rank: r, Stage: -1, Step: -1, MicroBatch: -1, Reason: reason}
	if r >= 0 && int(r) < len(a.ranks) {
		rc.Stage = a.ranks[r].stage
	}
	return rc
}

// waitedBy says who waits for rank r: " while rank 4 waits in RECV_F mb 6
// of step 12 from rank 5 (and 3 more ranks wait for it)".
func (a *analysis) waitedBy(r trace.Rank) string {
	w := a.waiters(int32(r))
	if len(w) == 0 {
		return ""
	}
	first := w[0]
	for _, x := range w {
		if a.ranks[x].state != StateBarrier {
			first = x
			break
		}
	}
	s := "; " + a.doing(first)
	if len(w) > 1 {
		s += fmt.Sprintf(" (%d ranks wait for rank %d directly)", len(w), r)
	}
	return s
}

// divergenceCause explains a departure from the schedule, with the pair or
// unmatched op that shows it when there is one.
func (a *analysis) divergenceCause(d *Divergence) RootCause {
	sched := a.rep.Job.Schedule
	a.rep.Divergence = d
	rc := a.cause(d.Rank, "schedule_divergence")
	rc.Step, rc.MicroBatch = d.Step, d.MicroBatch
	who := a.describeRank(d.Rank)
	got := "went on to its optimizer step"
	if d.Got != nil {
		got = "did " + describeOp(d.Got)
	}
	evidence := a.evidence(d.Rank, d.Step)
	switch {
	case d.Skipped:
		rc.Reason = "skipped_microbatch"
		rc.Summary = fmt.Sprintf("%s skipped micro-batch %d of step %d: %s", who, d.MicroBatch, d.Step, evidence)
		if evidence == "" {
			rc.Summary = fmt.Sprintf("%s skipped micro-batch %d of step %d: as its %s F/B/W/P2P op of the step it %s where the %s schedule has %s",
				who, d.MicroBatch, d.Step, ordinal(d.Index+1), got, sched, d.Want)
		}
	case d.Late:
		rc.Reason = "reordered_ops"
		rc.Summary = fmt.Sprintf("%s issued %s of step %d out of order: the %s schedule has it as the rank's %s F/B/W/P2P op of the step, where the rank %s",
			who, d.Want, d.Step, sched, ordinal(d.Index+1), got)
		if evidence != "" {
			rc.Summary += "; " + evidence
		}
	default:
		rc.Summary = fmt.Sprintf("%s departed from the %s schedule in step %d: as its %s F/B/W/P2P op of the step it %s where the schedule has %s",
			who, sched, d.Step, ordinal(d.Index+1), got, d.Want)
		if evidence != "" {
			rc.Summary += "; " + evidence
		}
	}
	return rc
}

// evidence describes the first mismatch of step that involves rank r: a
// mismatched pair ("it posted RECV_F mb 7 from rank 4 while rank 4 is
// sending mb 6") or an op left without a partner; "" when none.
func (a *analysis) evidence(r trace.Rank, step int64) string {
	for i := range a.rep.Mismatches {
		m := &a.rep.Mismatches[i]
		if m.Step != step || len(m.Ranks) != 2 || m.Ranks[0] != r && m.Ranks[1] != r {
			continue
		}
		switch m.Kind {
		case OrderMismatch:
			sameKind := m.Send.Kind.Counterpart() == m.Recv.Kind
			if m.Recv.Rank == r {
				return fmt.Sprintf("it posted %s from rank %d while rank %d is sending %s", opLabel(m.Recv, true), m.Send.Rank, m.Send.Rank, opLabel(m.Send, !sameKind))
			}
			return fmt.Sprintf("it sent %s to rank %d while rank %d expects %s", opLabel(m.Send, true), m.Recv.Rank, m.Recv.Rank, opLabel(m.Recv, !sameKind))
		case MissingSend:
			if m.Recv.Rank != r {
				return fmt.Sprintf("rank %d waits in %s, a send rank %d never posted; %s", m.Recv.Rank, describeOp(m.Recv), r, a.doing(r))
			}
		case MissingRecv:
			if m.Send.Rank != r {
				return fmt.Sprintf("rank %d's %s finds no receive; %s", m.Send.Rank, describeOp(m.Send), a.doing(r))
			}
		}
	}
	return ""
}

// opLabel says "RECV_F mb 7", "mb 7" without the kind, and adds the chunk
// when not 0.
func opLabel(e *trace.Event, kind bool) string {
	s := fmt.Sprintf("mb %d", e.MicroBatch)
	if kind {
		s = e.Kind.String() + " " + s
	}
	if e.Chunk != 0 {
		s += fmt.Sprintf(" chunk %d", e.Chunk)
	}
	return s
}

// pairCause explains a mismatched pair from its suspect's side.
func (a *analysis) pairCause(m *Mismatch) RootCause {
	s, r := m.Send, m.Recv
	rc := a.cause(m.Suspect, string(m.Kind))
	rc.Step, rc.MicroBatch = m.Step, m.MicroBatch
	hangs := r.EndNs == trace.NoTime && a.badPairRows(s, r)
	tail := ": rank " + fmt.Sprint(r.Rank) + " received the wrong data"
	if hangs {
		tail = ": NCCL waits for the byte count each side gave, so the pair can never complete"
	}
	switch m.Kind {
	case ShapeMismatch:
		rc.Summary = fmt.Sprintf("%s sent micro-batch %d of step %d to rank %d with shape %s (%d bytes) where rank %d's %s expects %s (%d bytes)%s",
			a.describeRank(s.Rank), s.MicroBatch, s.Step, r.Rank, s.Shape, s.Bytes, r.Rank, r.Kind, r.Shape, r.Bytes, tail)
	case DtypeMismatch:
		rc.Summary = fmt.Sprintf("%s sent micro-batch %d of step %d to rank %d as %s (%d bytes) where rank %d's %s expects %s (%d bytes)%s",
			a.describeRank(s.Rank), s.MicroBatch, s.Step, r.Rank, s.Dtype, s.Bytes, r.Rank, r.Kind, r.Dtype, r.Bytes, tail)
	case BytesMismatch:
		rc.Summary = fmt.Sprintf("%s sent %d bytes for micro-batch %d of step %d to rank %d where rank %d's %s expects %d bytes%s",
			a.describeRank(s.Rank), s.Bytes, s.MicroBatch, s.Step, r.Rank, r.Rank, r.Kind, r.Bytes, tail)
	default: // order
		pair := fmt.Sprintf("rank %d's %s met rank %d's %s (pairs match in issue order)", s.Rank, describeOp(s), r.Rank, describeOp(r))
		switch {
		case m.Suspect == trace.NoRank:
			rc.Rank = r.Rank
			rc.Stage = a.ranks[r.Rank].stage
			rc.Candidates = []trace.Rank{s.Rank, r.Rank}
			rc.Summary = fmt.Sprintf("ranks %d and %d disagree on the order of their ops in step %d: %s; the trace cannot tell which one left the schedule",
				s.Rank, r.Rank, m.Step, pair)
		case a.hasOp(m.Suspect, a.other(m), m.Step, m.MicroBatch, a.suspectKind(m)):
			rc.Reason = "reordered_ops"
			rc.Summary = fmt.Sprintf("%s issued its ops of micro-batch %d of step %d out of order: %s", a.describeRank(m.Suspect), m.MicroBatch, m.Step, pair)
		default:
			rc.Reason = "skipped_microbatch"
			rc.Summary = fmt.Sprintf("%s skipped micro-batch %d of step %d: %s", a.describeRank(m.Suspect), m.MicroBatch, m.Step, a.evidence(m.Suspect, m.Step))
		}
	}
	return rc
}

// other returns the rank of a two-rank mismatch that is not its suspect.
func (a *analysis) other(m *Mismatch) trace.Rank {
	if m.Ranks[0] == m.Suspect {
		return m.Ranks[1]
	}
	return m.Ranks[0]
}

// suspectKind returns the kind of the suspect's op in a mismatched pair,
// as the peer's op expects it (the counterpart of the peer's kind).
func (a *analysis) suspectKind(m *Mismatch) trace.Kind {
	if m.Send.Rank == m.Suspect {
		return m.Recv.Kind.Counterpart()
	}
	return m.Send.Kind.Counterpart()
}

func (a *analysis) badPairRows(s, r *trace.Event) bool {
	if s.Bytes > 0 && r.Bytes > 0 {
		return s.Bytes != r.Bytes
	}
	return s.Shape != "" && r.Shape != "" && s.Shape != r.Shape
}

// sinkCause names the end of the wait-for chains: an absent rank, one that
// stopped, one stuck in compute, one stuck in a transfer (the last to
// issue an op), a barrier every rank reached; the first of the most
// telling kind.
func (a *analysis) sinkCause(sinks []int32) RootCause {
	rank := func(k termKind) []trace.Rank {
		var out []trace.Rank
		for _, v := range sinks {
			if !a.isBarrier(v) && a.ranks[v].term == k {
				out = append(out, trace.Rank(v))
			}
		}
		return out
	}
	if rs := rank(termAbsent); len(rs) > 0 {
		return a.absentCause(rs)
	}
	if rs := rank(termIdle); len(rs) > 0 {
		return a.idleCause(rs)
	}
	if rs := rank(termStopped); len(rs) > 0 {
		return a.stoppedCause(rs[0])
	}
	if rs := rank(termCompute); len(rs) > 0 {
		return a.computeCause(rs)
	}
	if rs := rank(termCollDone); len(rs) > 0 {
		return a.collStuckCause(rs)
	}
	if rs := rank(termStuck); len(rs) > 0 {
		return a.stuckCause(rs)
	}
	for _, v := range sinks {
		if a.isBarrier(v) {
			b := a.barriers[int(v)-len(a.ranks)]
			if b.coll > 0 {
				return a.collHangCause(b.coll - 1)
			}
			rc := a.cause(trace.NoRank, "optimizer_barrier")
			rc.Step = b.step
			rc.Summary = fmt.Sprintf("every rank posted the optimizer step of step %d and it never completed: the collective inside it hangs (check the NCCL communicator and the network)", b.step)
			return rc
		}
	}
	return a.mismatchCause(&a.rep.Mismatches[0])
}

func (a *analysis) absentCause(rs []trace.Rank) RootCause {
	r := rs[0]
	rc := a.cause(r, "absent")
	if w := a.waiters(int32(r)); len(w) > 0 && a.ranks[w[0]].block >= 0 {
		e := a.event(a.ranks[w[0]].block)
		rc.Step = e.Step
	}
	rc.Summary = fmt.Sprintf("%s recorded no events: it never started, died before its collector's first flush, or its file is missing from the dump%s",
		a.describeRank(r), a.waitedBy(r))
	if len(rs) > 1 {
		rc.Candidates = rs
		rc.Summary += fmt.Sprintf("; %s recorded nothing either", rankList("rank", rs[1:]))
	}
	return rc
}

func (a *analysis) stoppedCause(r trace.Rank) RootCause {
	ri := &a.ranks[r]
	last := a.event(ri.lastDone)
	if ri.state == StateExited {
		rc := a.cause(r, "exited")
		rc.Step = last.Step + 1
		rc.Summary = fmt.Sprintf("%s exited after step %d: it recorded nothing of step %d%s", a.describeRank(r), last.Step, last.Step+1, a.waitedBy(r))
		return rc
	}
	rc := a.cause(r, "silent")
	rc.Step, rc.MicroBatch = last.Step, last.MicroBatch
	how := "it died without a record, or its collector lost its last events"
	if ri.truncated {
		how = "its file was not closed: it died without a record (killed?), or its collector did not flush its last events"
	}
	rc.Summary = fmt.Sprintf("%s stopped after %s (ended %s before the dump) with nothing pending: %s%s",
		a.describeRank(r), describeOp(last), ms(a.rep.DumpNs-last.EndNs), how, a.waitedBy(r))
	return rc
}

// computeCause names the rank stuck in compute the longest (the earliest
// start, or post); the others stuck in compute, if any, are candidates: a
// TP group hung in a collective inside its compute looks like this.
func (a *analysis) computeCause(rs []trace.Rank) RootCause {
	since := func(r trace.Rank) int64 {
		e := a.event(a.ranks[r].block)
		if e.StartNs != trace.NoTime {
			return e.StartNs
		}
		return e.IssueNs
	}
	r := rs[0]
	for _, x := range rs[1:] {
		if since(x) < since(r) {
			r = x
		}
	}
	e := a.event(a.ranks[r].block)
	rc := a.cause(r, "stopped_in_compute")
	rc.Step, rc.MicroBatch = e.Step, e.MicroBatch
	when := "was posted " + ms(a.rep.DumpNs-e.IssueNs) + " before the dump and never started"
	if e.StartNs != trace.NoTime {
		when = "started " + ms(a.rep.DumpNs-e.StartNs) + " before the dump and never ended"
	}
	rc.Summary = fmt.Sprintf("%s stopped in %s: it %s (it crashed there, or hangs in it)%s", a.describeRank(r), describeOp(e), when, a.waitedBy(r))
	if len(rs) > 1 {
		rc.Candidates = rs
		rc.Summary += fmt.Sprintf("; %s are stuck in compute too (a collective inside it, such as a TP all-reduce, hangs if one of them died)", rankList("rank", rs))
	}
	return rc
}

// stuckCause names the rank stuck in a transfer that issued an op last: the
// others were waiting for it by then, so it was alive and then stopped.
func (a *analysis) stuckCause(rs []trace.Rank) RootCause {
	best := rs[0]
	var tied []trace.Rank
	for _, r := range rs[1:] {
		if a.ranks[r].maxIssue > a.ranks[best].maxIssue {
			best = r
		}
	}
	for _, r := range rs {
		if a.ranks[r].maxIssue == a.ranks[best].maxIssue {
			tied = append(tied, r)
		}
	}
	e := a.event(a.ranks[best].block)
	rc := a.cause(best, "stopped_in_transfer")
	rc.Step, rc.MicroBatch = e.Step, e.MicroBatch
	partner := "the peer posted its side"
	if p := a.partner(a.ranks[best].block); p >= 0 {
		partner = "rank " + fmt.Sprint(e.Peer) + " posted " + describeOp(a.event(int(p)))
	}
	rc.Summary = fmt.Sprintf("%s stopped in %s: %s and the transfer never completed (it died in it, or the link failed)%s",
		a.describeRank(best), describeOp(e), partner, a.waitedBy(best))
	if len(tied) > 1 {
		rc.Candidates = tied
		rc.Summary += fmt.Sprintf("; %s are stuck the same way and issued their last ops at the same time: the trace cannot tell which died", rankList("rank", tied))
	}
	return rc
}

// cycleCause describes the first cycle when no mismatch explains it.
func (a *analysis) cycleCause() RootCause {
	rep := a.rep
	rc := a.cause(rep.Cycle[0], "deadlock")
	var parts []string
	for _, n := range rep.Path[:len(rep.Path)-1] {
		if n.Barrier {
			parts = append(parts, fmt.Sprintf("the optimizer step of step %d waits for the ranks that have not reached it", n.Step))
			continue
		}
		if n.Group != "" {
			parts = append(parts, fmt.Sprintf("%s #%d of group %s waits for the members that have not joined it", n.Kind, n.GroupSeq, n.Group))
			continue
		}
		parts = append(parts, a.doing(n.Rank))
	}
	if e := rep.Ranks[rep.Cycle[0]].Waiting; e != nil {
		rc.Step, rc.MicroBatch = e.Step, e.MicroBatch
	}
	rc.Candidates = rep.Cycle
	rc.Summary = fmt.Sprintf("%s wait for each other and none can go on: %s", rankList("rank", rep.Cycle), strings.Join(parts, "; "))
	return rc
}

// lostCause explains a verdict of incomplete.
func (a *analysis) lostCause(r trace.Rank) RootCause {
	ri := &a.ranks[r]
	rc := a.cause(r, "lost_data")
	last := "it recorded no events"
	if ri.lastDone >= 0 {
		e := a.event(ri.lastDone)
		rc.Step = e.Step
		last = "its last recorded op is " + describeOp(e)
	}
	rc.Summary = fmt.Sprintf("the dump is incomplete: events of %s are missing (%s); %s%s. Collect its events again to decide; until then it is the suspect",
		a.describeRank(r), ri.lostWhy, last, a.waitedBy(r))
	return rc
}

// mismatchCause explains a rank-level mismatch (or any other) as the root.
func (a *analysis) mismatchCause(m *Mismatch) RootCause {
	r := m.Suspect
	if r == trace.NoRank && len(m.Ranks) > 0 {
		r = m.Ranks[0]
	}
	rc := a.cause(r, string(m.Kind))
	rc.Step, rc.MicroBatch = m.Step, m.MicroBatch
	if len(m.Ranks) > 1 && m.Suspect == trace.NoRank {
		rc.Candidates = m.Ranks
	}
	switch m.Kind {
	case OptimizerSkipMismatch:
		rc.Reason = "optimizer_skip"
	case MissingSend, MissingRecv:
		rc.Summary = fmt.Sprintf("%s: %s", a.describeRank(r), m.Detail)
		return rc
	}
	rc.Summary = m.Detail
	return rc
}

// ordinal says "1st", "2nd", "3rd", "4th", "11th", "22nd".
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}
