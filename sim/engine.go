package sim

import (
	"math"

	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/trace"
)

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

// rankState is one rank's progress through its program.
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

// engine runs every rank's program. Time is not global: each rank carries
// its own clock, and an op's times are maxima and sums of times already
// known, so the order ranks are visited in does not change the result.
//
//  1. A runnable rank advances until it blocks: compute moves its clock;
//     a send is posted on its (src, dst) channel and the rank goes on; a
//     receive is posted and, unless a send is already waiting on the
//     channel, blocks the rank.
//  2. Posting matches the oldest op of the other side of the channel, if
//     any (NCCL order); completing a receive wakes its rank.
//  3. At the end of its step's actions a rank blocks until its sends have
//     completed, then posts OPT and blocks in the barrier; the last rank
//     in releases them all into the next step.
//  4. When no rank can run, sends held back because their sender may still
//     crash are released one at a time, earliest end first (resolveDeferred);
//     when there are none, what is still blocked stays blocked for good.
//
// Each action is handled once, so the work is linear in the rows.
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

// newEngine sets up the ranks of c, all runnable, at time 0.
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

// wake queues r to run, unless it is running or queued already.
func (e *engine) wake(r *rankState) {
	if r.running || r.queued {
		return
	}
	r.queued = true
	e.queue = append(e.queue, r)
}

// opAt returns the op x names.
func (e *engine) opAt(x ref) *op { return &e.ranks[x.rank].ops[x.op] }

// peerRank returns the rank of r's peer on stage: same pipeline, same TP
// rank.
func (e *engine) peerRank(r *rankState, stage int32) int32 {
	return int32((int(stage)*e.c.DP+r.pipe)*e.c.TP + r.tp)
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
