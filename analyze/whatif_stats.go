package analyze

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/ppprof/ppprof/trace"
)

// whatIfStats is what the scenarios are derived from: the medians of the
// replayed steps' samples. Durations are ns.
type whatIfStats struct {
	p, v      int
	replicas  []int32 // pipeline ids seen, ascending
	split     bool    // the trace records W
	steps     int
	keys      []sampleKey           // the keys of worker, sorted
	worker    map[sampleKey]float64 // median per (pipeline, stage, chunk, kind)
	workerN   map[sampleKey]int     // samples per key (over steps and TP ranks)
	chunk     map[sampleKey]float64 // median per (stage, chunk, kind), pipeline -1
	stage     map[sampleKey]float64 // median per (stage, kind), pipeline and chunk -1
	p2p       *p2pModel
	overhead  float64 // median of measured span - longest measured window
	og        *opGroups
	stragglrs int                // ops the straggler test flags over the replayed steps
	xferPerSt float64            // transfers per step
	xferMed   float64            // median transfer, ns
	ranksOf   map[[2]int32][]int // (pipeline, stage) -> global ranks
	rows      int64              // rows of the trace: a bound on schedules to build
}

// newWhatIfStats gathers the samples of the replayed steps ok; og is the
// straggler test's groups (newOpGroups), ranksOf the ranks of each
// (pipeline, stage) (baselinePass).
func newWhatIfStats(ix *index, ok []*stepBase, og *opGroups, ranksOf map[[2]int32][]int) *whatIfStats {
	st := &whatIfStats{p: ix.p, v: 1, steps: len(ok), worker: map[sampleKey]float64{}, workerN: map[sampleKey]int{},
		chunk: map[sampleKey]float64{}, stage: map[sampleKey]float64{}, ranksOf: ranksOf, rows: int64(ix.tot.events), og: og}
	// The medians of every key's samples over the steps, and of the
	// coarser groups that pool them: (stage, chunk, kind), and (stage,
	// kind) for compute ops. A median does not depend on the order of its
	// samples: each pool is gathered from the steps' lists into a worker's
	// buffer and selected there, every pool on some core.
	type part struct{ step, key int32 } // key index in ok[step].samples
	type pool struct {
		level int8 // 0 a key, 1 its (stage, chunk, kind), 2 its (stage, kind)
		k     sampleKey
	}
	var pools []pool
	var parts [][]part
	poolOf := map[pool]int{}
	add := func(pl pool, p part) {
		x, found := poolOf[pl]
		if !found {
			x = len(pools)
			poolOf[pl] = x
			pools, parts = append(pools, pl), append(parts, nil)
		}
		parts[x] = append(parts[x], p)
	}
	pipes := map[int32]bool{}
	for si, s := range ok {
		for i, k := range s.samples.keys {
			p := part{int32(si), int32(i)}
			add(pool{0, k}, p)
			add(pool{1, sampleKey{-1, k.stage, k.chunk, k.kind}}, p)
			if k.kind.IsCompute() {
				add(pool{2, sampleKey{-1, k.stage, -1, k.kind}}, p)
			}
		}
	}
	meds, ns := make([]float64, len(pools)), make([]int, len(pools))
	bufs := make([][]int64, workers(len(pools)))
	forEach(len(pools), func(w, x int) {
		buf := bufs[w][:0]
		for _, p := range parts[x] {
			buf = ok[p.step].samples.appendOf(buf, int(p.key))
		}
		meds[x], ns[x], bufs[w] = medianNs(buf), len(buf), buf
	})
	for x, pl := range pools {
		switch k := pl.k; pl.level {
		case 0:
			st.worker[k], st.workerN[k] = meds[x], ns[x]
			pipes[k.pipeline] = true
			if k.kind == trace.W {
				st.split = true
			}
			st.v = max(st.v, int(k.chunk)+1)
		case 1:
			st.chunk[k] = meds[x]
		default:
			st.stage[k] = meds[x]
		}
	}
	st.keys = slices.SortedFunc(maps.Keys(st.worker), cmpSampleKey)
	st.replicas = slices.Sorted(maps.Keys(pipes))
	xs := make([]*stepXfers, len(ok))
	over := make([]float64, len(ok))
	nx := 0
	for k, s := range ok {
		xs[k] = &s.xfers
		nx += s.xfers.len()
		over[k] = float64(s.measNs - s.windowNs)
	}
	st.p2p = fitP2P(xs)
	st.overhead = max(median(over), 0)
	if nx > 0 {
		st.xferMed = st.p2p.all.constNs // the median of every transfer's time
		st.xferPerSt = float64(nx) / float64(len(ok))
	}
	for _, s := range ok {
		st.stragglrs += s.stragglers
	}
	return st
}

func cmpSampleKey(a, b sampleKey) int {
	return cmp.Or(cmp.Compare(a.pipeline, b.pipeline), cmp.Compare(a.stage, b.stage), cmp.Compare(a.chunk, b.chunk), cmp.Compare(a.kind, b.kind))
}

// plans returns the scenarios that keep every rank's order, in
// ScenarioNames order.
func (st *whatIfStats) plans() []plan {
	return []plan{st.balancedPlan(), st.noStragglersPlan(), st.freeP2PPlan(), st.slowWorkerPlan()}
}

// balancedScale returns, per stage and compute kind (0 F, 1 B, 2 W), the
// factor that brings the stage to the median stage (at most 1), and the
// targets.
func (st *whatIfStats) balancedScale() [][3]float64 {
	scale := make([][3]float64, st.p)
	for s := range scale {
		scale[s] = [3]float64{1, 1, 1}
	}
	for k, kind := range []trace.Kind{trace.F, trace.B, trace.W} {
		var meds []float64
		for s := range st.p {
			if m, ok := st.stage[sampleKey{-1, int32(s), -1, kind}]; ok {
				meds = append(meds, m)
			}
		}
		target := median(meds)
		for s := range st.p {
			if m, ok := st.stage[sampleKey{-1, int32(s), -1, kind}]; ok && m > target && m > 0 {
				scale[s][k] = target / m
			}
		}
	}
	return scale
}

// factorString formats a factor with three significant digits, or as
// many more (up to six) as it takes not to read "1" when it is not 1: a
// stage 0.04% slower than the median one is sped up by x0.9996, not
// "x1", and a worker 0.03% slower than its peers is 1.0003x them.
func factorString(f float64) string {
	for digits := 3; ; digits++ {
		if s := strconv.FormatFloat(f, 'g', digits, 64); s != "1" || digits == 6 {
			return s
		}
	}
}

func (st *whatIfStats) balancedPlan() plan {
	scale := st.balancedScale()
	var parts []string
	for s := range st.p {
		var ks []string
		for k, name := range []string{"F", "B", "W"} {
			if scale[s][k] < 1 {
				ks = append(ks, name+" x"+factorString(scale[s][k]))
			}
		}
		if len(ks) > 0 {
			parts = append(parts, fmt.Sprintf("stage %d %s", s, strings.Join(ks, ", ")))
		}
	}
	detail := "no stage is slower than the median stage"
	if len(parts) > 0 {
		detail = "stages slower than the median stage sped up to it: " + strings.Join(parts, "; ")
	}
	return plan{name: ScenarioBalanced, detail: detail, change: func(_ *trace.Trace, g *stepGraph, dur []int64) {
		for v := range dur {
			if g.class[v] != ncCompute {
				continue
			}
			if k := computeIndex(g.kind[v]); k >= 0 {
				if f := scale[g.stage[v]][k]; f < 1 {
					dur[v] = roundNs(float64(dur[v]) * f)
				}
			}
		}
	}}
}

func (st *whatIfStats) noStragglersPlan() plan {
	og := st.og
	detail := "no op is a straggler (median + 5 MAD and 1.25x its (stage, chunk, kind))"
	if st.stragglrs > 0 {
		detail = fmt.Sprintf("%d straggler ops (%.3g per step; median + 5 MAD and 1.25x their (stage, chunk, kind)) at their expected durations",
			st.stragglrs, float64(st.stragglrs)/float64(st.steps))
	}
	return plan{name: ScenarioNoStragglers, detail: detail, change: func(t *trace.Trace, g *stepGraph, dur []int64) {
		for v := range dur {
			row := g.row[v]
			if g.class[v] != ncCompute || row < 0 {
				continue
			}
			x := og.group(t, int(row))
			if x < 0 {
				continue
			}
			class, exp, typ := og.judge(t, int(row), x)
			if class == "" {
				continue
			}
			target := exp
			if class == StragglerLongSequence {
				target = typ
			}
			dur[v] = min(dur[v], roundNs(target))
		}
	}}
}

func (st *whatIfStats) freeP2PPlan() plan {
	detail := "the trace has no point-to-point transfers"
	if st.xferPerSt > 0 {
		detail = fmt.Sprintf("%.4g transfers per step (median %.3g ms) take no time", st.xferPerSt, st.xferMed/1e6)
	}
	return plan{name: ScenarioFreeP2P, detail: detail, change: func(t *trace.Trace, g *stepGraph, dur []int64) {
		for v := range dur {
			if g.class[v] == ncRecv {
				dur[v] = 0
			}
		}
	}}
}

// slowWorker is the worker furthest above its peers.
type slowWorker struct {
	pipeline, stage int32
	factor          float64              // its weighted medians over its peers'
	scale           map[[2]int32]float64 // (chunk, kind) -> peer median / its median, when < 1
	computeFactor   float64              // the same over F, B, W only (0: none)
	linkFactor      float64              // the same over the transfers it receives (0: none)
}

// slowestWorker finds it; ok is false with fewer than two replicas.
func (st *whatIfStats) slowestWorker() (slowWorker, bool) {
	if len(st.replicas) < 2 {
		return slowWorker{}, false
	}
	best := slowWorker{factor: -1}
	byWorker := map[[2]int32][]sampleKey{}
	for _, k := range st.keys {
		byWorker[[2]int32{k.pipeline, k.stage}] = append(byWorker[[2]int32{k.pipeline, k.stage}], k)
	}
	for _, pipe := range st.replicas {
		for s := range int32(st.p) {
			w := slowWorker{pipeline: pipe, stage: s, scale: map[[2]int32]float64{}}
			var mine, peers, mineC, peersC, mineL, peersL float64
			for _, k := range byWorker[[2]int32{pipe, s}] {
				med := st.worker[k]
				var ps []float64
				for _, q := range st.replicas {
					if q == pipe {
						continue
					}
					if m, ok := st.worker[sampleKey{q, s, k.chunk, k.kind}]; ok {
						ps = append(ps, m)
					}
				}
				if len(ps) == 0 {
					continue
				}
				pm := median(ps)
				n := float64(st.workerN[k])
				mine += n * med
				peers += n * pm
				if k.kind.IsCompute() {
					mineC += n * med
					peersC += n * pm
				} else {
					mineL += n * med
					peersL += n * pm
				}
				if med > pm && med > 0 {
					w.scale[[2]int32{k.chunk, int32(k.kind)}] = pm / med
				}
			}
			if peers <= 0 {
				continue
			}
			w.factor = mine / peers
			if peersC > 0 {
				w.computeFactor = mineC / peersC
			}
			if peersL > 0 {
				w.linkFactor = mineL / peersL
			}
			if w.factor > best.factor {
				best = w
			}
		}
	}
	return best, best.factor >= 0
}

func (st *whatIfStats) slowWorkerPlan() plan {
	w, ok := st.slowestWorker()
	if !ok {
		return plan{name: ScenarioSlowWorkerFixed, unavailable: "one pipeline replica: a worker has no peers to be compared with"}
	}
	detail := fmt.Sprintf("no worker is slower than its peers (the slowest, pipeline %d stage %d, is %sx)", w.pipeline, w.stage, factorString(w.factor))
	if len(w.scale) > 0 && w.factor > 1 {
		detail = fmt.Sprintf("the slowest worker, pipeline %d stage %d (%s), %sx its peers in the other replicas, at their medians",
			w.pipeline, w.stage, rankList(st.ranksOf[[2]int32{w.pipeline, w.stage}]), factorString(w.factor))
	}
	return plan{name: ScenarioSlowWorkerFixed, detail: detail, change: func(t *trace.Trace, g *stepGraph, dur []int64) {
		if len(w.scale) == 0 {
			return
		}
		for v := range dur {
			if c := g.class[v]; c != ncCompute && c != ncRecv {
				continue
			}
			r := g.ranks[g.owner[v]]
			if r.pipeline != w.pipeline || r.stage != w.stage {
				continue
			}
			if f, ok := w.scale[[2]int32{g.chunk[v], int32(g.kind[v])}]; ok {
				dur[v] = roundNs(float64(dur[v]) * f)
			}
		}
	}}
}

// rankList renders ranks as "rank 5" or "ranks 4, 5".
func rankList(rs []int) string {
	if len(rs) == 1 {
		return fmt.Sprintf("rank %d", rs[0])
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprint(r)
	}
	return "ranks " + strings.Join(parts, ", ")
}
