package hang

import (
	"github.com/ppprof/ppprof/trace"
)

// barrier is the optimizer step of one step seen as a wait-for node: a
// rank that posted OPT of the step waits for it, and it waits for every
// rank that has not posted OPT of the step.
type barrier struct {
	step  int64
	waits []int32 // ranks that have not reached it, increasing
	coll  int32   // 1 + the collective (collective.go) of a collective node; 0 for an optimizer barrier
}

// Nodes of the wait-for graph are the ranks (0..len(ranks)-1) followed by
// the barriers: the optimizer barriers, then the collective nodes
// (collective_graph.go), which are barriers of the members that have not
// joined a collective.
func (a *analysis) numNodes() int { return len(a.ranks) + len(a.barriers) }

func (a *analysis) isBarrier(v int32) bool { return int(v) >= len(a.ranks) }

func (a *analysis) node(v int32) Node {
	if a.isBarrier(v) {
		b := &a.barriers[int(v)-len(a.ranks)]
		if b.coll > 0 {
			return a.collNodeInfo(b.coll - 1)
		}
		return Node{Rank: trace.NoRank, Barrier: true, Step: b.step}
	}
	return Node{Rank: trace.Rank(v), Step: -1}
}

// succ returns the e-th node v waits for, and whether there is one.
func (a *analysis) succ(v int32, e int) (int32, bool) {
	if a.isBarrier(v) {
		w := a.barriers[int(v)-len(a.ranks)].waits
		if e < len(w) {
			return w[e], true
		}
		return -1, false
	}
	if e == 0 && a.ranks[v].waitsFor >= 0 {
		return a.ranks[v].waitsFor, true
	}
	return -1, false
}

// buildGraph gives every blocked rank its wait-for edge (or marks it
// terminal), builds the barrier nodes, finds the cycles among the nodes
// blocked ranks reach, and refines stopped ranks that someone waits for
// into exited or silent.
func (a *analysis) buildGraph() {
	t := a.t
	// 1. Barrier nodes, one per step some rank waits in.
	a.barrierOf = map[int64]int32{}
	for r := range a.ranks {
		ri := &a.ranks[r]
		if ri.state != StateBarrier {
			continue
		}
		s := t.Step[ri.block]
		id, ok := a.barrierOf[s]
		if !ok {
			id = int32(len(a.barriers))
			a.barrierOf[s] = id
			a.barriers = append(a.barriers, barrier{step: s})
		}
		ri.waitsFor = int32(len(a.ranks)) + id
	}
	for bi := range a.barriers {
		b := &a.barriers[bi]
		for r := range a.ranks {
			// A rank with rows of a later step went past it, and one that
			// records no OPT at all and finished the step with nothing
			// pending is done with it: neither is waited for.
			ri := &a.ranks[r]
			passed := ri.maxStep > b.step ||
				ri.present && ri.lastOptStep < 0 && ri.pending == 0 && ri.maxStep == b.step
			if ri.lastOptStep < b.step && !passed {
				b.waits = append(b.waits, int32(r))
			}
		}
	}

	// 2. Rank edges.
	for r := range a.ranks {
		ri := &a.ranks[r]
		switch ri.state {
		case StateRecv, StateSend:
			a.p2pEdge(ri)
		case StateCompute:
			ri.term = termCompute
		case StateCollective:
			a.collEdge(ri)
		case StateIdle:
			ri.term = termIdle
		case StateDone:
			ri.term = termStopped
		case StateAbsent:
			ri.term = termAbsent
		}
	}

	a.chainStuck()

	// 3. Cycles among what blocked ranks reach.
	a.tarjan()

	// 4. Stopped ranks that others wait for left early, or went silent.
	for r := range a.ranks {
		ri := &a.ranks[r]
		if ri.state == StateDone && a.reached[r] {
			ri.state = StateSilent
			if ri.lastDone >= 0 && isOpt(t.Kind[ri.lastDone]) {
				ri.state = StateExited
			}
		}
	}
}

// p2pEdge sets the wait-for edge of a rank blocked in a receive, or
// waiting for a send, at row ri.block.
//
// An unmatched op waits for the peer, who must post its side. A matched
// pair that never completed is judged by what both sides show: byte counts
// that differ can never complete (terminal); a peer that stopped or is
// stuck in compute is waited for, as is the receiver of a rank that only
// waits for its sends (it finished its actions: it is alive); otherwise
// the side that started alone,
// or posted last without the transfer starting, was alive when the other
// was not, so the other is waited for; a peer blocked in an op before its
// side never got to it and is waited for; a transfer both sides started
// (or a peer that went on) leaves this rank stuck in it, terminal.
func (a *analysis) p2pEdge(ri *rankInfo) {
	t := a.t
	b := ri.block
	p := int(a.partner(b))
	peer := t.Peer[b]
	if p < 0 {
		ri.waitsFor = int32(peer)
		return
	}
	s, r := b, p
	if t.Kind[b].IsRecv() {
		s, r = p, b
	}
	if a.badPair(s, r) {
		ri.term = termBadPair
		return
	}
	ps := a.ranks[peer].state
	bStarted, pStarted := t.StartNs[b] != trace.NoTime, t.StartNs[p] != trace.NoTime
	switch {
	case ps == StateCompute || ps == StateDone:
		ri.waitsFor = int32(peer)
	case t.EndNs[p] != trace.NoTime:
		ri.term = termStuck // the peer's side completed and ours did not
	case a.blockedBefore(peer, p):
		// The peer posted its side ahead of its work (asynchronous
		// collectives and P2P, as a Flight Recorder dump shows them) and
		// is blocked in an earlier op: it never got to its side.
		ri.waitsFor = int32(peer)
	case ri.state == StateSend:
		// It finished its actions and waits for its sends: it is alive,
		// and waits for the receiver's side.
		ri.waitsFor = int32(peer)
	case bStarted && !pStarted:
		ri.term = termStuck
	case pStarted && !bStarted:
		ri.waitsFor = int32(peer)
	case !bStarted && !pStarted && t.IssueNs[p] < t.IssueNs[b]:
		ri.waitsFor = int32(peer)
	default:
		ri.term = termStuck
	}
}

// blockedBefore reports whether rank r is blocked in an op (not a send)
// that comes before its row p: its work never got to p.
func (a *analysis) blockedBefore(r trace.Rank, p int) bool {
	b := a.ranks[r].block
	return b >= 0 && b < p && !a.t.Kind[b].IsSend()
}

// chainStuck links ranks stuck in transfers: a rank stuck in a transfer
// with a peer that is itself stuck in a transfer with a third rank is
// explained by that peer (the peer stopped, so its side never finished),
// and waits for it. Ranks stuck with each other in a loop (two ranks stuck
// in transfers with one another) stay terminal: the trace cannot tell which
// of them stopped.
func (a *analysis) chainStuck() {
	peerOf := func(r int) int {
		ri := &a.ranks[r]
		if ri.term != termStuck {
			return -1
		}
		if p := a.partner(ri.block); p >= 0 && a.ranks[a.t.Rank[p]].term == termStuck {
			return int(a.t.Rank[p])
		}
		return -1
	}
	// Functional graph r -> peerOf(r): ranks on its loops stay terminal.
	const (
		unseen = iota
		active
		finished
	)
	color := map[int]uint8{}
	onLoop := map[int]bool{}
	for r := range a.ranks {
		if a.ranks[r].term != termStuck || color[r] != unseen {
			continue
		}
		var path []int
		v := r
		for v >= 0 && color[v] == unseen {
			color[v] = active
			path = append(path, v)
			v = peerOf(v)
		}
		if v >= 0 && color[v] == active {
			for i := len(path) - 1; i >= 0; i-- {
				onLoop[path[i]] = true
				if path[i] == v {
					break
				}
			}
		}
		for _, w := range path {
			color[w] = finished
		}
	}
	for r := range a.ranks {
		if p := peerOf(r); p >= 0 && !onLoop[r] {
			a.ranks[r].term, a.ranks[r].waitsFor = termNone, int32(p)
		}
	}
}

// tarjan runs Tarjan's strongly connected components algorithm, without
// recursion, from every rank with a pending op. It sets a.reached for each
// node visited and keeps the components of more than one node (cycles).
func (a *analysis) tarjan() {
	n := a.numNodes()
	a.reached = make([]bool, n)
	index := make([]int32, n) // 1-based visit order; 0 = unvisited
	low := make([]int32, n)
	onStack := make([]bool, n)
	var stack []int32
	type frame struct {
		v int32
		e int
	}
	var frames []frame
	next := int32(0)
	visit := func(v int32) {
		next++
		index[v], low[v] = next, next
		a.reached[v] = true
		stack = append(stack, v)
		onStack[v] = true
		frames = append(frames, frame{v, 0})
	}
	for r := range a.ranks {
		if a.ranks[r].pending == 0 || index[r] != 0 {
			continue
		}
		visit(int32(r))
		for len(frames) > 0 {
			f := &frames[len(frames)-1]
			if w, ok := a.succ(f.v, f.e); ok {
				f.e++
				switch {
				case index[w] == 0:
					visit(w)
				case onStack[w]:
					low[f.v] = min(low[f.v], index[w])
				}
				continue
			}
			v := f.v
			frames = frames[:len(frames)-1]
			if len(frames) > 0 {
				u := frames[len(frames)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			i := len(stack) - 1
			for stack[i] != v {
				i--
			}
			comp := stack[i:]
			for _, w := range comp {
				onStack[w] = false
			}
			if len(comp) > 1 {
				a.cycles = append(a.cycles, append([]int32(nil), comp...))
			}
			stack = stack[:i]
		}
	}
}

// simpleCycle walks one cycle inside the strongly connected component
// comp, from its lowest rank, and returns it with the first node repeated
// at the end.
func (a *analysis) simpleCycle(comp []int32) []Node {
	in := make(map[int32]bool, len(comp))
	start := int32(-1)
	for _, v := range comp {
		in[v] = true
		if !a.isBarrier(v) && (start < 0 || v < start) {
			start = v
		}
	}
	pos := map[int32]int{}
	var path []int32
	v := start
	for {
		if p, ok := pos[v]; ok {
			path = append(path[p:], v)
			break
		}
		pos[v] = len(path)
		path = append(path, v)
		next := int32(-1)
		for e := 0; ; e++ {
			w, ok := a.succ(v, e)
			if !ok {
				break
			}
			if in[w] {
				next = w
				break
			}
		}
		if next < 0 { // cannot happen in a strongly connected component
			break
		}
		v = next
	}
	out := make([]Node, len(path))
	for i, v := range path {
		out[i] = a.node(v)
	}
	return out
}

// chainTo returns the longest wait-for chain that ends at node root: from
// the reached node farthest from it (breadth-first on the reversed edges)
// to root.
func (a *analysis) chainTo(root int32) []Node {
	n := a.numNodes()
	// Reverse edges of reached nodes, in compressed form.
	start := make([]int32, n+1)
	for v := int32(0); int(v) < n; v++ {
		if !a.reached[v] {
			continue
		}
		for e := 0; ; e++ {
			w, ok := a.succ(v, e)
			if !ok {
				break
			}
			start[w+1]++
		}
	}
	for i := 1; i <= n; i++ {
		start[i] += start[i-1]
	}
	fill := append([]int32(nil), start[:n]...)
	from := make([]int32, start[n])
	for v := int32(0); int(v) < n; v++ {
		if !a.reached[v] {
			continue
		}
		for e := 0; ; e++ {
			w, ok := a.succ(v, e)
			if !ok {
				break
			}
			from[fill[w]] = v
			fill[w]++
		}
	}
	next := make([]int32, n) // toward root
	seen := make([]bool, n)
	seen[root] = true
	queue := []int32{root}
	far := root
	for len(queue) > 0 {
		w := queue[0]
		queue = queue[1:]
		far = w
		for _, v := range from[start[w]:start[w+1]] {
			if !seen[v] {
				seen[v] = true
				next[v] = w
				queue = append(queue, v)
			}
		}
	}
	var out []Node
	for v := far; ; v = next[v] {
		out = append(out, a.node(v))
		if v == root {
			break
		}
	}
	return out
}

// waiters returns the ranks whose wait-for edge points at node v directly.
func (a *analysis) waiters(v int32) []trace.Rank {
	var out []trace.Rank
	for r := range a.ranks {
		if a.ranks[r].waitsFor == v {
			out = append(out, trace.Rank(r))
		}
	}
	return out
}
