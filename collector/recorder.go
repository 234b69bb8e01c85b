package collector

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/ppprof/ppprof/collector/internal/ringapi"
	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// Span identifies one recorded op between its Begin (or Issue) and its End
// (or Complete). NoSpan means nothing was recorded: the op was invalid, the
// buffer was full, or the Recorder is closed. Ending NoSpan is a no-op.
type Span uint64

// NoSpan is the Span of an op that was not recorded.
const NoSpan Span = 0

// KindOptSkip is the kind of an optimizer step that was skipped (for
// example because mixed-precision gradients overflowed): "OPT_SKIP".
var KindOptSkip = trace.MustKind("OPT_SKIP")

// Op describes one operation as it starts. Fields that do not apply stay
// zero; MicroBatch is trace.NoMicroBatch (-1) for ops of no micro-batch.
type Op struct {
	Kind       trace.Kind
	Step       int64            // optimizer step, >= 0
	MicroBatch trace.MicroBatch // >= 0, or -1
	Chunk      int32            // virtual stage / model chunk on this rank
	Peer       trace.Rank       // the other rank: P2P ops only
	Bytes      int64            // payload bytes (P2P)
	Shape      string           // e.g. "4x16x32"; keep it short and reuse the string
	Dtype      string           // e.g. "bf16"
	Tokens     int64            // tokens in the micro-batch
	Flops      float64          // FLOPs of a compute op
	Stream     Stream           // the CUDA stream the work is enqueued on
}

// Stats counts what a Recorder did.
type Stats struct {
	Recorded     uint64 // ops recorded (given a seq)
	Written      uint64 // rows written as final rows (pending tails not counted)
	Dropped      int64  // ops not recorded because the buffer was full (or racing Close)
	Rejected     int64  // ops not recorded because they were invalid
	Abandoned    int64  // ops written as pending to free a full buffer; their End was ignored
	DeviceErrors int64  // CUDA calls that failed; those ops fell back to host times
	Watchdog     int64  // times the watchdog wrote pending ops
}

// Recorder records one rank's ops and writes them, as the job runs, to
// Dir/rank-NNNNN.arrows. Its methods are safe for concurrent use.
//
// The hot path (Begin, End, Issue, Complete) takes under 100 nanoseconds
// per op with the host clock: Begin claims a slot in a ring buffer with
// one compare-and-swap, stamps the time and publishes the slot with one
// atomic store; End does the same with the slot's state. It never
// allocates, never takes a lock the writer holds, never waits for I/O and
// never synchronises the device. A background
// goroutine resolves device times, writes a record batch every BatchEvents
// events or FlushInterval, and runs the watchdog.
//
// Rows are written in seq (issue) order, each op once with its final times.
// An op still in flight holds back the ops after it until it completes; if
// it has held back a buffer three quarters full for 250 ms, it is written
// as pending (null end) and its End is ignored, so the buffer never
// blocks. When the buffer is full, new ops are dropped and counted in the
// file's dropped_events metadata, which is patched in place.
//
// When ops are outstanding and none has completed for WatchdogTimeout (or
// on DumpPending, or SIGUSR1 with Config.Signals), the rows not yet final,
// pending ops with a null end among them, are appended to the file as a
// tail that later writes replace: a job killed while stuck leaves its
// pending ops readable, and a job that recovers rewrites them once.
type Recorder struct {
	cfg   Config
	clock Clock
	cuda  *CUDAClock
	path  string
	log   io.Writer

	mem   *ringMem
	ctl   *ringCtl      // mem.ctl: counters shared with the C hot path
	slots []slot        // mem.slots
	dev   []devSlot     // mem.dev: CUDA only, parallel to slots
	strs  []slotStrings // Go API labels, parallel to slots
	cmem  bool          // the ring is in C memory
	// guard: hot-path calls are counted in ctl.inflight, so that Close
	// frees the ring only when none is in progress: when the ring is in C
	// memory (freed at Close), or CUDA events may be destroyed.
	guard  bool
	mask   uint64
	size   uint64
	batchN uint64

	abandoned atomic.Int64
	written   atomic.Uint64
	watchdogs atomic.Int64
	curStep   atomic.Int64

	wake      chan struct{}
	reqs      chan request
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// New creates the output directory and file, writes the schema, and starts
// the background writer. Close it when the job ends.
func New(cfg Config) (*Recorder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("collector: %w", err)
	}
	r := &Recorder{
		cfg:    cfg,
		clock:  cfg.Clock,
		log:    cfg.Log,
		strs:   make([]slotStrings, cfg.BufferEvents),
		mask:   uint64(cfg.BufferEvents - 1),
		size:   uint64(cfg.BufferEvents),
		batchN: uint64(cfg.BatchEvents),
		wake:   make(chan struct{}, 1),
		reqs:   make(chan request),
		done:   make(chan struct{}),
	}
	if r.log == nil {
		r.log = os.Stderr
	}
	cuda, _ := cfg.Clock.(*CUDAClock)
	r.cuda = cuda
	r.mem = allocRing(cfg.BufferEvents, cuda != nil)
	r.ctl, r.slots, r.dev, r.cmem = r.mem.ctl, r.mem.slots, r.mem.dev, r.mem.cmem
	r.guard = r.cmem || cuda != nil
	r.setupCtl()
	meta := cfg.Meta
	meta.Clock = cfg.Clock.Name()
	meta.ClockOffsetNs = 0
	if r.cuda != nil {
		meta.ClockOffsetNs = r.cuda.OffsetNs()
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		r.mem.free()
		return nil, fmt.Errorf("collector: %w", err)
	}
	r.path = filepath.Join(cfg.Dir, rankFile(cfg.Rank))
	opt := arrowv1.Options{Compression: cfg.Compression, BatchRows: max(cfg.BatchEvents, 1024)}
	s, err := openSink(r.path, meta, opt, cfg.Fsync)
	if err != nil {
		r.mem.free()
		return nil, fmt.Errorf("collector: rank %d: %w", cfg.Rank, err)
	}
	started := make(chan error, 1)
	go r.run(s, started)
	if err := <-started; err != nil {
		<-r.done
		r.mem.free()
		return nil, fmt.Errorf("collector: rank %d: %w", cfg.Rank, err)
	}
	watchSignals(r, cfg.Signals)
	return r, nil
}

// Path returns the file the Recorder writes.
func (r *Recorder) Path() string { return r.path }

// Rank returns the rank the Recorder records.
func (r *Recorder) Rank() trace.Rank { return r.cfg.Rank }

// Stats returns the counters so far.
func (r *Recorder) Stats() Stats {
	return Stats{
		Recorded:     r.ctl.next.Load(),
		Written:      r.written.Load(),
		Dropped:      r.ctl.dropped.Load(),
		Rejected:     r.ctl.rejected.Load(),
		Abandoned:    r.abandoned.Load(),
		DeviceErrors: r.ctl.devErrs.Load(),
		Watchdog:     r.watchdogs.Load(),
	}
}

// setupCtl fills the control block's configuration for the C hot path.
func (r *Recorder) setupCtl() {
	c := r.ctl
	c.mask, c.size, c.rank = r.mask, r.size, int32(r.cfg.Rank)
	switch clk := r.clock.(type) {
	case *VirtualClock:
		c.clock = clockVirtual
		c.virtualPtr = uintptr(unsafe.Pointer(clk.ns))
	case *CUDAClock:
		c.clock = clockCUDA
		c.cuda = clk.api.table()
		if r.cmem {
			c.monoOffset = monoOffset(r.clock) // issue times are host times
		}
	default:
		c.clock = clockHost
		if r.cmem {
			c.monoOffset = monoOffset(r.clock)
		}
	}
}

func init() {
	ringapi.Ctl = func(rec any) uintptr { return uintptr(unsafe.Pointer(rec.(*Recorder).ctl)) }
	ringapi.LabelID = labelID
}

// Begin starts a compute op (F, B, W, or a free-form kind such as DATA or
// LOSS) on op.Stream and returns its Span. op.Peer is ignored. An invalid
// op (a P2P kind, a negative step...) is not recorded: see CheckOp.
func (r *Recorder) Begin(op Op) Span {
	if checkOp(&op, r.cfg.Rank, false) != nil {
		r.ctl.rejected.Add(1)
		return NoSpan
	}
	return r.open(&op, trace.NoRank)
}

// Issue records that a P2P op (SEND_F, RECV_F, SEND_B, RECV_B) to or from
// op.Peer was posted, and returns its Span; Complete it when its wait
// returns. Until then the op is pending: what a hang diagnosis looks for.
func (r *Recorder) Issue(op Op) Span {
	if checkOp(&op, r.cfg.Rank, true) != nil {
		r.ctl.rejected.Add(1)
		return NoSpan
	}
	return r.open(&op, op.Peer)
}

// End ends a span on the stream it began on.
func (r *Recorder) End(s Span) { r.end(s, SameStream, 0, false) }

// EndOn ends a span on stream (SameStream: the one it began on), noting
// the device memory allocated at its end (0 if unknown).
func (r *Recorder) EndOn(s Span, stream Stream, memBytes int64) {
	r.end(s, stream, memBytes, false)
}

// Complete records that the wait of a P2P op returned, on the stream it was
// issued on.
func (r *Recorder) Complete(s Span) { r.end(s, SameStream, 0, false) }

// CompleteOn records that the wait of a P2P op returned, timing it on
// stream (the stream that waited for it; SameStream: the one it was issued
// on).
func (r *Recorder) CompleteOn(s Span, stream Stream) { r.end(s, stream, 0, false) }

// OptimizerBegin starts the optimizer step of step on stream.
func (r *Recorder) OptimizerBegin(step int64, stream Stream) Span {
	return r.Begin(Op{Kind: trace.Opt, Step: step, MicroBatch: trace.NoMicroBatch, Stream: stream})
}

// OptimizerEnd ends an optimizer span. skipped records the step's skip
// decision: the row's kind becomes OPT_SKIP.
func (r *Recorder) OptimizerEnd(s Span, skipped bool) { r.end(s, SameStream, 0, skipped) }

// Step marks the start of step: the current step (see CurrentStep), and a
// natural point to write a batch, which the writer is woken for.
func (r *Recorder) Step(step int64) {
	r.curStep.Store(step)
	r.wakeWriter()
}

// CurrentStep returns the step last passed to Step.
func (r *Recorder) CurrentStep() int64 { return r.curStep.Load() }

// CheckOp says why Begin (p2p false) or Issue (p2p true) would refuse op on
// rank, or returns nil. Every row written must pass trace.Validate, so the
// hot path checks the same rules.
func CheckOp(op Op, rank trace.Rank, p2p bool) error { return checkOp(&op, rank, p2p) }

// Errors CheckOp returns (wrapped with details).
var (
	ErrBadKind  = errors.New("bad kind")
	ErrBadLabel = errors.New("bad label")
	ErrBadPeer  = errors.New("bad peer")
)

func checkOp(op *Op, rank trace.Rank, p2p bool) error {
	k := op.Kind
	switch {
	case !k.Valid():
		return fmt.Errorf("%w: invalid kind %d", ErrBadKind, uint16(k))
	case p2p && !k.IsP2P():
		return fmt.Errorf("%w: %s is not a P2P kind (SEND_F, RECV_F, SEND_B, RECV_B)", ErrBadKind, k)
	case !p2p && k.IsP2P():
		return fmt.Errorf("%w: %s is a P2P kind: use Issue", ErrBadKind, k)
	case p2p && op.Peer < 0:
		return fmt.Errorf("%w: peer %d", ErrBadPeer, op.Peer)
	case p2p && op.Peer == rank:
		return fmt.Errorf("%w: peer %d is the rank itself", ErrBadPeer, op.Peer)
	case op.Step < 0:
		return fmt.Errorf("%w: step %d (want >= 0)", ErrBadLabel, op.Step)
	case op.MicroBatch < trace.NoMicroBatch:
		return fmt.Errorf("%w: micro-batch %d (want >= 0, or -1)", ErrBadLabel, op.MicroBatch)
	case op.Chunk < 0:
		return fmt.Errorf("%w: chunk %d (want >= 0)", ErrBadLabel, op.Chunk)
	case op.Bytes < 0 || op.Tokens < 0:
		return fmt.Errorf("%w: bytes %d, tokens %d (want >= 0)", ErrBadLabel, op.Bytes, op.Tokens)
	case !(op.Flops >= 0) || op.Flops > math.MaxFloat64:
		return fmt.Errorf("%w: flops %v (want finite, >= 0)", ErrBadLabel, op.Flops)
	case op.Shape != "" && !utf8.ValidString(op.Shape), op.Dtype != "" && !utf8.ValidString(op.Dtype):
		return fmt.Errorf("%w: shape or dtype is not UTF-8", ErrBadLabel)
	}
	return nil
}

func (r *Recorder) wakeWriter() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Flush writes every completed op that is ready (in seq order, up to the
// first op still in flight) as a record batch now, and returns the first
// error the writer met, if any.
func (r *Recorder) Flush() error { return r.request(reqFlush) }

// DumpPending writes the ops not yet final, pending ones with a null end,
// as the file's pending tail now, and logs them. ppprof hang reads them.
func (r *Recorder) DumpPending() error { return r.request(reqDump) }

// Close stops recording, writes every op still buffered (ops in flight as
// pending, with a null end), ends the stream and closes the file. Calls
// after Close record nothing. Close is idempotent.
func (r *Recorder) Close() error {
	r.closeOnce.Do(func() {
		r.ctl.closed.Store(1)
		unwatchSignals(r)
		r.closeErr = r.request(reqClose)
		<-r.done
	})
	return r.closeErr
}

// ErrClosed is returned by Flush and DumpPending after Close.
var ErrClosed = errors.New("collector: recorder closed")

type reqKind int

const (
	reqFlush reqKind = iota
	reqDump
	reqClose
	reqHold // tests: the writer replies, then blocks until hold is closed
)

type request struct {
	kind  reqKind
	reply chan error
	hold  chan struct{} // reqHold: closed by the test to release the writer
}

func (r *Recorder) request(k reqKind) error {
	req := request{kind: k, reply: make(chan error, 1)}
	select {
	case r.reqs <- req:
		return <-req.reply
	case <-r.done:
		return ErrClosed
	}
}
