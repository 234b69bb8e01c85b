package collector

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/ppprof/ppprof/trace"
)

// Stream is a CUDA stream handle (cudaStream_t / CUstream) as an integer,
// e.g. torch.cuda.current_stream().cuda_stream. 0 is the legacy default
// stream. Host and virtual clocks ignore it.
type Stream uintptr

// SameStream, as the stream of an End or Complete, means the stream the
// span began on.
const SameStream = ^Stream(0)

// CUDAOptions configure OpenCUDA.
type CUDAOptions struct {
	// Library is the path or soname of libcudart or libcuda to dlopen.
	// "" tries libcudart.so, libcudart.so.12, libcudart.so.11.0, then
	// libcuda.so.1 and libcuda.so. A library already loaded in the process
	// (PyTorch's libcudart) is found by its soname.
	Library string
	// API is "runtime" (cudaEvent*), "driver" (cuEvent*) or "" to use the
	// runtime API when the library has it and the driver API otherwise.
	API string
	// Device is the CUDA device ordinal the events are created on.
	Device int
	// AnchorInterval is how often the device clock is re-anchored to the
	// host clock, off the hot path, to follow drift; 0 means one second.
	AnchorInterval time.Duration

	host Clock // the host time base; nil means HostClock (tests inject one)
}

// ErrNoCUDA says no usable CUDA library or device was found: the machine
// has no GPU, or the binary was built without cgo.
var ErrNoCUDA = errors.New("cuda clock unavailable")

// cudaAPI is what the collector needs from CUDA: timing events and one
// private stream. Implemented over dlopen'ed function pointers (cuda_cgo.go).
// Event and stream handles are opaque integers.
type cudaAPI interface {
	bindThread() error // make the device current on the calling OS thread
	eventCreate() (uintptr, error)
	eventDestroy(ev uintptr)
	eventRecord(ev uintptr, s Stream) error
	eventQuery(ev uintptr) (done bool, err error)
	elapsedMs(start, end uintptr) (float32, error)
	streamCreate() (Stream, error)
	streamDestroy(s Stream)
	describe() string // "libcudart.so.12 (runtime API, device 0)"
	table() uintptr   // the C function table (ppc_api*) for the C ABI's hot path
	close()
}

// CUDAClock times device work with CUDA events recorded on the streams the
// work runs on, and expresses the times on the host clock's time base.
//
// Recording an event is one cudaEventRecord on the caller's thread: no
// synchronisation. A Recorder resolves events later, off the hot path, with
// cudaEventQuery and cudaEventElapsedTime against an anchor event whose host
// time was measured on a private idle stream. Anchors are re-measured every
// AnchorInterval; between the last two, the device-to-host rate is
// estimated, so a device clock that drifts against the host stays aligned.
//
// The thread that records events must have the device current (PyTorch's
// threads do); resolution runs on the Recorder's own locked OS thread.
type CUDAClock struct {
	api      cudaAPI
	host     Clock
	interval time.Duration
	stream   Stream // private, non-blocking: anchors complete at once

	mu       sync.Mutex // guards the anchors: held by resolution and re-anchoring
	cur      anchor
	prev     anchor  // the anchor before cur; ev 0 when none
	rate     float64 // host ns per device ns between prev and cur; 1 when unknown
	anchors  int     // anchors measured so far
	offsetNs int64   // host time of the first anchor: host minus device time
	closed   bool
}

// anchor pairs a completed event with the host time it was recorded at.
type anchor struct {
	ev     uintptr
	hostNs int64 // midpoint of the window in which the event executed
	errNs  int64 // half that window: the anchor's uncertainty
}

// Anchor tuning: tries per anchor (the narrowest window wins), how long an
// anchor event may take to complete on the idle private stream, and the
// bounds within which an estimated drift rate is believed.
const (
	anchorTries   = 5
	anchorTimeout = 2 * time.Second
	maxDrift      = 1e-3 // 1000 ppm
	minRateSpan   = 50 * time.Millisecond
)

// OpenCUDA loads the CUDA library with dlopen, creates a private stream on
// opt.Device and anchors the device clock to the host clock. It fails with
// an error wrapping ErrNoCUDA when there is no library, no device, or no cgo.
func OpenCUDA(opt CUDAOptions) (*CUDAClock, error) {
	api, err := openCUDAAPI(opt)
	if err != nil {
		return nil, err
	}
	c, err := newCUDAClock(api, opt)
	if err != nil {
		api.close()
		return nil, err
	}
	return c, nil
}

// newCUDAClock sets a clock up over api: private stream and first anchor,
// both on a fresh locked OS thread, so the caller's current device is left
// alone.
func newCUDAClock(api cudaAPI, opt CUDAOptions) (*CUDAClock, error) {
	c := &CUDAClock{api: api, host: opt.host, interval: opt.AnchorInterval, rate: 1}
	if c.host == nil {
		c.host = HostClock()
	}
	if c.interval <= 0 {
		c.interval = time.Second
	}
	err := onBoundThread(api, func() error {
		s, err := api.streamCreate()
		if err != nil {
			return fmt.Errorf("creating the anchor stream: %w", err)
		}
		c.stream = s
		a, err := c.measureAnchor()
		if err != nil {
			api.streamDestroy(s)
			return err
		}
		c.cur, c.anchors, c.offsetNs = a, 1, a.hostNs
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cuda clock: %w", err)
	}
	return c, nil
}

// onBoundThread runs f on a new OS thread with the device current, and
// lets that thread exit afterwards so no Go thread keeps CUDA state.
func onBoundThread(api cudaAPI, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := api.bindThread(); err != nil {
			done <- err
			return
		}
		done <- f()
	}()
	return <-done
}

// Name returns trace.ClockCUDAEvent.
func (c *CUDAClock) Name() trace.Clock { return trace.ClockCUDAEvent }

// Now returns the host time: issue times are host times.
func (c *CUDAClock) Now() int64 { return c.host.Now() }

// OffsetNs returns host minus device time in nanoseconds, where device time
// counts from the first anchor event: the host time of that event. Trace
// times are already on the host time base; this is for reference.
func (c *CUDAClock) OffsetNs() int64 { return c.offsetNs }

// Describe names the library, API and device in use.
func (c *CUDAClock) Describe() string { return c.api.describe() }

// Anchors returns how many anchors have been measured, the first included.
func (c *CUDAClock) Anchors() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.anchors
}

// Close releases the anchor events, the private stream and the library
// handle. Recorders using the clock must be closed first.
func (c *CUDAClock) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return onBoundThread(c.api, func() error {
		c.api.eventDestroy(c.cur.ev)
		if c.prev.ev != 0 {
			c.api.eventDestroy(c.prev.ev)
		}
		c.api.streamDestroy(c.stream)
		c.api.close()
		return nil
	})
}

// measureAnchor records events on the idle private stream and keeps the one
// whose record-to-completion window, seen from the host, was narrowest: its
// host time is that window's midpoint. Runs on a bound thread.
func (c *CUDAClock) measureAnchor() (anchor, error) {
	best := anchor{errNs: math.MaxInt64}
	for try := 0; try < anchorTries; try++ {
		ev, err := c.api.eventCreate()
		if err != nil {
			return best, fmt.Errorf("creating an anchor event: %w", err)
		}
		h0 := c.host.Now()
		if err := c.api.eventRecord(ev, c.stream); err != nil {
			c.api.eventDestroy(ev)
			return best, fmt.Errorf("recording an anchor event: %w", err)
		}
		deadline := time.Now().Add(anchorTimeout)
		for {
			done, err := c.api.eventQuery(ev)
			if err != nil {
				c.api.eventDestroy(ev)
				return best, fmt.Errorf("querying an anchor event: %w", err)
			}
			if done {
				break
			}
			if time.Now().After(deadline) {
				c.api.eventDestroy(ev)
				return best, fmt.Errorf("anchor event not complete after %v on an idle stream", anchorTimeout)
			}
			runtime.Gosched()
		}
		h1 := c.host.Now()
		if w := (h1 - h0) / 2; w < best.errNs {
			if best.ev != 0 {
				c.api.eventDestroy(best.ev)
			}
			best = anchor{ev: ev, hostNs: h0 + w, errNs: w}
		} else {
			c.api.eventDestroy(ev)
		}
	}
	return best, nil
}

// maybeReanchor measures a new anchor when the current one is older than
// the interval, and estimates the drift rate from the two. Runs on a bound
// thread (a Recorder's writer).
func (c *CUDAClock) maybeReanchor() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.host.Now()-c.cur.hostNs < int64(c.interval) {
		return nil
	}
	return c.reanchorLocked()
}

func (c *CUDAClock) reanchorLocked() error {
	a, err := c.measureAnchor()
	if err != nil {
		return err
	}
	rate := 1.0
	if span := a.hostNs - c.cur.hostNs; span >= int64(minRateSpan) {
		if ms, err := c.api.elapsedMs(c.cur.ev, a.ev); err == nil && ms > 0 {
			r := float64(span) / (float64(ms) * 1e6)
			if math.Abs(r-1) <= maxDrift {
				rate = r
			}
		}
	}
	if c.prev.ev != 0 {
		c.api.eventDestroy(c.prev.ev)
	}
	c.prev, c.cur, c.rate = c.cur, a, rate
	c.anchors++
	return nil
}

// hostTime converts a completed event to host time: the current anchor's
// host time plus the device time elapsed since it, scaled by the estimated
// rate. Runs on a bound thread.
func (c *CUDAClock) hostTime(ev uintptr) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hostTimeLocked(ev)
}

func (c *CUDAClock) hostTimeLocked(ev uintptr) (int64, error) {
	ms, err := c.api.elapsedMs(c.cur.ev, ev)
	if err != nil {
		return 0, err
	}
	return c.cur.hostNs + int64(math.Round(float64(ms)*1e6*c.rate)), nil
}

// cudaError is a CUDA call's failure: the call, its code and the library's
// message for it.
type cudaError struct {
	call string
	code int
	msg  string
}

func (e *cudaError) Error() string {
	if e.msg != "" {
		return fmt.Sprintf("%s: cuda error %d: %s", e.call, e.code, e.msg)
	}
	return fmt.Sprintf("%s: cuda error %d", e.call, e.code)
}
