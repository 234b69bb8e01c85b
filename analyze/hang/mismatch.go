package hang

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ppprof/ppprof/trace"
)

// category orders mismatch kinds in the report: pair labels first (the
// first divergence), then ops left without a partner, then whole ranks.
func category(k MismatchKind) int {
	switch k {
	case OrderMismatch, ShapeMismatch, DtypeMismatch, BytesMismatch:
		return 0
	case MissingSend, MissingRecv:
		return 1
	case CollectiveMismatch, CollectiveDtypeMismatch, CollectiveSizeMismatch, MissingCollective:
		return 1
	}
	return 2
}

// mismatchTime is when a mismatch showed: the later post of its pair.
func mismatchTime(m *Mismatch) int64 {
	t := int64(trace.NoTime)
	if m.Send != nil {
		t = max(t, m.Send.IssueNs)
	}
	if m.Recv != nil {
		t = max(t, m.Recv.IssueNs)
	}
	if m.Collective != nil {
		for _, e := range m.Collective.Ops {
			t = max(t, e.IssueNs)
		}
	}
	return t
}

// collectMismatches lists every kind of disagreement: the first mismatched
// pair of each rank pair and kind, the first pending op without a partner
// of each rank pair, absent ranks, ranks that stopped while others wait
// for them, and steps whose optimizer step some ranks skipped.
func (a *analysis) collectMismatches() {
	t := a.t
	var out []Mismatch

	// 1. Matched pairs whose labels differ.
	for _, pm := range a.pairMM {
		s, r := int(pm.send), int(pm.recv)
		m := Mismatch{Kind: pm.kind, Ranks: []trace.Rank{t.Rank[s], t.Rank[r]}, Step: t.Step[r],
			MicroBatch: t.MicroBatch[r], Count: pm.count, Send: a.event(s), Recv: a.event(r), Suspect: trace.NoRank}
		if pm.kind == OrderMismatch {
			m.Suspect, m.MicroBatch = a.orderSuspect(s, r)
			m.Step = min(t.Step[s], t.Step[r])
		} else {
			m.Suspect = t.Rank[s]
		}
		m.Detail = fmt.Sprintf("rank %d's %s met rank %d's %s: %s", t.Rank[s], describeOp(m.Send), t.Rank[r], describeOp(m.Recv), a.pairDetail(s, r))
		if a.badPair(s, r) && t.EndNs[r] == trace.NoTime {
			m.Detail += "; the byte counts differ, so the pair can never complete"
		}
		if pm.count > 1 {
			m.Detail += fmt.Sprintf(" (and %d later pairs of the two ranks)", pm.count-1)
		}
		out = append(out, m)
	}

	// 2. Pending ops no op of the peer matches.
	for ci := range a.chans {
		ch := &a.chans[ci]
		for _, side := range [2]struct {
			rows []int32
			kind MismatchKind
		}{{a.unmatchedRecvs(ch), MissingSend}, {a.unmatchedSends(ch), MissingRecv}} {
			first, count := -1, 0
			for _, i := range side.rows {
				if t.EndNs[i] == trace.NoTime {
					if first < 0 {
						first = int(i)
					}
					count++
				}
			}
			if first < 0 {
				continue
			}
			e := a.event(first)
			m := Mismatch{Kind: side.kind, Ranks: []trace.Rank{ch.src, ch.dst}, Step: e.Step, MicroBatch: e.MicroBatch, Count: count}
			other := ch.src
			verb := "send"
			if side.kind == MissingSend {
				m.Recv, m.Suspect = e, ch.src
			} else {
				m.Send, m.Suspect, other, verb = e, ch.dst, ch.dst, "receive"
			}
			m.Detail = fmt.Sprintf("rank %d posted %s and rank %d has no %s for it: %s", e.Rank, describeOp(e), other, verb, a.doing(other))
			if count > 1 {
				m.Detail += fmt.Sprintf(" (%d such ops of rank %d)", count, e.Rank)
			}
			out = append(out, m)
		}
	}

	// 3. Whole ranks: absent, stopped while waited for, optimizer skips.
	var absent []trace.Rank
	for r := range a.ranks {
		if a.ranks[r].state == StateAbsent {
			absent = append(absent, trace.Rank(r))
		}
	}
	if len(absent) > 0 {
		m := Mismatch{Kind: RankAbsent, Ranks: absent, Step: -1, MicroBatch: -1, Count: len(absent), Suspect: absent[0]}
		m.Detail = fmt.Sprintf("no events from %s of a job of %d ranks", rankList("rank", absent), len(a.ranks))
		if len(absent) == 1 {
			m.Detail += ": " + a.doing(absent[0])
		}
		out = append(out, m)
	}
	for r := range a.ranks {
		ri := &a.ranks[r]
		if (ri.state != StateExited && ri.state != StateSilent) || ri.lost {
			continue
		}
		last := a.event(ri.lastDone)
		m := Mismatch{Kind: EarlyExit, Ranks: []trace.Rank{trace.Rank(r)}, Step: last.Step, MicroBatch: -1, Count: 1, Suspect: trace.Rank(r)}
		if ri.state == StateExited {
			m.Step = last.Step + 1
			m.Detail = fmt.Sprintf("rank %d's last op is the optimizer step of step %d; it recorded nothing after it, while others wait for it", r, last.Step)
		} else {
			m.MicroBatch = last.MicroBatch
			m.Detail = fmt.Sprintf("rank %d's last op is %s, with nothing pending after it, while others wait for it", r, describeOp(last))
		}
		out = append(out, m)
	}
	out = append(out, a.optSkips()...)
	out = append(out, a.collectiveMismatches()...)

	// Sorted on a copy of each mismatch's time, found once.
	type keyed struct {
		m  Mismatch
		at int64
	}
	ks := make([]keyed, len(out))
	for i := range out {
		ks[i] = keyed{out[i], a.shownAt(&out[i])}
	}
	slices.SortStableFunc(ks, func(x, y keyed) int {
		return cmp.Or(cmp.Compare(category(x.m.Kind), category(y.m.Kind)), cmp.Compare(x.m.Step, y.m.Step),
			cmp.Compare(x.at, y.at))
	})
	for i := range ks {
		out[i] = ks[i].m
	}
	a.rep.Mismatches = out
}

// shownAt is when mismatch m showed, for the report's order: the later post
// of its pair (mismatchTime), and for a collective some members never
// posted, not before the first of those members stopped (its first pending
// op, else its last op): a member still working when the others posted
// had not missed the collective yet, only not reached it. The replicas of
// a data-parallel group run apart within a step, so the group's fast
// replicas post its all-reduce while a slow replica still works; when the
// slow one then hangs, ordering its missing all-reduce by the fast
// replicas' posts put it (a victim, 4096 Flight Recorder dumps) before
// the skipped micro-batch that hung it.
func (a *analysis) shownAt(m *Mismatch) int64 {
	t := mismatchTime(m)
	if m.Kind != MissingCollective || m.Collective == nil || len(m.Collective.Missing) == 0 {
		return t
	}
	stopped := int64(math.MaxInt64)
	for _, r := range m.Collective.Missing {
		if r < 0 || int(r) >= len(a.ranks) {
			return t
		}
		ri := &a.ranks[r]
		at := ri.maxIssue
		if e := a.event(ri.firstPending); e != nil {
			at = e.IssueNs
		}
		stopped = min(stopped, at)
	}
	return max(t, stopped)
}

// optSkips returns one optimizer_skip_mismatch per step in which some ranks
// recorded OPT_SKIP and others OPT, naming the smaller group (OPT_SKIP on a
// tie).
func (a *analysis) optSkips() []Mismatch {
	steps := a.optSteps
	if steps == nil {
		steps = gatherOpts(a.t)
	}
	var out []Mismatch
	for step, s := range steps {
		if len(s.opt) == 0 || len(s.skip) == 0 {
			continue
		}
		m := Mismatch{Kind: OptimizerSkipMismatch, Step: step, MicroBatch: -1, Suspect: trace.NoRank}
		if len(s.skip) <= len(s.opt) {
			m.Ranks = s.skip
			m.Detail = fmt.Sprintf("%s skipped the optimizer step of step %d (OPT_SKIP) while %s stepped (OPT): their weights now differ",
				rankList("rank", s.skip), step, count(len(s.opt), "other rank"))
		} else {
			m.Ranks = s.opt
			m.Detail = fmt.Sprintf("%s stepped the optimizer in step %d (OPT) while %s skipped it (OPT_SKIP): their weights now differ",
				rankList("rank", s.opt), step, count(len(s.skip), "other rank"))
		}
		m.Count = len(m.Ranks)
		if len(m.Ranks) == 1 {
			m.Suspect = m.Ranks[0]
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(x, y Mismatch) int { return cmp.Compare(x.Step, y.Step) })
	return out
}

// optSides is who recorded OPT and who OPT_SKIP in one step, in row
// order.
type optSides struct{ opt, skip []trace.Rank }

// gatherOpts returns, per step, the ranks of t's OPT and OPT_SKIP rows in
// row order; nil when t has no OPT_SKIP (a step needs both kinds).
func gatherOpts(t *trace.Trace) map[int64]*optSides {
	if !slices.Contains(t.Kind, KindOptSkip) {
		return nil
	}
	steps := map[int64]*optSides{}
	for i := 0; i < t.Len(); i++ {
		k := t.Kind[i]
		if !isOpt(k) {
			continue
		}
		s := steps[t.Step[i]]
		if s == nil {
			s = &optSides{}
			steps[t.Step[i]] = s
		}
		if k == KindOptSkip {
			s.skip = append(s.skip, t.Rank[i])
		} else {
			s.opt = append(s.opt, t.Rank[i])
		}
	}
	return steps
}

// orderSuspect decides which side of a pair matched by issue order with
// different labels diverged, and returns it with the micro-batch its peer
// expected there; NoRank and the smaller micro-batch when the trace cannot
// tell. In order: a rank that departed from its schedule in that step; a
// side that has no op at all for the label its peer used (it skipped it);
// a side whose ops of that kind to that peer are not in increasing
// micro-batch order (it reordered them).
func (a *analysis) orderSuspect(s, r int) (trace.Rank, trace.MicroBatch) {
	t := a.t
	src, dst := t.Rank[s], t.Rank[r]
	pick := func(sus trace.Rank) (trace.Rank, trace.MicroBatch) {
		if sus == src {
			return src, t.MicroBatch[r]
		}
		return dst, t.MicroBatch[s]
	}
	for _, x := range [2]int{s, r} {
		if d := a.divergenceOf(t.Rank[x]); d != nil && d.Step == t.Step[x] {
			return pick(t.Rank[x])
		}
	}
	if !a.hasOp(src, dst, t.Step[r], t.MicroBatch[r], t.Kind[r].Counterpart()) {
		return pick(src)
	}
	if !a.hasOp(dst, src, t.Step[s], t.MicroBatch[s], t.Kind[s].Counterpart()) {
		return pick(dst)
	}
	if !a.ascending(src, dst, t.Step[s], t.Kind[s]) {
		return pick(src)
	}
	if !a.ascending(dst, src, t.Step[r], t.Kind[r]) {
		return pick(dst)
	}
	return trace.NoRank, min(t.MicroBatch[s], t.MicroBatch[r])
}

// hasOp reports whether rank has an op of kind with peer in step for
// micro-batch mb.
func (a *analysis) hasOp(rank, peer trace.Rank, step int64, mb trace.MicroBatch, kind trace.Kind) bool {
	if a.opMemo != nil {
		return a.opMemo.answer(opQuery{rank: rank, peer: peer, step: step, mb: mb, kind: kind})
	}
	t := a.t
	ri := &a.ranks[rank]
	for i := ri.lo; i < ri.hi; i++ {
		if t.Kind[i] == kind && t.Peer[i] == peer && t.Step[i] == step && t.MicroBatch[i] == mb {
			return true
		}
	}
	return false
}

// ascending reports whether rank's ops of kind with peer in step come in
// strictly increasing micro-batch order within each chunk.
func (a *analysis) ascending(rank, peer trace.Rank, step int64, kind trace.Kind) bool {
	if a.opMemo != nil {
		return a.opMemo.answer(opQuery{rank: rank, peer: peer, step: step, mb: -1, kind: kind, asc: true})
	}
	t := a.t
	ri := &a.ranks[rank]
	last := map[int32]trace.MicroBatch{}
	for i := ri.lo; i < ri.hi; i++ {
		if t.Kind[i] != kind || t.Peer[i] != peer || t.Step[i] != step {
			continue
		}
		if prev, ok := last[t.Chunk[i]]; ok && t.MicroBatch[i] <= prev {
			return false
		}
		last[t.Chunk[i]] = t.MicroBatch[i]
	}
	return true
}

// doing says what rank r was doing at the dump, for mismatch details:
// "it waits in RECV_B mb 0 of step 0 from rank 2".
func (a *analysis) doing(r trace.Rank) string {
	ri := &a.ranks[r]
	var w *trace.Event
	if ri.block >= 0 {
		w = a.event(ri.block)
	}
	switch ri.state {
	case StateAbsent:
		return fmt.Sprintf("rank %d recorded no events", r)
	case StateRecv:
		return fmt.Sprintf("rank %d waits in %s", r, describeOp(w))
	case StateSend:
		return fmt.Sprintf("rank %d waits for its %s to complete", r, describeOp(w))
	case StateBarrier:
		return fmt.Sprintf("rank %d waits in the optimizer step of step %d", r, w.Step)
	case StateCompute:
		return fmt.Sprintf("rank %d is in %s, which never ended", r, describeOp(w))
	case StateCollective:
		return fmt.Sprintf("rank %d waits in %s", r, a.describeColl(ri.block))
	case StateIdle:
		return fmt.Sprintf("rank %d's dump holds nothing in flight", r)
	}
	if ri.lastDone < 0 {
		return fmt.Sprintf("rank %d has nothing pending", r)
	}
	return fmt.Sprintf("rank %d has nothing pending; its last op is %s", r, describeOp(a.event(ri.lastDone)))
}

// rankList says "rank 5" or "ranks 1, 2, 7" (at most 8 named, then "and N
// more").
func rankList(noun string, rs []trace.Rank) string {
	if len(rs) == 1 {
		return fmt.Sprintf("%s %d", noun, rs[0])
	}
	var b strings.Builder
	b.WriteString(noun + "s ")
	for i, r := range rs {
		if i == 8 {
			fmt.Fprintf(&b, " and %d more", len(rs)-8)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, r)
	}
	return b.String()
}

// count says "1 other rank" or "3 other ranks".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
