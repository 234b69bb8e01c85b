package hang

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/ppprof/ppprof/trace"
)

// channel is one ordered rank pair (src, dst): src's sends to dst and
// dst's receives from src, each side in issue order. The k-th of each meet,
// as NCCL's do. When every P2P op of the trace names its process group, the
// channel is (group, src, dst): communicators do not match each other's
// ops. Channels are listed in the order of their first op in the rows.
type channel struct {
	src, dst     trace.Rank
	gid          uint32 // 1 + the group's index when channels are per group; 0 otherwise
	sends, recvs int32  // ops on each side
	// The rows of the longer side left unmatched, in issue order, are
	// analysis.extra[extra:extra+nextra] (RunChunks keeps some of them
	// only). While match runs and the channel waits for its other side's
	// rank, ^extra is the index of the side's rows in matcher.lists.
	extra, nextra int32
}

// unmatched returns the rows of ch's longer side that no op of the other
// side matches, in issue order.
func (a *analysis) unmatched(ch *channel) []int32 {
	return a.extra[ch.extra : ch.extra+ch.nextra]
}

// unmatchedSends returns the sends of ch no receive matches, in issue order.
func (a *analysis) unmatchedSends(ch *channel) []int32 {
	if ch.sends > ch.recvs {
		return a.unmatched(ch)
	}
	return nil
}

// unmatchedRecvs returns the receives of ch no send matches, in issue
// order.
func (a *analysis) unmatchedRecvs(ch *channel) []int32 {
	if ch.recvs > ch.sends {
		return a.unmatched(ch)
	}
	return nil
}

// tailPartners makes room for the partners match keeps: those of each
// rank's rows from its first pending op on (tailFrom), the only ones the
// analysis looks up (blocked ops); with allPartners, of every row.
func (a *analysis) tailPartners() {
	n := 0
	for r := range a.ranks {
		ri := &a.ranks[r]
		from := ri.hi
		switch {
		case a.allPartners:
			from = ri.lo
		case ri.firstPending >= 0:
			from = ri.firstPending
		}
		ri.tailFrom, ri.tailBase = from, n-from
		n += ri.hi - from
	}
	a.tail = make([]int32, n)
	for i := range a.tail {
		a.tail[i] = -1
	}
}

// partner returns the row of the op the P2P op at row i matched, -1 when
// none (or when row i is not a P2P op).
func (a *analysis) partner(i int) int32 {
	ri := &a.ranks[a.t.Rank[i]]
	if i >= ri.tailFrom {
		return a.tail[i+ri.tailBase]
	}
	return a.partnerScan(i)
}

// partnerScan is partner for a row match did not keep the partner of: the
// k-th op of row i's side meets the k-th of the other side, counted in the
// two ranks' rows.
func (a *analysis) partnerScan(i int) int32 {
	t := a.t
	k, r, p := t.Kind[i], t.Rank[i], t.Peer[i]
	if !k.IsP2P() || p < 0 || int(p) >= len(a.ranks) {
		return -1
	}
	channel := func(j int) uint32 { // the group of row j's channel
		if !a.p2pByGroup {
			return 0
		}
		return min(a.p2pGroupOf[t.Group[j]], maxGroupID)
	}
	g := channel(i)
	nth := 0
	for j := a.ranks[r].lo; j < i; j++ {
		if t.Kind[j].IsP2P() && t.Peer[j] == p && t.Kind[j]&1 == k&1 && channel(j) == g {
			nth++
		}
	}
	pi := &a.ranks[p]
	for j := pi.lo; j < pi.hi; j++ {
		if t.Kind[j].IsP2P() && t.Peer[j] == r && t.Kind[j]&1 != k&1 && channel(j) == g {
			if nth == 0 {
				return int32(j)
			}
			nth--
		}
	}
	return -1
}

// p2pGroups reports whether every P2P op of t names its process group.
func p2pGroups(t *trace.Trace) bool {
	found := false
	for i, k := range t.Kind {
		if k.IsP2P() {
			if t.Group[i] == 0 {
				return false
			}
			found = true
		}
	}
	return found
}

// maxGroupID is the group index past which groups share one channel space
// (a million groups; the index takes 20 bits of the channel key in the
// format this package has always used).
const maxGroupID = 1<<20 - 1

// side is one end of a channel of the rank being scanned: its sends to
// one peer, or its receives from one peer (in one group). Its ops are the
// pos first of olist's that each met, then own's.
type side struct {
	peer trace.Rank
	gid  uint32 // 1 + the group's index when channels are per group; 0 otherwise
	recv bool
	next int32 // per group: the rank's next side with the same peer and direction, -1
	ch   int32 // its channel
	// The other side's rows, listed by an earlier scan (nil when there is
	// none), and how many of them this side met.
	pos   int32
	olist []int32
	own   []int32 // this side's ops that met none, in issue order
	// The other side's rank keeps the partners of its rows from ofrom on,
	// at tail[row+obase].
	ofrom, obase int32
	first        int32 // the row of its first op, when it met one of the other side
}

// pairMismatch is the first pair of a channel showing one mismatch kind,
// and how many pairs of the channel show it.
type pairMismatch struct {
	kind       MismatchKind
	ch         int32
	send, recv int32 // rows of the first pair
	count      int
}

// matcher is the scratch state of match.
type matcher struct {
	a       *analysis
	t       *trace.Trace
	byGroup bool
	// sides of the rank being scanned, and head, per peer and direction
	// (2*peer + 1 for receives): 1 + the index in sides of its side toward
	// that peer (the first of its chain per group); 0 when none. Indexed
	// by rank: no hashing on the hot path.
	sides []side
	head  []int32
	// chFirst, per channel: the row of the op that opened it, then of its
	// first op (of either side).
	chFirst []int32
	// A channel opened by a rank toward a rank not scanned yet is
	// registered under that rank: regHead[r] is 1 + the first, regNext
	// chains them.
	regHead []int32
	regNext []int32 // per channel
	matched int
	bad     []pairMismatch // every pair whose labels differ, count 1 each
	// Row lists of channels done, for reuse: a few are in use at a time.
	pool [][]int32
	// The rows of the sides waiting for their other side's scan (a
	// channel's ^extra), and the indices free in lists.
	lists [][]int32
	free  []int32
	// Group indices (first-appearance order over the P2P rows), when
	// channels are per group.
	groupOf   map[trace.Str]uint32
	lastGroup trace.Str
	lastGID   uint32
	// Ranks are scanned in batches along their chains (match); visited
	// marks those scanned, succ collects the unvisited ranks the current
	// batch opened channels toward.
	visited []bool
	succ    []int32
}

// match pairs the k-th send with the k-th receive of every channel and
// checks every pair's labels, in one pass over the ranks (each in seq
// order), with arrays indexed by rank rather than hash maps:
//
//   - Ranks are scanned in batches of chainWidth consecutive ranks; the
//     next batch is the lowest unvisited ranks the batch opened channels
//     toward (in a pipeline, the next stage of the same replicas), else
//     the lowest unvisited ranks. The rows a batch lists are still in
//     cache when their peers meet them. With groups, batches are in rank
//     order (the group numbering follows the scan).
//   - The side of each P2P op is found by indexing an array by peer and
//     direction; a new side opens a channel or joins the channel an
//     earlier rank opened toward this one, registered under this rank.
//   - When the other side of the channel was listed by an earlier scan,
//     the op meets the first of its rows not met yet: the k-th send meets
//     the k-th receive, and the pair's labels are checked while both
//     ranks' rows are in cache. Otherwise the op is listed, in issue
//     order, for the other side's scan.
//   - What is left of either side once both are scanned, or of a list no
//     scan met, is unmatched. Channels are then renumbered in the order of
//     their first op in the rows.
//
// The partners of the pending ops (all the analysis looks up) are kept
// (tailPartners); no array per row is written.
func (a *analysis) match() {
	t := a.t
	a.tailPartners()
	a.extra = nil
	m := &matcher{a: a, t: t, byGroup: p2pGroups(t),
		head: make([]int32, 2*len(a.ranks)), regHead: make([]int32, len(a.ranks))}
	// Room for a pipeline's channels (two per neighbouring pair of ranks),
	// so that they rarely grow.
	nc := min(2*len(a.ranks), t.Len())
	a.chans = make([]channel, 0, nc)
	m.chFirst, m.regNext = make([]int32, 0, nc), make([]int32, 0, nc)
	m.visited = make([]bool, len(a.ranks))
	a.p2pByGroup = m.byGroup
	if m.byGroup {
		m.groupOf = map[trace.Str]uint32{}
		a.p2pGroupOf = m.groupOf
	}
	next := 0 // the lowest rank not visited
	var batch []int32
	for {
		if len(batch) == 0 {
			for ; next < len(a.ranks) && len(batch) < chainWidth; next++ {
				if !m.visited[next] && a.ranks[next].present {
					batch = append(batch, int32(next))
				}
			}
			if len(batch) == 0 {
				break
			}
		}
		m.succ = m.succ[:0]
		for _, r := range batch {
			m.visited[r] = true
			ri := &a.ranks[r]
			m.scan(trace.Rank(r), ri.lo, ri.hi)
		}
		batch = batch[:0]
		if m.byGroup {
			continue
		}
		slices.Sort(m.succ)
		for i, r := range m.succ {
			if len(batch) < chainWidth && (i == 0 || r != m.succ[i-1]) && !m.visited[r] && a.ranks[r].present {
				batch = append(batch, r)
			}
		}
	}
	m.finish()
}

// scan matches the P2P ops of rank r, rows [lo, hi), then sets the op
// counts of its channels, and the unmatched rows of those whose other side
// was scanned (before, or with no op toward r); the others keep r's rows
// in lists (their ^extra) for their other side's scan.
func (m *matcher) scan(r trace.Rank, lo, hi int) {
	t := m.t
	a := m.a
	m.sides = m.sides[:0]
	// r's sides of the channels earlier ranks opened toward it.
	for c := m.regHead[r] - 1; c >= 0; c = m.regNext[c] {
		ch := &a.chans[c]
		olist := m.lists[^ch.extra]
		m.free = append(m.free, ^ch.extra)
		if ch.dst == r {
			m.newSide(ch.src, ch.gid, true, c, olist)
		} else {
			m.newSide(ch.dst, ch.gid, false, c, olist)
		}
	}
	if m.byGroup {
		peers, kinds, groups := t.Peer[lo:hi], t.Kind[lo:hi], t.Group[lo:hi]
		for j, k := range kinds {
			if k.IsP2P() {
				s := m.findGrouped(r, peers[j], k, m.gid(groups[j]), int32(lo+j))
				m.add(r, &m.sides[s], int32(lo+j))
			}
		}
	} else {
		m.scanFast(r, lo, hi)
	}
	for i := range m.sides {
		sd := &m.sides[i]
		m.head[int(sd.peer)<<1|b2i(sd.recv)] = 0
		c := sd.ch
		ch := &a.chans[c]
		m.matched += int(sd.pos)
		if n := sd.pos + int32(len(sd.own)); sd.recv {
			ch.recvs = n
		} else {
			ch.sends = n
		}
		switch {
		case sd.olist != nil:
			// The channel is done: the first op of this side met the
			// opener's first; what either side has left is unmatched.
			if sd.pos > 0 {
				m.chFirst[c] = min(m.chFirst[c], sd.first)
			}
			if len(sd.own) > 0 {
				m.unmatched(ch, sd.own)
			} else {
				m.unmatched(ch, sd.olist[sd.pos:])
			}
			m.put(sd.olist)
			m.put(sd.own)
		case m.visited[sd.peer]:
			// The peer was scanned, with no op toward r: every op is
			// unmatched.
			m.unmatched(ch, sd.own)
			m.put(sd.own)
		default:
			// Listed for the peer's scan (unmatched if none comes).
			ch.extra = ^m.keep(sd.own)
		}
		sd.own, sd.olist = nil, nil
	}
}

// scanFast is scan's loop when channels are not per group: add and check
// written out, on locals, for the hot path. The rank's rows whose
// partners are kept, from tailFrom on (its pending ops, at its end), go
// through add.
func (m *matcher) scanFast(r trace.Rank, lo, hi int) {
	t := m.t
	n := t.Len()
	if uint(lo) > uint(hi) || uint(hi) > uint(n) {
		panic("hang: rows out of range")
	}
	// The columns, all of one length n, indexed by row: the rank's rows j
	// and the peers' rows q alike.
	step, mb, kind, bytes, shape, dtype, peer := t.Step[:n], t.MicroBatch[:n], t.Kind[:n], t.Bytes[:n], t.Shape[:n], t.Dtype[:n], t.Peer[:n]
	head, sides, tail := m.head, m.sides, m.a.tail
	end := max(lo, min(hi, m.a.ranks[r].tailFrom))
	for j := lo; j < end; j++ {
		k := kind[j]
		// SEND_F, RECV_F, SEND_B, RECV_B are 4..7: receives are odd.
		if uint16(k)-uint16(trace.SendF) >= 4 {
			continue
		}
		row := int32(j)
		s := int(head[int(peer[j])<<1|int(k&1)]) - 1
		if s < 0 {
			s = int(m.open(r, peer[j], 0, k&1 != 0, row))
			sides = m.sides
		}
		sd := &sides[s]
		if p := int(sd.pos); p < len(sd.olist) {
			// Meet the first op of the other side not met yet.
			q := sd.olist[p]
			sd.pos++
			if p == 0 {
				sd.first = row
			}
			if q >= sd.ofrom {
				tail[q+sd.obase] = row
			}
			if uint(q) >= uint(n) {
				panic("hang: row out of range")
			}
			// The common case, a pair that agrees on everything, with one
			// test (of a send and a receive, the receive's kind is the
			// send's with the low bit set).
			if differ(step[j], step[q], mb[j], mb[q], bytes[j], bytes[q], shape[j], shape[q], dtype[j], dtype[q]) || k^kind[q] != 1 {
				if k&1 != 0 {
					m.check(sd.ch, q, row)
				} else {
					m.check(sd.ch, row, q)
				}
			}
			continue
		}
		sd.own = append(sd.own, row)
	}
	for j := end; j < hi; j++ {
		if k := kind[j]; k.IsP2P() {
			s := m.head[int(peer[j])<<1|int(k&1)] - 1
			if s < 0 {
				s = m.open(r, peer[j], 0, k&1 != 0, int32(j))
			}
			m.add(r, &m.sides[s], int32(j))
		}
	}
}

// newSide appends a side of the current rank toward peer on channel c,
// whose other side's rows are olist (nil: none), indexes it in head, and
// returns it.
func (m *matcher) newSide(peer trace.Rank, gid uint32, recv bool, c int32, olist []int32) int32 {
	s := int32(len(m.sides))
	sd := side{peer: peer, gid: gid, recv: recv, next: -1, ch: c, olist: olist, own: m.get()}
	if olist != nil {
		pi := &m.a.ranks[peer]
		sd.ofrom, sd.obase = int32(pi.tailFrom), int32(pi.tailBase)
	}
	m.sides = append(m.sides, sd)
	h := int(peer)<<1 | b2i(recv)
	if m.head[h] == 0 {
		m.head[h] = s + 1
	} else { // another group toward the same peer: chain it
		x := m.head[h] - 1
		for m.sides[x].next >= 0 {
			x = m.sides[x].next
		}
		m.sides[x].next = s
	}
	return s
}

// open makes a new channel for rank r's first op toward peer (a receive
// when recv) in group gid, and returns r's side of it. A channel toward a
// rank not scanned yet is registered under it.
func (m *matcher) open(r, peer trace.Rank, gid uint32, recv bool, row int32) int32 {
	a := m.a
	c := int32(len(a.chans))
	ch := channel{src: r, dst: peer, gid: gid}
	if recv {
		ch.src, ch.dst = peer, r
	}
	a.chans = append(a.chans, ch)
	m.chFirst = append(m.chFirst, row)
	m.regNext = append(m.regNext, -1)
	if !m.visited[peer] {
		m.succ = append(m.succ, int32(peer))
		m.regNext[c] = m.regHead[peer] - 1
		m.regHead[peer] = c + 1
	}
	return m.newSide(peer, gid, recv, c, nil)
}

// findGrouped returns rank r's side toward peer in direction k and group
// gid, opening a channel when there is none.
func (m *matcher) findGrouped(r, peer trace.Rank, k trace.Kind, gid uint32, row int32) int32 {
	for s := m.head[int(peer)<<1|int(k&1)] - 1; s >= 0; s = m.sides[s].next {
		if m.sides[s].gid == gid {
			return s
		}
	}
	return m.open(r, peer, gid, k&1 != 0, row)
}

// add is one op of rank r, at row, of side sd: it meets the first op of
// the other side not met yet, or is listed.
func (m *matcher) add(r trace.Rank, sd *side, row int32) {
	if p := int(sd.pos); p < len(sd.olist) {
		q := sd.olist[p]
		sd.pos++
		if p == 0 {
			sd.first = row
		}
		a := m.a
		if ri := &a.ranks[r]; int(row) >= ri.tailFrom {
			a.tail[int(row)+ri.tailBase] = q
		}
		if q >= sd.ofrom {
			a.tail[q+sd.obase] = row
		}
		if sd.recv {
			m.check(sd.ch, q, row)
		} else {
			m.check(sd.ch, row, q)
		}
		return
	}
	sd.own = append(sd.own, row)
}

// unmatched sets rows, in extra, as the unmatched ops of ch.
func (m *matcher) unmatched(ch *channel, rows []int32) {
	ch.extra, ch.nextra = int32(len(m.a.extra)), int32(len(rows))
	m.a.extra = append(m.a.extra, rows...)
}

// keep puts list, the rows of a side waiting for its other side's scan,
// in lists, and returns its index.
func (m *matcher) keep(list []int32) int32 {
	if k := len(m.free); k > 0 {
		i := m.free[k-1]
		m.free = m.free[:k-1]
		m.lists[i] = list
		return i
	}
	m.lists = append(m.lists, list)
	return int32(len(m.lists) - 1)
}

// get returns an empty list, reusing one given back.
func (m *matcher) get() []int32 {
	k := len(m.pool)
	if k == 0 {
		return make([]int32, 0, 64)
	}
	l := m.pool[k-1]
	m.pool = m.pool[:k-1]
	return l
}

// put gives back a list no side uses any more.
func (m *matcher) put(l []int32) {
	if cap(l) > 0 {
		m.pool = append(m.pool, l[:0])
	}
}

// check notes the matched pair (s, r) of channel c when its labels differ.
func (m *matcher) check(c, s, r int32) {
	t := m.t
	// The common case, a pair that agrees on everything, without a call
	// (s is a send: its counterpart is the kind one above it).
	if t.Step[s] == t.Step[r] && t.MicroBatch[s] == t.MicroBatch[r] && t.Kind[s]^1 == t.Kind[r] &&
		t.Bytes[s] == t.Bytes[r] && t.Shape[s] == t.Shape[r] && t.Dtype[s] == t.Dtype[r] {
		return
	}
	if mk, ok := m.a.pairKind(int(s), int(r)); ok {
		m.bad = append(m.bad, pairMismatch{kind: mk, ch: c, send: s, recv: r, count: 1})
	}
}

// gid returns 1 + the index of group g among the groups of the P2P rows in
// row order (at most maxGroupID).
func (m *matcher) gid(g trace.Str) uint32 {
	if g != m.lastGroup || m.lastGID == 0 {
		id, ok := m.groupOf[g]
		if !ok {
			id = uint32(len(m.groupOf)) + 1
			m.groupOf[g] = id
		}
		m.lastGroup, m.lastGID = g, id
	}
	return min(m.lastGID, maxGroupID)
}

// differ reports whether a pair's steps, micro-batches, byte counts,
// shapes or dtypes differ, in one test (shapes and dtypes are interned:
// equal strings, equal ids).
func differ(s1, s2 int64, m1, m2 trace.MicroBatch, b1, b2 int64, sh1, sh2, dt1, dt2 trace.Str) bool {
	x := uint64(s1^s2) | uint64(m1^m2) | uint64(b1^b2) | uint64(sh1^sh2) | uint64(dt1^dt2)
	return x != 0
}

// chainWidth is how many ranks match scans side by side along their
// chains: consecutive ranks share the columns' cache lines and pages (rows
// are in rank order), and the ranks of a batch are still in cache when the
// next batch, their peers, reads their ops.
const chainWidth = 16

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// renumber puts the channels in the order of their first op in the rows
// (ranks were not scanned in row order), and renumbers the mismatched
// pairs' channels to match.
func (m *matcher) renumber() {
	a := m.a
	first := m.chFirst
	sorted := true
	for c := 1; c < len(first) && sorted; c++ {
		sorted = first[c-1] < first[c]
	}
	if sorted {
		return
	}
	// Counting sort by the rank of the first op, then by row within a
	// rank (a few channels each).
	rank := m.t.Rank
	start := make([]int32, len(a.ranks)+1)
	for _, f := range first {
		start[rank[f]+1]++
	}
	for r := 1; r < len(start); r++ {
		start[r] += start[r-1]
	}
	pos := m.head[:0] // all 0 again: room for a copy of start
	pos = append(pos, start...)
	order := make([]int32, len(first))
	for c, f := range first {
		r := rank[f]
		i := pos[r]
		pos[r]++
		for ; i > start[r] && first[order[i-1]] > f; i-- {
			order[i] = order[i-1]
		}
		order[i] = int32(c)
	}
	if len(m.bad) > 0 {
		newOf := start[:0]
		newOf = slices.Grow(newOf, len(order))[:len(order)]
		for i, c := range order {
			newOf[c] = int32(i)
		}
		for i := range m.bad {
			m.bad[i].ch = newOf[m.bad[i].ch]
		}
	}
	// Permute the channels in place, a cycle at a time (order[i] < 0:
	// done).
	chans := a.chans
	for i := range order {
		c := order[i]
		if c < 0 || int(c) == i {
			continue
		}
		tmp := chans[i]
		j := i
		for {
			c := order[j]
			order[j] = -1
			if int(c) == i {
				chans[j] = tmp
				break
			}
			chans[j] = chans[c]
			j = int(c)
		}
	}
}

// finish counts the pairs, puts the channels in row order, and keeps the
// first mismatched pair of each kind per channel.
func (m *matcher) finish() {
	a := m.a
	a.rep.Matched += m.matched
	// The channels whose other side no scan met: every op listed is
	// unmatched.
	for c := range a.chans {
		if ch := &a.chans[c]; ch.extra < 0 {
			m.unmatched(ch, m.lists[^ch.extra])
		}
	}
	m.renumber()
	// Pairs are checked in the row order of their later op: per channel,
	// in pair order. Keep per channel the first pair of each kind, counting
	// the others.
	slices.SortStableFunc(m.bad, func(x, y pairMismatch) int { return cmp.Compare(x.ch, y.ch) })
	first := 0
	for i, b := range m.bad {
		if i > 0 && b.ch != m.bad[i-1].ch {
			first = len(a.pairMM)
		}
		a.notePair(first, b.kind, b.ch, b.send, b.recv)
	}
}

// notePair counts a mismatch of kind mk at pair (s, r) of channel ci, whose
// entries in pairMM start at first.
func (a *analysis) notePair(first int, mk MismatchKind, ci, s, r int32) {
	for j := first; j < len(a.pairMM); j++ {
		if a.pairMM[j].kind == mk {
			a.pairMM[j].count++
			return
		}
	}
	a.pairMM = append(a.pairMM, pairMismatch{kind: mk, ch: ci, send: s, recv: r, count: 1})
}

// pairKind returns what a matched pair disagrees on first: its labels
// (step, micro-batch, kind), then shape, dtype and bytes; ok is false when
// they agree. Empty shapes and dtypes and zero bytes are unknown and agree
// with anything.
func (a *analysis) pairKind(s, r int) (MismatchKind, bool) {
	t := a.t
	switch {
	case t.Step[s] != t.Step[r] || t.MicroBatch[s] != t.MicroBatch[r] || t.Kind[s].Counterpart() != t.Kind[r]:
		return OrderMismatch, true
	case t.Shape[s] != 0 && t.Shape[r] != 0 && t.Shape[s] != t.Shape[r]:
		return ShapeMismatch, true
	case t.Dtype[s] != 0 && t.Dtype[r] != 0 && t.Dtype[s] != t.Dtype[r]:
		return DtypeMismatch, true
	case t.Bytes[s] > 0 && t.Bytes[r] > 0 && t.Bytes[s] != t.Bytes[r]:
		return BytesMismatch, true
	}
	return "", false
}

// badPair reports whether a matched pair can never complete: its byte
// counts differ (NCCL waits for the count it was given), or, with a byte
// count unknown, its shapes do.
func (a *analysis) badPair(s, r int) bool {
	t := a.t
	if t.Bytes[s] > 0 && t.Bytes[r] > 0 {
		return t.Bytes[s] != t.Bytes[r]
	}
	return t.Shape[s] != 0 && t.Shape[r] != 0 && t.Shape[s] != t.Shape[r]
}

// pairDetail lists every label on which a pair differs: "micro-batch 7 vs
// 6, shape 8192x1x4096 vs 4096x1x4096" (send side first).
func (a *analysis) pairDetail(s, r int) string {
	t := a.t
	var d []string
	if t.Step[s] != t.Step[r] {
		d = append(d, fmt.Sprintf("step %d vs %d", t.Step[s], t.Step[r]))
	}
	if t.MicroBatch[s] != t.MicroBatch[r] {
		d = append(d, fmt.Sprintf("micro-batch %d vs %d", t.MicroBatch[s], t.MicroBatch[r]))
	}
	if t.Kind[s].Counterpart() != t.Kind[r] {
		d = append(d, fmt.Sprintf("kind %s vs %s", t.Kind[s], t.Kind[r]))
	}
	if t.Chunk[s] != t.Chunk[r] && t.Kind[s].Counterpart() != t.Kind[r] {
		d = append(d, fmt.Sprintf("chunk %d vs %d", t.Chunk[s], t.Chunk[r]))
	}
	if t.Shape[s] != t.Shape[r] {
		d = append(d, fmt.Sprintf("shape %s vs %s", orUnknown(t.Shape[s].String()), orUnknown(t.Shape[r].String())))
	}
	if t.Dtype[s] != t.Dtype[r] {
		d = append(d, fmt.Sprintf("dtype %s vs %s", orUnknown(t.Dtype[s].String()), orUnknown(t.Dtype[r].String())))
	}
	if t.Bytes[s] != t.Bytes[r] {
		d = append(d, fmt.Sprintf("bytes %d vs %d", t.Bytes[s], t.Bytes[r]))
	}
	return strings.Join(d, ", ")
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// markLost marks the ranks whose events are evidently missing from the
// dump: their file lost bytes (newAnalysis); a peer holds a completed op
// that nothing of theirs matches; or other ranks completed an optimizer
// step (a barrier every rank must reach) that they, recording optimizer
// steps or recording nothing, never posted.
func (a *analysis) markLost() {
	t := a.t
	mark := func(r trace.Rank, why string) {
		ri := &a.ranks[r]
		if !ri.lost {
			ri.lost, ri.lostWhy = true, why
		}
	}
	for ci := range a.chans {
		ch := &a.chans[ci]
		for _, s := range a.unmatchedSends(ch) {
			if t.EndNs[s] != trace.NoTime {
				mark(ch.dst, fmt.Sprintf("rank %d's %s completed, but rank %d has no receive for it", ch.src, describeOp(a.event(int(s))), ch.dst))
				break
			}
		}
		for _, r := range a.unmatchedRecvs(ch) {
			if t.EndNs[r] != trace.NoTime {
				mark(ch.src, fmt.Sprintf("rank %d's %s completed, but rank %d has no send for it", ch.dst, describeOp(a.event(int(r))), ch.src))
				break
			}
		}
	}
	// The highest step whose optimizer barrier completed somewhere, and the
	// first rank (in row order: by rank) that completed it.
	done := int64(-1)
	doneRank := trace.NoRank
	for r := range a.ranks {
		if d := a.ranks[r].optDone; d > done {
			done, doneRank = d, trace.Rank(r)
		}
	}
	if done < 0 {
		return
	}
	for r := range a.ranks {
		// A rank with events but no optimizer step at all does not record
		// OPT (some runtimes record it on some ranks only): no evidence.
		if ri := &a.ranks[r]; ri.lastOptStep < done && (ri.lastOptStep >= 0 || !ri.present) {
			mark(trace.Rank(r), fmt.Sprintf("rank %d completed the optimizer step of step %d, which every rank must reach, but rank %d recorded no optimizer step %d", doneRank, done, r, done))
		}
	}
}
