package analyze

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/ppprof/ppprof/internal/hugepage"
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

// fitP2P fits the transfers of the steps xs (in step order) per boundary,
// per direction and all together. A fit's sums run over its transfers in
// the order of xs, as they always have (a float sum depends on its
// order), all groups in the same two passes; its medians are selected
// from the transfers' values partitioned by boundary (a median does not
// depend on the order), the boundaries' on every core.
func fitP2P(xs []*stepXfers) *p2pModel {
	m := &p2pModel{byBoundary: map[boundaryKey]xferFit{}}
	n := 0
	for _, p := range xs {
		n += p.len()
	}
	// Groups: 0 all, 1 + direction, 3 + a boundary's index (in order of
	// first appearance); kgrp[s][i] is the boundary group of step s's
	// kind i (a step's kinds are in the order they first appear).
	bidx := map[boundaryKey]int32{}
	var bkeys []boundaryKey
	kgrp := make([][]int32, len(xs))
	for s, p := range xs {
		kgrp[s] = make([]int32, len(p.kinds))
		for i, k := range p.kinds {
			g, found := bidx[k.boundaryKey]
			if !found {
				g = int32(3 + len(bkeys))
				bidx[k.boundaryKey] = g
				bkeys = append(bkeys, k.boundaryKey)
			}
			kgrp[s][i] = g
		}
	}
	accs := make([]xferAcc, 3+len(bkeys))
	for i := range accs {
		accs[i] = xferAcc{lo: math.Inf(1), hi: math.Inf(-1), known: true}
	}
	sumGroups(accs, xs, kgrp, false)
	for i := range accs {
		accs[i].center()
	}
	sumGroups(accs, xs, kgrp, true)

	// Each step's transfers of each kind, and each boundary's.
	kcnt := make([][]int, len(xs))
	cnt := make([]int, len(bkeys))
	for s, p := range xs {
		kcnt[s] = make([]int, len(p.kinds))
		for _, ki := range p.kind {
			kcnt[s][ki]++
		}
		for ki, c := range kcnt[s] {
			cnt[kgrp[s][ki]-3] += c
		}
	}
	start := make([]int, len(bkeys)) // each boundary's first index
	dirOff := [3]int{}               // each direction's run: [dirOff[d], dirOff[d+1])
	at := 0
	for dir := range 2 {
		dirOff[dir] = at
		for b, key := range bkeys {
			if int(key.dir&1) == dir {
				start[b] = at
				at += cnt[b]
			}
		}
	}
	dirOff[2] = at
	// Durations partitioned by boundary, the boundaries of direction 0
	// first: each direction's are then one run of ds, whose median needs
	// no copy (gathering them grew lists of every transfer: 2.6 s of a
	// what-if's 30 of CPU on 24.7M events).
	ds := hugepage.Make[int64](n)
	next := slices.Clone(start)
	for s, p := range xs {
		for j, ki := range p.kind {
			b := kgrp[s][ki] - 3
			ds[next[b]] = p.durNs[j]
			next[b]++
		}
	}
	// The payloads, as counts of each value per boundary (a step's
	// transfers of one kind share theirs): no list of every transfer's.
	bytesOf := make([][]valueCount, len(bkeys))
	for s, p := range xs {
		for ki, k := range p.kinds {
			if c := kcnt[s][ki]; c > 0 {
				b := kgrp[s][ki] - 3
				bytesOf[b] = append(bytesOf[b], valueCount{k.bytes, c})
			}
		}
	}
	// Medians: each boundary's in place; then each direction's, gathered;
	// then all (the partition reordered within boundaries holds the same
	// values).
	type meds struct{ dur, bytes float64 }
	med := make([]meds, len(accs))
	forEach(len(bkeys), func(_, b int) {
		a, lo, hi := &accs[3+b], start[b], start[b]+cnt[b]
		med[3+b].dur = medianNs(ds[lo:hi])
		if a.known {
			med[3+b].bytes = medianOfCounts(bytesOf[b]) // (reordered: the same counts)
		}
	})
	forEach(2, func(_, dir int) {
		lo, hi := dirOff[dir], dirOff[dir+1]
		med[1+dir].dur = medianNs(ds[lo:hi])
		if accs[1+dir].known {
			var vc []valueCount
			for b, key := range bkeys {
				if int(key.dir&1) == dir {
					vc = append(vc, bytesOf[b]...)
				}
			}
			med[1+dir].bytes = medianOfCounts(vc)
		}
	})
	med[0].dur = medianNs(ds)
	if accs[0].known {
		med[0].bytes = medianOfCounts(slices.Concat(bytesOf...))
	}
	for b, k := range bkeys {
		m.byBoundary[k] = accs[3+b].fit(med[3+b].dur, med[3+b].bytes)
	}
	m.byDir[0], m.byDir[1] = accs[1].fit(med[1].dur, med[1].bytes), accs[2].fit(med[2].dur, med[2].bytes)
	m.all = accs[0].fit(med[0].dur, med[0].bytes)
	return m
}

// valueCount is count values equal to value.
type valueCount struct {
	value int64
	count int
}

// medianOfCounts returns the median of the values vc counts (medianOf of
// the list holding each value count times), reordering vc.
func medianOfCounts(vc []valueCount) float64 {
	n := 0
	for _, x := range vc {
		n += x.count
	}
	if n == 0 {
		return 0
	}
	slices.SortFunc(vc, func(a, b valueCount) int { return cmp.Compare(a.value, b.value) })
	// The values at positions n/2 and, for an even n, n/2 - 1 of the
	// sorted list.
	at := func(k int) int64 {
		for _, x := range vc {
			if k < x.count {
				return x.value
			}
			k -= x.count
		}
		panic("medianOfCounts: position past the counts")
	}
	hi := at(n / 2)
	if n%2 == 1 {
		return float64(hi)
	}
	return (float64(at(n/2-1)) + float64(hi)) / 2
}

// sumGroups is one of fitP2P's passes over the transfers xs (kgrp: each
// step's kinds' boundary groups): each adds to its three groups (all, its
// direction, its boundary), centred on the second pass.
func sumGroups(accs []xferAcc, xs []*stepXfers, kgrp [][]int32, centred bool) {
	for s, p := range xs {
		for j, ki := range p.kind {
			k := &p.kinds[ki]
			b, d := float64(k.bytes), float64(p.durNs[j])
			for _, g := range [3]int32{0, 1 + int32(k.dir&1), kgrp[s][ki]} {
				if centred {
					accs[g].addCentred(b, d)
				} else {
					accs[g].add(b, d)
				}
			}
		}
	}
}

// xferAcc is what fitP2P sums of one group of transfers (see p2pModel).
type xferAcc struct {
	n      int
	lo, hi float64 // payload range
	known  bool    // every payload > 0
	line   bool    // a line is fitted: payloads known and spread, n >= 3
	// The sums of payloads (x) and times (y), then their means, and the
	// sums of the line's fit.
	mx, my, sxy, sxx, xy, xx float64
}

// add is the first pass's step: one transfer of b bytes in d ns.
func (a *xferAcc) add(b, d float64) {
	a.n++
	a.lo, a.hi = min(a.lo, b), max(a.hi, b)
	if b <= 0 {
		a.known = false
	}
	a.mx += b
	a.my += d
}

// center ends the first pass.
func (a *xferAcc) center() {
	a.line = a.known && a.hi > 1.05*a.lo && a.n >= 3
	if a.line {
		a.mx, a.my = a.mx/float64(a.n), a.my/float64(a.n)
	}
}

// addCentred is the second pass's step, for a group fitted by a line.
func (a *xferAcc) addCentred(b, d float64) {
	if a.line {
		a.sxy += (b - a.mx) * (d - a.my)
		a.sxx += (b - a.mx) * (b - a.mx)
		a.xy += b * d
		a.xx += b * b
	}
}

// fit is the group's fit, given the medians of its times and payloads.
func (a *xferAcc) fit(medNs, medBytes float64) xferFit {
	if a.n == 0 {
		return xferFit{}
	}
	f := xferFit{ok: true, constNs: medNs}
	if !a.known {
		return f
	}
	f.bytes = medBytes
	if a.line {
		slope := a.sxy / a.sxx
		if slope <= 0 {
			return f
		}
		f.perByte, f.nsPerByte, f.latNs = true, slope, a.my-slope*a.mx
		if f.latNs < 0 {
			f.latNs, f.nsPerByte = 0, a.xy/a.xx
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
