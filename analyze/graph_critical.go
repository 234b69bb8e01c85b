package analyze

import (
	"cmp"
	"slices"

	"github.com/ppprof/ppprof/trace"
)

// CriticalPath is the chain of dependent ops that sets a step's time: from
// the op that ends the step back, through the dependency (program order,
// send -> receive, the last arrival at a join) that each op waited for
// last, to the first op. Its parts add up to the replayed step time
// exactly: compute (F, B, W), P2P transfers, joins (OPT and collectives),
// other ops (DATA, LOSS...) and waits (launch delays between an op's
// readiness and its start, and a rank that began the step late). Every
// time is a mean per step, ms, over the replayed steps, the graphs re-timed
// with measured durations (see stepGraph).
//
// On ties (two dependencies ready at the same time) the path follows the
// data: a receive whose send was posted no earlier than the receive was
// goes to the sender.
type CriticalPath struct {
	Steps        int     // steps summarised
	LengthMs     float64 // mean path length: the mean replayed step time
	ComputeMs    float64 // F, B and W on the path
	P2PMs        float64 // transfers on the path (the receives)
	CollectiveMs float64 // OPT and collectives on the path
	OtherMs      float64 // other ops of one rank on the path (DATA, LOSS...)
	WaitMs       float64 // launch delays and late rank starts on the path

	Stages       []PathStage      // per stage, every stage of the trace
	Kinds        []PathKind       // per kind on the path, most time first
	MicroBatches []PathMicroBatch // compute per micro-batch on the path, most time first: the critical micro-batches

	// PathStep is the step whose path Path lists: the step whose replayed
	// time is the median (the lower one for an even count).
	PathStep int64
	Path     []PathOp // its ops on the path in time order (sends, arrivals and barriers left out)
}

// PathStage is the time one stage contributes to the critical path, ms
// per step.
type PathStage struct {
	Stage     int
	ComputeMs float64 // its F, B and W on the path
	P2PMs     float64 // transfers it received on the path
}

// PathKind is the time one kind of op contributes to the path.
type PathKind struct {
	Kind string
	Ms   float64 // per step
	Ops  float64 // ops per step
}

// PathMicroBatch is the compute of one micro-batch on the path.
type PathMicroBatch struct {
	MicroBatch int
	Ms         float64 // per step
	Ops        float64 // ops per step
}

// PathOp is one op on the path of PathStep. Times are ms from the step's
// start.
type PathOp struct {
	Rank       int
	Pipeline   int
	Stage      int
	Chunk      int
	MicroBatch int // -1 when none
	Kind       string
	StartMs    float64
	EndMs      float64
	WaitMs     float64 // launch delay or late start before it, on the path
}

// pathSum is one step's critical path, in ns, before averaging.
type pathSum struct {
	lengthNs                              int64
	compute, p2p, collective, other, wait int64
	stageCompute, stageP2P                []int64 // per stage
	kindNs, kindOps                       map[trace.Kind]int64
	mbNs, mbOps                           map[int32]int64
	ops                                   []PathOp
}

// criticalPath walks the path of g's last run (whose span started at
// startNs) back from the op that ends last, with the given delays (nil:
// none). p is the number of stages.
func (g *stepGraph) criticalPath(startNs int64, delay []int64, p int) pathSum {
	ps := pathSum{stageCompute: make([]int64, p), stageP2P: make([]int64, p),
		kindNs: map[trace.Kind]int64{}, kindOps: map[trace.Kind]int64{},
		mbNs: map[int32]int64{}, mbOps: map[int32]int64{}}
	// 1. The sink: the op that ends last (on a tie the later node: the
	// higher rank, then the later op of its program), never a send (its
	// receive ends with it).
	sink := int32(-1)
	for v := range int32(g.numNodes()) {
		switch g.class[v] {
		case ncSend, ncArrive, ncBarrier:
			continue
		}
		if sink < 0 || g.e[v] >= g.e[sink] {
			sink = v
		}
	}
	if sink < 0 {
		return ps
	}
	ps.lengthNs = g.e[sink] - startNs
	// 2. Walk back along the binding in-edges.
	for v := sink; v >= 0; {
		own := g.e[v] - g.s[v]
		var gap int64
		c := g.crit[v]
		switch g.class[v] {
		case ncCompute, ncOther, ncSend, ncRecv, ncArrive:
			if delay != nil {
				gap = delay[v]
			}
		}
		if c < 0 {
			gap = g.s[v] - startNs // its delay and its rank's late begin
		}
		ps.wait += gap
		k, st := g.kind[v], g.stage[v]
		switch g.class[v] {
		case ncCompute:
			ps.compute += own
			ps.stageCompute[st] += own
			if g.mb[v] >= 0 {
				ps.mbNs[g.mb[v]] += own
				ps.mbOps[g.mb[v]]++
			}
		case ncRecv:
			ps.p2p += own
			ps.stageP2P[st] += own
		case ncJoin:
			ps.collective += own
		case ncOther:
			ps.other += own
		}
		switch g.class[v] {
		case ncCompute, ncRecv, ncJoin, ncOther:
			ps.kindNs[k] += own
			ps.kindOps[k]++
			r := g.ranks[g.owner[v]]
			ps.ops = append(ps.ops, PathOp{Rank: int(r.rank), Pipeline: int(r.pipeline), Stage: int(st),
				Chunk: int(g.chunk[v]), MicroBatch: int(g.mb[v]), Kind: k.String(),
				StartMs: float64(g.s[v]-startNs) / 1e6, EndMs: float64(g.e[v]-startNs) / 1e6, WaitMs: float64(gap) / 1e6})
		case ncArrive, ncSend:
			if gap > 0 && len(ps.ops) > 0 {
				ps.ops[len(ps.ops)-1].WaitMs += float64(gap) / 1e6
			}
		}
		v = c
	}
	slices.Reverse(ps.ops)
	return ps
}

// summarizePaths averages the per-step paths; median is the index in sums
// of the step whose path is listed, steps the step of each.
func summarizePaths(sums []pathSum, steps []int64, median int, p int) CriticalPath {
	cp := CriticalPath{Steps: len(sums)}
	if len(sums) == 0 {
		return cp
	}
	n := float64(len(sums))
	ms := func(ns int64) float64 { return float64(ns) / n / 1e6 }
	var length, compute, p2p, coll, other, wait int64
	stC, stP := make([]int64, p), make([]int64, p)
	kNs, kOps := map[trace.Kind]int64{}, map[trace.Kind]int64{}
	mNs, mOps := map[int32]int64{}, map[int32]int64{}
	for _, s := range sums {
		length += s.lengthNs
		compute, p2p, coll, other, wait = compute+s.compute, p2p+s.p2p, coll+s.collective, other+s.other, wait+s.wait
		for st := range p {
			stC[st] += s.stageCompute[st]
			stP[st] += s.stageP2P[st]
		}
		for k, x := range s.kindNs {
			kNs[k] += x
			kOps[k] += s.kindOps[k]
		}
		for mb, x := range s.mbNs {
			mNs[mb] += x
			mOps[mb] += s.mbOps[mb]
		}
	}
	cp.LengthMs, cp.ComputeMs, cp.P2PMs, cp.CollectiveMs, cp.OtherMs, cp.WaitMs =
		ms(length), ms(compute), ms(p2p), ms(coll), ms(other), ms(wait)
	for st := range p {
		cp.Stages = append(cp.Stages, PathStage{Stage: st, ComputeMs: ms(stC[st]), P2PMs: ms(stP[st])})
	}
	for k, x := range kNs {
		cp.Kinds = append(cp.Kinds, PathKind{Kind: k.String(), Ms: ms(x), Ops: float64(kOps[k]) / n})
	}
	slices.SortFunc(cp.Kinds, func(a, b PathKind) int { return cmp.Or(cmp.Compare(b.Ms, a.Ms), cmp.Compare(a.Kind, b.Kind)) })
	for mb, x := range mNs {
		cp.MicroBatches = append(cp.MicroBatches, PathMicroBatch{MicroBatch: int(mb), Ms: ms(x), Ops: float64(mOps[mb]) / n})
	}
	slices.SortFunc(cp.MicroBatches, func(a, b PathMicroBatch) int {
		return cmp.Or(cmp.Compare(b.Ms, a.Ms), cmp.Compare(a.MicroBatch, b.MicroBatch))
	})
	cp.PathStep, cp.Path = steps[median], sums[median].ops
	return cp
}
