package analyze

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"

	"github.com/ppprof/ppprof/trace"
)

// Dist summarises the durations of one kind of op on one stage, in
// milliseconds: every op of that kind that started and ended, on every rank
// of the stage (TP ranks and pipeline replicas included), in the complete
// windows. N is the number of ops, so m x v x TP per window when every
// micro-batch ran on every chunk and TP rank. The median of an even count
// is the mean of the two middle values; P95Ms is by nearest rank: the
// ceil(0.95 N)-th smallest duration. All zero when N is 0.
type Dist struct {
	N        int
	MeanMs   float64
	MedianMs float64
	P95Ms    float64
	MinMs    float64
	MaxMs    float64
}

// Overhead is what one kind of op outside the pipeline window (OPT,
// OPT_SKIP, DATA, CKPT...: every kind but F, B, W and P2P) costs a step. Per
// analysed step its cost is the longest, over ranks, of the union of that
// kind's intervals on the rank (ops with a null start or end left out):
// the time the slowest rank spends in it.
type Overhead struct {
	Kind   string
	MeanMs float64 // mean of the per-step cost over analysed steps; a step without the kind counts 0
	MaxMs  float64 // the largest per-step cost
	Steps  int     // analysed steps in which some rank ran the kind
}

// statsScratch holds the buffers analyzeStats reuses between windows.
type statsScratch struct {
	comp   [][]interval // per stage: compute intervals
	recv   [][]taggedIv // per stage: receive transfer phases
	all    []interval
	group  []interval
	keys   []boundaryKey       // byKey's boundaries...
	groups [maxKeys][]interval // ...and their phases
	p2p    p2pScratch
	union  unionScratch // for the compute union, which stays in use...
	union2 unionScratch // ...while the receive phases' unions are formed
	ops    []overheadOp // the window's non-pipeline ops
}

// taggedIv is a receive's transfer phase and the boundary it crosses.
type taggedIv struct {
	iv  interval
	key boundaryKey
}

// statsAcc is one worker's share of analyzeStats' sums. Every sum is of
// integer nanoseconds, so adding the workers' shares gives the serial
// result whatever the split.
type statsAcc struct {
	durs [][3]blockList // [stage][F, B, W]
	// shared: the op groups that hold the durations of the compute ops of
	// their groups (statsVisitSharing); durs then holds only the others.
	shared                   *opGroups
	warm, cool, steady, wait []int64 // per stage
	sumT                     int64
	windows                  int
	exposed                  map[boundaryKey]int64
	sc                       statsScratch
}

// statsWindow is what analyzeStats keeps of one window for the passes that
// follow: per kind of its non-pipeline ops, the busiest rank's time in them
// (stepOverhead) and, for a complete window, the per-boundary sums of its
// sends (analyzeP2P).
type statsWindow struct {
	overhead []kindBusy
	sends    []p2pWinAcc
}

// kindBusy is, for one kind of non-pipeline op, the most time one rank of a
// window spent in its ops of that kind (their union), ns.
type kindBusy struct {
	kind  trace.Kind
	worst int64
}

// analyzeStats fills StageSummary.F/B/W, the per-stage idle split, the
// steady idle split (Bubble.SteadyP2P/SteadyOther), the per-boundary exposed
// wait that analyzeP2P reports, and Report.Overhead.
//
// Per complete window and stage (the union over its TP ranks):
//
//  1. compute = union of F/B/W intervals; warmup = first compute start -
//     window start, cooldown = window end - last compute end, steady = the
//     gaps between (a stage with no compute: the whole window is steady);
//  2. receive phases = for each RECV, from the start of its transfer (the
//     later of its start and the matched SEND's start, NCCL issue order)
//     to its end: the time the bytes are on the wire;
//  3. exposed P2P wait = the union of receive phases inside the steady
//     gaps; other wait = steady - exposed (waiting for the peer to post its
//     send, that is for its compute, and everything else).
//
// Stage fields are means over complete windows; the Bubble shares are sums
// over stages and windows over p x (summed windows), as Bubble.Steady.
//
// Windows are measured in parallel (forEach), each worker adding into its
// own statsAcc; the shares are added up at the end.
func analyzeStats(ix *index, rep *Report) { ix.visit(statsVisit(ix, rep)) }

// statsVisit is analyzeStats as a visit.
func statsVisit(ix *index, rep *Report) visit { return statsVisitSharing(ix, rep, nil) }

// statsVisitSharing is statsVisit beside og's visits (runPasses): the
// op groups keep the duration of every compute op of a complete window
// that falls in one of their groups (the same ops as the statistics' F,
// B and W lists but those of a chunk at or past maxChunks), so the
// statistics keep only the others, and make F, B and W once og's lists
// are filled (og.afterFill), from both: the same values, and distOf does
// not depend on their order. A fleet job's compute ops kept once, not
// twice (100M ops, 400 MB).
func statsVisitSharing(ix *index, rep *Report, og *opGroupsBuilder) visit {
	p := ix.p
	accs := make([]statsAcc, workers(len(ix.windows)))
	for w := range accs {
		a := &accs[w]
		if og != nil && statsShareGroups {
			a.shared = og.g
		}
		a.durs = make([][3]blockList, p)
		a.warm, a.cool, a.steady, a.wait = make([]int64, p), make([]int64, p), make([]int64, p), make([]int64, p)
		a.exposed = map[boundaryKey]int64{}
		a.sc = statsScratch{comp: make([][]interval, p), recv: make([][]taggedIv, p)}
	}
	wins := make([]statsWindow, len(ix.windows))
	return visit{window: func(w, k int) {
		statsOfWindow(ix, ix.windows[k], &accs[w], &wins[k])
	}, finish: func() {
		dists := statsFinish(ix, rep, accs, wins)
		if dists == nil {
			return
		}
		if accs[0].shared == nil {
			dists(nil)
			return
		}
		og.afterFill = dists
	}}
}

// statsShareGroups lets statsVisitSharing share the op groups' lists
// (tests turn it off to compare); statsShared counts the analyses that
// did (tests).
var (
	statsShareGroups = true
	statsShared      atomic.Int64 // analyses run concurrently
)

// exactFloat is the least duration a float64 may not hold exactly (2^53
// ns): the statistics keep such durations themselves, as the op groups'
// wide lists hold float64s.
const exactFloat = 1 << 53

// statsWide makes statsFinish widen every duration list (tests compare
// the narrow lists with the wide ones).
var statsWide = false

// statsFinish adds up the workers' shares. It returns the making of
// StageSummary.F, B and W (nil when there is nothing to make), to be
// called with the op groups' lists when the workers shared them
// (statsVisitSharing) and with nil otherwise.
func statsFinish(ix *index, rep *Report, accs []statsAcc, wins []statsWindow) func(groupDurs func(x int) ([]uint32, []float64)) {
	p := ix.p
	durs := make([][3][][]int64, p)    // the workers' blocks, wide
	durs32 := make([][3][][]uint32, p) // or narrow (every worker's list narrow)
	ns := make([][3]int, p)            // and how many values they hold
	for st := range p {
		for k := range 3 {
			// One worker's list gone wide (a duration over 4.3 s) makes
			// them all wide.
			wide := statsWide
			for w := range accs {
				wide = wide || accs[w].durs[st][k].wide
			}
			for w := range accs {
				l := &accs[w].durs[st][k]
				if wide {
					l.widen()
					durs[st][k] = l.blocks(durs[st][k])
				} else {
					durs32[st][k] = l.blocks32(durs32[st][k])
				}
				ns[st][k] += l.n
			}
		}
	}
	warm, cool, steady, wait := make([]int64, p), make([]int64, p), make([]int64, p), make([]int64, p)
	exposedNs := map[boundaryKey]int64{}
	var sumT int64
	windows := 0
	for w := range accs {
		a := &accs[w]
		for st := range p {
			warm[st] += a.warm[st]
			cool[st] += a.cool[st]
			steady[st] += a.steady[st]
			wait[st] += a.wait[st]
		}
		// Summed as integers, like the other times here: the same total
		// however the windows fell to the workers (float64 sums of the
		// workers' shares are not, past 2^53 ns).
		for key, x := range a.exposed {
			exposedNs[key] += x
		}
		sumT += a.sumT
		windows += a.windows
	}
	exposed := make(map[boundaryKey]float64, len(exposedNs))
	for key, x := range exposedNs {
		exposed[key] = float64(x)
	}
	rep.P2P.exposedNs = exposed
	rep.P2P.windows = wins
	rep.Overhead = stepOverhead(ix, wins)
	if windows == 0 || len(rep.Stages) != p {
		return nil
	}
	nw := float64(windows)
	var sumWait float64
	shared := accs[0].shared
	makeDists := func(groupDurs func(x int) ([]uint32, []float64)) {
		if shared != nil {
			statsShared.Add(1)
			// Each stage and kind's lists, with its groups' (one per
			// chunk): narrow when all are, else all wide.
			for st := range p {
				for k := range 3 {
					var wide [][]int64
					for c := range shared.v {
						d32, d64 := groupDurs((st*shared.v+c)*3 + k)
						switch {
						case len(d32) > 0 && durs[st][k] == nil:
							durs32[st][k] = append(durs32[st][k], d32)
						case len(d32) > 0:
							wide = append(wide, widen32(d32, len(d32)))
						case len(d64) > 0:
							// Those from 2^53 ns on are the statistics'
							// own, exact.
							l := make([]int64, 0, len(d64))
							for _, d := range d64 {
								if d < exactFloat {
									l = append(l, int64(d))
								}
							}
							wide = append(wide, l)
						}
					}
					if wide != nil || durs[st][k] != nil {
						for _, b := range durs32[st][k] {
							wide = append(wide, widen32(b, len(b)))
						}
						durs[st][k], durs32[st][k] = append(durs[st][k], wide...), nil
					}
					ns[st][k] = 0
					for _, b := range durs32[st][k] {
						ns[st][k] += len(b)
					}
					for _, b := range durs[st][k] {
						ns[st][k] += len(b)
					}
					// selectPairIn selects within a lone block, in place:
					// the groups' lists keep their order (their token
					// counts pair with them by position), so a lone
					// block gets an empty one beside it, and is copied.
					if len(durs32[st][k]) == 1 {
						durs32[st][k] = append(durs32[st][k], nil)
					}
					if len(durs[st][k]) == 1 {
						durs[st][k] = append(durs[st][k], nil)
					}
				}
			}
		}
		dists := make([]Dist, 3*p) // sorting is the costly part: stages and kinds in parallel
		scratch, scratch32 := make([][]int64, workers(3*p)), make([][]uint32, workers(3*p))
		forEach(3*p, func(w, x int) {
			n := ns[x/3][x%3]
			if bs := durs32[x/3][x%3]; bs != nil || durs[x/3][x%3] == nil {
				scratch32[w] = grow(scratch32[w], n)
				dists[x] = distOf(bs, n, scratch32[w])
				return
			}
			scratch[w] = grow(scratch[w], n)
			dists[x] = distOf(durs[x/3][x%3], n, scratch[w])
		})
		for st := 0; st < p; st++ {
			s := &rep.Stages[st]
			s.F, s.B, s.W = dists[3*st], dists[3*st+1], dists[3*st+2]
		}
	}
	for st := 0; st < p; st++ {
		s := &rep.Stages[st]
		s.WarmupMs, s.CooldownMs, s.SteadyMs = float64(warm[st])/nw/1e6, float64(cool[st])/nw/1e6, float64(steady[st])/nw/1e6
		s.P2PWaitMs = float64(wait[st]) / nw / 1e6
		s.OtherWaitMs = s.SteadyMs - s.P2PWaitMs
		sumWait += float64(wait[st])
	}
	if sumT > 0 {
		rep.Bubble.SteadyP2P = sumWait / (float64(p) * float64(sumT))
		rep.Bubble.SteadyOther = rep.Bubble.Steady - rep.Bubble.SteadyP2P
	}
	return makeDists
}

// statsOfWindow adds window g to a (when it is complete) and fills out.
func statsOfWindow(ix *index, g *window, a *statsAcc, out *statsWindow) {
	t, p := g.t, ix.p
	kinds, stages, starts, ends := t.Kind, t.Stage, t.StartNs, t.EndNs
	w := g.measured
	complete := w.Complete && w.EndNs > w.StartNs
	sc := &a.sc
	if complete {
		a.windows++
		a.sumT += w.EndNs - w.StartNs
		for st := range sc.comp {
			sc.comp[st], sc.recv[st] = sc.comp[st][:0], sc.recv[st][:0]
		}
	}
	// One scan: the compute intervals and durations of a complete window,
	// and the step overhead of every analysed window, complete or not.
	sc.ops = sc.ops[:0]
	for _, i := range g.rows {
		k := kinds[i]
		if k.IsCompute() {
			st := int(stages[i])
			if !complete || st < 0 || st >= p {
				continue
			}
			s, e := starts[i], ends[i]
			if s == trace.NoTime || e == trace.NoTime || e < s {
				continue
			}
			sc.comp[st] = append(sc.comp[st], interval{s, e})
			if a.shared == nil || e-s >= exactFloat || a.shared.group(t, i) < 0 {
				a.durs[st][k-trace.F].add(e - s)
			}
			continue
		}
		if inPipeline(k) || !k.Valid() {
			continue
		}
		s, e := starts[i], ends[i]
		if s == trace.NoTime || e == trace.NoTime || e < s {
			continue
		}
		sc.ops = append(sc.ops, overheadOp{k, t.Rank[i], interval{s, e}})
	}
	out.overhead = overheadBusy(sc.ops, out.overhead[:0])
	if !complete {
		return
	}
	trs := matchTransfersIn(t, g.rows, g.sorted, &sc.p2p)
	out.sends = p2pWindowSends(t, trs, p, out.sends[:0])
	for _, tr := range trs {
		if tr.recv < 0 || tr.durNs() <= 0 {
			continue
		}
		st := int(stages[tr.recv])
		if st < 0 || st >= p {
			continue
		}
		sc.recv[st] = append(sc.recv[st], taggedIv{interval{tr.startNs, tr.endNs}, recvKey(t, tr, p)})
	}
	for st := 0; st < p; st++ {
		u := unionRuns(sc.comp[st], &sc.union)
		span := [1]interval{{w.StartNs, w.EndNs}}
		var busy int64
		for _, iv := range u {
			busy += iv.e - iv.s
		}
		if len(u) > 0 {
			a.warm[st] += u[0].s - w.StartNs
			a.cool[st] += w.EndNs - u[len(u)-1].e
			span[0] = interval{u[0].s, u[len(u)-1].e}
		}
		a.steady[st] += span[0].e - span[0].s - busy
		if len(sc.recv[st]) == 0 {
			continue
		}
		sc.all = sc.all[:0]
		for _, r := range sc.recv[st] {
			sc.all = append(sc.all, r.iv)
		}
		a.wait[st] += inGaps(unionRuns(sc.all, &sc.union2), span[:], u)
		// Per boundary, each its own union (a set: the order the phases
		// are gathered in does not change it).
		rs := sc.recv[st]
		if !sc.byKey(rs) {
			slices.SortFunc(rs, func(a, b taggedIv) int {
				return cmp.Or(cmp.Compare(a.key.dir, b.key.dir), cmp.Compare(a.key.from, b.key.from), cmp.Compare(a.key.to, b.key.to))
			})
			for i := 0; i < len(rs); {
				j := i
				sc.group = sc.group[:0]
				for ; j < len(rs) && rs[j].key == rs[i].key; j++ {
					sc.group = append(sc.group, rs[j].iv)
				}
				if x := inGaps(unionRuns(sc.group, &sc.union2), span[:], u); x > 0 {
					a.exposed[rs[i].key] += x
				}
				i = j
			}
			continue
		}
		for j, key := range sc.keys {
			if x := inGaps(unionRuns(sc.groups[j], &sc.union2), span[:], u); x > 0 {
				a.exposed[key] += x
			}
		}
	}
}

// maxKeys bounds the boundaries byKey gathers one stage's receive phases
// into (a stage receives from two, its neighbours); more are sorted.
const maxKeys = 8

// byKey gathers rs's phases by boundary into sc.keys and sc.groups (the
// phases of sc.keys[j] in sc.groups[j], in rs's order) and reports whether
// they fit (at most maxKeys boundaries).
func (sc *statsScratch) byKey(rs []taggedIv) bool {
	sc.keys = sc.keys[:0]
	j := -1
	for _, r := range rs {
		if j < 0 || sc.keys[j] != r.key {
			j = -1
			for x, k := range sc.keys {
				if k == r.key {
					j = x
					break
				}
			}
			if j < 0 {
				if len(sc.keys) == maxKeys {
					return false
				}
				j = len(sc.keys)
				sc.keys = append(sc.keys, r.key)
				sc.groups[j] = sc.groups[j][:0]
			}
		}
		sc.groups[j] = append(sc.groups[j], r.iv)
	}
	return true
}

// inGaps returns how much of the disjoint sorted intervals x falls inside
// span (one interval) but outside the disjoint sorted intervals busy, all
// of which lie inside span: the part of x in span's gaps, ns.
func inGaps(x, span, busy []interval) int64 {
	return overlap(x, span) - overlap(x, busy)
}

// overlap returns the total length of the intersection of two lists of
// disjoint intervals sorted by start, ns.
func overlap(a, b []interval) int64 {
	var n int64
	for i, j := 0, 0; i < len(a) && j < len(b); {
		s, e := max(a[i].s, b[j].s), min(a[i].e, b[j].e)
		if e > s {
			n += e - s
		}
		if a[i].e < b[j].e {
			i++
		} else {
			j++
		}
	}
	return n
}

// dist summarises ds (ns) (see Dist), reordering it: the order statistics
// are found by selection, in linear time, not by sorting.
func dist(ds []int64) Dist { return distIn(ds, make([]int64, len(ds))) }

// distIn is dist with scratch memory for the selections (selectPair): at
// least len(ds) values.
func distIn(ds, scratch []int64) Dist {
	one := [1][]int64{ds}
	return distOf(one[:], len(ds), scratch)
}

// distOf is distIn of the n values of bs, one slice after the other (a
// blockList's blocks), which it may reorder when there is one.
func distOf[T int64 | uint32](bs [][]T, n int, scratch []T) Dist {
	if n == 0 {
		return Dist{}
	}
	var sum sum128 // exact, so the same in any order (the workers' lists come in any)
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, ds := range bs {
		for _, d := range ds {
			d := int64(d)
			sum.add(d)
			lo, hi = min(lo, d), max(hi, d)
		}
	}
	below, mid := selectPairIn(bs, n, n/2, scratch)
	med := float64(mid)
	if n%2 == 0 {
		med = (float64(below) + med) / 2
	}
	k := max(int(math.Ceil(0.95*float64(n)))-1, 0)
	p95 := mid
	if k > n/2 {
		_, p95 = selectPairIn(bs, n, k, scratch)
	}
	return Dist{N: n, MeanMs: sum.float() / float64(n) / 1e6, MedianMs: med / 1e6,
		P95Ms: float64(p95) / 1e6, MinMs: float64(lo) / 1e6, MaxMs: float64(hi) / 1e6}
}

// overheadOp is one non-pipeline op with its times.
type overheadOp struct {
	kind trace.Kind
	rank trace.Rank
	iv   interval
}

// overheadBusy appends to out, per kind of the non-pipeline ops ops (one
// window's; reordered), the most time one rank spent in its ops of that
// kind: the union of their intervals. A window's rows, and so its ops,
// usually come rank by rank: each rank's run is sorted alone (a Flight
// Recorder job's window holds millions of collectives); else all of them.
func overheadBusy(ops []overheadOp, out []kindBusy) []kindBusy {
	byRank := true
	for i := 1; i < len(ops) && byRank; i++ {
		byRank = ops[i].rank >= ops[i-1].rank
	}
	if !byRank {
		return unionsByKind(ops, out)
	}
	first := len(out)
	var mine []kindBusy
	for lo := 0; lo < len(ops); {
		hi := lo + 1
		for hi < len(ops) && ops[hi].rank == ops[lo].rank {
			hi++
		}
		mine = unionsByKind(ops[lo:hi], mine[:0])
		for _, kb := range mine {
			j := first
			for j < len(out) && out[j].kind != kb.kind {
				j++
			}
			if j == len(out) {
				out = append(out, kb)
			} else {
				out[j].worst = max(out[j].worst, kb.worst)
			}
		}
		lo = hi
	}
	return out
}

// unionsByKind is overheadBusy of ops in any order: sorted by kind, rank
// and start, each rank's union per kind.
func unionsByKind(ops []overheadOp, out []kindBusy) []kindBusy {
	slices.SortFunc(ops, func(a, b overheadOp) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.rank, b.rank), cmp.Compare(a.iv.s, b.iv.s))
	})
	// Runs of one kind; inside, runs of one rank: merge, measure.
	for i := 0; i < len(ops); {
		k := ops[i].kind
		var worst int64
		for i < len(ops) && ops[i].kind == k {
			r := ops[i].rank
			var busy int64
			cur := ops[i].iv
			for ; i < len(ops) && ops[i].kind == k && ops[i].rank == r; i++ {
				if iv := ops[i].iv; iv.s <= cur.e {
					cur.e = max(cur.e, iv.e)
				} else {
					busy += cur.e - cur.s
					cur = iv
				}
			}
			busy += cur.e - cur.s
			worst = max(worst, busy)
		}
		out = append(out, kindBusy{k, worst})
	}
	return out
}

// stepOverhead computes Report.Overhead (see Overhead) over every analysed
// window, complete or not, from what analyzeStats kept of their
// non-pipeline ops (wins, by window: per kind, the busiest rank). A rank's
// rows are in one window of a step (its pipeline's: a trace gives each rank
// one pipeline), so a step's busiest rank in a kind is the busiest of its
// windows'. Windows come in step order.
func stepOverhead(ix *index, wins []statsWindow) []Overhead {
	type acc struct {
		sum, max float64
		steps    int
	}
	byKind := map[trace.Kind]*acc{}
	worst := map[trace.Kind]int64{} // the step's, per kind (each kind's sums its own)
	steps := 0
	flush := func() {
		for k, w := range worst {
			a := byKind[k]
			if a == nil {
				a = &acc{}
				byKind[k] = a
			}
			ms := float64(w) / 1e6
			a.sum += ms
			a.max = max(a.max, ms)
			a.steps++
		}
		clear(worst)
	}
	for gi, g := range ix.windows {
		if gi == 0 || g.step != ix.windows[gi-1].step {
			flush()
			steps++
		}
		for _, kb := range wins[gi].overhead {
			worst[kb.kind] = max(worst[kb.kind], kb.worst)
		}
	}
	flush()
	if len(byKind) == 0 || steps == 0 {
		return nil
	}
	out := make([]Overhead, 0, len(byKind))
	for k, a := range byKind {
		out = append(out, Overhead{Kind: k.String(), MeanMs: a.sum / float64(steps), MaxMs: a.max, Steps: a.steps})
	}
	slices.SortFunc(out, func(a, b Overhead) int {
		return cmp.Or(cmp.Compare(b.MeanMs, a.MeanMs), cmp.Compare(a.Kind, b.Kind))
	})
	return out
}

// sum128 is an exact sum of int64s (two's complement, 128 bits): unlike a
// float64 sum, it does not depend on the order of the terms once they pass
// 2^53 (a trace with a clock glitch: an op "started" in 1970 and ended
// today).
type sum128 struct {
	hi int64
	lo uint64
}

func (s *sum128) add(d int64) {
	var c uint64
	s.lo, c = bits.Add64(s.lo, uint64(d), 0)
	s.hi += int64(c) + d>>63
}

// addSum adds another sum.
func (s *sum128) addSum(o sum128) {
	var c uint64
	s.lo, c = bits.Add64(s.lo, o.lo, 0)
	s.hi += o.hi + int64(c)
}

// float is the sum, rounded to float64 (exactly float64(sum) when it is
// below 2^53 in magnitude, as a float64 sum would give).
func (s sum128) float() float64 {
	if s.hi < 0 {
		lo, b := bits.Sub64(0, s.lo, 0)
		return -(float64(-s.hi-int64(b))*0x1p64 + float64(lo))
	}
	return float64(s.hi)*0x1p64 + float64(s.lo)
}
