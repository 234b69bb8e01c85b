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
	gid          uint32  // 1 + the group's index when channels are per group; 0 otherwise
	sends, recvs int32   // ops on each side
	extra        []int32 // rows of the longer side left unmatched, in issue order
}

// unmatchedSends returns the sends of ch no receive matches, in issue order.
func (ch *channel) unmatchedSends() []int32 {
	if ch.sends > ch.recvs {
		return ch.extra
	}
	return nil
}

// unmatchedRecvs returns the receives of ch no send matches, in issue
// order.
func (ch *channel) unmatchedRecvs() []int32 {
	if ch.recvs > ch.sends {
		return ch.extra
	}
	return nil
}

// p2pGroups reports whether every P2P op of t names its process group.
func p2pGroups(t *trace.Trace) bool {
	found := false
	for i, k := range t.Kind {
		if k.IsP2P() {
			if t.Group[i] == "" {
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

// side is one rank's end of a channel while matching: its sends to one
// peer, or its receives from one peer (in one group). Its ops form a list
// through the partner column, from first to last, in issue order.
type side struct {
	rank, peer  trace.Rank
	gid         uint32 // 1 + the group's index when channels are per group; 0 otherwise
	recv        bool
	next        int32 // per group: the rank's next side with the same peer and direction, -1
	first, last int32 // rows
	n           int32
	ch          int32 // the channel, once joined
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
	byGroup bool
	// head, per peer and direction (2*peer + 1 for receives): 1 + the
	// index, among the current rank's sides, of its side toward that peer
	// (the first of its chain per group); 0 when none. Indexed by rank:
	// no hashing on the hot path.
	head []int32
	// Group indices (first-appearance order over the P2P rows), when
	// channels are per group.
	groupOf   map[string]uint32
	lastGroup string
	lastGID   uint32
}

// match pairs the k-th send with the k-th receive of every channel and
// checks every pair's labels. Linear in the rows, with arrays indexed by
// rank rather than hash maps:
//
//  1. Per rank (rows are ordered by rank, then seq), one pass over its
//     kind and peer columns: the side of each P2P op is found by indexing
//     an array by peer, and the op is linked after the side's previous op
//     through the partner column (a list per side, in issue order).
//  2. The sides are joined into channels, rank by rank in row order, so
//     channels come in the order of their first op: a side toward a lower
//     rank finds the channel that rank's side opened, registered under
//     this rank.
//  3. Per channel, the two lists are walked together: the k-th send meets
//     the k-th receive, the partner column gets each pair's rows in place
//     of the links, and each pair's labels are checked. What is left of the
//     longer list is unmatched.
func (a *analysis) match() {
	t := a.t
	a.partner = make([]int32, t.Len())
	m := &matcher{a: a, byGroup: p2pGroups(t), head: make([]int32, 2*len(a.ranks))}
	if m.byGroup {
		m.groupOf = map[string]uint32{}
	}
	var sides []side
	for r := range a.ranks {
		ri := &a.ranks[r]
		if !ri.present {
			continue
		}
		sides = m.scan(trace.Rank(r), ri.lo, ri.hi, sides)
	}
	chSides := m.join(sides)
	a.pair(sides, chSides, m.walkOrder(sides))
}

// scan links the P2P ops of rank r, rows [lo, hi), into its sides, which
// it appends to sides in the order of their first op, and sets partner to
// -1 for every other row.
func (m *matcher) scan(r trace.Rank, lo, hi int, sides []side) []side {
	t := m.a.t
	part := m.a.partner[lo:hi]
	peers := t.Peer[lo:hi]
	kinds := t.Kind[lo:hi]
	head := m.head
	base := len(sides)
	if m.byGroup {
		groups := t.Group[lo:hi]
		for j, k := range kinds {
			part[j] = -1
			if !k.IsP2P() {
				continue
			}
			sides = m.addGrouped(sides, base, r, peers[j], k, m.gid(groups[j]), int32(lo+j))
		}
	} else {
		for j, k := range kinds {
			part[j] = -1
			if !k.IsP2P() {
				continue
			}
			// SEND_F, RECV_F, SEND_B, RECV_B are 4..7: receives are odd.
			h := int(peers[j])<<1 | int(k&1)
			row := int32(lo + j)
			if s := head[h]; s > 0 {
				sd := &sides[base+int(s)-1]
				m.a.partner[sd.last] = row
				sd.last = row
				sd.n++
				continue
			}
			sides = append(sides, side{rank: r, peer: peers[j], recv: k&1 != 0, next: -1, first: row, last: row, n: 1})
			head[h] = int32(len(sides) - base)
		}
	}
	for _, sd := range sides[base:] {
		head[int(sd.peer)<<1|b2i(sd.recv)] = 0
	}
	return sides
}

// addGrouped is scan's step for one P2P op at row when channels are per
// group: the side is found along the chain of the rank's sides toward the
// peer in that direction.
func (m *matcher) addGrouped(sides []side, base int, r, peer trace.Rank, k trace.Kind, gid uint32, row int32) []side {
	h := int(peer)<<1 | int(k&1)
	prev := int32(-1)
	for s := m.head[h] - 1; s >= 0; s = sides[base+int(s)].next {
		sd := &sides[base+int(s)]
		if sd.gid == gid {
			m.a.partner[sd.last] = row
			sd.last = row
			sd.n++
			return sides
		}
		prev = s
	}
	sides = append(sides, side{rank: r, peer: peer, gid: gid, recv: k&1 != 0, next: -1, first: row, last: row, n: 1})
	s := int32(len(sides) - base - 1)
	if prev < 0 {
		m.head[h] = s + 1
	} else {
		sides[base+int(prev)].next = s
	}
	return sides
}

// gid returns 1 + the index of group g among the groups of the P2P rows in
// row order (at most maxGroupID).
func (m *matcher) gid(g string) uint32 {
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

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// join makes the channels of sides (grouped by rank, ranks increasing,
// each rank's in the order of their first op) in the order of their first
// op, and returns each channel's send and receive side (-1 when none).
func (m *matcher) join(sides []side) [][2]int32 {
	a := m.a
	// A channel a rank opened toward a higher rank is registered under that
	// rank: regHead[r] is 1 + the first, regNext chains them. While rank r
	// is joined, head indexes its registered channels by (peer, r's
	// direction), idxNext chaining those of several groups.
	regHead := make([]int32, len(a.ranks))
	var regNext, idxNext []int32 // per channel
	var chSides [][2]int32
	head := m.head
	key := func(c int32, r trace.Rank) int {
		if ch := &a.chans[c]; ch.dst == r {
			return int(ch.src)<<1 | 1 // r receives from src
		} else {
			return int(ch.dst) << 1
		}
	}
	for lo := 0; lo < len(sides); {
		r := sides[lo].rank
		hi := lo
		for hi < len(sides) && sides[hi].rank == r {
			hi++
		}
		for c := regHead[r] - 1; c >= 0; c = regNext[c] {
			h := key(c, r)
			idxNext[c] = head[h] - 1
			head[h] = c + 1
		}
		for i := lo; i < hi; i++ {
			sd := &sides[i]
			c := int32(-1)
			if sd.peer < r {
				for x := head[int(sd.peer)<<1|b2i(sd.recv)] - 1; x >= 0; x = idxNext[x] {
					if a.chans[x].gid == sd.gid {
						c = x
						break
					}
				}
			}
			if c < 0 {
				c = int32(len(a.chans))
				ch := channel{src: r, dst: sd.peer, gid: sd.gid}
				if sd.recv {
					ch.src, ch.dst = sd.peer, r
				}
				a.chans = append(a.chans, ch)
				chSides = append(chSides, [2]int32{-1, -1})
				regNext = append(regNext, -1)
				idxNext = append(idxNext, -1)
				if sd.peer > r {
					regNext[c] = regHead[sd.peer] - 1
					regHead[sd.peer] = c + 1
				}
			}
			sd.ch = c
			chSides[c][b2i(sd.recv)] = int32(i)
		}
		for c := regHead[r] - 1; c >= 0; c = regNext[c] {
			head[key(c, r)] = 0
		}
		lo = hi
	}
	return chSides
}

// walkOrder returns the channels in the order pair walks them: depth
// first along the rank graph (from a rank to its peers, their peers...),
// so that consecutive channels share a rank and the rows of each rank are
// read while they are in cache. In a pipeline this goes down each
// pipeline stage by stage, rather than a rank and a peer far from it in
// rank order.
func (m *matcher) walkOrder(sides []side) []int32 {
	a := m.a
	firstSide := make([]int32, len(a.ranks)) // 1 + the rank's first side; 0 when none
	for i := len(sides) - 1; i >= 0; i-- {
		firstSide[sides[i].rank] = int32(i) + 1
	}
	order := make([]int32, 0, len(a.chans))
	done := make([]bool, len(a.chans))
	seen := make([]bool, len(a.ranks))
	var stack []trace.Rank
	for r0 := range a.ranks {
		if seen[r0] || firstSide[r0] == 0 {
			continue
		}
		seen[r0] = true
		stack = append(stack[:0], trace.Rank(r0))
		for len(stack) > 0 {
			r := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for i := firstSide[r] - 1; i >= 0 && int(i) < len(sides) && sides[i].rank == r; i++ {
				sd := &sides[i]
				if !done[sd.ch] {
					done[sd.ch] = true
					order = append(order, sd.ch)
				}
				if p := sd.peer; !seen[p] {
					seen[p] = true
					stack = append(stack, p)
				}
			}
		}
	}
	return order
}

// pair walks the send and receive lists of every channel together: the
// k-th send meets the k-th receive. It sets partner for both, counts the
// matched pairs, keeps per channel the first pair of each mismatch kind,
// and the rows left over on the longer side.
func (a *analysis) pair(sides []side, chSides [][2]int32, order []int32) {
	t := a.t
	part := a.partner
	step, mb, kind := t.Step, t.MicroBatch, t.Kind
	shape, dtype, bytes := t.Shape, t.Dtype, t.Bytes
	var extra []int32
	for _, ci := range order {
		ch := &a.chans[ci]
		s, r := int32(-1), int32(-1)
		if x := chSides[ci][0]; x >= 0 {
			ch.sends, s = sides[x].n, sides[x].first
		}
		if x := chSides[ci][1]; x >= 0 {
			ch.recvs, r = sides[x].n, sides[x].first
		}
		n := min(ch.sends, ch.recvs)
		a.rep.Matched += int(n)
		first := len(a.pairMM)
		for k := int32(0); k < n; k++ {
			ns, nr := part[s], part[r]
			part[s], part[r] = r, s
			// The common case, a pair that agrees on everything, without a
			// call (s is a send, so its counterpart kind is r's when they
			// differ in the low bit only).
			if step[s] != step[r] || mb[s] != mb[r] || kind[s]^1 != kind[r] ||
				shape[s] != shape[r] || dtype[s] != dtype[r] || bytes[s] != bytes[r] {
				if mk, ok := a.pairKind(int(s), int(r)); ok {
					a.notePair(first, mk, ci, s, r)
				}
			}
			s, r = ns, nr
		}
		rest := s
		if ch.recvs > ch.sends {
			rest = r
		}
		if rest >= 0 {
			lo := len(extra)
			for x := rest; x >= 0; {
				extra = append(extra, x)
				x, part[x] = part[x], -1
			}
			ch.extra = extra[lo:len(extra):len(extra)]
		}
	}
	// In channel order, each channel's in the order of their first pair.
	slices.SortStableFunc(a.pairMM, func(x, y pairMismatch) int { return cmp.Compare(x.ch, y.ch) })
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
	case t.Shape[s] != "" && t.Shape[r] != "" && t.Shape[s] != t.Shape[r]:
		return ShapeMismatch, true
	case t.Dtype[s] != "" && t.Dtype[r] != "" && t.Dtype[s] != t.Dtype[r]:
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
	return t.Shape[s] != "" && t.Shape[r] != "" && t.Shape[s] != t.Shape[r]
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
		d = append(d, fmt.Sprintf("shape %s vs %s", orUnknown(t.Shape[s]), orUnknown(t.Shape[r])))
	}
	if t.Dtype[s] != t.Dtype[r] {
		d = append(d, fmt.Sprintf("dtype %s vs %s", orUnknown(t.Dtype[s]), orUnknown(t.Dtype[r])))
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
		for _, s := range ch.unmatchedSends() {
			if t.EndNs[s] != trace.NoTime {
				mark(ch.dst, fmt.Sprintf("rank %d's %s completed, but rank %d has no receive for it", ch.src, describeOp(a.event(int(s))), ch.dst))
				break
			}
		}
		for _, r := range ch.unmatchedRecvs() {
			if t.EndNs[r] != trace.NoTime {
				mark(ch.src, fmt.Sprintf("rank %d's %s completed, but rank %d has no send for it", ch.dst, describeOp(a.event(int(r))), ch.src))
				break
			}
		}
	}
	done := int64(-1) // highest step whose optimizer barrier completed somewhere
	doneRank := trace.NoRank
	for i := 0; i < t.Len(); i++ {
		if isOpt(t.Kind[i]) && t.EndNs[i] != trace.NoTime && t.Step[i] > done {
			done, doneRank = t.Step[i], t.Rank[i]
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
