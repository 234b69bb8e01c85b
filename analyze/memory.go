package analyze

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/trace"
)

// Memory is live micro-batches and activation memory per stage, over every
// analysed window (a hung step's activations are real too).
//
// A (micro-batch, chunk) pair is live on a rank from the end of its F to the
// end of its last backward pass there (the later of its B and W ends; until
// the end of the window when none ended). Each pair of an interleaved stage
// counts once. At one instant, pairs that stop being live are counted out
// before new ones are counted in.
type Memory struct {
	Stages []StageMemory // one per stage, in stage order
}

// StageMemory is the live-activation picture of one stage.
type StageMemory struct {
	Stage int
	Peak  int // most pairs live at once on one rank of the stage, over analysed windows
	Bound int // the schedule's bound (schedule.LiveBound of the metadata's schedule); 0 when unknown
	// PeakActivationBytes is the most bytes of live activations on one rank
	// at once, taking a pair's activations to be its P2P activation
	// payload: the bytes of the rank's SEND_F of that (micro-batch, chunk),
	// or of its RECV_F where it sends none (the last stage). It stands for
	// the activations a stage stashes up to a per-layer factor the trace
	// does not know; 0 when no P2P bytes are recorded.
	PeakActivationBytes int64
	// PeakMemBytes is the largest mem_bytes (device memory allocated when
	// an op ended: weights, optimizer state and activations) on any row of
	// the stage; 0 when not recorded.
	PeakMemBytes int64
	LiveRank     int         // the rank whose Live series this is; -1 when none
	LiveStep     int64       // the step of the Live series
	Live         []LivePoint // live count over time on LiveRank in one window (see analyzeMemory), one point per change
}

// LivePoint is the live micro-batch count from AtNs (trace time, ns) until
// the next point; the count is 0 before the first point.
type LivePoint struct {
	AtNs  int64
	Live  int
	Bytes int64 // live activation bytes, as PeakActivationBytes
}

// memRec is one row that matters to liveness.
type memRec struct {
	rank      trace.Rank
	stage     trace.Stage
	mb, chunk int32
	kind      trace.Kind
	endNs     int64 // NoTime when the op never ended
	bytes     int64
}

// memEdge is a change of a rank's live count.
type memEdge struct {
	rank  trace.Rank
	stage trace.Stage
	atNs  int64
	delta int
	bytes int64
}

// analyzeMemory fills Report.Memory and, per stage, StageSummary.LiveBound,
// PeakActivationBytes and PeakLiveMicroBatches (the same peak as
// StageMemory.Peak). The Live series is drawn from the first complete
// window of the lowest pipeline (the first window when none is complete),
// on the lowest rank of each stage.
//
//  1. per window, gather F, B, W, SEND_F and RECV_F rows by (rank,
//     micro-batch, chunk) (one sort);
//  2. each pair gives +1 (and its bytes) at its F's end and -1 at its last
//     backward's end;
//  3. sweep each rank's edges in time order, frees first at equal times.
func analyzeMemory(ix *index, rep *Report) {
	t, p := ix.t, ix.p
	out := make([]StageMemory, p)
	for st := range out {
		out[st] = StageMemory{Stage: st, LiveRank: -1}
	}
	var recs []memRec
	var edges []memEdge
	show := liveWindow(ix.windows)
	for gi, g := range ix.windows {
		recs = recs[:0]
		var lowest []trace.Rank
		if gi == show {
			lowest = make([]trace.Rank, p)
			for st := range lowest {
				lowest[st] = -1
			}
		}
		for _, i := range g.rows {
			st := int(t.Stage[i])
			if st < 0 || st >= p {
				continue
			}
			out[st].PeakMemBytes = max(out[st].PeakMemBytes, t.MemBytes[i])
			if gi == show && (lowest[st] < 0 || t.Rank[i] < lowest[st]) {
				lowest[st] = t.Rank[i]
			}
			k := t.Kind[i]
			if t.MicroBatch[i] < 0 || !(k.IsCompute() || k == trace.SendF || k == trace.RecvF) {
				continue
			}
			recs = append(recs, memRec{rank: t.Rank[i], stage: t.Stage[i], mb: int32(t.MicroBatch[i]), chunk: t.Chunk[i], kind: k, endNs: t.EndNs[i], bytes: t.Bytes[i]})
		}
		edges = liveEdges(recs, edges[:0])
		slices.SortFunc(edges, func(a, b memEdge) int {
			return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.atNs, b.atNs), cmp.Compare(a.delta, b.delta))
		})
		for i := 0; i < len(edges); {
			r := edges[i].rank
			st := int(edges[i].stage)
			record := gi == show && r == lowest[st]
			if record {
				out[st].LiveRank, out[st].LiveStep = int(r), g.step
			}
			cur, bytes := 0, int64(0)
			for i < len(edges) && edges[i].rank == r {
				at := edges[i].atNs
				for ; i < len(edges) && edges[i].rank == r && edges[i].atNs == at; i++ {
					cur += edges[i].delta
					bytes += edges[i].bytes
				}
				out[st].Peak = max(out[st].Peak, cur)
				out[st].PeakActivationBytes = max(out[st].PeakActivationBytes, bytes)
				if record {
					out[st].Live = append(out[st].Live, LivePoint{AtNs: at, Live: cur, Bytes: bytes})
				}
			}
		}
	}
	bound := liveBounds(rep.Job, p)
	for st := range out {
		out[st].Bound = bound[st]
		if st < len(rep.Stages) {
			s := &rep.Stages[st]
			s.LiveBound = bound[st]
			s.PeakActivationBytes = out[st].PeakActivationBytes
			s.PeakLiveMicroBatches = out[st].Peak
		}
	}
	rep.Memory = Memory{Stages: out}
}

// liveWindow returns the index of the window the Live series is drawn from.
func liveWindow(ws []*window) int {
	best := -1
	for i, g := range ws {
		if !g.measured.Complete {
			continue
		}
		if best < 0 || g.pipeline < ws[best].pipeline {
			best = i
		}
	}
	if best < 0 && len(ws) > 0 {
		best = 0
	}
	return best
}

// liveEdges sorts recs by (rank, micro-batch, chunk) and appends to edges
// each pair's +1 at its F's end and -1 at its last backward's end. A pair
// with no ended F adds nothing; one whose backward ended before its F did
// (a clock gone wrong) adds nothing either.
func liveEdges(recs []memRec, edges []memEdge) []memEdge {
	slices.SortFunc(recs, func(a, b memRec) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.mb, b.mb), cmp.Compare(a.chunk, b.chunk))
	})
	for i := 0; i < len(recs); {
		j := i
		fEnd, back := int64(math.MaxInt64), int64(trace.NoTime)
		backPending := false
		var send, recv int64
		for ; j < len(recs) && recs[j].rank == recs[i].rank && recs[j].mb == recs[i].mb && recs[j].chunk == recs[i].chunk; j++ {
			r := recs[j]
			switch r.kind {
			case trace.F:
				if r.endNs != trace.NoTime {
					fEnd = min(fEnd, r.endNs)
				}
			case trace.B, trace.W:
				if r.endNs == trace.NoTime {
					backPending = true
				} else {
					back = max(back, r.endNs)
				}
			case trace.SendF:
				send = max(send, r.bytes)
			case trace.RecvF:
				recv = max(recv, r.bytes)
			}
		}
		r := recs[i]
		i = j
		if fEnd == math.MaxInt64 || back != trace.NoTime && back < fEnd {
			continue
		}
		b := send
		if b <= 0 {
			b = max(recv, 0)
		}
		edges = append(edges, memEdge{r.rank, r.stage, fEnd, +1, b})
		if back != trace.NoTime && !backPending {
			edges = append(edges, memEdge{r.rank, r.stage, back, -1, -b})
		}
	}
	return edges
}

// liveBounds returns schedule.LiveBound per stage for the schedule the
// job's metadata names, 0 where unknown.
func liveBounds(job Job, p int) []int {
	out := make([]int, p)
	if job.Schedule == "" || job.PP <= 0 || job.MicroBatches <= 0 {
		return out
	}
	s, err := schedule.New(job.Schedule, job.PP, job.MicroBatches, max(job.Virtual, 1))
	if err != nil {
		return out
	}
	for st := range out {
		out[st] = max(s.LiveBound(st), 0)
	}
	return out
}

// memoryFindings reports ACTIVATION_OVER_BOUND (warning) when some stage
// held more live micro-batches than its schedule's bound: forwards ran
// ahead of the schedule, and activation memory with them. The message
// names the stage furthest over.
func memoryFindings(_ *index, rep *Report) []Finding {
	worst, n := -1, 0
	for i, s := range rep.Memory.Stages {
		if s.Bound <= 0 || s.Peak <= s.Bound {
			continue
		}
		n++
		if worst < 0 || s.Peak-s.Bound > rep.Memory.Stages[worst].Peak-rep.Memory.Stages[worst].Bound {
			worst = i
		}
	}
	if worst < 0 {
		return nil
	}
	s := rep.Memory.Stages[worst]
	msg := fmt.Sprintf("stage %d held up to %d live micro-batches, above the %s bound of %d (%d of %d stages over the bound)",
		s.Stage, s.Peak, rep.Job.Schedule, s.Bound, n, len(rep.Memory.Stages))
	if s.PeakActivationBytes > 0 && s.Peak > 0 {
		extra := float64(s.PeakActivationBytes) * float64(s.Peak-s.Bound) / float64(s.Peak)
		msg += fmt.Sprintf("; about %s MB of activations more than planned", p2pNum(extra/1e6))
	}
	return []Finding{{Severity: "warning", Code: CodeActivationOverBound, Message: msg}}
}
