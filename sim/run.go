package sim

import (
	"math"

	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/trace"
)

// KindOptSkip is the free-form kind an optskip fault records instead of OPT.
var KindOptSkip = trace.MustKind("OPT_SKIP")

// Run simulates the job c describes and returns its trace: every rank's
// rows sorted by (rank, seq), times in virtual ns from 0, metadata filled
// in. The same Config always gives the same trace. A faulted run is not an
// error: its trace ends the way the real job would (see the package
// comment). Run returns an error only for an invalid Config.
func Run(c Config) (*trace.Trace, error) {
	c = c.WithDefaults()
	s, err := c.prepare()
	if err != nil {
		return nil, err
	}
	e := newEngine(c, s)
	e.run()
	return e.trace(), nil
}

// phase is where a rank is in its current step.
type phase uint8

const (
	phStartStep phase = iota // about to enter the next step
	phActions                // running the step's actions (maybe blocked in a receive)
	phWaitSends              // waiting for the step's sends to complete
	phOpt                    // about to post the optimizer step
	phOptWait                // waiting in the optimizer barrier
	phDone                   // ran every step
	phCrashed                // died at an action
	phExited                 // left before a step
)

// op is one recorded row of a rank, before it becomes a trace row.
type op struct {
	kind         trace.Kind
	chunk, mb    int32
	peer         int32 // peer rank, -1
	step         int64
	issue        int64
	start, end   int64 // trace.NoTime until known
	bytes        int64
	shape, dtype string
	tokens       int64
	flops        float64
}

// ref names one op: rank and index in its ops.
type ref struct{ rank, op int32 }

// transfer is a matched send/recv pair whose completion waits for the
// sender's crash-or-not to be known.
type transfer struct {
	send, recv ref
	start, end int64
}

type rankState struct {
	id, stage, pipe, tp int
	ops                 []op

	step  int
	prog  []instr
	pc    int
	t     int64 // when the rank is next free, ns
	phase phase

	waitingRecv bool // blocked in prog[pc], a receive
	running     bool // being advanced now (wake is a no-op)
	queued      bool

	unfinished int   // this step's sends not yet completed
	sendEnd    int64 // latest end of this step's completed sends

	crashPending bool       // this step's program holds a crash action not yet reached
	crashed      bool       // died at crashT
	crashT       int64      // ns
	crashOp      int        // index in ops of the op it died in
	deferred     []transfer // sends matched while crashPending
	optOp        int        // index in ops of the step's OPT row
}

// channel holds the posted but unmatched sends and receives of one ordered
// (src, dst) rank pair; they match in issue order, as NCCL's do.
type channel struct {
	sends, recvs []ref
	hung         bool // a byte mismatch: nothing on this pair completes any more
}

type engine struct {
	c      Config
	cost   *costModel
	progs  [][]instr // per stage
	faults faultIndex
	optNs  int64
	ranks  []*rankState
	chans  map[int64]*channel
	queue  []*rankState

	barrier   []*rankState // ranks waiting in the current step's OPT
	barrierAt int64        // latest arrival, ns
}

func newEngine(c Config, s *schedule.Schedule) *engine {
	e := &engine{
		c:      c,
		cost:   newCostModel(c, s),
		progs:  basePrograms(s),
		faults: indexFaults(c.Faults),
		optNs:  int64(math.Round(c.OptMs * 1e6)),
		chans:  map[int64]*channel{},
	}
	world := c.Stages * c.DP * c.TP
	e.ranks = make([]*rankState, world)
	for stage := 0; stage < c.Stages; stage++ {
		for pipe := 0; pipe < c.DP; pipe++ {
			for tp := 0; tp < c.TP; tp++ {
				id := (stage*c.DP+pipe)*c.TP + tp
				r := &rankState{id: id, stage: stage, pipe: pipe, tp: tp, step: -1, phase: phStartStep}
				e.ranks[id] = r
			}
		}
	}
	for _, r := range e.ranks {
		e.wake(r)
	}
	return e
}

// run advances runnable ranks until none is; then, if some sends were held
// back because their sender might still crash, it completes the earliest
// one (its sender has not crashed by then, see resolveDeferred) and goes on.
func (e *engine) run() {
	for {
		for len(e.queue) > 0 {
			r := e.queue[0]
			e.queue = e.queue[1:]
			r.queued = false
			e.advance(r)
		}
		if !e.resolveDeferred() {
			return
		}
	}
}

func (e *engine) wake(r *rankState) {
	if r.running || r.queued {
		return
	}
	r.queued = true
	e.queue = append(e.queue, r)
}

func (e *engine) opAt(x ref) *op { return &e.ranks[x.rank].ops[x.op] }

func (e *engine) peerRank(r *rankState, stage int32) int32 {
	return int32((int(stage)*e.c.DP+r.pipe)*e.c.TP + r.tp)
}

func (e *engine) channel(src, dst int32) *channel {
	key := int64(src)*int64(len(e.ranks)) + int64(dst)
	ch := e.chans[key]
	if ch == nil {
		ch = &channel{}
		e.chans[key] = ch
	}
	return ch
}

// advance runs r until it blocks, crashes, exits or finishes.
func (e *engine) advance(r *rankState) {
	r.running = true
	defer func() { r.running = false }()
	for {
		switch r.phase {
		case phStartStep:
			r.step++
			if r.step == e.c.Steps {
				r.phase = phDone
				return
			}
			if s, ok := e.faults.exit[r.id]; ok && s == r.step {
				r.phase = phExited
				return
			}
			r.prog, r.crashPending = applyFaults(e.progs[r.stage], e.faults.inStep[[2]int{r.id, r.step}])
			r.pc, r.unfinished, r.sendEnd = 0, 0, r.t
			r.phase = phActions
		case phActions:
			if r.waitingRecv {
				return
			}
			if r.pc == len(r.prog) {
				// No crash this step after all (its micro-batch was
				// skipped): the held-back sends complete.
				r.crashPending = false
				for _, d := range r.deferred {
					e.complete(d)
				}
				r.deferred = nil
				r.phase = phWaitSends
				continue
			}
			in := r.prog[r.pc]
			if in.flags&flagCrash != 0 {
				e.crash(r, in)
				return
			}
			e.issue(r, in)
		case phWaitSends:
			if r.unfinished > 0 {
				return
			}
			r.t = max(r.t, r.sendEnd)
			r.phase = phOpt
		case phOpt:
			kind := trace.Opt
			if e.faults.optSkip[[2]int{r.id, r.step}] {
				kind = KindOptSkip
			}
			r.optOp = len(r.ops)
			r.ops = append(r.ops, op{kind: kind, mb: -1, peer: -1, step: int64(r.step),
				issue: r.t, start: trace.NoTime, end: trace.NoTime})
			r.phase = phOptWait
			e.arrive(r)
		default: // phOptWait, phDone, phCrashed, phExited
			return
		}
	}
}

// record appends the row for action in of r, issued now, and returns its
// index.
func (e *engine) record(r *rankState, in instr) int {
	o := op{kind: in.kind, chunk: in.chunk, mb: in.mb, peer: -1, step: int64(r.step),
		issue: r.t, start: trace.NoTime, end: trace.NoTime}
	switch {
	case in.kind.IsCompute():
		_, o.flops, o.tokens = e.cost.compute(r.step, r.pipe, r.stage, in)
	case in.kind.IsP2P():
		o.peer = e.peerRank(r, in.peer)
		o.shape, o.dtype, o.bytes = e.cost.p2p(r.step, r.pipe, int(in.mb),
			in.flags&flagBadShape != 0, in.flags&flagBadDtype != 0)
	}
	r.ops = append(r.ops, o)
	return len(r.ops) - 1
}

// issue runs action in of r: a compute runs to its end, a send is posted
// and never blocks, a receive is posted and blocks until matched.
func (e *engine) issue(r *rankState, in instr) {
	i := e.record(r, in)
	o := &r.ops[i]
	me := ref{int32(r.id), int32(i)}
	switch {
	case in.kind.IsSend():
		r.pc++
		r.unfinished++
		e.post(e.channel(me.rank, o.peer), me, true)
	case in.kind.IsRecv():
		r.waitingRecv = true
		e.post(e.channel(o.peer, me.rank), me, false)
	default:
		dur, _, _ := e.cost.compute(r.step, r.pipe, r.stage, in)
		o.start, o.end = r.t, r.t+dur
		r.t = o.end
		r.pc++
	}
}

// post queues a send (isSend) or receive x on ch, matching it with the
// oldest unmatched op of the other side if there is one.
func (e *engine) post(ch *channel, x ref, isSend bool) {
	mine, theirs := &ch.recvs, &ch.sends
	if isSend {
		mine, theirs = theirs, mine
	}
	if ch.hung || len(*theirs) == 0 {
		*mine = append(*mine, x)
		return
	}
	y := (*theirs)[0]
	*theirs = (*theirs)[1:]
	if isSend {
		e.match(ch, x, y)
	} else {
		e.match(ch, y, x)
	}
}

// match pairs a send with the receive it meets in issue order. The transfer
// starts when both are posted. Byte counts that differ hang the pair (and
// every later op on it), as NCCL would; a sender that has crashed, or might
// still crash in this step, decides whether the transfer completes.
func (e *engine) match(ch *channel, send, recv ref) {
	so, ro := e.opAt(send), e.opAt(recv)
	start := max(so.issue, ro.issue)
	if dead := e.crashedAt(send, recv); dead != nil {
		// One side is the op its rank died in: the transfer never ends.
		if start <= dead.crashT {
			so.start, ro.start = start, start
		}
		return
	}
	if so.bytes != ro.bytes {
		ch.hung = true
		so.start, ro.start = start, start
		return
	}
	t := transfer{send: send, recv: recv, start: start, end: start + e.cost.transfer(so.bytes)}
	sender := e.ranks[send.rank]
	switch {
	case sender.crashed:
		e.settleAfterCrash(t, sender.crashT)
	case sender.crashPending:
		sender.deferred = append(sender.deferred, t)
	default:
		e.complete(t)
	}
}

// crashedAt returns the rank whose crash op is send or recv, or nil.
func (e *engine) crashedAt(send, recv ref) *rankState {
	for _, x := range [2]ref{send, recv} {
		if r := e.ranks[x.rank]; r.crashed && int(x.op) == r.crashOp {
			return r
		}
	}
	return nil
}

// complete finishes a matched transfer: both rows get its times, the
// receiver resumes at its end, the sender counts one send done.
func (e *engine) complete(t transfer) {
	so, ro := e.opAt(t.send), e.opAt(t.recv)
	so.start, so.end = t.start, t.end
	ro.start, ro.end = t.start, t.end
	s := e.ranks[t.send.rank]
	s.unfinished--
	s.sendEnd = max(s.sendEnd, t.end)
	if s.unfinished == 0 && s.phase == phWaitSends {
		e.wake(s)
	}
	r := e.ranks[t.recv.rank]
	r.waitingRecv = false
	r.t = t.end
	r.pc++
	e.wake(r)
}

// settleAfterCrash completes a transfer whose sender died at crashT if it
// was over by then; otherwise both ops stay pending, started if the
// transfer had begun.
func (e *engine) settleAfterCrash(t transfer, crashT int64) {
	if t.end <= crashT {
		e.complete(t)
		return
	}
	if t.start <= crashT {
		e.opAt(t.send).start = t.start
		e.opAt(t.recv).start = t.start
	}
}

// crash kills r at action in: the action is recorded started and never
// ended, nothing of r is posted any more, and the sends r matched while its
// crash was pending complete only if they were over by now.
func (e *engine) crash(r *rankState, in instr) {
	i := e.record(r, in)
	o := &r.ops[i]
	o.start = r.t
	r.crashed, r.crashPending, r.crashT, r.crashOp = true, false, r.t, i
	r.phase = phCrashed
	for _, d := range r.deferred {
		e.settleAfterCrash(d, r.crashT)
	}
	r.deferred = nil
	// A P2P op the rank died in was posted: it pairs (in order) with its
	// peer's op, which then never completes either.
	me := ref{int32(r.id), int32(i)}
	switch {
	case in.kind.IsSend():
		e.post(e.channel(me.rank, o.peer), me, true)
	case in.kind.IsRecv():
		e.post(e.channel(o.peer, me.rank), me, false)
	}
}

// resolveDeferred is called when no rank can run. Ranks holding deferred
// sends are blocked before their crash action; the deferred transfer that
// ends first completes (the sender cannot crash before it ends: whatever
// lets the sender run again follows from it). It reports whether there was
// one.
func (e *engine) resolveDeferred() bool {
	var best *rankState
	bi := -1
	for _, r := range e.ranks {
		for i, d := range r.deferred {
			if bi < 0 || d.end < best.deferred[bi].end {
				best, bi = r, i
			}
		}
	}
	if bi < 0 {
		return false
	}
	d := best.deferred[bi]
	best.deferred = append(best.deferred[:bi], best.deferred[bi+1:]...)
	e.complete(d)
	return true
}

// arrive enters r into the optimizer barrier of its step. When every rank
// of the job is in, the OPT of each starts at the latest arrival and lasts
// OptMs (OPT_SKIP: zero), and all go on to the next step. Until then the
// OPT rows stay posted with no start.
func (e *engine) arrive(r *rankState) {
	if len(e.barrier) == 0 || r.t > e.barrierAt {
		e.barrierAt = r.t
	}
	e.barrier = append(e.barrier, r)
	if len(e.barrier) < len(e.ranks) {
		return
	}
	start := e.barrierAt
	for _, w := range e.barrier {
		o := &w.ops[w.optOp]
		o.start, o.end = start, start+e.optNs
		if o.kind == KindOptSkip {
			o.end = start
		}
		w.t = o.end
		w.phase = phStartStep
		e.wake(w)
	}
	e.barrier = e.barrier[:0]
}

// trace assembles the rows of every rank, in rank order.
func (e *engine) trace() *trace.Trace {
	c := e.c
	t := &trace.Trace{Meta: trace.Meta{
		Schema: trace.SchemaMajor, Job: c.Job, WorldSize: len(e.ranks),
		PP: c.Stages, TP: c.TP, DP: c.DP, Virtual: c.Virtual, MicroBatches: c.MicroBatches,
		Schedule: c.Schedule, Device: c.Device, PeakFlops: c.PeakFlops, Clock: trace.ClockVirtual,
	}}
	n := 0
	for _, r := range e.ranks {
		n += len(r.ops)
	}
	t.Grow(n)
	for _, r := range e.ranks {
		for i, o := range r.ops {
			t.Append(trace.Event{
				Rank: trace.Rank(r.id), Pipeline: int32(r.pipe), Stage: trace.Stage(r.stage),
				TPRank: int32(r.tp), Chunk: o.chunk, Step: o.step, MicroBatch: trace.MicroBatch(o.mb),
				Kind: o.kind, Seq: int64(i), IssueNs: o.issue, StartNs: o.start, EndNs: o.end,
				Peer: trace.Rank(o.peer), Bytes: o.bytes, Shape: o.shape, Dtype: o.dtype,
				Tokens: o.tokens, Flops: o.flops,
			})
		}
	}
	return t
}
