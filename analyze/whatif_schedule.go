package analyze

import (
	"fmt"
	"math"
	"slices"

	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/trace"
)

// p2pModel predicts a transfer's time from its boundary and payload,
// fitted on the replayed steps' transfers (each the receive's duration:
// from the later post of the pair to the receive's end).
//
// Per boundary (from stage, to stage, direction), with n transfers:
//
//   - payloads known and spread (the largest > 1.05 x the smallest, n >=
//     3): a least-squares line time = latency + bytes / bandwidth; a
//     negative latency refits through the origin, a negative slope leaves
//     the median time, whatever the payload;
//   - payloads known, all alike: time proportional to the payload, median
//     time / median payload ns per byte (one payload cannot separate
//     latency from bandwidth: the bandwidth-bound case is assumed);
//   - payloads unknown (0): the median time, scaled with the payload
//     factor as if proportional.
//
// A boundary with no transfers (the wrap-around ones of a new interleaved
// schedule) uses the fit of all transfers of its direction, then of all.
type p2pModel struct {
	byBoundary map[boundaryKey]xferFit
	byDir      [2]xferFit
	all        xferFit
}

// xferFit is one fitted boundary.
type xferFit struct {
	ok        bool
	perByte   bool    // latency + bytes x nsPerByte; else constNs
	latNs     float64 // ns
	nsPerByte float64
	bytes     float64 // median payload, bytes
	constNs   float64 // median time, ns
}

// predict returns the time of a transfer of sizeFactor x the median
// payload, ns.
func (f xferFit) predict(sizeFactor float64) float64 {
	if f.perByte {
		return f.latNs + f.nsPerByte*f.bytes*sizeFactor
	}
	return f.constNs * sizeFactor
}

func fitP2P(xs []xferSample) *p2pModel {
	m := &p2pModel{byBoundary: map[boundaryKey]xferFit{}}
	// Groups in the order of xs (the fits' sums depend on it), each
	// allocated once at its size.
	count := map[boundaryKey]int{}
	var ndir [2]int
	for _, x := range xs {
		count[boundaryKey{x.from, x.to, x.dir}]++
		ndir[x.dir&1]++
	}
	by := make(map[boundaryKey][]xferSample, len(count))
	for k, n := range count {
		by[k] = make([]xferSample, 0, n)
	}
	dirs := [2][]xferSample{make([]xferSample, 0, ndir[0]), make([]xferSample, 0, ndir[1])}
	for _, x := range xs {
		k := boundaryKey{x.from, x.to, x.dir}
		by[k] = append(by[k], x)
		dirs[x.dir] = append(dirs[x.dir], x)
	}
	for k, s := range by {
		m.byBoundary[k] = fitXfers(s)
	}
	m.byDir[0], m.byDir[1] = fitXfers(dirs[0]), fitXfers(dirs[1])
	m.all = fitXfers(xs)
	return m
}

// fitXfers fits one group of transfers (see p2pModel).
func fitXfers(xs []xferSample) xferFit {
	n := len(xs)
	if n == 0 {
		return xferFit{}
	}
	ds, bs := make([]float64, n), make([]float64, n)
	lo, hi := math.Inf(1), math.Inf(-1)
	known := true
	for i, x := range xs {
		ds[i], bs[i] = float64(x.durNs), float64(x.bytes)
		if x.bytes <= 0 {
			known = false
		}
		lo, hi = min(lo, bs[i]), max(hi, bs[i])
	}
	f := xferFit{ok: true, constNs: median(ds)}
	if !known {
		return f
	}
	f.bytes = median(bs)
	if hi > 1.05*lo && n >= 3 {
		var mx, my float64
		for i := range n {
			mx += bs[i]
			my += ds[i]
		}
		mx, my = mx/float64(n), my/float64(n)
		var sxy, sxx, xy, xx float64
		for i := range n {
			sxy += (bs[i] - mx) * (ds[i] - my)
			sxx += (bs[i] - mx) * (bs[i] - mx)
			xy += bs[i] * ds[i]
			xx += bs[i] * bs[i]
		}
		slope := sxy / sxx
		if slope <= 0 {
			return f
		}
		f.perByte, f.nsPerByte, f.latNs = true, slope, my-slope*mx
		if f.latNs < 0 {
			f.latNs, f.nsPerByte = 0, xy/xx
		}
		return f
	}
	f.perByte, f.nsPerByte = true, f.constNs/f.bytes
	return f
}

// predict returns the time, ns, of a transfer from stage from to stage to
// in direction dir (0 activations, 1 gradients) of sizeFactor x the
// boundary's median payload.
func (m *p2pModel) predict(from, to int32, dir uint8, sizeFactor float64) int64 {
	f, ok := m.byBoundary[boundaryKey{from, to, dir}]
	if !ok || !f.ok {
		f = m.byDir[dir]
	}
	if !f.ok {
		f = m.all
	}
	if !f.ok {
		return 0
	}
	return roundNs(f.predict(sizeFactor))
}

// scheduleGraph builds the graph of one pipeline replica running s: stage
// st is local rank st, a compute action costs cost(st, a) ns and a receive
// xfer(st, a) ns (its transfer). Every rank begins at 0, with no launch
// delays.
func scheduleGraph(s *schedule.Schedule, cost, xfer func(st int, a schedule.Action) int64) (*stepGraph, error) {
	ranks := make([]gRank, s.Stages)
	for st, acts := range s.Actions {
		r := gRank{rank: trace.Rank(st), stage: int32(st), ops: make([]gOp, len(acts))}
		for i, a := range acts {
			op := gOp{row: -1, kind: a.Kind, class: ncCompute, peer: int32(a.Peer), join: -1, stage: int32(st),
				chunk: int32(a.Chunk), mb: int32(a.MicroBatch)}
			switch {
			case a.Kind.IsSend():
				op.class = ncSend
			case a.Kind.IsRecv():
				op.class, op.dur = ncRecv, xfer(st, a)
			default:
				op.dur = cost(st, a)
			}
			r.ops[i] = op
		}
		ranks[st] = r
	}
	return newStepGraph(0, ranks, 0, false)
}

// makespan re-times g with its durations and returns its span, ns.
func (g *stepGraph) makespan() int64 {
	s, e := g.run(g.meas, nil)
	return e - s
}

// costs are per-stage compute costs of a new schedule, ns: per (stage,
// chunk, kind).
type costs map[sampleKey]float64

// med returns the median of (stage, chunk, kind) over the replicas, 0
// when the trace has none.
func (st *whatIfStats) med(stage, chunk int32, k trace.Kind) float64 {
	return st.chunk[sampleKey{-1, stage, chunk, k}]
}

// stageTotal is the sum over the stage's chunks of its per-chunk medians
// of kind k: one micro-batch over the whole stage.
func (st *whatIfStats) stageTotal(stage int32, k trace.Kind) float64 {
	var sum float64
	for c := range int32(st.v) {
		sum += st.med(stage, c, k)
	}
	return sum
}

// predictSchedule builds schedule name (p stages, m micro-batches, v
// chunks), times it with c and transfers at sizeFactor x the payload, and
// returns the predicted step (its makespan plus the measured overhead
// outside the pipeline window), ms.
func (st *whatIfStats) predictSchedule(name string, m, v int, c costs, sizeFactor float64) (float64, error) {
	// maxScheduleActions (analyze.go) and the trace's own row count bound the
	// schedule, so metadata cannot make the what-if build more than the
	// trace holds.
	if n := int64(st.p) * int64(m) * int64(v); n > maxScheduleActions || n > st.rows {
		return 0, fmt.Errorf("%d stages x %d micro-batches x %d chunks: too large a schedule to build from this trace", st.p, m, v)
	}
	s, err := schedule.New(name, st.p, m, v)
	if err != nil {
		return 0, err
	}
	g, err := scheduleGraph(s,
		func(stage int, a schedule.Action) int64 {
			return roundNs(c[sampleKey{-1, int32(stage), int32(a.Chunk), a.Kind}])
		},
		func(stage int, a schedule.Action) int64 {
			return st.p2p.predict(int32(a.Peer), int32(stage), p2pDir(a.Kind), sizeFactor)
		})
	if err != nil {
		return 0, err
	}
	return (float64(g.makespan()) + st.overhead) / 1e6, nil
}

// schedules predicts the scenarios that change the schedule:
// double_microbatches, interleave_v2 and zb_h1 (see their constants).
func (st *whatIfStats) schedules(wi *WhatIf) []Scenario {
	name, m, v, p := wi.Schedule, wi.MicroBatches, max(wi.Virtual, 1), st.p
	known := slices.Contains(schedule.Names, name)
	out := []Scenario{
		{Name: ScenarioDoubleMicroBatches}, {Name: ScenarioInterleaveV2}, {Name: ScenarioZBH1},
	}
	if m < 1 || p < 1 {
		for i := range out {
			out[i].Detail = "the trace does not say how many micro-batches a step has"
		}
		return out
	}
	// The current schedule with the same median costs, for reference.
	cur := costs{}
	for k, x := range st.chunk {
		if k.kind.IsCompute() {
			cur[k] = x
		}
	}
	ref := ""
	if known {
		if ms, err := st.predictSchedule(name, m, v, cur, 1); err == nil {
			ref = fmt.Sprintf("; the current %s with the same median costs: %.4g ms", name, ms)
		}
	}
	set := func(i int, desc string, ms float64, err error) {
		if err != nil {
			out[i].Detail = fmt.Sprintf("%s: %v", desc, err)
			return
		}
		out[i].Available, out[i].StepMs, out[i].Detail = true, ms, desc+ref
	}

	// double_microbatches
	if !known {
		out[0].Detail = fmt.Sprintf("the schedule is not identified (%q): no order to rebuild with twice the micro-batches", name)
	} else {
		half := costs{}
		for k, x := range cur {
			half[k] = x / 2
		}
		ms, err := st.predictSchedule(name, 2*m, v, half, 0.5)
		set(0, fmt.Sprintf("%s with %d micro-batches instead of %d, each half as large: compute at half the median per (stage, chunk, kind), transfers at half the payload",
			name, 2*m, m), ms, err)
	}

	// interleave_v2
	il := costs{}
	for s := range int32(p) {
		f := st.stageTotal(s, trace.F)
		b := st.stageTotal(s, trace.B) + st.stageTotal(s, trace.W)
		for c := range int32(2) {
			il[sampleKey{-1, s, c, trace.F}], il[sampleKey{-1, s, c, trace.B}] = f/2, b/2
		}
	}
	if p < 2 {
		out[1].Detail = "one stage: nothing to interleave"
	} else {
		ms, err := st.predictSchedule(schedule.InterleavedName, m, 2, il, 1)
		set(1, fmt.Sprintf("interleaved 1F1B with 2 chunks per stage, each at half the stage's median F and B%s",
			map[bool]string{true: " (W folded into B)", false: ""}[st.split]), ms, err)
	}

	// zb_h1
	zb := costs{}
	how := "B and W each half the measured backward (the trace records no W)"
	for s := range int32(p) {
		f, b, w := st.stageTotal(s, trace.F), st.stageTotal(s, trace.B), st.stageTotal(s, trace.W)
		if !st.split {
			b, w = b/2, b/2
		}
		zb[sampleKey{-1, s, 0, trace.F}], zb[sampleKey{-1, s, 0, trace.B}], zb[sampleKey{-1, s, 0, trace.W}] = f, b, w
	}
	if st.split {
		how = "B and W at their measured medians"
	}
	ms, err := st.predictSchedule(schedule.ZBH1Name, m, 1, zb, 1)
	set(2, "ZB-H1 with "+how, ms, err)
	return out
}
