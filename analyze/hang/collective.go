package hang

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/ppprof/ppprof/internal/hugepage"
	"github.com/ppprof/ppprof/internal/seqindex"
	"github.com/ppprof/ppprof/trace"
)

// This file matches collectives: per process group (the Group column), per
// sequence number (GroupSeq), which members posted the collective, which
// completed it, which never arrived, and whether the members agree on what
// it is (kind, dtype, size).

// Group is a process group as the trace's reader describes it.
type Group struct {
	Desc  string       // what the runtime calls it ("TENSOR_MODEL_PARALLEL_GROUP"); "" when unknown
	Ranks []trace.Rank // its global ranks in group-rank order; nil when unknown
}

// Dump is what one rank's communicator dump (a PyTorch Flight Recorder
// file) says beyond its rows.
type Dump struct {
	Path string
	// Entries is the number of entries the dump holds. A dump with none
	// (and so no rows) says the rank had nothing in flight: it is idle, not
	// absent.
	Entries int
	// Progress is the dump's per-group progress (Flight Recorder
	// pg_status), keyed as the dump keys it: by group name, or by the
	// rank's local id of the group (Flight Recorder's pg_id, the order in
	// which the rank created its groups). Run maps such keys to groups when
	// the rows and Options.Groups prove the mapping (resolveProgress).
	Progress map[string]GroupProgress
}

// GroupProgress is how far one rank got in one process group: the sequence
// numbers of its last enqueued, started and completed collective; -1 none.
type GroupProgress struct {
	LastEnqueued, LastStarted, LastCompleted int64
}

// Collective is one collective of a process group, by sequence number, as
// the group's members recorded it. Rank lists are increasing.
type Collective struct {
	Group     string        // the process group (the trace's Group column)
	Desc      string        // the group's description (Options.Groups); "" when unknown
	Seq       int64         // its sequence number in the group (GroupSeq; the position among the rank's collectives of the group when the trace has none)
	Kind      trace.Kind    // what most members posted
	Members   []trace.Rank  // the group's ranks: Options.Groups, else the ranks seen in the group
	Completed []trace.Rank  // members that completed it: a row that ended, a later collective of the group, or the dump's progress
	Pending   []trace.Rank  // members that posted it and never completed it
	Missing   []trace.Rank  // members that never posted it: their last sequence number in the group is lower (or they have none)
	Behind    []trace.Rank  // the members of Pending blocked in an earlier op: they posted it ahead of their work, which never got to it
	Ops       []trace.Event // the members' rows of it, by rank
	IssueNs   int64         // the first post
}

// coll is one (group, seq) during the analysis.
type coll struct {
	gid   int32
	seq   int64
	ops   []int32 // rows, by rank (rows are scanned in rank order)
	nops  int32   // len(ops), counted first
	first int64   // earliest issue
	bad   MismatchKind
	// Classification, for collectives pending on some member.
	classified                          bool
	completed, pending, missing, behind []trace.Rank
}

type rankGroup struct {
	rank trace.Rank
	gid  int32
}

// collState is what collective matching keeps for the wait-for graph and
// the report.
type collState struct {
	names      []string // group names, by gid
	gidOf      map[trace.Str]int32
	gidByName  map[string]int32 // gidOf by the group's name
	hasP2P     []bool           // per gid: P2P ops use the group too (its progress counters then mix P2P and collective sequence numbers)
	members    [][]trace.Rank   // per gid, increasing
	colls      []coll
	collRow    []int32 // per row: its index in colls; -1 for a row not a collective (collOfRow)
	maxSeq     map[rankGroup]int64
	progress   map[rankGroup]GroupProgress // resolved dump progress, collective-only groups
	nodeOf     map[int32]int32             // index in colls -> wait-for node
	mismatches []collMismatch
}

// collMismatch is the first collective of a group showing one mismatch
// kind, and how many of the group's collectives show it.
type collMismatch struct {
	kind     MismatchKind
	ci       int32
	count    int
	suspects []trace.Rank
	detail   string
}

// matchCollectives marks the ranks that wrote a dump with nothing in flight
// as idle, then matches collectives per (group, seq):
//
//  1. groups of the collective rows, and each row's sequence number;
//  2. one record per (group, seq) with its rows;
//  3. each group's members (Options.Groups, else the ranks seen in it) and
//     the dumps' progress per member (resolveProgress);
//  4. per record, whether its members agree on kind, dtype and size;
//  5. per record pending on some member, which members completed it,
//     which are in it, which are behind it, which never posted it;
//  6. ranks blocked in a collective of a known group are in state
//     collective.
func hasKey[K comparable, V any](m map[K]V, k K) bool { _, ok := m[k]; return ok }

// collOfRow returns the index in colls of row's collective; ok false
// for a row that is not one.
func (cs *collState) collOfRow(row int) (int32, bool) {
	if row < 0 || row >= len(cs.collRow) || cs.collRow[row] < 0 {
		return 0, false
	}
	return cs.collRow[row], true
}

// denseSeqs lets matchCollectives index groups' collectives by sequence
// number in arrays (seqindex; tests turn it off to compare with its map).
var denseSeqs = true

func (a *analysis) matchCollectives() {
	t := a.t
	for _, r := range a.dumpRanks() {
		d := a.opt.Dumps[r]
		ri := &a.ranks[r]
		switch {
		case ri.present && ri.pending == 0, !ri.present && d.Entries == 0:
			ri.state = StateIdle
		case !ri.present:
			a.note("rank %d's dump %s has %d entries, none of which could be read: the rank is taken as absent", r, d.Path, d.Entries)
		}
	}

	// Without collectives there is nothing to match (the kinds are a
	// narrow column; the groups, read below, are wide).
	if !slices.ContainsFunc(t.Kind, trace.Kind.IsCollective) {
		return
	}

	// 1. Groups and sequence numbers.
	cs := &collState{gidOf: map[trace.Str]int32{}, gidByName: map[string]int32{}}
	intern := func(g trace.Str) int32 {
		id, ok := cs.gidOf[g]
		if !ok {
			id = int32(len(cs.names))
			cs.gidOf[g] = id
			cs.gidByName[g.String()] = id
			cs.names = append(cs.names, g.String())
			cs.hasP2P = append(cs.hasP2P, false)
		}
		return id
	}
	var positional []bool
	var seqs seqindex.Ranges // the groups' sequence numbers, for the index below
	found := false
	// A rank's rows name a few groups, often the same one several rows in
	// a row: the last group's id is kept (a map lookup per row was a third
	// of this function on 4096 Flight Recorder dumps).
	lastG, lastID := trace.Str(0), int32(-1)
	gidOf := func(g trace.Str) int32 {
		if g != lastG || lastID < 0 {
			lastG, lastID = g, intern(g)
		}
		return lastID
	}
	for i, k := range t.Kind {
		if !k.IsCollective() && !k.IsP2P() {
			continue
		}
		g := t.Group[i]
		if g == 0 {
			continue
		}
		switch {
		case k.IsCollective():
			id := gidOf(g)
			for len(positional) <= int(id) {
				positional = append(positional, false)
			}
			if sq := t.GroupSeq[i]; sq < 0 {
				positional[id] = true
			} else {
				seqs.Note(id, sq)
			}
			found = true
		case k.IsP2P():
			cs.hasP2P[gidOf(g)] = true
		}
	}
	if !found {
		return
	}
	a.cs = cs
	for gid, p := range positional {
		if p {
			a.note("collectives of group %s carry no sequence numbers: the k-th collective of each member is taken as the same one", cs.names[gid])
		}
	}

	// 2. One record per (group, seq), found in an index by sequence number
	// (seqindex; positional groups' numbers, not noted, in its map).
	collOf := seqs.Build(denseSeqs)
	// Room for them at once, but never more than half the rows (groups
	// of sparse numbers count rows, not collectives).
	cs.colls = make([]coll, 0, min(seqs.Most(), int64(t.Len())/2+1))
	cs.collRow = hugepage.Make[int32](t.Len()) // in 4 KiB pages, a fault every 1024 rows
	for i := range cs.collRow {
		cs.collRow[i] = -1
	}
	cs.maxSeq = map[rankGroup]int64{}
	pos := map[int32]int64{}
	seen := make([]map[trace.Rank]bool, len(cs.names))
	// The highest seq of the rank at hand per group (rows come rank by
	// rank), put in maxSeq and seen when the rank changes: a map write
	// per rank and group, not per row.
	rankMax := make([]int64, len(cs.names))
	var touched []int32
	last := trace.NoRank
	flush := func() {
		for _, gid := range touched {
			if k := (rankGroup{last, gid}); rankMax[gid] > cs.maxSeq[k] || !hasKey(cs.maxSeq, k) {
				cs.maxSeq[k] = rankMax[gid]
			}
			if seen[gid] == nil {
				seen[gid] = map[trace.Rank]bool{}
			}
			seen[gid][last] = true
			rankMax[gid] = math.MinInt64
		}
		touched = touched[:0]
	}
	for gid := range rankMax {
		rankMax[gid] = math.MinInt64
	}
	for i := 0; i < t.Len(); i++ {
		if !t.Kind[i].IsCollective() || t.Group[i] == 0 {
			continue
		}
		r := t.Rank[i]
		if r != last {
			flush()
			clear(pos)
			last = r
		}
		gid := gidOf(t.Group[i])
		seq := t.GroupSeq[i]
		if positional[gid] {
			seq = pos[gid]
			pos[gid]++
		}
		ci, ok := collOf.Get(gid, seq)
		if !ok {
			ci = int32(len(cs.colls))
			collOf.Put(gid, seq, ci)
			cs.colls = append(cs.colls, coll{gid: gid, seq: seq, first: t.IssueNs[i]})
		}
		c := &cs.colls[ci]
		c.nops++
		c.first = min(c.first, t.IssueNs[i])
		cs.collRow[i] = ci
		if rankMax[gid] == math.MinInt64 {
			touched = append(touched, gid)
		}
		rankMax[gid] = max(rankMax[gid], seq)
	}
	flush()
	// Each collective's rows, in row order (so by rank): one array for
	// all, cut by counts (appending to each collective's own list grew
	// millions of small slices).
	nops := 0
	for ci := range cs.colls {
		nops += int(cs.colls[ci].nops)
	}
	ops := make([]int32, 0, nops)
	for ci := range cs.colls {
		c := &cs.colls[ci]
		c.ops = ops[len(ops) : len(ops) : len(ops)+int(c.nops)]
		ops = ops[:len(ops)+int(c.nops)]
	}
	for i, ci := range cs.collRow {
		if ci >= 0 {
			c := &cs.colls[ci]
			c.ops = append(c.ops, int32(i))
		}
	}

	// 3. Members and progress.
	cs.members = make([][]trace.Rank, len(cs.names))
	dropped := 0
	for gid, name := range cs.names {
		g, ok := a.opt.Groups[name]
		// The ranks seen in the group, in rank order (the notes below come
		// in that order).
		saw := slices.Sorted(maps.Keys(seen[gid]))
		if !ok || len(g.Ranks) == 0 {
			cs.members[gid] = append(cs.members[gid], saw...)
		} else {
			for _, r := range g.Ranks {
				if r < 0 || int(r) >= len(a.ranks) {
					dropped++
					continue
				}
				cs.members[gid] = append(cs.members[gid], r)
			}
			for _, r := range saw {
				if !slices.Contains(g.Ranks, r) {
					a.note("rank %d has collectives in group %s, which does not list it as a member: it is taken as one", r, name)
					cs.members[gid] = append(cs.members[gid], r)
				}
			}
		}
		slices.Sort(cs.members[gid])
		cs.members[gid] = slices.Compact(cs.members[gid])
	}
	if dropped > 0 {
		a.note("%d group members are beyond the job's %d ranks: left out of collective matching", dropped, len(a.ranks))
	}
	a.resolveProgress()

	// 4, 5. Agreement, then who is where.
	for ci := range cs.colls {
		c := &cs.colls[ci]
		if kind, detail, sus := a.collDisagree(c); kind != "" {
			c.bad = kind
			cs.addMismatch(kind, int32(ci), detail, sus)
		}
		for _, i := range c.ops {
			if t.EndNs[i] == trace.NoTime {
				a.classify(c)
				break
			}
		}
	}

	// 6. Ranks blocked in a collective.
	for r := range a.ranks {
		ri := &a.ranks[r]
		if ri.block < 0 || ri.state != StateCompute {
			continue
		}
		if _, ok := cs.collOfRow(ri.block); ok {
			ri.state = StateCollective
		}
	}
}

// addMismatch keeps the first collective of a group per mismatch kind.
func (cs *collState) addMismatch(kind MismatchKind, ci int32, detail string, sus []trace.Rank) {
	gid := cs.colls[ci].gid
	for j := range cs.mismatches {
		m := &cs.mismatches[j]
		if m.kind == kind && cs.colls[m.ci].gid == gid {
			m.count++
			if cs.colls[ci].seq < cs.colls[m.ci].seq {
				m.ci, m.detail, m.suspects = ci, detail, sus
			}
			return
		}
	}
	cs.mismatches = append(cs.mismatches, collMismatch{kind: kind, ci: ci, count: 1, detail: detail, suspects: sus})
}

// opOf returns rank r's row of c, or -1.
func (a *analysis) opOf(c *coll, r trace.Rank) int {
	t := a.t
	i, ok := slices.BinarySearchFunc(c.ops, r, func(row int32, r trace.Rank) int { return cmp.Compare(t.Rank[row], r) })
	if !ok {
		return -1
	}
	return int(c.ops[i])
}

// classify sorts c's members into completed, pending (and behind) and
// missing.
func (a *analysis) classify(c *coll) {
	t, cs := a.t, a.cs
	c.classified = true
	for _, x := range cs.members[c.gid] {
		row := a.opOf(c, x)
		switch {
		case row >= 0 && t.EndNs[row] != trace.NoTime:
			c.completed = append(c.completed, x)
		case row >= 0:
			c.pending = append(c.pending, x)
			if b := a.ranks[x].block; b >= 0 && b < row {
				c.behind = append(c.behind, x)
			}
		default:
			rg := rankGroup{x, c.gid}
			if p, ok := cs.progress[rg]; ok {
				switch {
				case c.seq <= p.LastCompleted:
					c.completed = append(c.completed, x)
				case c.seq <= p.LastEnqueued:
					c.pending = append(c.pending, x) // posted; its record is not in the dump
				default:
					c.missing = append(c.missing, x)
				}
				continue
			}
			if m, ok := cs.maxSeq[rg]; ok && m > c.seq {
				// It went on to later collectives of the group: it
				// completed this one, and the dump kept no record of it
				// (Flight Recorder dumps often hold only what is in
				// flight).
				c.completed = append(c.completed, x)
			} else {
				c.missing = append(c.missing, x)
			}
		}
	}
}

// comparableSize reports whether every member of a collective of kind k
// gives it the same input size: not so for all-to-all (uneven splits),
// gather and scatter (the root's buffers differ) and unknown kinds.
func comparableSize(k trace.Kind) bool {
	switch k {
	case trace.AllReduce, trace.AllGather, trace.ReduceScatter, trace.Broadcast, trace.Reduce, trace.Barrier:
		return true
	}
	return false
}

// collDisagree returns what c's members disagree on first: the collective
// (kind), then dtype, then size; the detail; and the members that differ
// from the majority (nil when there is no majority).
func (a *analysis) collDisagree(c *coll) (MismatchKind, string, []trace.Rank) {
	if len(c.ops) < 2 {
		return "", "", nil
	}
	t := a.t
	// The common case: every member posted the same kind, dtype, size and
	// shape, so none of the tests below can find a disagreement.
	f := c.ops[0]
	same := true
	for _, i := range c.ops[1:] {
		if t.Kind[i] != t.Kind[f] || t.Dtype[i] != t.Dtype[f] || t.Bytes[i] != t.Bytes[f] || t.Shape[i] != t.Shape[f] {
			same = false
			break
		}
	}
	if same {
		return "", "", nil
	}
	split := func(get func(i int32) (string, bool)) (map[string][]trace.Rank, []string) {
		by := map[string][]trace.Rank{}
		var order []string
		for _, i := range c.ops {
			v, ok := get(i)
			if !ok {
				continue
			}
			if _, seen := by[v]; !seen {
				order = append(order, v)
			}
			by[v] = append(by[v], t.Rank[i])
		}
		return by, order
	}
	describe := func(by map[string][]trace.Rank, order []string) (string, []trace.Rank) {
		slices.SortStableFunc(order, func(x, y string) int { return cmp.Compare(len(by[y]), len(by[x])) })
		var parts []string
		for _, v := range order {
			parts = append(parts, fmt.Sprintf("%s %s", rankList("rank", by[v]), v))
		}
		var sus []trace.Rank
		if len(by[order[0]]) > len(by[order[1]]) {
			for _, v := range order[1:] {
				sus = append(sus, by[v]...)
			}
			slices.Sort(sus)
		}
		return strings.Join(parts, ", "), sus
	}
	name := a.collName(c)
	by, order := split(func(i int32) (string, bool) {
		return t.Kind[i].String(), t.Kind[i] != trace.Collective
	})
	if len(order) > 1 {
		d, sus := describe(by, order)
		return CollectiveMismatch, fmt.Sprintf("members posted different collectives as %s: %s", name, d), sus
	}
	k := a.majorityKind(c)
	if k == trace.Collective {
		return "", "", nil
	}
	by, order = split(func(i int32) (string, bool) { return t.Dtype[i].String(), t.Dtype[i] != 0 })
	if len(order) > 1 {
		d, sus := describe(by, order)
		return CollectiveDtypeMismatch, fmt.Sprintf("members of %s disagree on its dtype: %s", name, d), sus
	}
	if !comparableSize(k) {
		return "", "", nil
	}
	bytes := false
	for _, i := range c.ops {
		bytes = bytes || t.Bytes[i] > 0
	}
	by, order = split(func(i int32) (string, bool) {
		if bytes {
			return fmt.Sprintf("%d bytes", t.Bytes[i]), t.Bytes[i] > 0
		}
		return "shape " + t.Shape[i].String(), t.Shape[i] != 0
	})
	if len(order) > 1 {
		d, sus := describe(by, order)
		return CollectiveSizeMismatch, fmt.Sprintf("members of %s disagree on its size: %s", name, d), sus
	}
	return "", "", nil
}

// collName says "ALL_REDUCE #7 of group 35 (TENSOR_MODEL_PARALLEL_GROUP)".
func (a *analysis) collName(c *coll) string {
	k := trace.Collective
	if len(c.ops) > 0 {
		k = a.t.Kind[c.ops[0]]
	}
	return fmt.Sprintf("%s #%d of %s", k, c.seq, a.groupName(c.gid))
}

// groupName says "group 35 (TENSOR_MODEL_PARALLEL_GROUP)", or "group 35".
func (a *analysis) groupName(gid int32) string {
	name := a.cs.names[gid]
	if g, ok := a.opt.Groups[name]; ok && g.Desc != "" {
		return fmt.Sprintf("group %s (%s)", name, g.Desc)
	}
	return "group " + name
}

// majorityKind returns the kind most of c's rows carry (the first on a tie).
func (a *analysis) majorityKind(c *coll) trace.Kind {
	n := map[trace.Kind]int{}
	best := trace.Collective
	for _, i := range c.ops {
		k := a.t.Kind[i]
		n[k]++
		if n[k] > n[best] || best == trace.Collective && k != trace.Collective {
			best = k
		}
	}
	return best
}

// collectiveMismatches lists the collective mismatches (kind, dtype, size)
// and, per group, the first pending collective some members never posted.
func (a *analysis) collectiveMismatches() []Mismatch {
	cs := a.cs
	if cs == nil {
		return nil
	}
	var out []Mismatch
	for _, cm := range cs.mismatches {
		c := &cs.colls[cm.ci]
		m := a.collMismatchBase(c, cm.kind)
		m.Detail = cm.detail
		if cm.count > 1 {
			m.Detail += fmt.Sprintf(" (and %d later collectives of the group)", cm.count-1)
		}
		m.Count = cm.count
		if len(cm.suspects) > 0 {
			m.Ranks = cm.suspects
		}
		if len(cm.suspects) == 1 {
			m.Suspect = cm.suspects[0]
		}
		out = append(out, m)
	}
	// Missing members: the first collective of each group, and a count.
	type first struct {
		ci    int32
		count int
	}
	byGroup := map[int32]*first{}
	for ci := range cs.colls {
		c := &cs.colls[ci]
		if !c.classified || len(c.missing) == 0 || len(c.pending) == 0 {
			continue
		}
		f := byGroup[c.gid]
		if f == nil {
			byGroup[c.gid] = &first{ci: int32(ci), count: 1}
			continue
		}
		f.count++
		if c.seq < cs.colls[f.ci].seq {
			f.ci = int32(ci)
		}
	}
	// One entry per group, in the order of their first such collective
	// (first post, then group name): not in map order, so that ties in the
	// report's order of mismatches are broken the same way every run.
	firsts := make([]int32, 0, len(byGroup))
	for _, f := range byGroup {
		firsts = append(firsts, f.ci)
	}
	a.sortColls(firsts)
	for _, ci := range firsts {
		f := byGroup[cs.colls[ci].gid]
		c := &cs.colls[f.ci]
		m := a.collMismatchBase(c, MissingCollective)
		m.Ranks = c.missing
		m.Count = f.count
		if len(c.missing) == 1 {
			m.Suspect = c.missing[0]
		}
		m.Detail = fmt.Sprintf("%s posted %s and %s never did", rankList("rank", c.pending), a.collName(c), rankList("rank", c.missing))
		if len(c.missing) == 1 {
			m.Detail += ": " + a.doing(c.missing[0])
		}
		if f.count > 1 {
			m.Detail += fmt.Sprintf(" (%d collectives of the group lack members)", f.count)
		}
		out = append(out, m)
	}
	return out
}

// collMismatchBase starts a Mismatch about collective c.
func (a *analysis) collMismatchBase(c *coll, kind MismatchKind) Mismatch {
	t := a.t
	m := Mismatch{Kind: kind, Step: -1, MicroBatch: -1, Count: 1, Suspect: trace.NoRank, Collective: a.collective(c)}
	for _, i := range c.ops {
		m.Ranks = append(m.Ranks, t.Rank[i])
	}
	if len(c.ops) > 0 {
		m.Step = t.Step[c.ops[0]]
		if mb := t.MicroBatch[c.ops[0]]; mb >= 0 {
			m.MicroBatch = mb
		}
	}
	return m
}

// collective returns the report's view of c.
func (a *analysis) collective(c *coll) *Collective {
	cs := a.cs
	out := &Collective{Group: cs.names[c.gid], Seq: c.seq, Kind: a.majorityKind(c), Members: cs.members[c.gid],
		Completed: c.completed, Pending: c.pending, Missing: c.missing, Behind: c.behind, IssueNs: c.first}
	if g, ok := a.opt.Groups[out.Group]; ok {
		out.Desc = g.Desc
	}
	for _, i := range c.ops {
		out.Ops = append(out.Ops, a.t.At(int(i)))
	}
	return out
}

// collectiveReport lists every collective pending on some member, the
// groups in the order of their first such collective, each by seq.
func (a *analysis) collectiveReport() []Collective {
	cs := a.cs
	if cs == nil {
		return nil
	}
	var idx []int32
	groupFirst := map[int32]int64{}
	for ci := range cs.colls {
		c := &cs.colls[ci]
		if !c.classified || len(c.pending) == 0 {
			continue
		}
		idx = append(idx, int32(ci))
		if f, ok := groupFirst[c.gid]; !ok || c.first < f {
			groupFirst[c.gid] = c.first
		}
	}
	slices.SortFunc(idx, func(x, y int32) int {
		cx, cy := &cs.colls[x], &cs.colls[y]
		return cmp.Or(cmp.Compare(groupFirst[cx.gid], groupFirst[cy.gid]), cmp.Compare(cs.names[cx.gid], cs.names[cy.gid]),
			cmp.Compare(cx.seq, cy.seq))
	})
	out := make([]Collective, len(idx))
	for k, ci := range idx {
		out[k] = *a.collective(&cs.colls[ci])
	}
	return out
}
