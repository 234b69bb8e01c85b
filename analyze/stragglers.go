package analyze

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/ppprof/ppprof/internal/hugepage"
	"github.com/ppprof/ppprof/trace"
)

// Straggler is one compute op far slower than its peers: the ops of the
// same stage, chunk and kind over the analysed complete windows. The TP
// ranks of a stage run the same op; a straggler is reported once, for the
// rank whose copy took longest.
type Straggler struct {
	Step       int64
	Pipeline   int
	Stage      int
	Rank       int // the rank of the stage whose copy of the op took longest
	Chunk      int
	MicroBatch int
	Kind       string  // F, B or W
	DurMs      float64 // measured duration
	TypicalMs  float64 // median duration of its (stage, chunk, kind)
	ExpectedMs float64 // what it should have taken: TypicalMs, or its tokens times the median ns per token when tokens are known
	Factor     float64 // DurMs / ExpectedMs
	Tokens     int64   // tokens of its micro-batch, 0 if unknown
	Class      string  // StragglerSlow or StragglerLongSequence
	// DelayMs is how much earlier its window (step, pipeline) would have
	// ended had the op (on every TP rank of its stage) taken ExpectedMs when
	// Class is "slow", TypicalMs when "long_sequence" (what balancing
	// sequence lengths would buy): the replay of the window with measured
	// durations minus the replay with that op shortened. It is >= 0, and 0
	// when the op's slack absorbed it.
	DelayMs float64
}

// Straggler classes.
const (
	// StragglerSlow is an op slower than its tokens explain (or, without
	// tokens, than its peers): a slow device, a preemption, a host stall.
	StragglerSlow = "slow"
	// StragglerLongSequence is an op long against its peers but as long as
	// its micro-batch's tokens predict: sequence-length imbalance.
	StragglerLongSequence = "long_sequence"
)

// Straggler thresholds. An op of duration d in a (stage, chunk, kind) group
// of at least StragglerMinSamples ops with median med and median absolute
// deviation mad is an outlier when
//
//	d > med + StragglerMADs*mad  and  d > StragglerRatio*med.
//
// The first test is robust to the group's noise (uniform jitter of ±J has
// mad = J/2, so it never crosses med + 5 mad = 1 + 2.5 J); the second keeps
// a group without noise (mad 0) from flagging ns of rounding. When every op
// of the group records tokens, the same test runs on ns per token (median
// rate r, deviation madR): expected = r*tokens, outlier when d > expected +
// StragglerMADs*madR*tokens and d > StragglerRatio*expected. An op that is
// an outlier per token is "slow"; one that is an outlier only by duration
// is "long_sequence" (its tokens explain it). A group whose median is 0 (or
// whose expected duration is 0) has no stragglers: a factor over 0 means
// nothing.
const (
	StragglerMADs       = 5.0
	StragglerRatio      = 1.25
	StragglerMinSamples = 5
	// MaxStragglers is how many stragglers a report keeps: those with the
	// largest excess (duration minus the duration they are replayed at),
	// each replayed once for its DelayMs.
	MaxStragglers = 20
)

// maxChunks bounds the chunk ids that get their own group; compute ops of
// other chunks (bad input) are left out of the typical durations.
const maxChunks = 1024

// opGroups holds the typical durations of compute ops per (stage, chunk,
// kind) over the replayable windows of an index. Durations are ns.
type opGroups struct {
	p, v     int
	n        []int
	median   []float64 // ns
	mad      []float64 // ns
	perToken []bool    // every op of the group records tokens
	rate     []float64 // median ns per token, when perToken
	rateMAD  []float64 // ns per token
}

// group returns the group of row i, or -1 when it is not a compute op of a
// stage in [0, p) and chunk in [0, v).
func (g *opGroups) group(t *trace.Trace, i int) int {
	var k int
	switch t.Kind[i] {
	case trace.F:
		k = 0
	case trace.B:
		k = 1
	case trace.W:
		k = 2
	default:
		return -1
	}
	st, c := int(t.Stage[i]), int(t.Chunk[i])
	if st < 0 || st >= g.p || c < 0 || c >= g.v {
		return -1
	}
	return (st*g.v+c)*3 + k
}

// kindOfGroup returns the kind index (0 F, 1 B, 2 W) of group x.
func kindOfGroup(x int) int { return x % 3 }

func opDur(t *trace.Trace, i int) int64 { return max(t.EndNs[i]-t.StartNs[i], 0) }

// newOpGroups computes the typical durations over ix's replayable windows
// (once: the result is kept in ix.groups). Run builds them with the
// visits of opGroupsBuilder instead, alongside other passes.
func newOpGroups(ix *index) *opGroups {
	if ix.groups != nil {
		return ix.groups
	}
	b := newOpGroupsBuilder(ix)
	ix.visit(b.countVisit())
	ix.visit(b.fillVisit())
	return ix.groups
}

// opGroupsBuilder builds an index's opGroups in two visits of the
// replayable windows: the counts per window and group, then (once the
// layout is known) the durations.
type opGroupsBuilder struct {
	ix       *index
	g        *opGroups
	ng       int
	counts   [][]int  // [window][group]; nil when not replayable
	noTokens [][]bool // [worker][group]
	wide     []bool   // [worker]: a grouped op's duration or tokens over 32 bits
	off      []int
	at       [][]int // [window][group]: its first slot
	// Each op's duration and ns per token, in its slot. When every
	// duration and token count fits in 32 bits (a duration under 4.3 s),
	// the durations and token counts are kept instead (dur32, tok32: 8
	// bytes an op instead of 16; a fleet job has about 100M ops) and the
	// float64s are made one group at a time, as the first visit would
	// have made them.
	durs, rates  []float64
	dur32, tok32 []uint32
	// Each group's token count when all its ops have the same (0: they
	// differ, or none seen): the narrow layout then keeps no token counts
	// (tok32 nil) when every group's is constant, as a fleet job's are
	// (400 MB of its 7 GB peak). tokSeen and tokVary are per worker.
	constTok []int64
	tokSeen  [][]int64 // [worker][group]: its ops' token count; 0: none seen yet
	tokVary  [][]bool  // [worker][group]: its ops' token counts differ
	// afterFill, when set (statsVisitSharing), is called once the lists
	// are filled, before the medians reorder them, with each group's
	// durations (narrow or wide).
	afterFill func(groupDurs func(x int) ([]uint32, []float64))
}

// opGroupsWide makes opGroupsBuilder keep float64s even when 32 bits
// hold every duration and token count (tests compare the two layouts).
var opGroupsWide = false

func newOpGroupsBuilder(ix *index) *opGroupsBuilder {
	g := &opGroups{p: ix.p, v: 1}
	// v: over the replayable windows' compute rows (measure).
	for _, w := range ix.windows {
		if replayable(w) {
			g.v = max(g.v, w.vSeen)
		}
	}
	ng := g.p * g.v * 3
	g.n, g.median, g.mad = make([]int, ng), make([]float64, ng), make([]float64, ng)
	g.perToken, g.rate, g.rateMAD = make([]bool, ng), make([]float64, ng), make([]float64, ng)
	nw := workers(len(ix.windows))
	b := &opGroupsBuilder{ix: ix, g: g, ng: ng, counts: make([][]int, len(ix.windows)),
		noTokens: make([][]bool, nw), wide: make([]bool, nw), tokSeen: make([][]int64, nw), tokVary: make([][]bool, nw)}
	for w := range b.noTokens {
		b.noTokens[w], b.tokSeen[w], b.tokVary[w] = make([]bool, ng), make([]int64, ng), make([]bool, ng)
	}
	return b
}

// countVisit counts each window's ops per group, then lays the groups out:
// each window's ops fill their own slots of each group, in window order
// (the layout a serial pass gives).
func (b *opGroupsBuilder) countVisit() visit {
	ix, g, ng := b.ix, b.g, b.ng
	return visit{want: ix.isReplayable, window: func(w, k int) {
		t := ix.windows[k].t
		cnt := make([]int, ng)
		for _, i := range ix.computeRows(w, k) { // group(t, i) < 0 for other rows
			if x := g.group(t, i); x >= 0 {
				cnt[x]++
				if tok := t.Tokens[i]; tok <= 0 {
					b.noTokens[w][x] = true
				} else if seen := b.tokSeen[w][x]; seen == 0 {
					b.tokSeen[w][x] = tok
				} else if tok != seen {
					b.tokVary[w][x] = true
				}
				if uint64(opDur(t, i)) > math.MaxUint32 || t.Tokens[i] > math.MaxUint32 {
					b.wide[w] = true
				}
			}
		}
		b.counts[k] = cnt
	}, finish: func() {
		b.constTok = make([]int64, ng)
		varying := false
		for x := range g.perToken {
			g.perToken[x] = true
			for w := range b.noTokens {
				if b.noTokens[w][x] {
					g.perToken[x] = false
				}
			}
			// The one token count of every worker's ops, if any.
			for w := range b.tokSeen {
				switch seen := b.tokSeen[w][x]; {
				case b.tokVary[w][x] || seen != 0 && b.constTok[x] != 0 && seen != b.constTok[x]:
					b.constTok[x] = -1
				case seen != 0 && b.constTok[x] == 0:
					b.constTok[x] = seen
				}
			}
			if b.constTok[x] < 0 {
				b.constTok[x] = 0
				varying = varying || g.perToken[x]
			}
		}
		b.tokSeen, b.tokVary = nil, nil
		b.off = make([]int, ng+1)
		for _, cnt := range b.counts {
			for x, c := range cnt {
				g.n[x] += c
			}
		}
		for x := range ng {
			b.off[x+1] = b.off[x] + g.n[x]
		}
		fill := slices.Clone(b.off[:ng])
		b.at = make([][]int, len(ix.windows))
		for k, cnt := range b.counts {
			if cnt == nil {
				continue
			}
			b.at[k] = slices.Clone(fill)
			for x, c := range cnt {
				fill[x] += c
			}
		}
		b.counts = nil
		// Filled in the groups' order, not the rows': huge pages
		// (internal/hugepage) spare a fault for each small page hit.
		if opGroupsWide || slices.Contains(b.wide, true) {
			b.durs = hugepage.Make[float64](int(b.off[ng]))
			b.rates = hugepage.Make[float64](int(b.off[ng]))
			return
		}
		b.dur32 = hugepage.Make[uint32](int(b.off[ng]))
		if varying {
			b.tok32 = hugepage.Make[uint32](int(b.off[ng]))
		}
	}}
}

// fillVisit puts each op's duration (and ns per token) in its slot, then
// computes every group's statistics and sets ix.groups.
func (b *opGroupsBuilder) fillVisit() visit {
	ix, g, ng := b.ix, b.g, b.ng
	return visit{want: func(k int) bool { return b.at[k] != nil }, window: func(w, k int) {
		pos := b.at[k]
		t := ix.windows[k].t
		for _, i := range ix.computeRows(w, k) { // group(t, i) < 0 for other rows
			x := g.group(t, i)
			if x < 0 {
				continue
			}
			if b.dur32 != nil {
				b.dur32[pos[x]] = uint32(opDur(t, i))
				if b.tok32 != nil && g.perToken[x] {
					b.tok32[pos[x]] = uint32(t.Tokens[i])
				}
			} else {
				d := float64(opDur(t, i))
				b.durs[pos[x]] = d
				if g.perToken[x] {
					b.rates[pos[x]] = d / float64(t.Tokens[i])
				}
			}
			pos[x]++
		}
	}, finish: func() {
		if b.afterFill != nil {
			b.afterFill(func(x int) ([]uint32, []float64) {
				lo, hi := b.off[x], b.off[x+1]
				if b.dur32 != nil {
					return b.dur32[lo:hi], nil
				}
				return nil, b.durs[lo:hi]
			})
			b.afterFill = nil
		}
		// The statistics, one group at a time, groups in parallel.
		nw := workers(ng)
		devs, durs, rates := make([][]float64, nw), make([][]float64, nw), make([][]float64, nw)
		forEach(ng, func(w, x int) {
			if g.n[x] == 0 {
				g.perToken[x] = false
				return
			}
			lo, hi := b.off[x], b.off[x+1]
			var ds, rs []float64
			if b.dur32 != nil {
				// The values the wide layout holds, made from the
				// narrow one: the same float64s, bit for bit.
				durs[w], rates[w] = grow(durs[w], hi-lo), grow(rates[w], hi-lo)
				ds, rs = durs[w][:hi-lo], rates[w][:hi-lo]
				for i, d := range b.dur32[lo:hi] {
					ds[i] = float64(d)
				}
				switch {
				case !g.perToken[x]:
				case b.tok32 != nil:
					for i, tok := range b.tok32[lo:hi] {
						rs[i] = ds[i] / float64(tok)
					}
				default: // every op of the group has b.constTok[x] tokens
					tok := float64(b.constTok[x])
					for i := range rs {
						rs[i] = ds[i] / tok
					}
				}
			} else {
				ds, rs = b.durs[lo:hi], b.rates[lo:hi]
			}
			g.median[x], g.mad[x], devs[w] = medianMAD(ds, devs[w])
			if g.perToken[x] {
				g.rate[x], g.rateMAD[x], devs[w] = medianMAD(rs, devs[w])
			}
		})
		b.durs, b.rates, b.dur32, b.tok32, b.at = nil, nil, nil, nil, nil
		ix.groups = g
	}}
}

// medianMAD returns the median and the median absolute deviation of xs,
// reordering xs; buf is scratch, returned for reuse. Linear time on
// average (selection, not sorting).
func medianMAD(xs, buf []float64) (med, mad float64, _ []float64) {
	buf = grow(buf, len(xs))
	med = medianIn(xs, buf) // buf as scratch
	for i, x := range xs {
		buf[i] = math.Abs(x - med)
	}
	return med, medianIn(buf, xs), buf // xs, no longer needed, as scratch
}

// medianIn is medianOf using scratch (len(scratch) >= len(xs)) so
// that a large xs is mostly left alone (selectPair).
func medianIn[T float64 | int64](xs, scratch []T) T {
	n := len(xs)
	if n == 0 {
		return 0
	}
	lo, hi := selectPair(xs, n/2, scratch)
	if n%2 == 1 {
		return hi
	}
	return (lo + hi) / 2
}

// b2i is 1 for true, 0 for false (compiled without a branch).
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// selectSample is the sample selectPair narrows its search with.
const selectSample = 512

// selectPair returns the k-th smallest value of xs (from 0) and, when
// k > 0, the (k-1)-th (else the zero value), as sorting xs would leave
// them at xs[k] and xs[k-1]. It may reorder xs; scratch must hold
// len(xs) values.
//
// A large xs is narrowed first (Floyd and Rivest's idea, with a fixed
// sample): an evenly spaced sample, sorted, gives bounds [lo, hi] that
// likely bracket both values; one pass counts the values below lo and
// copies those within the bounds, and the selection runs on that copy,
// a small part of xs. When the bounds miss, it selects in xs itself.
// Either way the values are exact.
func selectPair[T cmp.Ordered](xs []T, k int, scratch []T) (below, at T) {
	one := [1][]T{xs}
	return selectPairIn(one[:], len(xs), k, scratch)
}

// selectPairIn is selectPair on the values of bs, n in all, one slice
// after the other (a blockList's blocks). When the bounds miss, one
// slice is reordered in place; more are first copied into scratch, and
// bs is left as it was.
func selectPairIn[T cmp.Ordered](bs [][]T, n, k int, scratch []T) (below, at T) {
	if n >= 16*selectSample {
		smp := scratch[:selectSample]
		step := n / selectSample
		b, off := 0, 0 // the slice holding value j*step, and where it starts
		for j := range smp {
			x := j * step
			for x-off >= len(bs[b]) {
				off += len(bs[b])
				b++
			}
			smp[j] = bs[b][x-off]
		}
		slices.Sort(smp)
		const slack = 24 // sample positions either side
		r := int(int64(k) * selectSample / int64(n))
		lo, hi := smp[max(r-slack, 0)], smp[min(r+slack, selectSample-1)]
		// Branch-free: whether x is below or within the bounds is a coin
		// toss for half of xs.
		in := scratch[:n]
		less, m := 0, 0
		for _, xs := range bs {
			for _, x := range xs {
				in[m] = x
				lt, gt := b2i(x < lo), b2i(x > hi)
				less += lt
				m += 1 - lt - gt
			}
		}
		in = in[:m]
		if kk := k - less; kk >= 0 && kk < len(in) && (k == 0 || kk > 0) {
			at = selectKth(in, kk)
			if kk > 0 {
				below = slices.Max(in[:kk])
			}
			return below, at
		}
	}
	xs := scratch[:0]
	if len(bs) == 1 {
		xs = bs[0]
	} else {
		for _, b := range bs {
			xs = append(xs, b...)
		}
	}
	at = selectKth(xs, k)
	if k > 0 {
		below = slices.Max(xs[:k])
	}
	return below, at
}

// medianNs is medianOf of durations (or byte counts): the same value as
// medianOf of them converted to float64 (the conversion keeps the order,
// so the middle values are the converted middle values), selected on the
// integers. xs is reordered.
func medianNs(xs []int64) float64 { return medianOf(xs) }

// medianOf returns the median of xs as a float64 (the mean of the two
// middle values when len(xs) is even; 0 when empty), reordering xs.
func medianOf[T ~int64 | ~float64](xs []T) float64 {
	n := len(xs)
	if n == 0 {
		return 0
	}
	hi := selectKth(xs, n/2)
	if n%2 == 1 {
		return float64(hi)
	}
	// After selection xs[:n/2] holds the n/2 smallest: the lower middle
	// value is their maximum.
	lo := xs[0]
	for _, x := range xs[1 : n/2] {
		lo = max(lo, x)
	}
	return (float64(lo) + float64(hi)) / 2
}

// selectKth reorders xs so that xs[k] is the value a sort would put there,
// with nothing larger before it and nothing smaller after, and returns it.
// Quickselect with a median-of-three pivot; a range that shrinks too slowly
// is sorted instead, so the worst case is O(n log n).
func selectKth[T cmp.Ordered](xs []T, k int) T {
	lo, hi := 0, len(xs)-1
	budget := 2 * bits.Len(uint(len(xs)))
	for hi-lo > 16 {
		if budget == 0 {
			slices.Sort(xs[lo : hi+1])
			return xs[k]
		}
		budget--
		mid := lo + (hi-lo)/2
		if xs[mid] < xs[lo] {
			xs[mid], xs[lo] = xs[lo], xs[mid]
		}
		if xs[hi] < xs[lo] {
			xs[hi], xs[lo] = xs[lo], xs[hi]
		}
		if xs[hi] < xs[mid] {
			xs[hi], xs[mid] = xs[mid], xs[hi]
		}
		pivot := xs[mid]
		// Hoare partition: xs[lo..j] <= pivot <= xs[j+1..hi].
		i, j := lo-1, hi+1
		for {
			for i++; xs[i] < pivot; i++ {
			}
			for j--; xs[j] > pivot; j-- {
			}
			if i >= j {
				break
			}
			xs[i], xs[j] = xs[j], xs[i]
		}
		if k <= j {
			hi = j
		} else {
			lo = j + 1
		}
	}
	slices.Sort(xs[lo : hi+1])
	return xs[k]
}

// judge classifies row i of group x: class "" when it is no straggler;
// expected and typical in ns.
func (g *opGroups) judge(t *trace.Trace, i, x int) (class string, expected, typical float64) {
	med := g.median[x]
	if g.n[x] < StragglerMinSamples || med <= 0 {
		return "", 0, 0
	}
	d := float64(opDur(t, i))
	plain := d > med+StragglerMADs*g.mad[x] && d > StragglerRatio*med
	tok := float64(t.Tokens[i])
	e := g.rate[x] * tok
	if !g.perToken[x] || e <= 0 {
		if plain {
			return StragglerSlow, med, med
		}
		return "", 0, 0
	}
	switch {
	case d > e+StragglerMADs*g.rateMAD[x]*tok && d > StragglerRatio*e:
		return StragglerSlow, e, med
	case plain:
		return StragglerLongSequence, e, med
	}
	return "", 0, 0
}

// stragglerCand is a straggler found, before its replay.
type stragglerCand struct {
	win    int // index in ix.windows
	kind   trace.Kind
	dur    int64 // ns
	target int64 // ns it is replayed at
	s      Straggler
}

// analyzeStragglers fills Report.Stragglers: outliers by the thresholds
// above over the complete windows, one per op (the longest TP copy), at
// most MaxStragglers (the largest excesses), sorted by DelayMs, then
// excess, descending, then by step, pipeline, stage, micro-batch, kind.
func analyzeStragglers(ix *index, rep *Report) {
	ix.visit(stragglersVisit(ix, rep))
}

// stragglersVisit is analyzeStragglers as a visit (the opGroups must be
// built); its finish reads again the windows to replay.
func stragglersVisit(ix *index, rep *Report) visit {
	g := newOpGroups(ix)
	// 1. Candidates, every TP copy: per window (in parallel), then in
	// window order.
	per := make([][]stragglerCand, len(ix.windows))
	return visit{want: ix.isReplayable, window: func(wk, k int) {
		w := ix.windows[k]
		t := w.t
		var out []stragglerCand
		for _, i := range ix.computeRows(wk, k) { // group(t, i) < 0 for other rows
			x := g.group(t, i)
			if x < 0 {
				continue
			}
			class, exp, typ := g.judge(t, i, x)
			if class == "" {
				continue
			}
			d := opDur(t, i)
			target := exp
			if class == StragglerLongSequence {
				target = typ
			}
			out = append(out, stragglerCand{win: k, kind: t.Kind[i], dur: d, target: min(int64(math.Round(target)), d), s: Straggler{
				Step: w.step, Pipeline: int(w.pipeline), Stage: int(t.Stage[i]), Rank: int(t.Rank[i]),
				Chunk: int(t.Chunk[i]), MicroBatch: int(t.MicroBatch[i]), Kind: t.Kind[i].String(),
				DurMs: float64(d) / 1e6, TypicalMs: typ / 1e6, ExpectedMs: exp / 1e6, Factor: float64(d) / exp,
				Tokens: t.Tokens[i], Class: class,
			}})
		}
		per[k] = out
	}, finish: func() { rep.Stragglers = pickStragglers(ix, per) }}
}

// pickStragglers is the rest of analyzeStragglers, from the candidates of
// each window.
func pickStragglers(ix *index, per [][]stragglerCand) []Straggler {
	var cs []stragglerCand
	for _, out := range per {
		cs = append(cs, out...)
	}
	if len(cs) == 0 {
		return nil
	}
	// 2. One per op: the longest copy over the stage's TP ranks.
	sameOp := func(a, b *stragglerCand) int {
		return cmp.Or(cmp.Compare(a.win, b.win), cmp.Compare(a.s.Stage, b.s.Stage), cmp.Compare(a.s.Chunk, b.s.Chunk),
			cmp.Compare(a.s.MicroBatch, b.s.MicroBatch), cmp.Compare(a.kind, b.kind))
	}
	slices.SortFunc(cs, func(a, b stragglerCand) int {
		return cmp.Or(sameOp(&a, &b), cmp.Compare(b.s.DurMs, a.s.DurMs), cmp.Compare(a.s.Rank, b.s.Rank))
	})
	cs = slices.CompactFunc(cs, func(a, b stragglerCand) bool { return sameOp(&a, &b) == 0 })
	// 3. Keep the largest excesses.
	excess := func(c *stragglerCand) int64 { return c.dur - c.target }
	slices.SortStableFunc(cs, func(a, b stragglerCand) int { return cmp.Compare(excess(&b), excess(&a)) })
	cs = cs[:min(len(cs), MaxStragglers)]
	// 4. Replay each one's window with the op at its target.
	byWin := map[int][]int{}
	for j, c := range cs {
		byWin[c.win] = append(byWin[c.win], j)
	}
	ix.forWindows(func(k int) bool { return byWin[k] != nil }, func(_, k int) {
		t := ix.windows[k].t
		r, err := newReplay(t, ix.windows[k], ix.p)
		if err != nil {
			return // DelayMs stays 0: the window cannot be re-timed
		}
		base := r.baseWindowNs // the run with the measured durations
		var dur []int64
		for _, j := range byWin[k] {
			c := &cs[j]
			dur = r.measuredDurIn(dur)
			for _, op := range r.comp { // c.kind is F, B or W
				row := r.rows[op]
				if t.Kind[row] == c.kind && int(t.Stage[row]) == c.s.Stage && int(t.Chunk[row]) == c.s.Chunk &&
					int(t.MicroBatch[row]) == c.s.MicroBatch {
					dur[op] = min(dur[op], c.target)
				}
			}
			c.s.DelayMs = float64(base-r.run(dur).WindowNs()) / 1e6
		}
	})
	slices.SortStableFunc(cs, func(a, b stragglerCand) int {
		return cmp.Or(cmp.Compare(b.s.DelayMs, a.s.DelayMs), cmp.Compare(excess(&b), excess(&a)),
			cmp.Compare(a.s.Step, b.s.Step), cmp.Compare(a.s.Pipeline, b.s.Pipeline), cmp.Compare(a.s.Stage, b.s.Stage),
			cmp.Compare(a.s.MicroBatch, b.s.MicroBatch), cmp.Compare(a.s.Kind, b.s.Kind))
	})
	out := make([]Straggler, len(cs))
	for j, c := range cs {
		out[j] = c.s
	}
	return out
}

// stragglersFindings reports the stragglers that cost the most: one
// STRAGGLER finding for each of the (up to) three with the largest DelayMs,
// "warning" for a slow op that delayed its step, "info" otherwise (a long
// sequence, or an op whose slack absorbed it). ImpactMs is the DelayMs: the
// time lost in the one step it struck.
func stragglersFindings(_ *index, rep *Report) []Finding {
	var out []Finding
	for j, s := range rep.Stragglers {
		if j == 3 {
			break
		}
		sev := "info"
		if s.Class == StragglerSlow && s.DelayMs > 0 {
			sev = "warning"
		}
		why := fmt.Sprintf("%.1fx its expected %.3g ms", s.Factor, s.ExpectedMs)
		if s.Class == StragglerLongSequence {
			why = fmt.Sprintf("%.1fx the typical %.3g ms, explained by its %d tokens", s.DurMs/s.TypicalMs, s.TypicalMs, s.Tokens)
		}
		chunk := ""
		if rep.Job.Virtual > 1 || s.Chunk > 0 {
			chunk = fmt.Sprintf(" (chunk %d)", s.Chunk)
		}
		out = append(out, Finding{Severity: sev, Code: CodeStraggler, ImpactMs: s.DelayMs,
			Message: fmt.Sprintf("step %d, pipeline %d, stage %d (rank %d): %s of micro-batch %d%s took %.3g ms, %s; it delayed the step by %.3g ms",
				s.Step, s.Pipeline, s.Stage, s.Rank, s.Kind, s.MicroBatch, chunk, s.DurMs, why, s.DelayMs)})
	}
	return out
}
