package analyze

import (
	"cmp"
	"fmt"
	"slices"

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

// analyzeMemory fills Report.Memory and, per stage, StageSummary.LiveBound,
// PeakActivationBytes and PeakLiveMicroBatches (the same peak as
// StageMemory.Peak). The Live series is drawn from the first complete
// window of the lowest pipeline (the first window when none is complete),
// on the lowest rank of each stage.
//
//  1. per window and rank, gather F, B, W, SEND_F and RECV_F rows by
//     (micro-batch, chunk) in a table indexed by mb x chunks + chunk
//     (sorting instead when ids are too sparse for a table);
//  2. each pair gives +1 (and its bytes) at its F's end and -1 at its last
//     backward's end;
//  3. sweep the rank's edges in time order, frees first at equal times.
func analyzeMemory(ix *index, rep *Report) { ix.visit(memoryVisit(ix, rep)) }

// memoryVisit is analyzeMemory as a visit.
func memoryVisit(ix *index, rep *Report) visit {
	p := ix.p
	out := make([]StageMemory, p)
	for st := range out {
		out[st] = StageMemory{Stage: st, LiveRank: -1}
	}
	show := liveWindow(ix.windows)
	// Windows are scanned in parallel; each worker keeps its own maxima
	// (and scratch), merged below. Only the shown window writes out's Live
	// series, and it is scanned by one worker.
	first := newMemScan(ix.tot.maxMB, ix.tot.maxChunk)
	accs := make([]memAcc, workers(len(ix.windows)))
	for w := range accs {
		sc := first
		if w > 0 {
			sc = first.clone()
		}
		accs[w] = memAcc{sc: sc, peak: make([]int, p), peakAct: make([]int64, p), peakMem: make([]int64, p)}
	}
	window := func(w, gi int) {
		a, g := &accs[w], ix.windows[gi]
		t := g.t
		sc := a.sc
		sc.t = t
		rows := g.rows
		if !g.sorted { // else grouped by rank already
			rows = sc.byRank(rows)
		}
		for lo := 0; lo < len(rows); {
			r := t.Rank[rows[lo]]
			hi := lo + 1
			for hi < len(rows) && t.Rank[rows[hi]] == r {
				hi++
			}
			run := rows[lo:hi]
			lo = hi
			st := int(t.Stage[run[0]])
			if st < 0 || st >= p {
				continue
			}
			pm := a.peakMem[st]
			for _, i := range run {
				pm = max(pm, t.MemBytes[i])
			}
			a.peakMem[st] = pm
			// Ranks come in increasing order: the first rank of a stage
			// met in the shown window is its lowest.
			m := &out[st]
			record := gi == show && m.LiveRank < 0
			if record {
				m.LiveRank, m.LiveStep = int(r), g.step
			}
			es := sc.rankEdges(run)
			cur, bytes := 0, int64(0)
			for i := 0; i < len(es); {
				at := es[i].atNs
				for ; i < len(es) && es[i].atNs == at; i++ {
					cur += es[i].delta
					bytes += es[i].bytes
				}
				a.peak[st] = max(a.peak[st], cur)
				a.peakAct[st] = max(a.peakAct[st], bytes)
				if record {
					m.Live = append(m.Live, LivePoint{AtNs: at, Live: cur, Bytes: bytes})
				}
			}
		}
	}
	return visit{window: window, finish: func() { memoryFinish(rep, p, out, accs) }}
}

// memAcc is one worker's maxima and scratch.
type memAcc struct {
	sc               *memScan
	peak             []int
	peakAct, peakMem []int64
}

func memoryFinish(rep *Report, p int, out []StageMemory, accs []memAcc) {
	for w := range accs {
		for st := range out {
			m := &out[st]
			m.Peak = max(m.Peak, accs[w].peak[st])
			m.PeakActivationBytes = max(m.PeakActivationBytes, accs[w].peakAct[st])
			m.PeakMemBytes = max(m.PeakMemBytes, accs[w].peakMem[st])
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

// memRec is one row that matters to liveness (the sorting fallback).
type memRec struct {
	mb, chunk int32
	kind      trace.Kind
	endNs     int64 // NoTime when the op never ended
	bytes     int64
}

// memEdge is a change of one rank's live count.
type memEdge struct {
	atNs  int64
	delta int
	bytes int64
}

// pairState is what one rank's rows say about one (micro-batch, chunk).
type pairState struct {
	fEnd, back  int64 // earliest F end, latest B/W end; NoTime when none
	backPending bool  // some B or W never ended
	send, recv  int64 // SEND_F, RECV_F bytes
	used        bool
}

func (ps *pairState) add(k trace.Kind, endNs, bytes int64) {
	if !ps.used {
		*ps = pairState{fEnd: trace.NoTime, back: trace.NoTime, used: true}
	}
	switch k {
	case trace.F:
		if endNs != trace.NoTime && (ps.fEnd == trace.NoTime || endNs < ps.fEnd) {
			ps.fEnd = endNs
		}
	case trace.B, trace.W:
		if endNs == trace.NoTime {
			ps.backPending = true
		} else {
			ps.back = max(ps.back, endNs)
		}
	case trace.SendF:
		ps.send = max(ps.send, bytes)
	case trace.RecvF:
		ps.recv = max(ps.recv, bytes)
	}
}

// edges appends the pair's +1 (and bytes) at its F's end and -1 at its last
// backward's end. A pair with no ended F adds nothing; one whose backward
// ended before its F did (a clock gone wrong) adds nothing either; one
// whose backward never ended, or is still pending, stays live.
func (ps *pairState) edges(out []memEdge) []memEdge {
	if ps.fEnd == trace.NoTime || ps.back != trace.NoTime && ps.back < ps.fEnd {
		return out
	}
	b := ps.send
	if b <= 0 {
		b = max(ps.recv, 0)
	}
	out = append(out, memEdge{ps.fEnd, +1, b})
	if ps.back != trace.NoTime && !ps.backPending {
		out = append(out, memEdge{ps.back, -1, -b})
	}
	return out
}

// memDenseMax bounds the per-rank table of (micro-batch, chunk) pairs;
// sparser ids fall back to sorting.
const memDenseMax = 1 << 16

// memScan holds analyzeMemory's buffers, reused across ranks and windows.
type memScan struct {
	t       *trace.Trace
	chunks  int         // 1 + the largest chunk: the table's stride
	table   []pairState // [mb*chunks + chunk]; nil when too large
	touched []int
	recs    []memRec
	edges   []memEdge
	sorted  []int

	plus, minus []memEdge // mergeEdges' halves
}

// clone returns a memScan with the same table shape and fresh buffers, for
// another goroutine.
func (sc *memScan) clone() *memScan {
	c := &memScan{t: sc.t, chunks: sc.chunks}
	if sc.table != nil {
		c.table = make([]pairState, len(sc.table))
	}
	return c
}

// newMemScan sizes a scan for micro-batch ids up to maxMB and chunks up to
// maxChunk (the largest of any row, at least 0). Set its t before use.
func newMemScan(maxMB, maxChunk int64) *memScan {
	sc := &memScan{}
	sc.chunks = int(maxChunk) + 1
	if n := (maxMB + 1) * (maxChunk + 1); n <= memDenseMax {
		sc.table = make([]pairState, n)
	}
	return sc
}

// rankEdges returns the live edges of one rank's rows, sorted by time,
// frees first at equal times. The result aliases sc.
func (sc *memScan) rankEdges(rows []int) []memEdge {
	t := sc.t
	sc.edges = sc.edges[:0]
	relevant := func(i int) bool {
		k := t.Kind[i]
		return t.MicroBatch[i] >= 0 && t.Chunk[i] >= 0 && (k.IsCompute() || k == trace.SendF || k == trace.RecvF)
	}
	if sc.table != nil {
		for _, i := range rows {
			if !relevant(i) {
				continue
			}
			x := int(t.MicroBatch[i])*sc.chunks + int(t.Chunk[i])
			if !sc.table[x].used {
				sc.touched = append(sc.touched, x)
			}
			sc.table[x].add(t.Kind[i], t.EndNs[i], t.Bytes[i])
		}
		for _, x := range sc.touched {
			sc.edges = sc.table[x].edges(sc.edges)
			sc.table[x] = pairState{}
		}
		sc.touched = sc.touched[:0]
		// Pairs come in the order their first op ran: their F ends, and
		// their last backward ends, are mostly each in time order already.
		sc.mergeEdges()
		return sc.edges
	}
	sc.recs = sc.recs[:0]
	for _, i := range rows {
		if relevant(i) {
			sc.recs = append(sc.recs, memRec{int32(t.MicroBatch[i]), t.Chunk[i], t.Kind[i], t.EndNs[i], t.Bytes[i]})
		}
	}
	slices.SortFunc(sc.recs, func(a, b memRec) int { return cmp.Or(cmp.Compare(a.mb, b.mb), cmp.Compare(a.chunk, b.chunk)) })
	for i := 0; i < len(sc.recs); {
		var ps pairState
		j := i
		for ; j < len(sc.recs) && sc.recs[j].mb == sc.recs[i].mb && sc.recs[j].chunk == sc.recs[i].chunk; j++ {
			ps.add(sc.recs[j].kind, sc.recs[j].endNs, sc.recs[j].bytes)
		}
		sc.edges = ps.edges(sc.edges)
		i = j
	}
	slices.SortFunc(sc.edges, func(a, b memEdge) int { return cmp.Or(cmp.Compare(a.atNs, b.atNs), cmp.Compare(a.delta, b.delta)) })
	return sc.edges
}

// mergeEdges puts sc.edges in time order by merging its +1 and its -1
// edges, each half sorted by time first unless it is in time order
// already (the F ends mostly are; an interleaved schedule's backward ends
// are not). Edges at one
// instant are summed together by the sweep, so their order among
// themselves does not matter.
func (sc *memScan) mergeEdges() {
	sc.plus, sc.minus = sc.plus[:0], sc.minus[:0]
	plusSorted, minusSorted := true, true
	for _, e := range sc.edges {
		if e.delta > 0 {
			if len(sc.plus) > 0 && e.atNs < sc.plus[len(sc.plus)-1].atNs {
				plusSorted = false
			}
			sc.plus = append(sc.plus, e)
		} else {
			if len(sc.minus) > 0 && e.atNs < sc.minus[len(sc.minus)-1].atNs {
				minusSorted = false
			}
			sc.minus = append(sc.minus, e)
		}
	}
	byTime := func(a, b memEdge) int { return cmp.Compare(a.atNs, b.atNs) }
	if !plusSorted {
		slices.SortFunc(sc.plus, byTime)
	}
	if !minusSorted {
		slices.SortFunc(sc.minus, byTime)
	}
	out := sc.edges[:0]
	i, j := 0, 0
	for i < len(sc.plus) || j < len(sc.minus) {
		if j < len(sc.minus) && (i == len(sc.plus) || sc.minus[j].atNs <= sc.plus[i].atNs) {
			out = append(out, sc.minus[j])
			j++
		} else {
			out = append(out, sc.plus[i])
			i++
		}
	}
	sc.edges = out
}

// byRank returns rows ordered by rank, stably: rows itself when it already
// is (every trace ingest reads or sim makes is in (rank, seq) order), else
// a sorted copy that aliases sc.
func (sc *memScan) byRank(rows []int) []int {
	t := sc.t
	for k := 1; k < len(rows); k++ {
		if t.Rank[rows[k]] < t.Rank[rows[k-1]] {
			sc.sorted = append(sc.sorted[:0], rows...)
			slices.SortStableFunc(sc.sorted, func(a, b int) int { return cmp.Compare(t.Rank[a], t.Rank[b]) })
			return sc.sorted
		}
	}
	return rows
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

// liveBounds returns schedule.LiveBound per stage for the schedule the
// job's metadata names, 0 where unknown.
func liveBounds(job Job, p int) []int {
	out := make([]int, p)
	if job.Schedule == "" || job.PP <= 0 || job.MicroBatches <= 0 {
		return out
	}
	s, err := buildSchedule(job.Schedule, job.PP, job.MicroBatches, max(job.Virtual, 1))
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
