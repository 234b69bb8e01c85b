package analyze

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"

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

// newOpGroups computes the typical durations over ix's replayable windows.
func newOpGroups(ix *index) *opGroups {
	if ix.groups != nil {
		return ix.groups
	}
	g := &opGroups{p: ix.p, v: 1}
	isReplayable := func(k int) bool { return replayable(ix.windows[k]) }
	// 1. v, then per window and group the op counts (windows in parallel).
	vs := make([]int, workers(len(ix.windows)))
	ix.forWindows(isReplayable, func(w, k int) {
		t := ix.windows[k].t
		for _, i := range ix.windows[k].rows {
			if c := t.Chunk[i]; t.Kind[i].IsCompute() && c >= 0 && c < maxChunks {
				vs[w] = max(vs[w], int(c)+1)
			}
		}
	})
	for _, v := range vs {
		g.v = max(g.v, v)
	}
	ng := g.p * g.v * 3
	g.n, g.median, g.mad = make([]int, ng), make([]float64, ng), make([]float64, ng)
	g.perToken, g.rate, g.rateMAD = make([]bool, ng), make([]float64, ng), make([]float64, ng)
	counts := make([][]int, len(ix.windows)) // [window][group]; nil when not replayable
	noTokens := make([][]bool, workers(len(ix.windows)))
	for w := range noTokens {
		noTokens[w] = make([]bool, ng)
	}
	ix.forWindows(isReplayable, func(w, k int) {
		t := ix.windows[k].t
		cnt := make([]int, ng)
		for _, i := range ix.windows[k].rows {
			if x := g.group(t, i); x >= 0 {
				cnt[x]++
				if t.Tokens[i] <= 0 {
					noTokens[w][x] = true
				}
			}
		}
		counts[k] = cnt
	})
	for x := range g.perToken {
		g.perToken[x] = true
		for w := range noTokens {
			if noTokens[w][x] {
				g.perToken[x] = false
			}
		}
	}
	// 2. Each window's ops fill their own slots of each group, in window
	// order: the layout a serial pass gives.
	off := make([]int, ng+1)
	for _, cnt := range counts {
		for x, c := range cnt {
			g.n[x] += c
		}
	}
	for x := range ng {
		off[x+1] = off[x] + g.n[x]
	}
	fill := slices.Clone(off[:ng])
	at := make([][]int, len(ix.windows)) // [window][group]: first slot
	for k, cnt := range counts {
		if cnt == nil {
			continue
		}
		at[k] = slices.Clone(fill)
		for x, c := range cnt {
			fill[x] += c
		}
	}
	durs := make([]float64, off[ng])
	rates := make([]float64, off[ng])
	ix.forWindows(func(k int) bool { return at[k] != nil }, func(_, k int) {
		pos := at[k]
		t := ix.windows[k].t
		for _, i := range ix.windows[k].rows {
			x := g.group(t, i)
			if x < 0 {
				continue
			}
			d := float64(opDur(t, i))
			durs[pos[x]] = d
			if g.perToken[x] {
				rates[pos[x]] = d / float64(t.Tokens[i])
			}
			pos[x]++
		}
	})
	// 3. The statistics, one group at a time, groups in parallel.
	devs := make([][]float64, workers(ng))
	forEach(ng, func(w, x int) {
		if g.n[x] == 0 {
			g.perToken[x] = false
			return
		}
		g.median[x], g.mad[x], devs[w] = medianMAD(durs[off[x]:off[x+1]], devs[w])
		if g.perToken[x] {
			g.rate[x], g.rateMAD[x], devs[w] = medianMAD(rates[off[x]:off[x+1]], devs[w])
		}
	})
	ix.groups = g
	return g
}

// medianMAD returns the median and the median absolute deviation of xs,
// reordering xs; buf is scratch, returned for reuse. Linear time on
// average (selection, not sorting).
func medianMAD(xs, buf []float64) (med, mad float64, _ []float64) {
	med = selectMedian(xs)
	buf = buf[:0]
	for _, x := range xs {
		buf = append(buf, math.Abs(x-med))
	}
	return med, selectMedian(buf), buf
}

// selectMedian returns the median of xs (the mean of the two middle values
// when len(xs) is even; 0 when empty), reordering xs.
func selectMedian(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return 0
	}
	hi := selectKth(xs, n/2)
	if n%2 == 1 {
		return hi
	}
	// After selection xs[:n/2] holds the n/2 smallest: the lower middle
	// value is their maximum.
	lo := xs[0]
	for _, x := range xs[1 : n/2] {
		lo = max(lo, x)
	}
	return (lo + hi) / 2
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
	rep.Stragglers = findStragglers(ix, newOpGroups(ix))
}

func findStragglers(ix *index, g *opGroups) []Straggler {
	// 1. Candidates, every TP copy: per window (in parallel), then in
	// window order.
	per := make([][]stragglerCand, len(ix.windows))
	ix.forWindows(func(k int) bool { return replayable(ix.windows[k]) }, func(_, k int) {
		w := ix.windows[k]
		t := w.t
		var out []stragglerCand
		for _, i := range w.rows {
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
	})
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
		base := r.run(r.measuredDur()).WindowNs()
		for _, j := range byWin[k] {
			c := &cs[j]
			dur := r.measuredDur()
			for op := range r.numOps() {
				row := r.row(op)
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
