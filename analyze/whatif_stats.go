package analyze

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
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

// newWhatIfStats gathers the samples of the replayed steps ok.
func newWhatIfStats(ix *index, ok []*stepBase) *whatIfStats {
	st := &whatIfStats{p: ix.p, v: 1, steps: len(ok), worker: map[sampleKey]float64{}, workerN: map[sampleKey]int{},
		chunk: map[sampleKey]float64{}, stage: map[sampleKey]float64{}, ranksOf: map[[2]int32][]int{}, rows: int64(ix.t.Len())}
	// Each key's samples in step and graph order (as the medians' inputs
	// always were), each list allocated once at its size: a job's steps
	// hold a sample per compute op and transfer. A rank's program cycles
	// through a few keys (F, B, their receives, per chunk), so the last
	// keys found are looked up before the map.
	ids := map[sampleKey]int32{}
	var keysSeen []sampleKey
	var cnt []int
	var cache [8]struct {
		k  sampleKey
		id int32
	}
	for c := range cache {
		cache[c].id = -1
	}
	slot := 0
	idOf := func(k sampleKey) int32 {
		for _, c := range cache {
			if c.id >= 0 && c.k == k {
				return c.id
			}
		}
		id, found := ids[k]
		if !found {
			id = int32(len(keysSeen))
			ids[k] = id
			keysSeen, cnt = append(keysSeen, k), append(cnt, 0)
		}
		cache[slot].k, cache[slot].id = k, id
		slot = (slot + 1) % len(cache)
		return id
	}
	nSamples, nx := 0, 0
	for _, s := range ok {
		nSamples += len(s.samples)
		nx += len(s.xfers)
	}
	sid := make([]int32, 0, nSamples)
	for _, s := range ok {
		for _, x := range s.samples {
			if x.key.chunk < 0 || x.key.chunk >= maxChunks {
				sid = append(sid, -1) // bad input: no schedule has such a chunk
				continue
			}
			id := idOf(x.key)
			cnt[id]++
			sid = append(sid, id)
		}
	}
	lists := make([][]float64, len(keysSeen))
	for id, n := range cnt {
		lists[id] = make([]float64, 0, n)
	}
	xs := make([]xferSample, 0, nx)
	var over []float64
	j := 0
	for _, s := range ok {
		for _, x := range s.samples {
			if id := sid[j]; id >= 0 {
				lists[id] = append(lists[id], float64(x.durNs))
			}
			j++
		}
		xs = append(xs, s.xfers...)
		over = append(over, float64(s.measNs-s.windowNs))
	}
	byKey := make(map[sampleKey][]float64, len(keysSeen))
	pipes := map[int32]bool{}
	for id, k := range keysSeen {
		byKey[k] = lists[id]
		pipes[k.pipeline] = true
		if k.kind == trace.W {
			st.split = true
		}
		st.v = max(st.v, int(k.chunk)+1)
	}
	st.replicas = slices.Sorted(maps.Keys(pipes))
	// Coarser groups pool the finer ones, in key order (deterministic).
	byChunk, byStage := map[sampleKey][]float64{}, map[sampleKey][]float64{}
	keys := slices.SortedFunc(maps.Keys(byKey), cmpSampleKey)
	st.keys = keys
	nChunk, nStage := map[sampleKey]int{}, map[sampleKey]int{}
	for _, k := range keys {
		nChunk[sampleKey{-1, k.stage, k.chunk, k.kind}] += len(byKey[k])
		if k.kind.IsCompute() {
			nStage[sampleKey{-1, k.stage, -1, k.kind}] += len(byKey[k])
		}
	}
	for k, n := range nChunk {
		byChunk[k] = make([]float64, 0, n)
	}
	for k, n := range nStage {
		byStage[k] = make([]float64, 0, n)
	}
	for _, k := range keys {
		st.workerN[k] = len(byKey[k])
		ck := sampleKey{-1, k.stage, k.chunk, k.kind}
		byChunk[ck] = append(byChunk[ck], byKey[k]...)
		if k.kind.IsCompute() {
			sk := sampleKey{-1, k.stage, -1, k.kind}
			byStage[sk] = append(byStage[sk], byKey[k]...)
		}
	}
	var buf []float64
	med := func(xs []float64) float64 {
		buf = append(buf[:0], xs...)
		return selectMedian(buf)
	}
	for k, xs := range byKey {
		st.worker[k] = med(xs)
	}
	for k, xs := range byChunk {
		st.chunk[k] = med(xs)
	}
	for k, xs := range byStage {
		st.stage[k] = med(xs)
	}
	st.p2p = fitP2P(xs)
	st.overhead = max(median(over), 0)
	if len(xs) > 0 {
		ds := make([]float64, len(xs))
		for i, x := range xs {
			ds[i] = float64(x.durNs)
		}
		st.xferMed = selectMedian(ds)
		st.xferPerSt = float64(len(xs)) / float64(len(ok))
	}
	// Stragglers, and the ranks of each worker.
	st.og = newOpGroups(ix)
	t := ix.t
	for _, s := range ok {
		for _, w := range s.ws {
			for _, i := range ix.windows[w].rows {
				if x := st.og.group(t, i); x >= 0 {
					if c, _, _ := st.og.judge(t, i, x); c != "" {
						st.stragglrs++
					}
				}
			}
		}
	}
	seen := map[trace.Rank]bool{}
	for _, w := range ix.windows {
		for _, i := range w.rows {
			if r := t.Rank[i]; !seen[r] {
				seen[r] = true
				k := [2]int32{t.Pipeline[i], int32(t.Stage[i])}
				st.ranksOf[k] = append(st.ranksOf[k], int(r))
			}
		}
	}
	for k := range st.ranksOf {
		slices.Sort(st.ranksOf[k])
	}
	return st
}

func cmpSampleKey(a, b sampleKey) int {
	return cmp.Or(cmp.Compare(a.pipeline, b.pipeline), cmp.Compare(a.stage, b.stage), cmp.Compare(a.chunk, b.chunk), cmp.Compare(a.kind, b.kind))
}

// plans returns the scenarios that keep every rank's order, in
// ScenarioNames order.
func (st *whatIfStats) plans(ix *index) []plan {
	return []plan{st.balancedPlan(), st.noStragglersPlan(ix.t), st.freeP2PPlan(), st.slowWorkerPlan()}
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

func (st *whatIfStats) balancedPlan() plan {
	scale := st.balancedScale()
	var parts []string
	for s := range st.p {
		var ks []string
		for k, name := range []string{"F", "B", "W"} {
			if scale[s][k] < 1 {
				ks = append(ks, fmt.Sprintf("%s x%.3g", name, scale[s][k]))
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
	return plan{name: ScenarioBalanced, detail: detail, change: func(g *stepGraph, dur []int64) {
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

func (st *whatIfStats) noStragglersPlan(t *trace.Trace) plan {
	og := st.og
	detail := "no op is a straggler (median + 5 MAD and 1.25x its (stage, chunk, kind))"
	if st.stragglrs > 0 {
		detail = fmt.Sprintf("%d straggler ops (%.3g per step; median + 5 MAD and 1.25x their (stage, chunk, kind)) at their expected durations",
			st.stragglrs, float64(st.stragglrs)/float64(st.steps))
	}
	return plan{name: ScenarioNoStragglers, detail: detail, change: func(g *stepGraph, dur []int64) {
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
	return plan{name: ScenarioFreeP2P, detail: detail, change: func(g *stepGraph, dur []int64) {
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
	detail := fmt.Sprintf("no worker is slower than its peers (the slowest, pipeline %d stage %d, is %.3gx)", w.pipeline, w.stage, w.factor)
	if len(w.scale) > 0 && w.factor > 1 {
		detail = fmt.Sprintf("the slowest worker, pipeline %d stage %d (%s), %.3gx its peers in the other replicas, at their medians",
			w.pipeline, w.stage, rankList(st.ranksOf[[2]int32{w.pipeline, w.stage}]), w.factor)
	}
	return plan{name: ScenarioSlowWorkerFixed, detail: detail, change: func(g *stepGraph, dur []int64) {
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
