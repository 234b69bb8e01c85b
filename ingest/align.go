package ingest

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"time"

	"github.com/ppprof/ppprof/internal/hugepage"
	"github.com/ppprof/ppprof/internal/seqindex"
	"github.com/ppprof/ppprof/trace"
)

// ClockOffset is the offset alignClocks added to the times of one file of
// another tool's format (one clock domain: a Kineto rank file, a Flight
// Recorder dump, a whole Megatron timeline).
type ClockOffset struct {
	Path     string
	Ranks    []trace.Rank
	OffsetNs int64  // added to every issue, start and end time of the file's rows
	Method   string // "reference", "collectives", "p2p causality", "collectives, p2p causality", or "none" (nothing to align with: offset 0)
	// Collectives is how many collectives this file shares with the file it
	// was aligned against; SpreadNs the median absolute deviation of their
	// end-time differences (small: the ranks left together, as they must;
	// large: the estimate is rough).
	Collectives int
	SpreadNs    int64
	// LowNs and HighNs bound the offset relative to the reference file by
	// causality (a receive cannot end before its send was posted), from
	// the P2P pairs the two files share, in both directions;
	// math.MinInt64 / math.MaxInt64 when unbounded.
	LowNs, HighNs int64
	P2PPairs      int // matched send/receive pairs behind the bounds
}

// allPairsDomains is the most files of one collective whose every pair
// gets an estimate (a tensor-parallel group's 8, a node's).
const allPairsDomains = 16

// alignClocks puts the files of other tools on one time base, in place:
//
//  1. the file holding the lowest rank is the reference (offset 0); a file
//     is one clock domain (its ranks share a clock, or the tool that wrote
//     it put them on one);
//  2. collectives (same group and group_seq, or same position in the
//     group when group_seq is unknown) end together on every rank: the
//     median difference of their end times estimates each file's offset
//     from a file it shares collectives with;
//  3. causality then bounds the offsets: for each matched P2P pair (sends
//     and receives of a pair of ranks matched in issue order, as NCCL
//     does), the receive ends after the send was posted. P2P in both
//     directions bounds an offset on both sides. Offsets that break a bound are moved
//     the least that satisfies it (Bellman-Ford on the difference
//     constraints); inconsistent bounds (clocks that drift within the
//     trace) leave the step-2 estimate and say so;
//  4. times are shifted; what was applied is returned, and each non-zero
//     offset is a warning.
//
// Files of collector formats (Arrow, CSV, JSONL) are never shifted.
//
// A collective shared by more than allPairsDomains files gives an estimate
// for each file against the lowest of them only, so that the work grows
// with the files, not with their square (a collective of the world group
// of 4096 ranks' dumps).
//
// It also returns the P2P rows of Flight Recorder dumps whose partners fell
// out of their peers' ring buffers (windowDrops, on the collectives'
// estimate of the offsets; nil when none): the causality bounds do not
// pair them, and Open drops them.
func alignClocks(t *trace.Trace, parts []*part) ([]ClockOffset, []Warning, *windowDrop) {
	// 1. Domains.
	var doms []*part
	for _, p := range parts {
		if p.external && len(p.info.Ranks) > 0 {
			doms = append(doms, p)
		}
	}
	domainOf := newRankDomains(doms)
	if len(doms) < 2 {
		return nil, nil, windowDrops(t, parts, nil)
	}
	n := len(doms)
	ref := 0
	for d, p := range doms {
		if p.info.Ranks[0] < doms[ref].info.Ranks[0] {
			ref = d
		}
	}

	// 2. Collective end-time differences between domains. Each
	// collective's ends, one per domain (its first row's), in a list.
	type rankGroup struct {
		r trace.Rank
		g trace.Str
	}
	// The collectives' rows, twice: the groups' sequence numbers first,
	// for an index of the collectives by number (seqindex), then each
	// row's end into its collective's list.
	var ends [][]domEnd
	gids := map[trace.Str]int32{}
	lastG, lastID := trace.Str(0), int32(-1)
	var ordinal map[rankGroup]int64
	each := func(fn func(i, d int, gid int32, seq int64)) {
		clear(ordinal)
		for i := 0; i < t.Len(); i++ {
			if !t.Kind[i].IsCollective() || t.Group[i] == 0 || t.EndNs[i] == trace.NoTime {
				continue
			}
			d, ok := domainOf.get(t.Rank[i])
			if !ok {
				continue
			}
			seq := t.GroupSeq[i]
			if seq < 0 {
				if ordinal == nil {
					ordinal = map[rankGroup]int64{}
				}
				k := rankGroup{t.Rank[i], t.Group[i]}
				seq = ordinal[k]
				ordinal[k]++
			}
			if g := t.Group[i]; g != lastG || lastID < 0 {
				id, ok := gids[g]
				if !ok {
					id = int32(len(gids))
					gids[g] = id
				}
				lastG, lastID = g, id
			}
			fn(i, d, lastID, seq)
		}
	}
	// The first pass also counts each group's domains (rows come rank by
	// rank: a domain's rows together, or a domain counted again, which
	// only wastes room), the most ends a collective of the group can have:
	// each collective's list is cut at that size from blocks of one
	// array, not grown end by end (a 16384-rank job's dumps: 1 s).
	var seqs seqindex.Ranges
	var groupDoms, lastDom []int
	rows := 0
	each(func(_, d int, gid int32, seq int64) {
		rows++
		seqs.Note(gid, seq)
		for int(gid) >= len(groupDoms) {
			groupDoms, lastDom = append(groupDoms, 0), append(lastDom, -1)
		}
		if lastDom[gid] != d {
			lastDom[gid] = d
			groupDoms[gid]++
		}
	})
	index := seqs.Build(true) // collective -> its list in ends
	// Room for every collective at once: grown append by append, the
	// lists' headers were 0.9 s of a 16384-rank job's dumps' 7 s of
	// aligning, on one core. In huge pages, as the large arrays below
	// (internal/hugepage: a fresh 4 KiB page is a fault of its own; a
	// 16384-rank job's dumps took 42K fewer faults, 13% of them).
	ends = hugepage.Make[[]domEnd](int(min(seqs.Most(), int64(rows))))[:0]
	var block []domEnd
	each(func(i, d int, gid int32, seq int64) {
		x, ok := index.Get(gid, seq)
		if !ok {
			x = int32(len(ends))
			index.Put(gid, seq, x)
			n := groupDoms[gid]
			if n > len(block) {
				block = make([]domEnd, max(n, 1<<16))
			}
			ends = append(ends, block[:0:n])
			block = block[n:]
		}
		l := ends[x]
		// A domain's rows of one collective are usually together: its
		// last entry first.
		dup := len(l) > 0 && l[len(l)-1].d == d
		for j := 0; j < len(l) && !dup; j++ {
			dup = l[j].d == d
		}
		if !dup {
			ends[x] = append(l, domEnd{d, t.EndNs[i]})
		}
	})
	// The pairs each collective gives an estimate for: every pair of its
	// domains, or, for a collective of many files (a data-parallel or
	// world group of a fleet), each against the lowest one (4096 dumps
	// would make 8.4M pairs a collective). Collectives of the same domains
	// (a group's) share their pairs' lists, found once. The collectives of
	// each set of domains are counted first, and every pair's list cut at
	// its size from one array: grown append by append, the lists were 3.3 s
	// of the 7.6 s of aligning a 16384-rank job's dumps.
	diffs := map[[2]int]int32{} // (a, b) -> its list in lists: x_b - x_a estimates
	var want []int              // per list, its estimates
	pairsOf := map[string]int32{}
	var setSlots [][]int32 // per set of domains, its pairs' lists in the order of a collective's pairs
	var setN []int         // per set, its collectives
	setOf := make([]int32, len(ends))
	var sig []byte
	span := int64(0) // the widest collective: its latest end less its earliest
	for x, l := range ends {
		slices.SortFunc(l, func(x, y domEnd) int { return cmp.Compare(x.d, y.d) })
		sig = sig[:0]
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		for _, e := range l {
			sig = binary.AppendUvarint(sig, uint64(e.d))
			lo, hi = min(lo, e.end), max(hi, e.end)
		}
		if len(l) > 0 {
			w := hi - lo
			if w < 0 { // past int64: as wide as can be
				w = math.MaxInt64
			}
			span = max(span, w)
		}
		set, ok := pairsOf[string(sig)]
		if !ok {
			var slots []int32
			for i := range l {
				for j := i + 1; j < len(l); j++ {
					k := [2]int{l[i].d, l[j].d}
					id, ok := diffs[k]
					if !ok {
						id = int32(len(want))
						diffs[k] = id
						want = append(want, 0)
					}
					slots = append(slots, id)
				}
				if len(l) > allPairsDomains {
					break
				}
			}
			set = int32(len(setSlots))
			pairsOf[string(sig)] = set
			setSlots, setN = append(setSlots, slots), append(setN, 0)
		}
		setOf[x] = set
		setN[set]++
	}
	total := 0
	for set, slots := range setSlots {
		for _, id := range slots {
			want[id] += setN[set]
			total += setN[set]
		}
	}
	type edge struct {
		to     int
		offset int64 // x_to - x_from
		n      int
		spread int64
	}
	adj := make([][]edge, n)
	// Each pair's median and spread, on every core (a 16384-rank job's
	// dumps: 1.1 s on one).
	keys := make([][2]int, 0, len(diffs))
	for k := range diffs {
		keys = append(keys, k)
	}
	ids := make([]int32, len(keys))
	for i, k := range keys {
		ids[i] = diffs[k]
	}
	plan := pairPlan{ends: ends, setSlots: setSlots, setOf: setOf, want: want, total: total, ids: ids}
	var meds [][2]int64
	if span < 1<<30 { // every difference, and its deviation, fits in 32 bits: half the memory
		meds = pairMedians[int32](plan)
	} else {
		meds = pairMedians[int64](plan)
	}
	for i, k := range keys {
		med, mad, cnt := meds[i][0], meds[i][1], want[ids[i]]
		adj[k[0]] = append(adj[k[0]], edge{k[1], med, cnt, mad})
		adj[k[1]] = append(adj[k[1]], edge{k[0], -med, cnt, mad})
	}
	for d := range adj {
		sort.Slice(adj[d], func(i, j int) bool {
			if adj[d][i].n != adj[d][j].n {
				return adj[d][i].n > adj[d][j].n
			}
			return adj[d][i].to < adj[d][j].to
		})
	}
	x := make([]int64, n)
	out := make([]ClockOffset, n)
	for d, p := range doms {
		out[d] = ClockOffset{Path: p.info.Path, Ranks: p.info.Ranks, Method: "none", LowNs: math.MinInt64, HighNs: math.MaxInt64}
	}
	out[ref].Method = "reference"
	seen := make([]bool, n)
	seen[ref] = true
	queue := []int{ref}
	for len(queue) > 0 {
		a := queue[0]
		queue = queue[1:]
		for _, e := range adj[a] {
			if seen[e.to] {
				continue
			}
			seen[e.to] = true
			x[e.to] = x[a] + e.offset
			out[e.to].Method, out[e.to].Collectives, out[e.to].SpreadNs = "collectives", e.n, e.spread
			queue = append(queue, e.to)
		}
	}

	drops := windowDrops(t, parts, func(r trace.Rank) int64 {
		if d, ok := domainOf.get(r); ok {
			return x[d]
		}
		return 0
	})

	// 3. Causality bounds from matched P2P pairs: x_b - x_a >= low[a][b].
	low := map[[2]int]int64{}
	pairs := map[[2]int]int{}
	bound := func(a, b int, v int64) {
		k := [2]int{a, b}
		if old, ok := low[k]; !ok || v > old {
			low[k] = v
		}
		pairs[k]++
	}
	var dropped []bool
	if drops != nil {
		dropped = drops.rows
	}
	sends, recvs := p2pChannels(t, dropped)
	for k, ss := range sends {
		da, okA := domainOf.get(k.src)
		db, okB := domainOf.get(k.dst)
		if !okA || !okB || da == db {
			continue
		}
		rs := recvs[k]
		for j := 0; j < len(ss) && j < len(rs); j++ {
			s, r := ss[j], rs[j]
			if t.EndNs[r] != trace.NoTime {
				bound(da, db, t.IssueNs[s]-t.EndNs[r]) // recv ends after the send was posted
			}
			// The converse (a send ends after its receive was posted) holds
			// for rendezvous transfers only: Gloo and small NCCL messages
			// may complete eagerly, so it is not used.
		}
	}
	var warns []Warning
	if len(low) > 0 {
		y := append([]int64(nil), x...)
		feasible := false
		for round := 0; round <= n; round++ {
			changed := false
			for k, v := range low {
				if y[k[1]] < y[k[0]]+v {
					y[k[1]] = y[k[0]] + v
					changed = true
				}
			}
			if !changed {
				feasible = true
				break
			}
		}
		if feasible {
			for d := range y {
				if d != ref && y[d]-y[ref] != x[d]-x[ref] {
					if out[d].Method == "collectives" {
						out[d].Method = "collectives, p2p causality"
					} else {
						out[d].Method = "p2p causality"
					}
				}
			}
			shift := y[ref]
			for d := range y {
				x[d] = y[d] - shift
			}
		} else {
			warns = append(warns, Warning{Path: doms[ref].info.Path, Message: "clock alignment: the P2P causality bounds contradict each other (clocks drifting within the trace?); kept the collective-based offsets"})
		}
		for d := range doms {
			if d == ref {
				continue
			}
			if v, ok := low[[2]int{ref, d}]; ok {
				out[d].LowNs = v
				out[d].P2PPairs += pairs[[2]int{ref, d}]
			}
			if v, ok := low[[2]int{d, ref}]; ok {
				out[d].HighNs = -v
				out[d].P2PPairs += pairs[[2]int{d, ref}]
			}
			if out[d].Method == "none" && out[d].P2PPairs > 0 {
				out[d].Method = "p2p causality"
			}
		}
	}

	// 4. Shift.
	for d := range doms {
		out[d].OffsetNs = x[d]
	}
	// In ranges of rows, on every core.
	nrows := t.Len()
	workers := min(runtime.GOMAXPROCS(0), max(nrows/p2pChannelRows, 1))
	eachParallel(workers, func(w int) {
		for i := w * nrows / workers; i < (w+1)*nrows/workers; i++ {
			d, ok := domainOf.get(t.Rank[i])
			if !ok || x[d] == 0 {
				continue
			}
			t.IssueNs[i] += x[d]
			if t.StartNs[i] != trace.NoTime {
				t.StartNs[i] += x[d]
			}
			if t.EndNs[i] != trace.NoTime {
				t.EndNs[i] += x[d]
			}
		}
	})
	for d, o := range out {
		if o.OffsetNs == 0 {
			continue
		}
		msg := fmt.Sprintf("clock: times shifted by %s to line up with %s (%s", fmtDuration(o.OffsetNs), doms[ref].info.Path, o.Method)
		if o.Collectives > 0 {
			msg += fmt.Sprintf("; %d shared collectives, spread %s", o.Collectives, fmtDuration(o.SpreadNs))
		}
		if o.P2PPairs > 0 {
			msg += fmt.Sprintf("; %d P2P pairs bound it to [%s, %s]", o.P2PPairs, fmtBound(o.LowNs), fmtBound(o.HighNs))
		}
		warns = append(warns, Warning{Path: doms[d].info.Path, Message: msg + ")"})
	}
	return out, warns, drops
}

// rankIndex maps ranks to small integers (the clock domain of a rank, the
// index of a wrapped dump's rank): an array by rank, looked up for every
// row, or a map when the ranks are too sparse for one.
type rankIndex struct {
	arr []int32 // -1: none
	m   map[trace.Rank]int
}

// maxDenseRank bounds the array of a rankIndex (16 MiB).
const maxDenseRank = 1 << 22

// newRankIndex indexes the ranks each gives (called twice), each to its
// value; a rank given twice keeps the last.
func newRankIndex(each func(add func(r trace.Rank, v int))) rankIndex {
	top, bottom := trace.Rank(-1), trace.Rank(0)
	each(func(r trace.Rank, _ int) { top, bottom = max(top, r), min(bottom, r) })
	var ri rankIndex
	if top < maxDenseRank && bottom >= 0 {
		ri.arr = make([]int32, top+1)
		for i := range ri.arr {
			ri.arr[i] = -1
		}
		each(func(r trace.Rank, v int) { ri.arr[r] = int32(v) })
	} else {
		ri.m = map[trace.Rank]int{}
		each(func(r trace.Rank, v int) { ri.m[r] = v })
	}
	return ri
}

// newRankDomains is the clock domain (the index in doms) of each rank.
func newRankDomains(doms []*part) rankIndex {
	return newRankIndex(func(add func(trace.Rank, int)) {
		for d, p := range doms {
			for _, r := range p.info.Ranks {
				add(r, d)
			}
		}
	})
}

func (ri *rankIndex) get(r trace.Rank) (int, bool) {
	if ri.m != nil {
		v, ok := ri.m[r]
		return v, ok
	}
	if r < 0 || int(r) >= len(ri.arr) || ri.arr[r] < 0 {
		return 0, false
	}
	return int(ri.arr[r]), true
}

// chanKey is a P2P channel: the sends of src to dst, the receives of dst
// from src.
type chanKey struct{ src, dst trace.Rank }

// p2pChannels lists the rows of each channel's sends and receives, in row
// order, leaving out the rows skip marks (nil: none). A send is SEND_F,
// SEND_B or another tool's SEND; a receive alike. The rows are counted
// first, then every list is cut from one array: grown append by append,
// the lists of a 16384-rank job's dumps were 1.2 s of fresh memory's
// page faults and copies.
//
// The rows are listed in ranges on every core, the ranges' lists of a
// channel then put end to end in row order (a rank's rows are together:
// most channels are in one range).
func p2pChannels(t *trace.Trace, skip []bool) (sends, recvs map[chanKey][]int32) {
	n := t.Len()
	workers := min(runtime.GOMAXPROCS(0), max(n/p2pChannelRows, 1))
	if workers == 1 {
		return p2pChannelsIn(t, skip, 0, n)
	}
	parts := make([][2]map[chanKey][]int32, workers)
	eachParallel(workers, func(w int) {
		parts[w][0], parts[w][1] = p2pChannelsIn(t, skip, w*n/workers, (w+1)*n/workers)
	})
	join := func(d int) map[chanKey][]int32 {
		out := parts[0][d]
		for _, p := range parts[1:] {
			for k, l := range p[d] {
				if prev, ok := out[k]; ok {
					l = append(prev[:len(prev):len(prev)], l...)
				}
				out[k] = l
			}
		}
		return out
	}
	return join(0), join(1)
}

// p2pChannelRows is the fewest rows per goroutine of p2pChannels.
var p2pChannelRows = 1 << 18

// p2pChannelsIn is p2pChannels of rows [lo, hi).
func p2pChannelsIn(t *trace.Trace, skip []bool, lo, hi int) (sends, recvs map[chanKey][]int32) {
	var s, r channelLists
	for pass := range 2 {
		for i := lo; i < hi; i++ {
			if t.Peer[i] < 0 || skip != nil && skip[i] {
				continue
			}
			switch k := t.Kind[i]; {
			case k.IsSend() || k.String() == "SEND":
				s.note(pass, chanKey{t.Rank[i], t.Peer[i]}, i)
			case k.IsRecv() || k.String() == "RECV":
				r.note(pass, chanKey{t.Peer[i], t.Rank[i]}, i)
			}
		}
		if pass == 0 {
			s.cut()
			r.cut()
		}
	}
	return s.result(), r.result()
}

// channelLists is one direction of p2pChannels: each channel's index, its
// rows (counted in the first pass, listed in the second), and the last
// two channels noted (a rank's rows are together, and go to a few peers:
// most rows find theirs there, not in the map).
type channelLists struct {
	ids    map[chanKey]int32
	keys   []chanKey
	counts []int32
	lists  [][]int32
	last   [2]chanKey
	lastID [2]int32
	nlast  int
}

// id returns channel k's index, a new one for a channel not seen.
func (c *channelLists) id(k chanKey) int32 {
	for j := range c.nlast {
		if c.last[j] == k {
			return c.lastID[j]
		}
	}
	id, ok := c.ids[k]
	if !ok {
		if c.ids == nil {
			c.ids = map[chanKey]int32{}
		}
		id = int32(len(c.keys))
		c.ids[k] = id
		c.keys, c.counts = append(c.keys, k), append(c.counts, 0)
	}
	c.last[1], c.lastID[1] = c.last[0], c.lastID[0]
	c.last[0], c.lastID[0] = k, id
	c.nlast = min(c.nlast+1, 2)
	return id
}

// note counts row i of channel k (pass 0) or lists it (pass 1). Rows fit
// in 32 bits: a trace of 2^31 rows would take 260 GB in memory.
func (c *channelLists) note(pass int, k chanKey, i int) {
	id := c.id(k)
	if pass == 0 {
		c.counts[id]++
		return
	}
	c.lists[id] = append(c.lists[id], int32(i))
}

// cut makes every channel's list room for its rows, from one array.
func (c *channelLists) cut() {
	total := 0
	for _, n := range c.counts {
		total += int(n)
	}
	flat := hugepage.Make[int32](total)
	c.lists = make([][]int32, len(c.counts))
	for id, n := range c.counts {
		c.lists[id], flat = flat[:0:n], flat[n:]
	}
}

// result returns the lists by channel.
func (c *channelLists) result() map[chanKey][]int32 {
	m := make(map[chanKey][]int32, len(c.keys))
	for id, k := range c.keys {
		m[k] = c.lists[id]
	}
	return m
}

// domEnd is one clock domain's end of a collective.
type domEnd struct {
	d   int
	end int64
}

// pairPlan is what pairMedians needs of alignClocks: each collective's
// ends (sorted by domain), the pair lists of each set of domains and each
// collective's set, each list's length and their total, and the lists
// whose medians are wanted.
type pairPlan struct {
	ends     [][]domEnd
	setSlots [][]int32
	setOf    []int32
	want     []int
	total    int
	ids      []int32
}

// pairMedians fills every pair's list of end-time differences (x_b - x_a
// estimates; every pair of a collective's domains, or each against the
// lowest past allPairsDomains), cut from one array of T, and returns the
// median and spread (medianMAD) of the lists p.ids names, on every core.
// T is int32 when every difference fits (alignClocks checks the widest
// collective): the lists are a fleet's largest allocation here, 688 MB
// for a 16384-rank job's dumps as int64, and fresh pages cost.
func pairMedians[T int32 | int64](p pairPlan) [][2]int64 {
	lists := make([][]T, len(p.want))
	flat := hugepage.Make[T](p.total)
	for id, w := range p.want {
		lists[id], flat = flat[:0:w], flat[w:]
	}
	// Filled on every core, each list by one goroutine (the lists whose
	// index it owns: index mod the goroutines), in collective order as on
	// one: the same lists. Each goroutine reads every collective's ends,
	// and makes only its share of the scattered appends, the most of the
	// time (a 16384-rank job's dumps: 1.5 s on one core).
	workers := min(runtime.GOMAXPROCS(0), max(len(p.want)/pairFillPerWorker, 1))
	if pairFillWorkers > 0 {
		workers = pairFillWorkers
	}
	eachParallel(workers, func(w int) {
		for x, l := range p.ends {
			slots := p.setSlots[p.setOf[x]]
			k := 0
			for i := range l {
				for j := i + 1; j < len(l); j++ {
					if id := slots[k]; int(id)%workers == w {
						lists[id] = append(lists[id], T(l[i].end-l[j].end))
					}
					k++
				}
				if len(l) > allPairsDomains {
					break
				}
			}
		}
	})
	meds := make([][2]int64, len(p.ids))
	eachParallel(len(p.ids), func(i int) {
		med, mad := medianMAD(lists[p.ids[i]])
		meds[i] = [2]int64{med, mad}
	})
	return meds
}

// pairFillPerWorker is the fewest pair lists per goroutine filling them
// (pairMedians); pairFillWorkers, when not 0, sets the goroutines (tests).
var (
	pairFillPerWorker = 1024
	pairFillWorkers   = 0
)

// medianMAD returns the median of xs (the upper one of an even count) and
// the median absolute deviation, overwriting xs with the deviations: the
// per-pair lists are not read again, and copying them was 381 MB of
// garbage (and so of peak memory) for a 4096-rank job's dumps.
func medianMAD[T int32 | int64](xs []T) (int64, int64) {
	slices.Sort(xs)
	med := xs[len(xs)/2]
	for i, v := range xs {
		xs[i] = v - med
		if xs[i] < 0 {
			xs[i] = -xs[i]
		}
	}
	slices.Sort(xs)
	return int64(med), int64(xs[len(xs)/2])
}

func fmtDuration(ns int64) string {
	s := time.Duration(ns).String()
	if ns > 0 {
		s = "+" + s
	}
	return s
}

func fmtBound(ns int64) string {
	switch ns {
	case math.MinInt64:
		return "-inf"
	case math.MaxInt64:
		return "+inf"
	}
	return time.Duration(ns).String()
}
