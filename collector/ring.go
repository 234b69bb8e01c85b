package collector

import (
	"sync/atomic"

	"github.com/ppprof/ppprof/trace"
)

// slot holds one op from Begin until the writer takes it. The tag says
// which seq the slot holds and in what state; the fields are written by the
// goroutine that owns the state (see the states) before it publishes the
// next state with an atomic store, and read after loading it. A slot is
// 128 bytes: two cache lines, the hot path's only memory traffic.
type slot struct {
	tag atomic.Uint64 // seq<<3 | state

	// Written by Begin/Issue before stOpen.
	issueNs int64
	startNs int64 // host or virtual start; CUDA: NoTime until resolved
	step    int64
	bytes   int64
	tokens  int64
	flops   float64
	shape   string
	dtype   string
	mb      trace.MicroBatch
	chunk   int32
	peer    trace.Rank
	kind    trace.Kind
	flags   uint8 // flagHostOnly, flagEndHost

	// Written by End before stEnded/stDone (CUDA: endNs again when resolved).
	endKind  trace.Kind
	endNs    int64
	memBytes int64
}

// devSlot is a slot's CUDA side, in an array of its own so that host
// clocks do not pay for it: the op's stream and two events the slot owns
// and reuses lap after lap.
type devSlot struct {
	stream  Stream
	startEv uintptr
	endEv   uintptr
}

// Slot flags.
const (
	flagHostOnly = 1 << iota // no device timing for this op: host times only
	flagEndHost              // CUDA: the end event failed; endNs is a host time
)

// Slot states. Producers move a slot free -> open -> ending -> ended|done;
// the writer moves ended -> done (CUDA resolution) and open|ended ->
// abandoned (a full buffer, or Close).
const (
	stFree      = iota // claimed, not yet published
	stOpen             // begun
	stEnding           // End in progress
	stEnded            // ended; device times not resolved yet
	stDone             // complete with final times
	stAbandoned        // written as pending; a late End is ignored
)

func tagOf(seq uint64, st uint64) uint64 { return seq<<3 | st }

// claim takes the next seq, or reports the buffer full.
func (r *Recorder) claim() (uint64, bool) {
	for {
		n := r.next.Load()
		if n-r.head.Load() >= r.size {
			r.dropped.Add(1)
			r.wakeWriter()
			return 0, false
		}
		if r.next.CompareAndSwap(n, n+1) {
			return n, true
		}
	}
}

// open records the start of a checked op.
func (r *Recorder) open(op *Op, peer trace.Rank) Span {
	if r.closed.Load() {
		return NoSpan
	}
	if r.cuda != nil {
		r.inflight.Add(1)
		defer r.inflight.Add(-1)
		if r.closed.Load() {
			return NoSpan
		}
	}
	seq, ok := r.claim()
	if !ok {
		return NoSpan
	}
	s := &r.slots[seq&r.mask]
	s.kind = op.Kind
	s.mb = op.MicroBatch
	s.chunk = op.Chunk
	s.peer = peer
	s.step = op.Step
	s.bytes = op.Bytes
	s.tokens = op.Tokens
	s.flops = op.Flops
	s.shape = op.Shape
	s.dtype = op.Dtype
	s.flags = flagHostOnly
	now := r.clock.Now()
	s.issueNs = now
	s.startNs = now
	if r.cuda != nil && r.recordStart(s, &r.dev[seq&r.mask], op.Stream) {
		s.flags = 0
		s.startNs = trace.NoTime
	}
	s.tag.Store(tagOf(seq, stOpen))
	return Span(seq + 1)
}

// end records the end of span s on stream.
func (r *Recorder) end(sp Span, stream Stream, memBytes int64, skipped bool) {
	if sp == NoSpan {
		return
	}
	seq := uint64(sp - 1)
	s := &r.slots[seq&r.mask]
	if !s.tag.CompareAndSwap(tagOf(seq, stOpen), tagOf(seq, stEnding)) {
		return // ended twice, abandoned, or not a span of this Recorder
	}
	s.endNs = r.clock.Now()
	s.memBytes = max(memBytes, 0)
	s.endKind = s.kind
	if skipped && s.kind == trace.Opt {
		s.endKind = KindOptSkip
	}
	if s.flags&flagHostOnly != 0 {
		s.tag.Store(tagOf(seq, stDone))
		if seq%r.batchN == 0 {
			r.wakeWriter() // about a batch's worth is ready
		}
		return
	}
	d := &r.dev[seq&r.mask]
	if stream == SameStream {
		stream = d.stream
	}
	r.inflight.Add(1)
	if err := r.cuda.api.eventRecord(d.endEv, stream); err != nil {
		r.devErrs.Add(1)
		s.flags |= flagEndHost
	}
	r.inflight.Add(-1)
	s.tag.Store(tagOf(seq, stEnded))
}

// recordStart gives the slot its events (created the first time the slot
// is used) and records the start event on stream. It reports false,
// counting a device error, when the op must fall back to host times.
func (r *Recorder) recordStart(s *slot, d *devSlot, stream Stream) bool {
	api := r.cuda.api
	d.stream = stream
	if d.startEv == 0 || d.endEv == 0 {
		var err error
		if d.startEv == 0 {
			d.startEv, err = api.eventCreate()
		}
		if err == nil && d.endEv == 0 {
			d.endEv, err = api.eventCreate()
		}
		if err != nil {
			r.devErrs.Add(1)
			return false
		}
	}
	if err := api.eventRecord(d.startEv, stream); err != nil {
		r.devErrs.Add(1)
		return false
	}
	return true
}
