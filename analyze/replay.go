package analyze

import (
	"fmt"
	"math"
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
//
// A replay's memory can be reused for the next window (newReplayIn), so a
// worker that replays many windows allocates once.
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
	comp      []int32 // the compute ops, rank by rank, each rank's in op order
	compFirst []int32 // first entry in comp of each local rank; len = ranks + 1

	// base is the run with the measured durations (newReplay checks that
	// the window does not deadlock with it): its window and busiest stage.
	baseWindowNs, baseMaxBusyNs int64

	// segs is the order in which that first run timed the ops, as op
	// ranges [segs[k], segs[k+1]) each of one rank: a topological order
	// of the ops (every op after its rank's previous op, every receive
	// after its send), which every later run follows in one pass (see
	// run). nil until the first run succeeded.
	segs []int32
	// recording: the event-driven run records segs.
	recording bool

	// scratch, reused by run
	start, end []int64
	post       []int64
	pc         []int32
	clock      []int64
	rankBusy   []int64 // per local rank: summed durations of its compute ops
	queued     []bool
	queue      []int32
	busy       []int64 // per stage, the result's BusyNs
	ivs        []interval
	merged     []interval
	winS, winE int64 // earliest start and latest end of F/B/W/P2P ops so far
	winAny     bool

	// scratch, reused by newReplayIn
	ranks     []trace.Rank
	seenStage []bool
	chanOf    []int32 // per op: its channel (P2P ops only)
	ord       []int32 // per op: its position in its channel
	chans     []p2pChan
	chanFirst []int32 // first channel of each local rank; len = ranks + 1
	chanOff   []int32
	arena     []int32
	dense     []int32 // rank - ranks[0] -> local rank, when the ranks are dense enough
	peer      []int32 // per P2P op: its peer's trace rank (other ops: unspecified)

	// topo: the replay was built (newReplayIn succeeded), so its matching
	// and its order of ops (segs) serve the next window of the same
	// topology (newReplayIn); topoReused counts the builds that reused
	// them (tests).
	topo       bool
	topoReused int
}

// p2pChan is one rank's sends to, or receives from, one peer.
type p2pChan struct {
	peer int32 // local rank of the other side
	send bool
	n    int32 // ops
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
	// durations. They (and BusyNs) belong to the replay and are valid until
	// its next run.
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
	return newReplayIn(nil, t, w, p)
}

// grow returns s resliced to n entries, reallocated when too small; the
// entries' values are unspecified.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/8)
	}
	return s[:n]
}

// newReplayIn is newReplay reusing the memory of r, a replay no longer
// needed (nil: none). It returns the new replay (r itself when not nil).
func newReplayIn(r *replay, t *trace.Trace, w *window, p int) (*replay, error) {
	n := len(w.rows)
	if n == 0 {
		return nil, fmt.Errorf("step %d, pipeline %d: no rows", w.step, w.pipeline)
	}
	if r == nil {
		r = &replay{}
	}
	// The window before, when its build succeeded: a window of the same
	// topology (as many ranks, each with ops of the same kinds in the
	// same order, its sends and receives to and from the same peers, as
	// local ranks) has the same matching and the same deadlock-free order
	// of ops, which depend on nothing else (not on durations, times,
	// stages or the ranks' numbers): the next step of a pipeline, as a
	// rule, and the same step of the next pipeline replica. Step 1
	// compares the shape and, for the same ranks, the peers with the
	// window before's as it writes them; step 3 the other ranks' peers.
	same := r.topo && len(r.rows) == n
	sameRanks := same // the same trace ranks, each sending to and receiving from the same peers
	r.topo = false
	oldRanks, oldFirst := r.ranks, r.first
	rows := w.rows
	if !w.sorted && !sortedByRankSeq(t, rows) {
		rows = slices.Clone(rows)
		sort.SliceStable(rows, func(a, b int) bool {
			i, j := rows[a], rows[b]
			if t.Rank[i] != t.Rank[j] {
				return t.Rank[i] < t.Rank[j]
			}
			return t.Seq[i] < t.Seq[j]
		})
	}
	r.t, r.p, r.rows = t, p, rows
	r.kind, r.match, r.owner, r.meas, r.peer = grow(r.kind, n), grow(r.match, n), grow(r.owner, n), grow(r.meas, n), grow(r.peer, n)
	r.multi = grow(r.multi, p)
	clear(r.multi)
	r.first, r.rankStage, r.ranks, r.comp, r.compFirst = r.first[:0], r.rankStage[:0], r.ranks[:0], r.comp[:0], r.compFirst[:0]
	r.start, r.end, r.post = grow(r.start, n), grow(r.end, n), grow(r.post, n)

	// 1. Ranks, op kinds, measured durations.
	rank, stage, kinds, starts, ends, peers := t.Rank, t.Stage, t.Kind, t.StartNs, t.EndNs, t.Peer
	kind, meas, owner, peer := r.kind[:n], r.meas[:n], r.owner[:n], r.peer[:n]
	lr := int32(-1)
	for i, row := range rows {
		if i == 0 || rank[row] != rank[rows[i-1]] {
			st := stage[row]
			if st < 0 || int(st) >= p {
				return nil, fmt.Errorf("step %d, pipeline %d: rank %d has stage %d outside [0, %d)", w.step, w.pipeline, rank[row], st, p)
			}
			lr++
			// (The window before's lists share these arrays: compare
			// before appending over them.)
			same = same && int(lr) < len(oldFirst) && oldFirst[lr] == int32(i)
			sameRanks = same && sameRanks && oldRanks[lr] == rank[row]
			r.ranks = append(r.ranks, rank[row])
			r.first = append(r.first, int32(i))
			r.compFirst = append(r.compFirst, int32(len(r.comp)))
			r.rankStage = append(r.rankStage, int32(st))
		}
		owner[i] = lr
		s, e := starts[row], ends[row]
		if s == trace.NoTime || e == trace.NoTime {
			return nil, fmt.Errorf("step %d, pipeline %d: rank %d seq %d never ended", w.step, w.pipeline, rank[row], t.Seq[row])
		}
		k := kinds[row]
		var ok opKind
		switch {
		case k.IsCompute():
			ok = opCompute
			r.comp = append(r.comp, int32(i))
		case k.IsSend():
			ok = opSend
		case k.IsRecv():
			ok = opRecv
		default:
			ok = opOther
		}
		same = same && kind[i] == ok
		kind[i] = ok
		if ok == opSend || ok == opRecv {
			sameRanks = sameRanks && peer[i] == int32(peers[row])
			peer[i] = int32(peers[row])
		}
		meas[i] = max(e-s, 0)
	}
	same = same && int(lr)+1 == len(oldRanks)
	sameRanks = sameRanks && same
	r.first = append(r.first, int32(n))
	r.compFirst = append(r.compFirst, int32(len(r.comp)))
	nr := len(r.ranks)
	r.seenStage = grow(r.seenStage, p)
	clear(r.seenStage)
	for _, st := range r.rankStage {
		if r.seenStage[st] {
			r.multi[st] = true
		}
		r.seenStage[st] = true
	}

	// 2. Each rank's starting clock.
	r.begin = grow(r.begin, nr)
	posts := w.posts // when the trace holds no issue times (a packed chunk's)
	for lr := range nr {
		row := rows[r.first[lr]]
		b := starts[row]
		if k := kind[r.first[lr]]; k == opSend || k == opRecv {
			post := trace.NoTime
			if len(t.IssueNs) > 0 {
				post = t.IssueNs[row]
			} else {
				for len(posts) > 0 && posts[0].rank < r.ranks[lr] {
					posts = posts[1:]
				}
				if len(posts) > 0 && posts[0].rank == r.ranks[lr] && posts[0].row == row {
					post = posts[0].post
				}
			}
			if post != trace.NoTime && post <= b {
				b = post
			}
		}
		r.begin[lr] = b
	}

	// 3. NCCL matching: per (src, dst), sends of src to dst in seq order
	// against receives of dst from src in seq order (the window before's
	// when the topology is the same).
	match := r.match[:n]
	if same && !sameRanks {
		// Other ranks, or other peers, in the same shape: the same
		// topology when each P2P op's peer is, as a local rank, the one
		// its match in the window before was on.
		r.indexRanks()
		for i, k := range kind {
			if (k == opSend || k == opRecv) && r.localRank(trace.Rank(peer[i])) != owner[match[i]] {
				same = false
				break
			}
		}
	}
	if !same {
		if err := r.matchP2P(w); err != nil {
			return nil, err
		}
	}
	// A receive's transfer starts when both sides are there: a receive
	// posted before its send spends the gap waiting on the peer, which the
	// replay re-derives, not transferring.
	for i, k := range kind {
		if k == opRecv {
			recv, send := rows[i], rows[match[i]]
			meas[i] = max(ends[recv]-max(starts[recv], starts[send]), 0)
		}
	}

	// 4. A program that deadlocks does so whatever the durations: check
	// once (or not at all: the window before's program did not).
	var res replayResult
	if same {
		res = r.runOrdered(r.meas)
		r.topoReused++
	} else {
		r.segs, r.recording = r.segs[:0], true
		var ok bool
		res, ok = r.runChecked(r.meas)
		r.recording = false
		if !ok {
			r.segs = nil
			return nil, fmt.Errorf("step %d, pipeline %d: the ranks' P2P orders deadlock on replay", w.step, w.pipeline)
		}
	}
	r.baseWindowNs, r.baseMaxBusyNs = res.WindowNs(), res.MaxBusyNs()
	r.topo = true
	return r, nil
}

func sortedByRankSeq(t *trace.Trace, rows []int) bool {
	rank, seq := t.Rank, t.Seq
	for k := 1; k < len(rows); k++ {
		i, j := rows[k-1], rows[k]
		if rank[j] < rank[i] || rank[j] == rank[i] && seq[j] < seq[i] {
			return false
		}
	}
	return true
}

// localRank returns the local rank of trace rank pr, or -1 when it has no
// rows in the window.
func (r *replay) localRank(pr trace.Rank) int32 {
	if r.dense != nil {
		d := int64(pr) - int64(r.ranks[0])
		if d < 0 || d >= int64(len(r.dense)) {
			return -1
		}
		return r.dense[d]
	}
	lp, ok := slices.BinarySearch(r.ranks, pr)
	if !ok {
		return -1
	}
	return int32(lp)
}

// indexRanks readies localRank for the window's ranks: a table when they
// are dense enough or span at most 64K ranks (a 16384-rank job's replica
// spans 15K: 256 KB, filled in microseconds, against a search per P2P
// op), else a search.
func (r *replay) indexRanks() {
	nr := len(r.ranks)
	r.dense = r.dense[:0]
	if span := int64(r.ranks[nr-1]) - int64(r.ranks[0]) + 1; span <= max(64*int64(nr)+1024, 1<<16) {
		r.dense = grow(r.dense, int(span))
		for i := range r.dense {
			r.dense[i] = -1
		}
		for lr, rk := range r.ranks {
			r.dense[int64(rk)-int64(r.ranks[0])] = int32(lr)
		}
	} else {
		r.dense = nil
	}
}

// matchP2P pairs every SEND with a RECV (and back) in r.match: the k-th
// send of a rank to a peer with the k-th receive of the peer from the
// rank. Each P2P op is numbered in its channel (its rank's sends to, or
// receives from, one peer; a rank has few), then each channel of sends is
// matched with its peer's channel of receives.
func (r *replay) matchP2P(w *window) error {
	t := r.t
	nr := len(r.ranks)
	r.indexRanks()
	n := len(r.rows)
	for i := range r.match[:n] {
		r.match[i] = -1
	}
	r.chanOf, r.ord = grow(r.chanOf, n), grow(r.ord, n)
	r.chans, r.chanFirst = r.chans[:0], r.chanFirst[:0]
	peers, kind := t.Peer, r.kind
	for lr := range nr {
		r.chanFirst = append(r.chanFirst, int32(len(r.chans)))
		cf := len(r.chans)
		for i := r.first[lr]; i < r.first[lr+1]; i++ {
			k := kind[i]
			if k != opSend && k != opRecv {
				continue
			}
			row := r.rows[i]
			pr := peers[row]
			lp := r.localRank(pr)
			if lp < 0 {
				return fmt.Errorf("step %d, pipeline %d: rank %d seq %d: peer %d has no rows in the window", w.step, w.pipeline, t.Rank[row], t.Seq[row], pr)
			}
			send := k == opSend
			c := -1
			for x := cf; x < len(r.chans); x++ {
				if r.chans[x].peer == lp && r.chans[x].send == send {
					c = x
					break
				}
			}
			if c < 0 {
				c = len(r.chans)
				r.chans = append(r.chans, p2pChan{peer: lp, send: send})
			}
			r.chanOf[i], r.ord[i] = int32(c), r.chans[c].n
			r.chans[c].n++
		}
	}
	r.chanFirst = append(r.chanFirst, int32(len(r.chans)))
	// Each channel's ops, in order, in one arena.
	r.chanOff = grow(r.chanOff, len(r.chans)+1)
	r.chanOff[0] = 0
	for c, ch := range r.chans {
		r.chanOff[c+1] = r.chanOff[c] + ch.n
	}
	r.arena = grow(r.arena, int(r.chanOff[len(r.chans)]))
	for i, k := range kind {
		if k == opSend || k == opRecv {
			r.arena[r.chanOff[r.chanOf[i]]+r.ord[i]] = int32(i)
		}
	}
	// Sends of src to dst against receives of dst from src.
	for src := range nr {
		for c := r.chanFirst[src]; c < r.chanFirst[src+1]; c++ {
			ch := r.chans[c]
			if !ch.send {
				continue
			}
			rc := int32(-1)
			for x := r.chanFirst[ch.peer]; x < r.chanFirst[ch.peer+1]; x++ {
				if !r.chans[x].send && r.chans[x].peer == int32(src) {
					rc = x
				}
			}
			var nRecv int32
			if rc >= 0 {
				nRecv = r.chans[rc].n
			}
			if nRecv != ch.n {
				return fmt.Errorf("step %d, pipeline %d: rank %d sends %d ops to rank %d, which receives %d", w.step, w.pipeline, r.ranks[src], ch.n, r.ranks[ch.peer], nRecv)
			}
			ss := r.arena[r.chanOff[c]:r.chanOff[c+1]]
			rs := r.arena[r.chanOff[rc]:r.chanOff[rc+1]]
			for k, s := range ss {
				r.match[s], r.match[rs[k]] = rs[k], s
			}
		}
	}
	for dst := range nr {
		for c := r.chanFirst[dst]; c < r.chanFirst[dst+1]; c++ {
			if ch := r.chans[c]; !ch.send && ch.n > 0 && r.match[r.arena[r.chanOff[c]]] < 0 {
				return fmt.Errorf("step %d, pipeline %d: rank %d receives from rank %d, which sends nothing", w.step, w.pipeline, r.ranks[dst], r.ranks[ch.peer])
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

// measuredDurIn is measuredDur written into buf (reallocated when too
// small), for a caller that reuses it.
func (r *replay) measuredDurIn(buf []int64) []int64 { return append(buf[:0], r.meas...) }

// run re-times the window with durations dur (indexed by op, see replay)
// and returns the result. dur must have numOps entries; it is not modified.
//
// The times are the unique solution of the rules' equations (each a max
// or a sum of earlier times and durations), whatever the order in which
// they are evaluated, as long as it is a topological one: the order the
// first, event-driven, run (runChecked) found, recorded in segs, serves
// every later run, which is one pass over the ops with no queue and no
// blocking.
func (r *replay) run(dur []int64) replayResult {
	if r.segs == nil {
		res, _ := r.runChecked(dur)
		return res
	}
	return r.runOrdered(dur)
}

// runOrdered is run following r.segs.
func (r *replay) runOrdered(dur []int64) replayResult {
	n, nr := len(r.rows), len(r.begin)
	dur = dur[:n]
	kind, match, owner, post, start, end := r.kind[:n], r.match[:n], r.owner[:n], r.post[:n], r.start[:n], r.end[:n]
	clock, rankBusy := r.clock[:nr], r.rankBusy[:nr]
	copy(clock, r.begin)
	clear(rankBusy)
	ws, we, any := int64(math.MaxInt64), int64(math.MinInt64), false
	segs := r.segs
	for k := 0; k+1 < len(segs); k += 2 {
		from, to := segs[k], segs[k+1]
		lr := owner[from]
		now := clock[lr]
		var busy int64
		for i := from; i < to; i++ {
			switch kind[i] {
			case opSend:
				post[i] = now
			case opRecv:
				// Its send was posted earlier in the order.
				j := match[i]
				st := max(post[j], now)
				e := st + dur[i]
				start[i], end[i], start[j], end[j] = st, e, st, e
				ws, we, any = min(ws, st), max(we, e), true
				now = e
			case opCompute:
				d := dur[i]
				start[i], end[i] = now, now+d
				ws, we, any = min(ws, now), max(we, now+d), true
				busy += d
				now += d
			default:
				start[i], end[i] = now, now+dur[i]
				now += dur[i]
			}
		}
		clock[lr] = now
		rankBusy[lr] += busy
	}
	r.winS, r.winE, r.winAny = ws, we, any
	return r.result()
}

// runChecked is the event-driven run: each rank runs until it blocks in a
// receive whose send is not posted, then another; it reports whether
// every rank finished (false: the window deadlocks). With r.recording it
// records the order it timed the ops in r.segs.
func (r *replay) runChecked(dur []int64) (replayResult, bool) {
	n, nr := len(r.rows), len(r.begin)
	dur = dur[:n]
	r.start, r.end, r.post = r.start[:n], r.end[:n], r.post[:n]
	r.pc, r.clock, r.queued, r.rankBusy = grow(r.pc, nr), grow(r.clock, nr), grow(r.queued, nr), grow(r.rankBusy, nr)
	for i := range r.post {
		r.post[i] = trace.NoTime
	}
	r.queue = r.queue[:0]
	for lr := range nr {
		r.pc[lr] = r.first[lr]
		r.clock[lr] = r.begin[lr]
		r.rankBusy[lr] = 0
		r.queued[lr] = true
		r.queue = append(r.queue, int32(lr))
	}
	r.winS, r.winE, r.winAny = math.MaxInt64, math.MinInt64, false
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
// It keeps the rank's program counter and clock in locals: no other rank
// changes them while it runs (a send wakes only a rank blocked in a
// receive, never the running one).
func (r *replay) advance(lr int32, dur []int64) {
	kind, match, post, start, end, owner := r.kind, r.match, r.post, r.start, r.end, r.owner
	stop := r.first[lr+1]
	i, now := r.pc[lr], r.clock[lr]
	seg := i // start of the current segment (r.recording)
	ws, we, any := r.winS, r.winE, r.winAny
	var busy int64
	for ; i < stop; i++ {
		switch kind[i] {
		case opSend:
			post[i] = now
			if j := match[i]; post[j] != trace.NoTime {
				// The receiver is blocked in j: the transfer completes it.
				st := max(now, post[j])
				e := st + dur[j]
				start[i], end[i], start[j], end[j] = st, e, st, e
				ws, we, any = min(ws, st), max(we, e), true
				rr := owner[j]
				r.clock[rr] = e
				r.pc[rr]++
				if r.recording {
					// The send, then the receive it completes.
					r.segs = append(r.segs, seg, i+1, j, j+1)
					seg = i + 1
				}
				if !r.queued[rr] {
					r.queued[rr] = true
					r.queue = append(r.queue, rr)
				}
			}
		case opRecv:
			if post[i] == trace.NoTime {
				post[i] = now
			}
			j := match[i]
			if post[j] == trace.NoTime {
				// Blocked until the send is posted.
				if r.recording && i > seg {
					r.segs = append(r.segs, seg, i)
				}
				r.pc[lr], r.clock[lr], r.rankBusy[lr] = i, now, r.rankBusy[lr]+busy
				r.winS, r.winE, r.winAny = ws, we, any
				return
			}
			st := max(post[j], post[i])
			e := st + dur[i]
			start[i], end[i], start[j], end[j] = st, e, st, e
			ws, we, any = min(ws, st), max(we, e), true
			now = e
		case opCompute:
			d := dur[i]
			start[i], end[i] = now, now+d
			ws, we, any = min(ws, now), max(we, now+d), true
			busy += d
			now += d
		default:
			start[i], end[i] = now, now+dur[i]
			now += dur[i]
		}
	}
	if r.recording && i > seg {
		r.segs = append(r.segs, seg, i)
	}
	r.pc[lr], r.clock[lr], r.rankBusy[lr] = i, now, r.rankBusy[lr]+busy
	r.winS, r.winE, r.winAny = ws, we, any
}

// result measures the window and busy time of the last run.
func (r *replay) result() replayResult {
	r.busy = grow(r.busy, r.p)
	clear(r.busy)
	res := replayResult{BusyNs: r.busy, OpStartNs: r.start, OpEndNs: r.end}
	if r.winAny {
		res.StartNs, res.EndNs = r.winS, r.winE
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
			ops := r.comp[r.compFirst[lr]:r.compFirst[lr+1]]
			r.merged = mergeOps(r.merged[:0], r.ivs, ops, r.start, r.end)
			r.ivs, r.merged = r.merged, r.ivs
		}
		var b int64
		for _, iv := range r.ivs {
			b += iv.e - iv.s
		}
		res.BusyNs[st] = b
	}
	for lr, s := range r.rankStage {
		if !r.multi[s] {
			res.BusyNs[s] += r.rankBusy[lr]
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

// mergeOps is mergeSorted with b the intervals [start[op], end[op]) of
// ops, in order.
func mergeOps(dst, a []interval, ops []int32, start, end []int64) []interval {
	i, j := 0, 0
	for i < len(a) || j < len(ops) {
		var iv interval
		if j == len(ops) || i < len(a) && a[i].s <= start[ops[j]] {
			iv, i = a[i], i+1
		} else {
			iv, j = interval{start[ops[j]], end[ops[j]]}, j+1
		}
		if n := len(dst); n > 0 && iv.s <= dst[n-1].e {
			dst[n-1].e = max(dst[n-1].e, iv.e)
			continue
		}
		dst = append(dst, iv)
	}
	return dst
}
