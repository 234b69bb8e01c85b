package hang

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/ppprof/ppprof/trace"
)

// collEdge sets the wait-for edge of a rank blocked in a collective at row
// ri.block. A collective whose members disagree can never complete
// (terminal); one that some member completed is done as far as the group
// is concerned, so a rank still showing it pending stopped making progress
// itself (terminal); otherwise the rank waits in the collective's node,
// which waits for the members that never posted it and for those that
// posted it but are blocked in an earlier op.
func (a *analysis) collEdge(ri *rankInfo) {
	ci, _ := a.cs.collOfRow(ri.block)
	c := &a.cs.colls[ci]
	switch {
	case c.bad != "":
		ri.term = termCollBad
	case len(c.completed) > 0:
		ri.term = termCollDone
	default:
		ri.waitsFor = a.collNode(ci)
	}
}

// collNode returns the wait-for node of collective ci, making it the first
// time: a group node (after the optimizer barriers) that waits for the
// members that have not joined.
func (a *analysis) collNode(ci int32) int32 {
	cs := a.cs
	if cs.nodeOf == nil {
		cs.nodeOf = map[int32]int32{}
	}
	if v, ok := cs.nodeOf[ci]; ok {
		return v
	}
	c := &cs.colls[ci]
	var waits []int32
	for _, r := range c.missing {
		waits = append(waits, int32(r))
	}
	for _, r := range c.behind {
		waits = append(waits, int32(r))
	}
	slices.Sort(waits)
	v := int32(len(a.ranks) + len(a.barriers))
	a.barriers = append(a.barriers, barrier{step: -1, coll: ci + 1, waits: waits})
	cs.nodeOf[ci] = v
	return v
}

// groupNode returns the barrier of graph node v (an optimizer barrier or a
// collective node), or nil when v is a rank.
func (a *analysis) groupNode(v int32) *barrier {
	if !a.isBarrier(v) {
		return nil
	}
	return &a.barriers[int(v)-len(a.ranks)]
}

// collNodeInfo is the report's Node of collective ci.
func (a *analysis) collNodeInfo(ci int32) Node {
	c := &a.cs.colls[ci]
	return Node{Rank: trace.NoRank, Step: -1, Group: a.cs.names[c.gid], GroupSeq: c.seq, Kind: a.majorityKind(c)}
}

// reachedColls returns the collectives whose nodes blocked ranks reach, by
// first post.
func (a *analysis) reachedColls() []int32 {
	if a.cs == nil {
		return nil
	}
	var out []int32
	for ci, v := range a.cs.nodeOf {
		if a.reached[v] {
			out = append(out, ci)
		}
	}
	a.sortColls(out)
	return out
}

func (a *analysis) sortColls(cis []int32) {
	cs := a.cs
	slices.SortFunc(cis, func(x, y int32) int {
		cx, cy := &cs.colls[x], &cs.colls[y]
		return cmp.Or(cmp.Compare(cx.first, cy.first), cmp.Compare(cs.names[cx.gid], cs.names[cy.gid]), cmp.Compare(cx.seq, cy.seq))
	})
}

// missedBy returns the first reached collective that one of rs never
// posted (missing), else one that one of rs posted but never got to
// (behind); -1 when none.
func (a *analysis) missedBy(rs []trace.Rank) (int32, bool) {
	cis := a.reachedColls()
	for _, behind := range []bool{false, true} {
		for _, ci := range cis {
			c := &a.cs.colls[ci]
			list := c.missing
			if behind {
				list = c.behind
			}
			for _, r := range rs {
				if slices.Contains(list, r) {
					return ci, behind
				}
			}
		}
	}
	return -1, false
}

// neverJoined says "ranks 1, 2 never joined ALL_REDUCE #5 of group dp,
// which ranks 0, 3 posted".
func (a *analysis) neverJoined(ci int32) string {
	c := &a.cs.colls[ci]
	return fmt.Sprintf("%s never joined %s, which %s posted", rankList("rank", c.missing), a.collName(c), rankList("rank", c.pending))
}

// collContext adds to a root cause that does not already say it the
// collective its rank (or a candidate) never joined, or never got to.
func (a *analysis) collContext(rc *RootCause) {
	switch rc.Reason {
	case "never_joined", "stuck_in_collective", "collective_hang",
		string(CollectiveMismatch), string(CollectiveDtypeMismatch), string(CollectiveSizeMismatch):
		return
	}
	rs := rc.Candidates
	if rc.Rank >= 0 && !slices.Contains(rs, rc.Rank) {
		rs = append([]trace.Rank{rc.Rank}, rs...)
	}
	ci, behind := a.missedBy(rs)
	if ci < 0 {
		return
	}
	c := &a.cs.colls[ci]
	switch {
	case !behind:
		rc.Summary += "; " + a.neverJoined(ci)
	default:
		in := slices.DeleteFunc(slices.Clone(c.pending), func(r trace.Rank) bool { return slices.Contains(c.behind, r) })
		rc.Summary += fmt.Sprintf("; %s posted %s but never got to it (blocked in an earlier op)", rankList("rank", c.behind), a.collName(c))
		if len(in) > 0 {
			rc.Summary += fmt.Sprintf(", while %s %s in it", rankList("rank", in), plural(len(in), "waits", "wait"))
		}
	}
}

// plural picks the singular or plural form for n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// pickCollRank returns the rank of rs that never posted a reached
// collective, else the first.
func (a *analysis) pickCollRank(rs []trace.Rank) trace.Rank {
	ci, behind := a.missedBy(rs)
	if ci >= 0 && !behind {
		for _, r := range rs {
			if slices.Contains(a.cs.colls[ci].missing, r) {
				return r
			}
		}
	}
	return rs[0]
}

// idleCause names ranks whose dumps hold nothing in flight while others
// wait for them: their host stopped issuing work.
func (a *analysis) idleCause(rs []trace.Rank) RootCause {
	r := a.pickCollRank(rs)
	rc := a.cause(r, "never_joined")
	if len(rs) > 1 {
		rc.Candidates = rs
	}
	subj := a.describeRank(r)
	if len(rs) > 1 {
		subj = rankList("rank", rs)
	}
	var b strings.Builder
	b.WriteString(subj)
	ci, behind := a.missedBy(rs)
	if ci >= 0 && !behind {
		c := &a.cs.colls[ci]
		rc.Step = a.t.Step[c.ops[0]]
		fmt.Fprintf(&b, " never joined %s, which %s posted, and %s nothing in flight in %s dump%s",
			a.collName(c), rankList("rank", c.pending), plural(len(rs), "has", "have"), plural(len(rs), "its", "their"), plural(len(rs), "", "s"))
	} else {
		fmt.Fprintf(&b, " %s nothing in flight in %s dump%s while others wait for %s",
			plural(len(rs), "has", "have"), plural(len(rs), "its", "their"), plural(len(rs), "", "s"), plural(len(rs), "it", "them"))
	}
	fmt.Fprintf(&b, " (every collective %s enqueued completed): %s host stopped issuing work, a hang on the CPU side (a held GIL, a Python deadlock, a stuck data loader) rather than in the GPU or the network",
		plural(len(rs), "it", "they"), plural(len(rs), "its", "their"))
	b.WriteString(a.waitedBy(r))
	rc.Summary = b.String()
	return rc
}

// collStuckCause names ranks blocked in a collective that another member
// completed: the collective is done for the group, so the rank itself
// stopped making progress.
func (a *analysis) collStuckCause(rs []trace.Rank) RootCause {
	r := a.pickCollRank(rs)
	if ci, behind := a.missedBy(rs); ci < 0 || behind {
		for _, x := range rs[1:] {
			if a.t.IssueNs[a.ranks[x].block] < a.t.IssueNs[a.ranks[r].block] {
				r = x
			}
		}
	}
	stuckIn := func(x trace.Rank) (*coll, string) {
		ci, _ := a.cs.collOfRow(a.ranks[x].block)
		c := &a.cs.colls[ci]
		return c, fmt.Sprintf("%s, which %s completed", a.collName(c), rankList("rank", c.completed))
	}
	_, what := stuckIn(r)
	e := a.event(a.ranks[r].block)
	rc := a.cause(r, "stuck_in_collective")
	rc.Step, rc.MicroBatch = e.Step, e.MicroBatch
	rc.Summary = fmt.Sprintf("%s is stuck in %s: posted %s before the dump, it never completed on rank %d, so rank %d stopped making progress itself (a GPU error, a hung kernel, or a process that stopped watching its work)",
		a.describeRank(r), what, ms(a.rep.DumpNs-e.IssueNs), r, r)
	if len(rs) > 1 {
		rc.Candidates = rs
		var others []string
		for _, x := range rs {
			if x == r || len(others) == 3 {
				continue
			}
			_, w := stuckIn(x)
			others = append(others, fmt.Sprintf("rank %d in %s", x, w))
		}
		rc.Summary += fmt.Sprintf("; %s are stuck the same way (%s)", rankList("rank", rs), strings.Join(others, "; "))
	}
	if ci, behind := a.missedBy(rs); ci >= 0 && !behind {
		rc.Summary += "; " + a.neverJoined(ci)
	}
	rc.Summary += a.waitedBy(r)
	return rc
}

// collHangCause explains a collective every member joined that never
// completed.
func (a *analysis) collHangCause(ci int32) RootCause {
	c := &a.cs.colls[ci]
	rc := a.cause(trace.NoRank, "collective_hang")
	rc.Step = a.t.Step[c.ops[0]]
	rc.Candidates = c.pending
	rc.Summary = fmt.Sprintf("every member of %s (%s) posted %s and it never completed: the collective itself hangs (check the NCCL communicator, the network links and the GPUs of the group)",
		a.groupName(c.gid), rankList("rank", c.pending), a.collName(c))
	return rc
}

// firstCollMismatch returns the first collective kind, dtype or size
// mismatch of the report, or nil.
func (a *analysis) firstCollMismatch() *Mismatch {
	for i := range a.rep.Mismatches {
		switch a.rep.Mismatches[i].Kind {
		case CollectiveMismatch, CollectiveDtypeMismatch, CollectiveSizeMismatch:
			return &a.rep.Mismatches[i]
		}
	}
	return nil
}

// collMismatchCause explains members that disagree on a collective.
func (a *analysis) collMismatchCause(m *Mismatch) RootCause {
	rc := a.cause(m.Suspect, string(m.Kind))
	rc.Step, rc.MicroBatch = m.Step, m.MicroBatch
	if m.Suspect == trace.NoRank {
		var rs []trace.Rank
		for _, e := range m.Collective.Ops {
			rs = append(rs, e.Rank)
		}
		rc.Rank, rc.Candidates = rs[0], rs
		rc.Stage = a.ranks[rs[0]].stage
	}
	tail := "NCCL takes each member's call as given, so the collective hangs or exchanges the wrong data"
	if m.Kind == CollectiveMismatch {
		tail = "the members' sequences of collectives diverged (one skipped or added a collective), so the group hangs or exchanges the wrong data"
	}
	who := ""
	switch {
	case m.Suspect != trace.NoRank:
		who = a.describeRank(m.Suspect) + " differs from the other members: "
	case len(m.Ranks) > 0 && len(m.Ranks) < len(m.Collective.Ops):
		who = rankList("rank", m.Ranks) + " differ from the other members: "
	}
	rc.Summary = who + strings.TrimSuffix(m.Detail, ".") + "; " + tail
	return rc
}

// describeColl says "ALL_TO_ALL #20537 of group 74 (EXPERT_MODEL_PARALLEL_GROUP)"
// for a collective row in a matched group, "" otherwise.
func (a *analysis) describeColl(row int) string {
	if a.cs == nil || row < 0 {
		return ""
	}
	ci, ok := a.cs.collOfRow(row)
	if !ok {
		return ""
	}
	return a.collName(&a.cs.colls[ci])
}
