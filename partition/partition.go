// Package partition assigns a model's layers to pipeline stages: the
// contiguous split that minimises the slowest stage under a memory limit.
package partition

import (
	"fmt"
	"math"

	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/trace"
)

// Layer is one layer's cost for one micro-batch.
type Layer struct {
	Name     string
	FwdMs    float64 // forward, ms
	BwdMs    float64 // whole backward (input and weight gradients), ms
	ActBytes int64   // activation bytes kept from its forward to its backward
}

// Model is a model's layers in order, with the extra costs of the first
// and last stage.
type Model struct {
	Layers    []Layer
	Embedding *Layer // counted on the first stage; nil when none
	Loss      *Layer // counted on the last stage; nil when none
}

// Options says how to split.
type Options struct {
	Stages int // p, >= 1 and at most the number of layers (every stage gets a layer)
	// Schedule is the pipeline schedule the split runs under: gpipe, 1f1b
	// or zb-h1 ("" means 1f1b). It sets each stage's live micro-batches
	// (schedule.LiveBound: m for gpipe, p - stage for 1f1b, min(p, m) for
	// zb-h1, counting a micro-batch until its W) and the step prediction.
	Schedule string
	// MicroBatches is m per step; 0 means 4 x Stages.
	MicroBatches int
	// MemLimitBytes bounds each stage's activation memory: the activation
	// bytes of its layers (and embedding or loss) for one micro-batch times
	// the schedule's live bound for the stage. 0 means no limit.
	MemLimitBytes int64
}

// Result is a split and what it predicts.
type Result struct {
	Stages        int
	Schedule      string
	MicroBatches  int
	MemLimitBytes int64 // 0: none
	Split         []Stage
	BottleneckMs  float64 // the slowest stage's F + B per micro-batch (minimal)
	// StepMs is the predicted step: the schedule replayed (schedule.Replay)
	// with each stage's F and B, free communication (zb-h1: B and W each
	// half of the backward). Time outside the pipeline (optimizer...) is
	// not included.
	StepMs float64
	// Even is the split by layer count (n/p layers a stage, the first n%p
	// stages one more), the usual default, for comparison.
	Even Baseline
}

// Stage is one stage of a split.
type Stage struct {
	Stage       int
	First, Last int    // layer indices (0-based, inclusive) in Model.Layers
	FirstName   string // Model.Layers[First].Name
	LastName    string // Model.Layers[Last].Name
	FwdMs       float64
	BwdMs       float64
	CostMs      float64 // FwdMs + BwdMs: one micro-batch, embedding or loss included
	ActBytes    int64   // per micro-batch
	LiveBound   int     // micro-batches live at once under the schedule
	MemBytes    int64   // ActBytes x LiveBound (saturating)
}

// Baseline is another split, evaluated the same way.
type Baseline struct {
	Sizes        []int // layers per stage
	BottleneckMs float64
	StepMs       float64
	FitsMemory   bool
}

// Solve returns the contiguous split of m's layers into opt.Stages
// non-empty stages that minimises the slowest stage's F + B per
// micro-batch (the embedding counted on the first stage, the loss on the
// last), with every stage within the memory limit. Among the optimal
// splits it returns one with the least sum of squared stage costs (a
// second exact pass), the earliest cuts on ties.
//
// The search is a dynamic program over (stage, layers so far) with prefix
// sums, on costs rounded to whole ns so that sums are exact: best[s][i],
// the least bottleneck of the first i layers on stages 0..s, is min over j
// of max(best[s-1][j], cost(s, j..i-1)) over the j whose stage fits memory
// (the limit depends on the stage through its live bound). A stage's cost
// and memory only grow as it takes more layers, so the scan over j (from
// the largest) stops at the first that cannot improve: O(p n^2) at worst,
// about O(n^2) in practice.
func Solve(m *Model, opt Options) (*Result, error) {
	pr, err := newProblem(m, opt)
	if err != nil {
		return nil, err
	}
	cuts, ok := pr.solve()
	if !ok {
		return nil, fmt.Errorf("no split of %d layers into %d stages fits %d bytes of activations per stage under %s (m=%d): the smallest stage needs more",
			pr.n, pr.p, opt.MemLimitBytes, pr.sched.Name, pr.m)
	}
	res := &Result{Stages: pr.p, Schedule: pr.sched.Name, MicroBatches: pr.m, MemLimitBytes: opt.MemLimitBytes}
	res.Split, res.BottleneckMs, res.StepMs, err = pr.evaluate(cuts)
	if err != nil {
		return nil, err
	}
	even := evenCuts(pr.n, pr.p)
	_, res.Even.BottleneckMs, res.Even.StepMs, err = pr.evaluate(even)
	if err != nil {
		return nil, err
	}
	res.Even.Sizes = sizes(even)
	res.Even.FitsMemory = pr.fitsAll(even)
	return res, nil
}

// problem is a model prepared for the search: prefix sums in ns and bytes.
type problem struct {
	n, p, m    int
	sched      *schedule.Schedule
	live       []int64 // per stage
	limit      int64   // 0: none
	cost       []int64 // prefix sums of F + B, ns; len n+1
	fwd, bwd   []int64 // prefix sums, ns
	act        []int64 // prefix sums, bytes
	embF, embB int64
	lossF      int64
	lossB      int64
	embA       int64
	lossA      int64
	names      []string // layer names
}

func newProblem(m *Model, opt Options) (*problem, error) {
	n, p := len(m.Layers), opt.Stages
	switch {
	case n == 0:
		return nil, fmt.Errorf("no layers")
	case n > MaxLayers:
		return nil, fmt.Errorf("%d layers: at most %d", n, MaxLayers)
	case p < 1:
		return nil, fmt.Errorf("%d stages: want >= 1", p)
	case p > n:
		return nil, fmt.Errorf("%d stages for %d layers: every stage needs a layer", p, n)
	case opt.MemLimitBytes < 0:
		return nil, fmt.Errorf("memory limit %d: want >= 0", opt.MemLimitBytes)
	}
	name := opt.Schedule
	if name == "" {
		name = schedule.OneFOneBName
	}
	if name != schedule.GPipeName && name != schedule.OneFOneBName && name != schedule.ZBH1Name {
		return nil, fmt.Errorf("schedule %q: partition supports gpipe, 1f1b and zb-h1 (an interleaved stage holds several non-contiguous chunks)", name)
	}
	mb := opt.MicroBatches
	if mb == 0 {
		mb = 4 * p
	}
	if mb < 1 {
		return nil, fmt.Errorf("%d micro-batches: want >= 1", mb)
	}
	s, err := schedule.New(name, p, mb, 1)
	if err != nil {
		return nil, err
	}
	pr := &problem{n: n, p: p, m: mb, sched: s, limit: opt.MemLimitBytes, live: make([]int64, p),
		cost: make([]int64, n+1), fwd: make([]int64, n+1), bwd: make([]int64, n+1), act: make([]int64, n+1)}
	for st := range p {
		pr.live[st] = int64(max(s.LiveBound(st), 1))
	}
	check := func(l *Layer) error {
		for _, x := range []float64{l.FwdMs, l.BwdMs} {
			if !(x >= 0) || x > MaxLayerMs {
				return fmt.Errorf("layer %q: cost %v ms (want a number in [0, %g])", l.Name, x, float64(MaxLayerMs))
			}
		}
		if l.ActBytes < 0 || l.ActBytes > MaxActBytes {
			return fmt.Errorf("layer %q: %d activation bytes (want [0, %d])", l.Name, l.ActBytes, int64(MaxActBytes))
		}
		return nil
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		if err := check(l); err != nil {
			return nil, err
		}
		f, b := ns(l.FwdMs), ns(l.BwdMs)
		pr.fwd[i+1], pr.bwd[i+1] = pr.fwd[i]+f, pr.bwd[i]+b
		pr.cost[i+1] = pr.cost[i] + f + b
		pr.act[i+1] = pr.act[i] + l.ActBytes
		pr.names = append(pr.names, l.Name)
	}
	if l := m.Embedding; l != nil {
		if err := check(l); err != nil {
			return nil, err
		}
		pr.embF, pr.embB, pr.embA = ns(l.FwdMs), ns(l.BwdMs), l.ActBytes
	}
	if l := m.Loss; l != nil {
		if err := check(l); err != nil {
			return nil, err
		}
		pr.lossF, pr.lossB, pr.lossA = ns(l.FwdMs), ns(l.BwdMs), l.ActBytes
	}
	return pr, nil
}

func ns(ms float64) int64 { return int64(math.Round(ms * 1e6)) }

// stageCost is the F + B of layers [j, i) on stage s, ns.
func (pr *problem) stageCost(s, j, i int) int64 {
	c := pr.cost[i] - pr.cost[j]
	if s == 0 {
		c += pr.embF + pr.embB
	}
	if s == pr.p-1 {
		c += pr.lossF + pr.lossB
	}
	return c
}

// stageAct is the activation bytes of layers [j, i) on stage s, one
// micro-batch.
func (pr *problem) stageAct(s, j, i int) int64 {
	a := pr.act[i] - pr.act[j]
	if s == 0 {
		a += pr.embA
	}
	if s == pr.p-1 {
		a += pr.lossA
	}
	return a
}

// fits reports whether layers [j, i) fit stage s's memory.
func (pr *problem) fits(s, j, i int) bool {
	return pr.limit == 0 || pr.stageAct(s, j, i) <= pr.limit/pr.live[s]
}

// solve runs the two passes and returns the cuts (cuts[s] is the first
// layer of stage s, cuts[p] = n), or false when nothing fits.
func (pr *problem) solve() ([]int, bool) {
	n, p := pr.n, pr.p
	const inf = math.MaxInt64
	// Pass 1: the least bottleneck. best[s][i] over i layers on stages 0..s.
	best := make([][]int64, p)
	for s := range p {
		best[s] = make([]int64, n+1)
		for i := range best[s] {
			best[s][i] = inf
		}
	}
	for i := 1; i <= n-(p-1); i++ {
		if pr.fits(0, 0, i) {
			best[0][i] = pr.stageCost(0, 0, i)
		}
	}
	for s := 1; s < p; s++ {
		// Stage s takes layers [j, i): j >= s (stages before hold one
		// each), i <= n - (p-1-s) (one each for the stages after).
		for i := s + 1; i <= n-(p-1-s); i++ {
			// j descends: the stage grows, so its cost and memory only
			// rise; stop once either rules out any improvement.
			b := int64(inf)
			for j := i - 1; j >= s; j-- {
				c := pr.stageCost(s, j, i)
				if c >= b || !pr.fits(s, j, i) {
					break
				}
				if prev := best[s-1][j]; prev != inf {
					b = min(b, max(prev, c))
				}
			}
			best[s][i] = b
		}
	}
	bstar := best[p-1][n]
	if bstar == inf {
		return nil, false
	}
	// Pass 2: among splits with every stage <= bstar, the least sum of
	// squared stage costs (ms^2, float: a tie-break), earliest cut first.
	sq := make([][]float64, p)
	from := make([][]int32, p)
	for s := range p {
		sq[s] = make([]float64, n+1)
		from[s] = make([]int32, n+1)
		for i := range sq[s] {
			sq[s][i] = math.Inf(1)
		}
	}
	ms2 := func(c int64) float64 { x := float64(c) / 1e6; return x * x }
	for i := 1; i <= n-(p-1); i++ {
		if c := pr.stageCost(0, 0, i); c <= bstar && pr.fits(0, 0, i) {
			sq[0][i] = ms2(c)
		}
	}
	for s := 1; s < p; s++ {
		for i := s + 1; i <= n-(p-1-s); i++ {
			for j := i - 1; j >= s; j-- {
				c := pr.stageCost(s, j, i)
				if c > bstar || !pr.fits(s, j, i) {
					break
				}
				if math.IsInf(sq[s-1][j], 1) {
					continue
				}
				// <= keeps the smallest j on a tie: the earliest cut.
				if x := sq[s-1][j] + ms2(c); x <= sq[s][i] {
					sq[s][i], from[s][i] = x, int32(j)
				}
			}
		}
	}
	cuts := make([]int, p+1)
	cuts[p] = n
	for s := p - 1; s > 0; s-- {
		cuts[s] = int(from[s][cuts[s+1]])
	}
	return cuts, true
}

// evenCuts splits n layers into p stages by count.
func evenCuts(n, p int) []int {
	cuts := make([]int, p+1)
	q, r := n/p, n%p
	for s := range p {
		size := q
		if s < r {
			size++
		}
		cuts[s+1] = cuts[s] + size
	}
	return cuts
}

func sizes(cuts []int) []int {
	out := make([]int, len(cuts)-1)
	for s := range out {
		out[s] = cuts[s+1] - cuts[s]
	}
	return out
}

// fitsAll reports whether every stage of cuts fits memory.
func (pr *problem) fitsAll(cuts []int) bool {
	for s := range pr.p {
		if !pr.fits(s, cuts[s], cuts[s+1]) {
			return false
		}
	}
	return true
}

// evaluate describes the split cuts and predicts its step.
func (pr *problem) evaluate(cuts []int) ([]Stage, float64, float64, error) {
	out := make([]Stage, pr.p)
	fwd, bwd := make([]float64, pr.p), make([]float64, pr.p)
	var bottleneck int64
	for s := range pr.p {
		j, i := cuts[s], cuts[s+1]
		f, b := pr.fwd[i]-pr.fwd[j], pr.bwd[i]-pr.bwd[j]
		if s == 0 {
			f, b = f+pr.embF, b+pr.embB
		}
		if s == pr.p-1 {
			f, b = f+pr.lossF, b+pr.lossB
		}
		c := pr.stageCost(s, j, i)
		bottleneck = max(bottleneck, c)
		a := pr.stageAct(s, j, i)
		mem := int64(math.MaxInt64)
		if a <= math.MaxInt64/pr.live[s] {
			mem = a * pr.live[s]
		}
		fwd[s], bwd[s] = float64(f)/1e6, float64(b)/1e6
		out[s] = Stage{Stage: s, First: j, Last: i - 1, FirstName: pr.names[j], LastName: pr.names[i-1], FwdMs: fwd[s], BwdMs: bwd[s], CostMs: float64(c) / 1e6,
			ActBytes: a, LiveBound: int(pr.live[s]), MemBytes: mem}
	}
	tl, err := pr.sched.Replay(func(st int, a schedule.Action) float64 {
		switch a.Kind {
		case trace.F:
			return fwd[st]
		case trace.B:
			if pr.sched.SplitBackward {
				return bwd[st] / 2
			}
			return bwd[st]
		case trace.W:
			return bwd[st] / 2
		}
		return 0
	})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("replaying %s: %w", pr.sched.Name, err)
	}
	return out, float64(bottleneck) / 1e6, tl.StepTime, nil
}

// Sizes returns the number of layers of each stage of r.
func (r *Result) Sizes() []int {
	out := make([]int, len(r.Split))
	for i, s := range r.Split {
		out[i] = s.Last - s.First + 1
	}
	return out
}
