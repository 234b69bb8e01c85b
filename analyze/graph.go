package analyze

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/ppprof/ppprof/internal/hugepage"
	"github.com/ppprof/ppprof/trace"
)

// A stepGraph is the dependency graph of one optimizer step of the whole
// job (every pipeline replica, every TP rank), re-timed by longest path.
// Its nodes are the ops of each rank's program in seq order; its edges:
//
//   - program order: an op starts when its rank is free: after the
//     previous op ended, or, when that op was a send, after it was posted
//     (a send never blocks its rank);
//   - send -> receive: sends and receives match NCCL-style per ordered
//     (src, dst) rank pair in issue order, whatever their labels; a
//     transfer starts when both sides have posted and lasts the receive's
//     duration; the receive (and its rank) waits for it to end;
//   - joins: the ranks taking part in one collective (the k-th OPT of the
//     step on every rank, as the simulator's optimizer barrier; a
//     collective kind that names its process group, per (group,
//     group_seq), or the k-th of the group on each rank when group_seq is
//     unknown; and the Megatron collective timers that name no group, see
//     implicitGroup) arrive at a barrier; it opens at the latest arrival and each
//     rank's collective then lasts its own duration. An OPT arrives only
//     once its rank's sends of the step have completed (the simulator
//     waits for them). A collective kind without a group, and every other
//     kind (DATA, LOSS...), occupies its rank alone.
//
// Each op may also start a launch delay after it is ready: the gap the
// trace shows between readiness and start (host overhead, data loading...),
// measured once and kept in re-timings (it is 0 on simulated traces). A
// receive is ready when its rank is free and its send was posted (a trace
// may record a receive's transfer start rather than its post, so only the
// gap after both is a delay); the transfer then starts after the delay.
// Each rank begins at the time it began the step in the trace. With the
// measured durations and delays a re-timing reproduces every start and end
// of a trace that follows these rules, such as any the simulator writes.
//
// A stepGraph is not safe for concurrent use: run reuses scratch memory.
type stepGraph struct {
	step  int64
	ranks []gRank

	// Per node (0 <= v < n).
	class []nodeClass
	kind  []trace.Kind
	row   []int32 // trace row; -1 for synthetic and virtual nodes
	owner []int32 // local rank; -1 for a barrier
	stage []int32
	chunk []int32
	mb    []int32
	opIdx []int32 // index of the node's op in its rank's program (an arrival and its join share it); -1 for a barrier
	prev  []int32 // program predecessor on the rank; -1 for the first op
	other []int32 // recv: its send; send: its recv; join: its barrier; -1 otherwise
	base  []int64 // the rank's begin time for its first op; trace.NoTime otherwise
	meas  []int64 // measured (or given) durations, ns
	delay []int64 // launch delays, ns (>= 0)
	// fromArrival marks a join whose trace row starts at the rank's arrival
	// (a real collective's timer) rather than at the barrier (the
	// simulator's OPT); rowTimes follows the trace.
	fromArrival []bool
	// Extra in-edges, CSR: an arrival's completed sends (their receives), a
	// barrier's arrivals.
	extraOff []int32
	extra    []int32
	order    []int32 // a topological order

	// Memory topo and measure use while they run, kept for the next graph
	// built in the same graphMem.
	scratch32 [4][]int32
	scratch64 [2][]int64
	// buildExtras' scratch: the sends of each rank in turn, the nodes
	// that wait for some of them.
	sentBuf []int32
	waits   []extraWait

	// Results of the last run.
	s, e []int64
	crit []int32 // the in-edge that bound the node's start; -1: its rank's begin
}

// nodeClass is how a stepGraph times a node.
type nodeClass uint8

const (
	ncCompute nodeClass = iota // F, B, W: occupies its rank for its duration
	ncOther                    // any other op of its rank alone: occupies it
	ncSend                     // posted when reached; never blocks its rank
	ncRecv                     // posted when reached; blocks until its transfer ends
	ncArrive                   // a rank reaching a join; zero length
	ncBarrier                  // virtual: opens at the latest arrival of a join
	ncJoin                     // the collective on one rank: opens with the barrier, lasts its duration
)

// gOp is one op of a rank's program, before the graph is built.
type gOp struct {
	row       int32 // trace row, -1 when synthetic
	kind      trace.Kind
	class     nodeClass // ncCompute, ncOther, ncSend, ncRecv or ncJoin
	peer      int32     // P2P: local rank of the peer
	join      int32     // ncJoin: join id, shared by its participants
	waitSends bool      // ncJoin: arrives only once the rank's sends have completed
	stage     int32
	chunk     int32
	mb        int32
	dur       int64 // synthetic: the duration; measured graphs derive it
	// Measured times (trace graphs): post is when a P2P op was posted or a
	// rank arrived at a join (the issue time when the trace has a usable
	// one, else the start).
	post, start, end int64
}

// gRank is one rank of a stepGraph and its program.
type gRank struct {
	rank                  trace.Rank
	pipeline, stage, tpRk int32
	ops                   []gOp
}

// newStepGraph builds the graph of ranks' programs. joins is the number of
// join ids used. measured says the ops carry measured times, from which
// durations, delays and the ranks' begin times are derived; otherwise each
// op's dur is its duration, delays are 0 and every rank begins at 0.
func newStepGraph(step int64, ranks []gRank, joins int, measured bool) (*stepGraph, error) {
	var m *graphMem
	return m.newStepGraph(step, ranks, joins, measured)
}

// graphMem is memory the step graphs that one worker builds, one after
// another, reuse: a job's step graph takes a few hundred bytes an op, and
// fresh memory for each graph (faulted in, zeroed, collected) cost more
// than building it. A graph built in a graphMem is valid until the next
// one is built there; a nil *graphMem builds in fresh memory.
type graphMem struct {
	g      stepGraph
	rows   []int // the step's rows
	sorted []int // and in (rank, seq) order
	ranks  []gRank
	ops    []gOp
	opNode []int32
	opRank [][]int32
	// newStepGraph's lists by pair id and by join, their arrays kept from
	// step to step (a fleet job's step graph has tens of thousands).
	sends, recvs, arrivals [][]int32
	dur                    []int64 // replayPlans' durations of the graph's nodes
	// The what-if's step whose graph this memory holds (heldGraph), built
	// by baselinePass; nil when none.
	held      *stepBase
	heldGraph *stepGraph
	// shaped: g holds the structure of the last measured graph built
	// here (every array but the times): a next graph of the same
	// programs (the next step of a job) keeps it (sameShape).
	shaped   bool
	reshaped int // graphs built by reshape (for the tests)
}

// graphReuse lets graphMem.newStepGraph keep the last graph's structure
// for programs of the same shape (tests build with and without).
var graphReuse = true

// grown returns s with length n, reusing its array when large enough;
// the contents are not cleared. A new large array is asked for huge
// pages (hugepage.Make): a step graph of a fleet job is hundreds of MB
// of fresh memory, and a fresh 4 KiB page costs a fault of its own.
func grown[T any](s []T, n int) []T {
	if cap(s) < n {
		return hugepage.Make[T](n)
	}
	return s[:n]
}

// zeroed returns s with length n, every element zero.
func zeroed[T any](s []T, n int) []T {
	s = grown(s, n)
	clear(s)
	return s
}

// newStepGraph is newStepGraph in m's memory (nil: fresh memory). A
// measured graph whose programs have the shape of the last one built in m
// (the same ops in the same order on the same ranks, the same peers and
// joins: a job's next step) takes its structure from it, and only its
// rows, durations, delays and begin times are set again (reshape): the
// same graph as built afresh (TestGraphReuse), without matching, extra
// edges or a topological order to make again.
func (m *graphMem) newStepGraph(step int64, ranks []gRank, joins int, measured bool) (g *stepGraph, err error) {
	if m != nil {
		if measured && graphReuse && m.shaped && m.sameShape(ranks, joins) {
			return m.reshape(step, ranks), nil
		}
		m.shaped = false
		if measured && graphReuse {
			defer func() {
				m.shaped = err == nil
			}()
		}
	}
	g = &stepGraph{}
	if m != nil {
		g = &m.g
	}
	*g = stepGraph{step: step, ranks: ranks,
		class: g.class, kind: g.kind, row: g.row, owner: g.owner, stage: g.stage, chunk: g.chunk, mb: g.mb,
		opIdx: g.opIdx, prev: g.prev, other: g.other, base: g.base, meas: g.meas, delay: g.delay,
		fromArrival: g.fromArrival, extraOff: g.extraOff, extra: g.extra, order: g.order,
		s: g.s, e: g.e, crit: g.crit, scratch32: g.scratch32, scratch64: g.scratch64,
		sentBuf: g.sentBuf, waits: g.waits}
	// 1. Nodes: each op, a join as an arrival and the join; then one
	// barrier per join id.
	n := 0
	for _, r := range ranks {
		for _, op := range r.ops {
			n++
			if op.class == ncJoin {
				n++
			}
		}
	}
	n += joins
	// Every node's class, row, owner, stage, chunk, mb, opIdx, prev, other
	// and base are written below (add, or the barriers' loop); kind and
	// meas are left zero for barriers, delay for ranks' first ops and
	// joins, fromArrival for all but joins.
	g.class, g.kind = grown(g.class, n), zeroed(g.kind, n)
	g.row, g.owner, g.stage, g.chunk, g.mb = grown(g.row, n), grown(g.owner, n), grown(g.stage, n), grown(g.chunk, n), grown(g.mb, n)
	g.opIdx, g.prev, g.other = grown(g.opIdx, n), grown(g.prev, n), grown(g.other, n)
	g.base, g.meas, g.delay = grown(g.base, n), zeroed(g.meas, n), zeroed(g.delay, n)
	g.fromArrival = zeroed(g.fromArrival, n)
	// [rank][op] -> the node holding the op (the join for a join): each
	// rank's part of one array.
	var opNode [][]int32
	var opNodes []int32
	if m != nil {
		m.opRank, m.opNode = grown(m.opRank, len(ranks)), grown(m.opNode, n)
		opNode, opNodes = m.opRank, m.opNode
	} else {
		opNode, opNodes = make([][]int32, len(ranks)), make([]int32, n)
	}
	barrier := func(j int32) int32 { return int32(n-joins) + j }
	// The ordered (src, dst) rank pairs of P2P ops, numbered as found;
	// each rank remembers the pairs of its own ops (a rank has few peers),
	// so the pairs' map is read only for a rank's first op with a peer.
	type pairKey struct{ src, dst int32 }
	pairID := map[pairKey]int32{}
	var pairs []pairKey
	var sends, recvs [][]int32 // by pair id: the nodes in issue order
	var arrivals [][]int32     // by join id: its arrival nodes
	if m != nil {
		sends, recvs = m.sends[:0], m.recvs[:0]
		arrivals = emptied(m.arrivals, joins)
		defer func() { m.sends, m.recvs, m.arrivals = sends, recvs, arrivals }()
	} else {
		arrivals = make([][]int32, joins)
	}
	type seen struct {
		peer int32
		send bool
		id   int32
	}
	var mine []seen
	pairOf := func(lr int32, op *gOp) int32 {
		send := op.class == ncSend
		for _, m := range mine {
			if m.peer == op.peer && m.send == send {
				return m.id
			}
		}
		k := pairKey{lr, op.peer}
		if !send {
			k = pairKey{op.peer, lr}
		}
		id, ok := pairID[k]
		if !ok {
			id = int32(len(pairs))
			pairID[k] = id
			pairs = append(pairs, k)
			sends, recvs = pushEmpty(sends), pushEmpty(recvs)
		}
		mine = append(mine, seen{op.peer, send, id})
		return id
	}
	v := int32(0)
	add := func(lr int32, k int, op *gOp, c nodeClass) int32 {
		g.class[v], g.kind[v], g.row[v], g.owner[v], g.opIdx[v] = c, op.kind, op.row, lr, int32(k)
		g.stage[v], g.chunk[v], g.mb[v] = op.stage, op.chunk, op.mb
		g.prev[v], g.other[v], g.base[v] = -1, -1, trace.NoTime
		g.meas[v] = op.dur
		v++
		return v - 1
	}
	for lr := range ranks {
		r := &ranks[lr]
		opNode[lr], opNodes = opNodes[:len(r.ops):len(r.ops)], opNodes[len(r.ops):]
		last := int32(-1)
		mine = mine[:0]
		for k := range r.ops {
			op := &r.ops[k]
			if op.class == ncJoin {
				if op.join < 0 || int(op.join) >= joins {
					return nil, fmt.Errorf("rank %d: join id %d out of range", r.rank, op.join)
				}
				a := add(int32(lr), k, op, ncArrive)
				g.prev[a] = last
				g.meas[a] = 0
				arrivals[op.join] = append(arrivals[op.join], a)
				j := add(int32(lr), k, op, ncJoin)
				g.other[j] = barrier(op.join)
				opNode[lr][k], last = j, j
				continue
			}
			x := add(int32(lr), k, op, op.class)
			g.prev[x] = last
			opNode[lr][k], last = x, x
			switch op.class {
			case ncSend:
				id := pairOf(int32(lr), op)
				sends[id] = append(sends[id], x)
			case ncRecv:
				id := pairOf(int32(lr), op)
				recvs[id] = append(recvs[id], x)
			}
		}
	}
	for j := range joins {
		b := barrier(int32(j))
		g.class[b], g.row[b], g.owner[b], g.opIdx[b], g.prev[b], g.other[b], g.base[b] = ncBarrier, -1, -1, -1, -1, -1, trace.NoTime
		g.stage[b], g.chunk[b], g.mb[b] = -1, -1, -1
		if len(arrivals[j]) == 0 {
			return nil, fmt.Errorf("step %d: join %d has no participant", step, j)
		}
	}

	// 2. NCCL matching per ordered rank pair (in pair order, so that the
	// first error is always the same one).
	byPair := make([]int32, len(pairs))
	for k := range byPair {
		byPair[k] = int32(k)
	}
	slices.SortFunc(byPair, func(a, b int32) int {
		return cmp.Or(cmp.Compare(pairs[a].src, pairs[b].src), cmp.Compare(pairs[a].dst, pairs[b].dst))
	})
	for _, k := range byPair {
		ss, rs := sends[k], recvs[k]
		if len(ss) == 0 {
			continue
		}
		if len(rs) != len(ss) {
			return nil, fmt.Errorf("step %d: rank %d sends %d ops to rank %d, which receives %d",
				step, ranks[pairs[k].src].rank, len(ss), ranks[pairs[k].dst].rank, len(rs))
		}
		for i := range ss {
			g.other[ss[i]], g.other[rs[i]] = rs[i], ss[i]
		}
	}
	for _, k := range byPair {
		if rs := recvs[k]; len(rs) > 0 && len(sends[k]) == 0 {
			return nil, fmt.Errorf("step %d: rank %d receives %d ops from rank %d, which sends none",
				step, ranks[pairs[k].dst].rank, len(rs), ranks[pairs[k].src].rank)
		}
	}

	// 3. Extra in-edges: an OPT's arrival waits for the receives of its
	// rank's earlier sends; a barrier for its arrivals.
	g.buildExtras(ranks, opNode, arrivals, joins, n)

	// 4. Topological order (Kahn); a cycle is a deadlock.
	if err := g.topo(); err != nil {
		return nil, err
	}

	// 5. Durations, delays and begin times.
	if measured {
		g.measure()
	} else {
		for lr := range ranks {
			if len(ranks[lr].ops) > 0 {
				first := opNode[lr][0]
				if g.class[first] == ncJoin {
					first--
				}
				g.base[first] = 0
			}
		}
	}
	return g, nil
}

// sameShape reports whether ranks' programs, with joins join ids, make
// the graph m.g was built from, but for rows and times: node by node the
// same rank, op, class, kind, stage, chunk and micro-batch, each P2P op's
// peer the rank its matched op is on (ops in the same order toward the
// same peers are matched alike), each join op the same barrier node
// (numbered n-joins+id: traceGraph numbers join ids in node order, so the
// first join op has id 0 both times and the number of joins agrees).
// Everything a graph's structure is made of (matching, joins, extra
// edges, the topological order) follows from those; whether an arrival
// waits for its rank's sends follows from its kind (an OPT's does).
func (m *graphMem) sameShape(ranks []gRank, joins int) bool {
	g := &m.g
	n := g.numNodes()
	if len(g.ranks) != len(ranks) || n < joins {
		return false
	}
	v := int32(0)
	last := int32(n - joins)
	for lr := range ranks {
		ops := ranks[lr].ops
		for k := range ops {
			op := &ops[k]
			if v >= last || g.owner[v] != int32(lr) || g.opIdx[v] != int32(k) || g.kind[v] != op.kind ||
				g.stage[v] != op.stage || g.chunk[v] != op.chunk || g.mb[v] != op.mb {
				return false
			}
			switch c := g.class[v]; {
			case op.class == ncJoin:
				if c != ncArrive || v+1 >= last || g.class[v+1] != ncJoin || g.other[v+1] != last+op.join ||
					op.join < 0 || int(op.join) >= joins {
					return false
				}
				v += 2
				continue
			case c != op.class:
				return false
			case c == ncSend || c == ncRecv:
				if o := g.other[v]; o < 0 || g.owner[o] != op.peer {
					return false
				}
			}
			v++
		}
	}
	return v == last
}

// reshape sets m.g, of the shape of ranks' programs (sameShape), to the
// graph of step from ranks: what newStepGraph writes of each node that
// is not structure (row, durations, delays, begin times, fromArrival),
// then measure.
func (m *graphMem) reshape(step int64, ranks []gRank) *stepGraph {
	g := &m.g
	g.step, g.ranks = step, ranks
	m.reshaped++
	n := g.numNodes()
	clear(g.meas)
	clear(g.delay)
	clear(g.fromArrival)
	for v := range int32(n) {
		g.base[v] = trace.NoTime
		if g.owner[v] < 0 {
			continue // a barrier
		}
		op := g.opOf(v)
		g.row[v] = op.row
		if g.class[v] != ncArrive {
			g.meas[v] = op.dur
		}
	}
	g.measure()
	return g
}

// buildExtras fills the extra in-edges CSR: for each arrival of a join
// that waits for its sends, the receives of the rank's sends issued before
// it; for each barrier, its arrivals.
func (g *stepGraph) buildExtras(ranks []gRank, opNode [][]int32, arrivals [][]int32, joins, n int) {
	// The nodes with extra in-edges come in node order: arrivals rank by
	// rank, in program order, then the barriers. An arrival's are the
	// receives of its rank's sends so far: sent[lo:hi], the sends of all
	// ranks in one list.
	sent, waits := g.sentBuf[:0], g.waits[:0]
	total := 0
	for lr := range ranks {
		first := len(sent)
		for k := range ranks[lr].ops {
			op := &ranks[lr].ops[k]
			x := opNode[lr][k]
			switch {
			case op.class == ncSend:
				sent = append(sent, g.other[x])
			case op.class == ncJoin && op.waitSends && len(sent) > first:
				waits = append(waits, extraWait{x - 1, int32(first), int32(len(sent))})
				total += len(sent) - first
			}
		}
	}
	g.sentBuf, g.waits = sent, waits
	for j := range joins {
		total += len(arrivals[j])
	}
	g.extraOff = grown(g.extraOff, n+1)
	g.extraOff[0] = 0
	g.extra = slices.Grow(g.extra[:0], total)
	at := 0
	for v := range n {
		switch {
		case v >= n-joins:
			g.extra = append(g.extra, arrivals[v-(n-joins)]...)
		case at < len(waits) && waits[at].v == int32(v):
			g.extra = append(g.extra, sent[waits[at].lo:waits[at].hi]...)
			at++
		}
		g.extraOff[v+1] = int32(len(g.extra))
	}
}

// extraWait is an arrival node v of a join that waits for its rank's
// sends so far: their receives are sent[lo:hi] (buildExtras).
type extraWait struct{ v, lo, hi int32 }

// pushEmpty returns s with one more list, empty (the array a list there
// had before kept for appending).
func pushEmpty(s [][]int32) [][]int32 {
	if len(s) < cap(s) {
		s = s[:len(s)+1]
		s[len(s)-1] = s[len(s)-1][:0]
		return s
	}
	return append(s, nil)
}

// emptied returns s with length n, its lists emptied (their arrays kept
// for appending).
func emptied(s [][]int32, n int) [][]int32 {
	if cap(s) < n {
		s = append(s[:cap(s)], make([][]int32, n-cap(s))...)
	}
	s = s[:n]
	for i := range s {
		s[i] = s[i][:0]
	}
	return s
}

// numNodes is the number of nodes.
func (g *stepGraph) numNodes() int { return len(g.class) }

// extras returns v's extra in-edges.
func (g *stepGraph) extras(v int32) []int32 { return g.extra[g.extraOff[v]:g.extraOff[v+1]] }

// topo sets g.order, or fails when the graph has a cycle: programs that
// deadlock whatever the durations.
func (g *stepGraph) topo() error {
	n := g.numNodes()
	indeg := zeroed(g.scratch32[0], n)
	succOff := zeroed(g.scratch32[1], n+1)
	each := func(v int32, fn func(u int32)) { // in-edges of v
		if u := g.prev[v]; u >= 0 {
			fn(u)
		}
		switch g.class[v] {
		case ncRecv, ncJoin:
			fn(g.other[v])
		}
		for _, u := range g.extras(v) {
			fn(u)
		}
	}
	for v := range int32(n) {
		each(v, func(u int32) { indeg[v]++; succOff[u+1]++ })
	}
	for i := range n {
		succOff[i+1] += succOff[i]
	}
	succ := grown(g.scratch32[2], int(succOff[n]))
	fill := append(g.scratch32[3][:0], succOff[:n]...)
	defer func() { g.scratch32 = [4][]int32{indeg, succOff, succ, fill} }()
	for v := range int32(n) {
		each(v, func(u int32) { succ[fill[u]] = v; fill[u]++ })
	}
	// Depth first: the ready nodes wait on a stack, and a node's program
	// successor is pushed last, so the order follows one rank's program
	// (consecutive nodes) until it blocks on another rank. Any
	// topological order gives the same times; this one lets run and
	// measure read and write their per-node arrays mostly in sequence
	// instead of hopping across every rank of the job at each level.
	g.order = slices.Grow(g.order[:0], n)
	stack := make([]int32, 0, 64)
	for v := int32(n) - 1; v >= 0; v-- {
		if indeg[v] == 0 {
			stack = append(stack, v)
		}
	}
	for len(stack) > 0 {
		u := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		g.order = append(g.order, u)
		next := int32(-1)
		for _, v := range succ[succOff[u]:succOff[u+1]] {
			if indeg[v]--; indeg[v] == 0 {
				if g.prev[v] == u {
					next = v
					continue
				}
				stack = append(stack, v)
			}
		}
		if next >= 0 {
			stack = append(stack, next)
		}
	}
	if len(g.order) != n {
		for v := range int32(n) {
			if indeg[v] > 0 && g.owner[v] >= 0 {
				return fmt.Errorf("step %d: the ranks' P2P and collective orders deadlock (rank %d waits at its %s)",
					g.step, g.ranks[g.owner[v]].rank, g.kind[v])
			}
		}
		return fmt.Errorf("step %d: the ranks' P2P and collective orders deadlock", g.step)
	}
	return nil
}

// anchor is the time v frees its rank for the next op: a send's post, any
// other node's end.
func (g *stepGraph) anchor(v int32, s, e []int64) int64 {
	if g.class[v] == ncSend {
		return s[v]
	}
	return e[v]
}

// measure derives durations, launch delays and begin times from the ops'
// measured times (see stepGraph), in topological order.
func (g *stepGraph) measure() {
	n := g.numNodes()
	sm, em := grown(g.scratch64[0], n), grown(g.scratch64[1], n) // every node's set below, in order
	g.scratch64 = [2][]int64{sm, em}
	op := g.opOf
	for _, v := range g.order {
		var ready int64 = trace.NoTime
		if u := g.prev[v]; u >= 0 {
			ready = g.anchor(u, sm, em)
		}
		for _, u := range g.extras(v) {
			if g.class[v] == ncArrive {
				ready = max(ready, em[u])
			}
		}
		var at int64 // the measured time the delay leads to
		switch g.class[v] {
		case ncCompute, ncOther:
			o := op(v)
			sm[v], em[v] = o.start, o.end
			g.meas[v] = max(o.end-o.start, 0)
			at = o.start
		case ncSend:
			o := op(v)
			sm[v], em[v] = o.post, o.post
			at = o.post
		case ncRecv:
			// A receive's start is explained by its rank and by its
			// sender: the trace may record the transfer's start rather
			// than the post, so only the part after both is a delay.
			o := op(v)
			so := op(g.other[v])
			sm[v], em[v] = max(o.post, so.post), o.end
			g.meas[v] = max(o.end-sm[v], 0)
			at = o.post
			if g.prev[v] >= 0 {
				ready = max(ready, so.post)
			}
		case ncArrive:
			o := op(v)
			sm[v], em[v] = o.post, o.post
			at = o.post
		case ncBarrier:
			b := int64(trace.NoTime)
			for _, u := range g.extras(v) {
				b = max(b, em[u])
			}
			sm[v], em[v] = b, b
			continue
		case ncJoin:
			o := op(v)
			b := em[g.other[v]]
			sm[v], em[v] = b, max(o.end, b)
			g.meas[v] = max(o.end-b, 0)
			g.fromArrival[v] = o.start < b
			continue
		}
		if g.prev[v] < 0 {
			g.base[v] = at // first op of its rank (no earlier send: no extras)
			continue
		}
		g.delay[v] = max(at-ready, 0)
	}
}

// opOf returns the gOp a node came from (an arrival and its join share
// one); nil for a barrier.
func (g *stepGraph) opOf(v int32) *gOp {
	if g.owner[v] < 0 {
		return nil
	}
	return &g.ranks[g.owner[v]].ops[g.opIdx[v]]
}

// run re-times the graph with durations dur (indexed by node; a send's
// entry is ignored, a receive's is its transfer) and launch delays delay
// (nil: none), and returns the step's span: first start to last end of
// the ops' rows (see rowTimes), ns. It leaves each node's times and the
// in-edge that bound its start in g.s, g.e and g.crit, valid until the
// next run. Re-timing is monotone: no shorter duration or delay makes any
// op end later.
func (g *stepGraph) run(dur, delay []int64) (startNs, endNs int64) {
	n := g.numNodes()
	if len(g.s) != n {
		g.s, g.e, g.crit = grown(g.s, n), grown(g.e, n), grown(g.crit, n)
	}
	s, e, crit := g.s, g.e, g.crit
	for _, v := range g.order {
		ready, c := g.base[v], int32(-1)
		if u := g.prev[v]; u >= 0 {
			ready, c = g.anchor(u, s, e), u
		}
		var d int64
		if delay != nil {
			d = delay[v]
		}
		switch g.class[v] {
		case ncCompute, ncOther:
			s[v] = ready + d
			e[v] = s[v] + dur[v]
		case ncSend:
			s[v] = ready + d
			e[v] = s[v]
		case ncRecv:
			snd := g.other[v]
			if s[snd] >= ready {
				ready, c = s[snd], snd
			}
			s[v] = ready + d
			e[v] = s[v] + dur[v]
		case ncArrive:
			for _, u := range g.extras(v) {
				if e[u] > ready {
					ready, c = e[u], u
				}
			}
			s[v] = ready + d
			e[v] = s[v]
		case ncBarrier:
			ready = trace.NoTime
			for _, u := range g.extras(v) {
				if e[u] > ready {
					ready, c = e[u], u
				}
			}
			s[v], e[v] = ready, ready
		case ncJoin:
			b := g.other[v]
			s[v], c = e[b], b
			e[v] = s[v] + dur[v]
		}
		crit[v] = c
	}
	startNs, endNs = int64(math.MaxInt64), int64(math.MinInt64)
	for v := range int32(n) {
		if rs, re, ok := g.rowTimes(v); ok {
			startNs, endNs = min(startNs, rs), max(endNs, re)
		}
	}
	return startNs, endNs
}

// rowTimes returns the replayed start and end of the trace row node v
// stands for, as the trace would record them: a send's row spans its
// transfer (from the later post to the receive's end), a join's from the
// barrier to its end, or from the rank's arrival when the trace's row
// starts there (fromArrival); ok is false for arrivals and barriers, which
// are no row.
func (g *stepGraph) rowTimes(v int32) (s, e int64, ok bool) {
	switch g.class[v] {
	case ncArrive, ncBarrier:
		return 0, 0, false
	case ncSend:
		r := g.other[v]
		return g.s[r], g.e[r], true
	case ncJoin:
		if g.fromArrival[v] {
			return g.s[v-1], g.e[v], true // v-1 is its arrival
		}
	}
	return g.s[v], g.e[v], true
}
