package analyze

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/ppprof/ppprof/trace"
)

// traceGraph builds the stepGraph (graph.go) of one step of t from rows,
// every row of the step (all pipelines), with p stages. It fails for a step
// it cannot re-time: a row that never started or ended, a stage out of
// [0, p), a P2P op whose peer has no rows in the step (or, for a trace that
// records no peers, no neighbour rank to infer), send and receive counts
// that differ between a pair of ranks, or orders that deadlock.
//
// A P2P row without a peer (NoRank) is matched with the neighbour stage of
// its own pipeline replica and TP rank: activations flow to the next stage
// (the last wraps to the first), gradients to the previous one.
func traceGraph(t *trace.Trace, step int64, rows []int, p int) (*stepGraph, error) {
	var m *graphMem
	return m.traceGraph(t, step, rows, p)
}

// traceGraph is traceGraph in m's memory (nil: fresh memory).
func (m *graphMem) traceGraph(t *trace.Trace, step int64, rows []int, p int) (*stepGraph, error) {
	if len(rows) == 0 {
		return nil, fmt.Errorf("step %d: no rows", step)
	}
	var buf *[]int
	if m != nil {
		buf = &m.sorted
	}
	rows = byRankSeq(t, rows, buf)
	// 1. Ranks and the step's earliest start (the floor of a usable post).
	var ranks []gRank
	if m != nil {
		ranks = m.ranks[:0]
	}
	var firstRow []int
	stepStart := int64(math.MaxInt64)
	for k, i := range rows {
		if t.StartNs[i] == trace.NoTime || t.EndNs[i] == trace.NoTime {
			return nil, fmt.Errorf("step %d: rank %d seq %d (%s) never ended", step, t.Rank[i], t.Seq[i], t.Kind[i])
		}
		stepStart = min(stepStart, t.StartNs[i])
		if k == 0 || t.Rank[i] != t.Rank[rows[k-1]] {
			st := t.Stage[i]
			if st < 0 || int(st) >= p {
				return nil, fmt.Errorf("step %d: rank %d has stage %d outside [0, %d)", step, t.Rank[i], st, p)
			}
			ranks = append(ranks, gRank{rank: t.Rank[i], pipeline: t.Pipeline[i], stage: int32(st), tpRk: t.TPRank[i]})
			firstRow = append(firstRow, k)
		}
	}
	firstRow = append(firstRow, len(rows))
	if m != nil {
		m.ranks = ranks
	}
	// One op per row: each rank's program is its part of one array.
	var ops []gOp
	if m != nil {
		m.ops = grown(m.ops, len(rows))
		ops = m.ops
	} else {
		ops = make([]gOp, len(rows))
	}
	type place struct{ pipeline, stage, tp int32 }
	byPlace := make(map[place]int32, len(ranks))
	for lr, r := range ranks {
		byPlace[place{r.pipeline, r.stage, r.tpRk}] = int32(lr)
	}
	local := localRanks(ranks)
	// 2. Programs: classes, peers, joins, posts.
	joinID := map[string]int32{}
	for lr := range ranks {
		r := &ranks[lr]
		r.ops = ops[firstRow[lr]:firstRow[lr]:firstRow[lr+1]]
		optN := 0
		groupN := map[string]int{}
		floor := stepStart // the rank's previous anchor, measured
		for _, i := range rows[firstRow[lr]:firstRow[lr+1]] {
			k := t.Kind[i]
			op := gOp{row: int32(i), kind: k, class: ncOther, peer: -1, join: -1, stage: r.stage,
				chunk: t.Chunk[i], mb: int32(t.MicroBatch[i]), start: t.StartNs[i], end: t.EndNs[i]}
			op.post = op.start
			usablePost := func() {
				if is := t.IssueNs[i]; is != trace.NoTime && is <= op.start && is >= floor {
					op.post = is
				}
			}
			key := ""
			switch {
			case k.IsCompute():
				op.class = ncCompute
			case k.IsP2P():
				op.class = ncRecv
				if k.IsSend() {
					op.class = ncSend
				}
				usablePost()
				if pr := t.Peer[i]; pr != trace.NoRank {
					lp, ok := local(pr)
					if !ok {
						return nil, fmt.Errorf("step %d: rank %d seq %d: peer %d has no rows in the step", step, r.rank, t.Seq[i], pr)
					}
					op.peer = lp
				} else {
					lp, ok := byPlace[place{r.pipeline, neighbour(r.stage, k, p), r.tpRk}]
					if !ok || p < 2 {
						return nil, fmt.Errorf("step %d: rank %d seq %d: %s records no peer and no neighbour rank is in the step", step, r.rank, t.Seq[i], k)
					}
					op.peer = lp
				}
			case k == trace.Opt || k == conformanceOptSkip:
				key = "OPT#" + strconv.Itoa(optN)
				optN++
				op.waitSends = true
			case k.IsCollective() && t.Group[i] != 0:
				grp := t.Group[i].String()
				if gs := t.GroupSeq[i]; gs != trace.NoGroupSeq {
					key = "G" + grp + "#" + strconv.FormatInt(gs, 10)
				} else {
					key = "G" + grp + "@" + strconv.Itoa(groupN[grp])
					groupN[grp]++
				}
			case t.Group[i] == 0:
				if grp := implicitGroup(k, r); grp != "" {
					key = grp + "@" + strconv.Itoa(groupN[grp])
					groupN[grp]++
				}
			}
			if key != "" {
				op.class = ncJoin
				usablePost()
				id, ok := joinID[key]
				if !ok {
					id = int32(len(joinID))
					joinID[key] = id
				}
				op.join = id
			}
			switch op.class {
			case ncSend, ncJoin:
				floor = max(floor, op.post)
			default:
				floor = max(floor, op.end)
			}
			r.ops = append(r.ops, op)
		}
	}
	return m.newStepGraph(step, ranks, len(joinID), true)
}

// byRankSeq returns rows ordered by (rank, seq), rows of equal rank and seq
// in their order in rows: what a stable sort returns, and rows itself when
// they are in that order already. A step's rows come as its windows' rows,
// one pipeline replica after another, each in (rank, seq) order: runs of
// one rank in seq order, which are put in order rather than sorted row by
// row (a sort of a whole job's step is most of building its graph). The
// rows returned, when not rows, are in *buf (buf nil: fresh memory).
func byRankSeq(t *trace.Trace, rows []int, buf *[]int) []int {
	if sortedByRankSeq(t, rows) {
		return rows
	}
	rank, seq := t.Rank, t.Seq
	cmpRows := func(i, j int) int { return cmp.Or(cmp.Compare(rank[i], rank[j]), cmp.Compare(seq[i], seq[j])) }
	type run struct{ lo, hi int }
	var runs []run
	lo := 0
	for k := 1; k <= len(rows) && len(runs) <= len(rows)/8; k++ {
		if k == len(rows) || rank[rows[k]] != rank[rows[k-1]] || seq[rows[k]] < seq[rows[k-1]] {
			runs = append(runs, run{lo, k})
			lo = k
		}
	}
	if len(runs) <= len(rows)/8 {
		// Runs in order of their first rows; when the runs of one rank
		// overlap in seq the result is not sorted, and the rows are.
		slices.SortStableFunc(runs, func(a, b run) int { return cmpRows(rows[a.lo], rows[b.lo]) })
		var out []int
		if buf != nil {
			out = (*buf)[:0]
		}
		out = slices.Grow(out, len(rows))
		for _, r := range runs {
			out = append(out, rows[r.lo:r.hi]...)
		}
		if buf != nil {
			*buf = out
		}
		if sortedByRankSeq(t, out) {
			return out
		}
	}
	var out []int
	if buf != nil {
		out = (*buf)[:0]
	}
	out = append(out, rows...)
	slices.SortStableFunc(out, cmpRows)
	if buf != nil {
		*buf = out
	}
	return out
}

// localRanks returns the lookup of a trace rank's index in ranks (sorted
// by rank): a table when the ranks are dense enough, else a binary search.
func localRanks(ranks []gRank) func(trace.Rank) (int32, bool) {
	if len(ranks) == 0 {
		return func(trace.Rank) (int32, bool) { return 0, false }
	}
	first, last := int64(ranks[0].rank), int64(ranks[len(ranks)-1].rank)
	if span := last - first + 1; span <= 4*int64(len(ranks))+1024 {
		dense := make([]int32, span)
		for k := range dense {
			dense[k] = -1
		}
		for lr, r := range ranks {
			dense[int64(r.rank)-first] = int32(lr)
		}
		return func(r trace.Rank) (int32, bool) {
			d := int64(r) - first
			if d < 0 || d >= int64(len(dense)) || dense[d] < 0 {
				return 0, false
			}
			return dense[d], true
		}
	}
	return func(r trace.Rank) (int32, bool) {
		k, ok := slices.BinarySearchFunc(ranks, r, func(g gRank, r trace.Rank) int { return cmp.Compare(g.rank, r) })
		return int32(k), ok
	}
}

// Megatron-style timers of collectives, recorded as free-form kinds with no
// process group (as in the StragglerAnalysis timelines). Their groups are
// Megatron-LM's, and the same the study's dependency model assumes:
//
//	embedding-grads-all-reduce   the first and last stage of a replica (tied embeddings)
//	grads-reduce-scatter,        one stage across the replicas (the data-parallel group)
//	params-all-gather,
//	grads-all-reduce
//	optimizer-clip-main-grad     every rank (the global gradient norm)
//	layernorm-grads-all-reduce   the TP ranks of one stage of one replica
//
// The k-th such op of a rank in a step joins the k-th of the other ranks
// of its group.
var (
	kindEmbeddingAllReduce = trace.MustKind("embedding-grads-all-reduce")
	kindGradsReduceScatter = trace.MustKind("grads-reduce-scatter")
	kindParamsAllGather    = trace.MustKind("params-all-gather")
	kindGradsAllReduce     = trace.MustKind("grads-all-reduce")
	kindClipMainGrad       = trace.MustKind("optimizer-clip-main-grad")
	kindLayernormAllReduce = trace.MustKind("layernorm-grads-all-reduce")
)

// implicitGroup returns the join key of kind k on rank r when k is one of
// the Megatron collective timers above, else "".
func implicitGroup(k trace.Kind, r *gRank) string {
	itoa := func(x int32) string { return strconv.Itoa(int(x)) }
	switch k {
	case kindEmbeddingAllReduce:
		return "Iemb/" + itoa(r.pipeline) + "/" + itoa(r.tpRk)
	case kindGradsReduceScatter, kindParamsAllGather, kindGradsAllReduce:
		return "Idp/" + k.String() + "/" + itoa(r.stage) + "/" + itoa(r.tpRk)
	case kindClipMainGrad:
		return "Iworld/" + k.String()
	case kindLayernormAllReduce:
		return "Itp/" + k.String() + "/" + itoa(r.pipeline) + "/" + itoa(r.stage)
	}
	return ""
}
