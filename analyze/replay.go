package analyze

import (
	"fmt"
	"slices"
	"sort"

	"github.com/ppprof/ppprof/trace"
)

// A replay re-times one (step, pipeline) window of a trace: every rank runs
// its rows again in seq order with durations the caller chooses, under the
// simulator's timing rules (sim package comment, "Timing"):
//
//   - a compute op (F, B, W) and any other non-P2P op (OPT, DATA, LOSS...)
//     starts when its rank is free and keeps the rank busy for its duration;
//   - a SEND is posted when its rank reaches it and never blocks the rank;
//   - a RECV is posted when its rank reaches it and blocks the rank until
//     its transfer ends;
//   - a transfer starts at the later of the two posts and lasts the
//     duration given for its pair; both rows get its start and end;
//   - sends and receives match NCCL-style: per ordered (src, dst) rank pair,
//     in issue (seq) order, whatever their labels.
//
// OPT is replayed like any other op: its wait for the rank's own sends and
// for the job-wide optimizer barrier (which spans pipelines) is not modelled,
// so a replayed OPT may start earlier than the trace's; it never counts
// toward the window.
//
// Each rank starts at the time it began the window in the trace: the start
// of its first row, or for a first row that is a P2P op its post (IssueNs)
// when the trace records one no later than the start. With the measured
// durations (compute: end - start; transfer: end - start of the receive) a
// replay of a trace that follows these rules, such as any the simulator
// writes, reproduces every start and end exactly.
//
// Durations live in a slice indexed by op (0 <= op < numOps): ops are the
// window's rows grouped by rank (ranks ascending), each rank's in seq order;
// row(op) is the trace row. The entry of a RECV is the transfer time of its
// pair; the entry of a SEND is ignored. Replaying is monotone: no shorter
// duration can make any op end later (every time is a max and a sum of
// durations).
//
// Building a replay is O(n log n) in the window's rows (one sort when the
// rows are out of (rank, seq) order); each run is O(n x TP) (the busy time
// of a stage merges its ranks' intervals one rank at a time). A replay
// reuses scratch memory between runs: it is not safe for concurrent use.
type replay struct {
	t     *trace.Trace
	p     int   // stages of the trace
	rows  []int // trace row of each op
	kind  []opKind
	match []int32 // the matched op of a SEND or RECV; -1 otherwise
	owner []int32 // local rank index of each op
	meas  []int64 // measured durations (see measuredDur)

	first     []int32 // first op of each local rank; len = ranks + 1
	rankStage []int32 // stage of each local rank
	begin     []int64 // clock of each local rank at the start of the window, ns
	multi     []bool  // per stage: held by more than one rank (TP), so busy needs a union

	// scratch, reused by run
	start, end []int64
	post       []int64
	pc         []int32
	clock      []int64
	queued     []bool
	queue      []int32
	ivs        []interval
	tmp        []interval
	merged     []interval
}

// opKind is how a replay times an op.
type opKind uint8

const (
	opOther   opKind = iota // OPT, DATA...: occupies its rank, not busy, not in the window
	opCompute               // F, B, W: occupies its rank, busy, in the window
	opSend                  // posted, never blocks; in the window
	opRecv                  // posted, blocks until its transfer ends; in the window
)

// replayResult is one run of a replay. Times are ns on the trace's time base.
type replayResult struct {
	StartNs, EndNs int64   // the window: first start to last end of F/B/W/P2P ops
	BusyNs         []int64 // per stage: union of F/B/W intervals over the stage's ranks
	// OpStartNs and OpEndNs are each op's replayed times, indexed like the
	// durations. They belong to the replay and are valid until its next run.
	OpStartNs, OpEndNs []int64
}

// WindowNs is the replayed window length, ns.
func (r replayResult) WindowNs() int64 { return r.EndNs - r.StartNs }

// MaxBusyNs is the busy time of the busiest stage, ns.
func (r replayResult) MaxBusyNs() int64 {
	var m int64
	for _, b := range r.BusyNs {
		m = max(m, b)
	}
	return m
}

// newReplay builds the replay of window w of t (p stages). It fails for a
// window it cannot re-time: a row without start or end (pending), a P2P op
// whose peer is not in the window or whose pair has no partner, a stage out
// of [0, p), or a program that deadlocks under the rules above.
func newReplay(t *trace.Trace, w *window, p int) (*replay, error) {
	n := len(w.rows)
	if n == 0 {
		return nil, fmt.Errorf("step %d, pipeline %d: no rows", w.step, w.pipeline)
	}
	rows := w.rows
	if !sortedByRankSeq(t, rows) {
		rows = slices.Clone(rows)
		sort.SliceStable(rows, func(a, b int) bool {
			i, j := rows[a], rows[b]
			if t.Rank[i] != t.Rank[j] {
				return t.Rank[i] < t.Rank[j]
			}
			return t.Seq[i] < t.Seq[j]
		})
	}
	r := &replay{t: t, p: p, rows: rows, kind: make([]opKind, n), match: make([]int32, n),
		owner: make([]int32, n), meas: make([]int64, n), multi: make([]bool, p)}

	// 1. Ranks, op kinds, measured durations.
	var ranks []trace.Rank
	for i, row := range rows {
		if i == 0 || t.Rank[row] != t.Rank[rows[i-1]] {
			st := t.Stage[row]
			if st < 0 || int(st) >= p {
				return nil, fmt.Errorf("step %d, pipeline %d: rank %d has stage %d outside [0, %d)", w.step, w.pipeline, t.Rank[row], st, p)
			}
			ranks = append(ranks, t.Rank[row])
			r.first = append(r.first, int32(i))
			r.rankStage = append(r.rankStage, int32(st))
		}
		r.owner[i] = int32(len(ranks) - 1)
		if t.StartNs[row] == trace.NoTime || t.EndNs[row] == trace.NoTime {
			return nil, fmt.Errorf("step %d, pipeline %d: rank %d seq %d never ended", w.step, w.pipeline, t.Rank[row], t.Seq[row])
		}
		k := t.Kind[row]
		switch {
		case k.IsCompute():
			r.kind[i] = opCompute
		case k.IsSend():
			r.kind[i] = opSend
		case k.IsRecv():
			r.kind[i] = opRecv
		}
		r.meas[i] = max(t.EndNs[row]-t.StartNs[row], 0)
		r.match[i] = -1
	}
	r.first = append(r.first, int32(n))
	seenStage := make([]bool, p)
	for _, st := range r.rankStage {
		if seenStage[st] {
			r.multi[st] = true
		}
		seenStage[st] = true
	}

	// 2. Each rank's starting clock.
	r.begin = make([]int64, len(ranks))
	for lr := range ranks {
		row := rows[r.first[lr]]
		b := t.StartNs[row]
		if k := r.kind[r.first[lr]]; (k == opSend || k == opRecv) && t.IssueNs[row] != trace.NoTime && t.IssueNs[row] <= b {
			b = t.IssueNs[row]
		}
		r.begin[lr] = b
	}

	// 3. NCCL matching: per (src, dst), sends of src to dst in seq order
	// against receives of dst from src in seq order.
	if err := r.matchP2P(ranks, w); err != nil {
		return nil, err
	}
	// A receive's transfer starts when both sides are there: a receive
	// posted before its send spends the gap waiting on the peer, which the
	// replay re-derives, not transferring.
	for i, k := range r.kind {
		if k == opRecv {
			recv, send := rows[i], rows[r.match[i]]
			r.meas[i] = max(t.EndNs[recv]-max(t.StartNs[recv], t.StartNs[send]), 0)
		}
	}

	// 4. A program that deadlocks does so whatever the durations: check
	// once.
	if _, ok := r.runChecked(r.meas); !ok {
		return nil, fmt.Errorf("step %d, pipeline %d: the ranks' P2P orders deadlock on replay", w.step, w.pipeline)
	}
	return r, nil
}

func sortedByRankSeq(t *trace.Trace, rows []int) bool {
	for k := 1; k < len(rows); k++ {
		i, j := rows[k-1], rows[k]
		if t.Rank[j] < t.Rank[i] || t.Rank[j] == t.Rank[i] && t.Seq[j] < t.Seq[i] {
			return false
		}
	}
	return true
}

// matchP2P pairs every SEND with a RECV (and back) in r.match.
func (r *replay) matchP2P(ranks []trace.Rank, w *window) error {
	t := r.t
	type queue struct {
		peer int32   // local rank of the other side
		ops  []int32 // this rank's ops to or from peer, in seq order
	}
	sends := make([][]queue, len(ranks))
	recvs := make([][]queue, len(ranks))
	push := func(qs []queue, peer, op int32) []queue {
		for k := range qs {
			if qs[k].peer == peer {
				qs[k].ops = append(qs[k].ops, op)
				return qs
			}
		}
		return append(qs, queue{peer: peer, ops: []int32{op}})
	}
	for i, row := range r.rows {
		k := r.kind[i]
		if k != opSend && k != opRecv {
			continue
		}
		pr := t.Peer[row]
		lp, ok := slices.BinarySearch(ranks, pr)
		if !ok {
			return fmt.Errorf("step %d, pipeline %d: rank %d seq %d: peer %d has no rows in the window", w.step, w.pipeline, t.Rank[row], t.Seq[row], pr)
		}
		me := r.owner[i]
		if k == opSend {
			sends[me] = push(sends[me], int32(lp), int32(i))
		} else {
			recvs[me] = push(recvs[me], int32(lp), int32(i))
		}
	}
	for src, qs := range sends {
		for _, q := range qs {
			var rq []int32
			for _, x := range recvs[q.peer] {
				if x.peer == int32(src) {
					rq = x.ops
				}
			}
			if len(rq) != len(q.ops) {
				return fmt.Errorf("step %d, pipeline %d: rank %d sends %d ops to rank %d, which receives %d", w.step, w.pipeline, ranks[src], len(q.ops), ranks[q.peer], len(rq))
			}
			for k, s := range q.ops {
				r.match[s], r.match[rq[k]] = rq[k], s
			}
		}
	}
	for dst, qs := range recvs {
		for _, q := range qs {
			for _, op := range q.ops {
				if r.match[op] < 0 {
					return fmt.Errorf("step %d, pipeline %d: rank %d receives from rank %d, which sends nothing", w.step, w.pipeline, ranks[dst], ranks[q.peer])
				}
			}
		}
	}
	return nil
}

// numOps is the number of ops: the length of a durations slice.
func (r *replay) numOps() int { return len(r.rows) }

// row returns the trace row of op i.
func (r *replay) row(i int) int { return r.rows[i] }

// measuredDur returns a new slice of the measured durations, ns: end - start
// of each compute and other op; for a RECV its transfer, from the later of
// its own and its send's start to its end; 0 for a SEND (unused). Negative
// spans count as 0.
func (r *replay) measuredDur() []int64 { return slices.Clone(r.meas) }

// run re-times the window with durations dur (indexed by op, see replay)
// and returns the result. dur must have numOps entries; it is not modified.
func (r *replay) run(dur []int64) replayResult {
	res, _ := r.runChecked(dur)
	return res
}

// runChecked is run that also reports whether every rank finished.
func (r *replay) runChecked(dur []int64) (replayResult, bool) {
	n, nr := len(r.rows), len(r.begin)
	if r.start == nil {
		r.start, r.end, r.post = make([]int64, n), make([]int64, n), make([]int64, n)
		r.pc, r.clock, r.queued = make([]int32, nr), make([]int64, nr), make([]bool, nr)
	}
	for i := range r.post {
		r.post[i] = trace.NoTime
	}
	r.queue = r.queue[:0]
	for lr := range nr {
		r.pc[lr] = r.first[lr]
		r.clock[lr] = r.begin[lr]
		r.queued[lr] = true
		r.queue = append(r.queue, int32(lr))
	}
	for len(r.queue) > 0 {
		lr := r.queue[len(r.queue)-1]
		r.queue = r.queue[:len(r.queue)-1]
		r.queued[lr] = false
		r.advance(lr, dur)
	}
	ok := true
	for lr := range nr {
		if r.pc[lr] != r.first[lr+1] {
			ok = false
		}
	}
	return r.result(), ok
}

// advance runs local rank lr until it blocks in a receive or finishes.
func (r *replay) advance(lr int32, dur []int64) {
	stop := r.first[lr+1]
	for r.pc[lr] < stop {
		i := r.pc[lr]
		now := r.clock[lr]
		switch r.kind[i] {
		case opSend:
			r.post[i] = now
			if j := r.match[i]; r.post[j] != trace.NoTime {
				// The receiver is blocked in j: the transfer completes it.
				r.transfer(i, j, dur[j])
				rr := r.owner[j]
				r.clock[rr] = r.end[j]
				r.pc[rr]++
				if !r.queued[rr] && rr != lr {
					r.queued[rr] = true
					r.queue = append(r.queue, rr)
				}
			}
		case opRecv:
			if r.post[i] == trace.NoTime {
				r.post[i] = now
			}
			j := r.match[i]
			if r.post[j] == trace.NoTime {
				return // blocked until the send is posted
			}
			r.transfer(j, i, dur[i])
			r.clock[lr] = r.end[i]
		default:
			r.start[i], r.end[i] = now, now+dur[i]
			r.clock[lr] = r.end[i]
		}
		r.pc[lr]++
	}
}

// transfer times the matched pair (send s, recv v) lasting d ns.
func (r *replay) transfer(s, v int32, d int64) {
	st := max(r.post[s], r.post[v])
	r.start[s], r.end[s] = st, st+d
	r.start[v], r.end[v] = st, st+d
}

// result measures the window and busy time of the last run.
func (r *replay) result() replayResult {
	res := replayResult{StartNs: 0, EndNs: 0, BusyNs: make([]int64, r.p), OpStartNs: r.start, OpEndNs: r.end}
	first := true
	for i := range r.rows {
		if r.kind[i] == opOther {
			continue
		}
		if first || r.start[i] < res.StartNs {
			res.StartNs = r.start[i]
		}
		if first || r.end[i] > res.EndNs {
			res.EndNs = r.end[i]
		}
		first = false
	}
	for st := range r.p {
		if !r.multi[st] {
			continue
		}
		// Each rank's compute intervals are disjoint and in time order (the
		// rank runs them one after another): merge rank by rank.
		r.ivs = r.ivs[:0]
		for lr, s := range r.rankStage {
			if int(s) != st {
				continue
			}
			r.tmp = r.tmp[:0]
			for i := r.first[lr]; i < r.first[lr+1]; i++ {
				if r.kind[i] == opCompute {
					r.tmp = append(r.tmp, interval{r.start[i], r.end[i]})
				}
			}
			r.merged = mergeSorted(r.merged[:0], r.ivs, r.tmp)
			r.ivs, r.merged = r.merged, r.ivs
		}
		for _, iv := range r.ivs {
			res.BusyNs[st] += iv.e - iv.s
		}
	}
	for lr, s := range r.rankStage {
		if r.multi[s] {
			continue
		}
		for i := r.first[lr]; i < r.first[lr+1]; i++ {
			if r.kind[i] == opCompute {
				res.BusyNs[s] += r.end[i] - r.start[i]
			}
		}
	}
	return res
}

// replayable reports whether window w can be replayed: it is complete and
// not empty.
func replayable(w *window) bool {
	return w.measured.Complete && w.measured.EndNs > w.measured.StartNs
}

// mergeSorted appends to dst the union of a and b, each sorted by start
// with overlapping or touching intervals allowed, as sorted disjoint
// intervals.
func mergeSorted(dst, a, b []interval) []interval {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var iv interval
		if j == len(b) || i < len(a) && a[i].s <= b[j].s {
			iv, i = a[i], i+1
		} else {
			iv, j = b[j], j+1
		}
		if n := len(dst); n > 0 && iv.s <= dst[n-1].e {
			dst[n-1].e = max(dst[n-1].e, iv.e)
			continue
		}
		dst = append(dst, iv)
	}
	return dst
}
