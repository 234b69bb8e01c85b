package collector

import (
	"sync/atomic"

	"github.com/ppprof/ppprof/trace"
)

// slot holds one op from Begin until the writer takes it. The tag says
// which seq the slot holds and in what state; the fields are written by the
// goroutine (or C thread) that owns the state before it publishes the next
// state with an atomic store, and read after loading it. A slot is 128
// bytes, two cache lines: the hot path's only memory traffic. Its layout is
// ppc_slot's in ring.h (TestRingLayout checks it): the C ABI's hot path
// writes slots directly.
type slot struct {
	tag atomic.Uint64 // seq<<3 | state

	// Written by Begin/Issue before stOpen.
	issueNs int64
	startNs int64 // host or virtual start; CUDA: NoTime until resolved
	step    int64
	bytes   int64
	tokens  int64
	flops   float64
	// Written by End before stEnded/stDone (CUDA: endNs again when resolved).
	endNs    int64
	memBytes int64
	// Written by Begin/Issue before stOpen.
	shape   uint32 // label ids (labels.go), unless flagGoStrings
	dtype   uint32
	mb      trace.MicroBatch
	chunk   int32
	peer    trace.Rank
	kind    trace.Kind
	endKind trace.Kind // written by End
	flags   uint8      // flag*; End may add flagEndHost
	_       [31]byte
}

// slotStrings are the shape and dtype of an op recorded through the Go
// API, which keeps Go strings (no interning on the Go hot path). Parallel
// to the slots, in Go memory; used when the slot has flagGoStrings.
type slotStrings struct {
	shape, dtype string
}

// devSlot is a slot's CUDA side, in an array of its own so that host
// clocks do not pay for it: the op's stream and two events the slot owns
// and reuses lap after lap. Layout: ppc_dev.
type devSlot struct {
	stream  Stream
	startEv uintptr
	endEv   uintptr
}

// ringCtl is the ring's control block. Layout: ppc_ctl (ring.h). With the
// C ABI it lives in C memory, shared with the C hot path.
type ringCtl struct {
	next       atomic.Uint64 // next seq to claim; written by producers
	_          [56]byte
	head       atomic.Uint64 // first seq not yet taken by the writer; written by the writer
	_          [56]byte
	closed     atomic.Int32
	inflight   atomic.Int32 // hot-path sections in progress where Close must wait for them
	dropped    atomic.Int64
	rejected   atomic.Int64
	devErrs    atomic.Int64
	virtualPtr uintptr // address of the virtual clock's int64 (C memory), 0 unless clock is virtual
	mask       uint64
	size       uint64
	rank       int32
	clock      int32 // clockHost, clockVirtual, clockCUDA
	monoOffset int64 // host ns = monoOffset + CLOCK_MONOTONIC ns, for C
	cuda       uintptr
	slots      uintptr
	dev        uintptr
}

// Clock codes of ringCtl.clock (PPC_CLOCK_* in ring.h).
const (
	clockHost = iota
	clockVirtual
	clockCUDA
)

// Slot flags (PPC_FLAG_* in ring.h).
const (
	flagHostOnly  = 1 << iota // no device timing for this op: host times only
	flagEndHost               // CUDA: the end event failed; endNs is a host time
	flagGoStrings             // shape and dtype are in the recorder's strs
)

// Slot states (PPC_ST_* in ring.h). Producers move a slot free -> open ->
// ending -> ended|done; the writer moves ended -> done (CUDA resolution)
// and open|ended -> abandoned (a full buffer, or Close).
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
	c := r.ctl
	for {
		n := c.next.Load()
		if n-c.head.Load() >= r.size {
			c.dropped.Add(1)
			r.wakeWriter()
			return 0, false
		}
		if c.next.CompareAndSwap(n, n+1) {
			return n, true
		}
	}
}

// open records the start of a checked op.
func (r *Recorder) open(op *Op, peer trace.Rank) Span {
	c := r.ctl
	if r.guard {
		c.inflight.Add(1)
		defer c.inflight.Add(-1)
	}
	if c.closed.Load() != 0 {
		return NoSpan
	}
	seq, ok := r.claim()
	if !ok {
		return NoSpan
	}
	i := seq & r.mask
	s := &r.slots[i]
	s.kind = op.Kind
	s.mb = op.MicroBatch
	s.chunk = op.Chunk
	s.peer = peer
	s.step = op.Step
	s.bytes = op.Bytes
	s.tokens = op.Tokens
	s.flops = op.Flops
	s.flags = flagHostOnly
	if op.Shape != "" || op.Dtype != "" {
		r.strs[i] = slotStrings{op.Shape, op.Dtype}
		s.flags |= flagGoStrings
	}
	now := r.clock.Now()
	s.issueNs = now
	s.startNs = now
	if r.cuda != nil && r.recordStart(&r.dev[i], op.Stream) {
		s.flags &^= flagHostOnly
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
	c := r.ctl
	if r.guard {
		c.inflight.Add(1)
		defer c.inflight.Add(-1)
		if c.closed.Load() != 0 {
			return
		}
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
	if err := r.cuda.api.eventRecord(d.endEv, stream); err != nil {
		c.devErrs.Add(1)
		s.flags |= flagEndHost
	}
	s.tag.Store(tagOf(seq, stEnded))
}

// recordStart gives the slot its events (created the first time the slot
// is used) and records the start event on stream. It reports false,
// counting a device error, when the op must fall back to host times.
func (r *Recorder) recordStart(d *devSlot, stream Stream) bool {
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
			r.ctl.devErrs.Add(1)
			return false
		}
	}
	if err := api.eventRecord(d.startEv, stream); err != nil {
		r.ctl.devErrs.Add(1)
		return false
	}
	return true
}
