//go:build cgo

package collector

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ppprof/ppprof/collector/internal/fakecuda"
	"github.com/ppprof/ppprof/trace"
)

// The fake library is built once per test binary; every test shares the
// loaded copy (dlopen by path), so the tests that change its settings do
// not run in parallel and restore them.
var fake struct {
	once sync.Once
	path string
	lib  *fakecuda.Lib
	err  error
}

func fakeCUDA(t *testing.T) (string, *fakecuda.Lib) {
	t.Helper()
	fake.once.Do(func() {
		dir, err := tempDirNoCleanup()
		if err != nil {
			fake.err = err
			return
		}
		if fake.path, fake.err = fakecuda.Build(dir); fake.err == nil {
			fake.lib, fake.err = fakecuda.Open(fake.path)
		}
	})
	if fake.err != nil {
		t.Skipf("fake CUDA library unavailable: %v", fake.err)
	}
	l := fake.lib
	t.Cleanup(func() {
		l.SetManual(false, 0)
		l.SetClock(0, 0)
		l.SetVisibleDelay(0)
		l.SetDevices(1)
	})
	return fake.path, l
}

// manualSetup puts the fake library and a virtual host clock at the same
// time and returns a CUDA clock over them.
func manualSetup(t *testing.T, opt CUDAOptions) (*CUDAClock, *VirtualClock, *fakecuda.Lib) {
	t.Helper()
	path, lib := fakeCUDA(t)
	const t0 = 1_000_000_000_000
	lib.SetManual(true, t0)
	host := NewVirtualClock(t0)
	opt.Library, opt.host = path, host
	c, err := OpenCUDA(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, host, lib
}

// advance moves both clocks.
func advance(host *VirtualClock, lib *fakecuda.Lib, d time.Duration) {
	host.Advance(d)
	lib.Advance(int64(d))
}

// TestCUDADlopenAndAsyncResolution: events are recorded on the caller's
// stream and resolved later, off the hot path; an op whose end event has
// not executed yet is not written; once it has, its row carries the device
// times on the host time base, exactly.
func TestCUDADlopenAndAsyncResolution(t *testing.T) {
	c, host, lib := manualSetup(t, CUDAOptions{AnchorInterval: time.Hour})
	if !strings.Contains(c.Describe(), "runtime API") {
		t.Errorf("describe: %s", c.Describe())
	}
	r := newTestRecorder(t, Config{Rank: 0, Clock: c, WatchdogTimeout: -1})
	stream := lib.StreamCreate()
	t0 := host.Now()

	f := r.Begin(Op{Kind: trace.F, MicroBatch: 0, Stream: Stream(stream)})
	lib.Launch(stream, int64(5*time.Millisecond)) // the forward's kernels
	r.End(f)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	tr, _, _ := readRank(t, r.Path())
	if tr.Len() != 0 || r.Stats().Written != 0 {
		t.Fatalf("an op still running on the device was written: %v", rowsOf(tr))
	}

	advance(host, lib, 10*time.Millisecond)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	tr, _, _ = readRank(t, r.Path())
	if tr.Len() != 1 {
		t.Fatalf("rows %v", rowsOf(tr))
	}
	e := tr.At(0)
	if e.IssueNs != t0 || !near(e.StartNs, t0, 1000) || !near(e.EndNs, t0+int64(5*time.Millisecond), 1000) {
		t.Errorf("row %+v: want issue %d, start %d, end %d", e, t0, t0, t0+int64(5*time.Millisecond))
	}
	if tr.Meta.Clock != trace.ClockCUDAEvent || tr.Meta.ClockOffsetNs != c.OffsetNs() || c.OffsetNs() != t0 {
		t.Errorf("metadata clock %q offset %d (clock's %d)", tr.Meta.Clock, tr.Meta.ClockOffsetNs, c.OffsetNs())
	}
}

func near(got, want, tol int64) bool { return got >= want-tol && got <= want+tol }

// TestCUDAHotPathOnlyRecords: Begin and End call cudaEventRecord on the
// caller's thread and nothing else: no query, no elapsed time, no
// synchronisation. Resolution happens on the writer's thread.
func TestCUDAHotPathOnlyRecords(t *testing.T) {
	c, host, lib := manualSetup(t, CUDAOptions{AnchorInterval: time.Hour})
	r := newTestRecorder(t, Config{Rank: 0, Clock: c, BufferEvents: 64, WatchdogTimeout: -1})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	lib.ResetCounts()
	for i := 0; i < 40; i++ {
		r.End(r.Begin(Op{Kind: trace.F, MicroBatch: trace.MicroBatch(i)}))
	}
	if n := lib.ThreadCount("event_record"); n != 80 {
		t.Errorf("%d event records on the hot path, want 80", n)
	}
	for _, call := range []string{"event_query", "elapsed_time", "event_create", "set_device"} {
		if n := lib.ThreadCount(call); n != 0 {
			t.Errorf("%d %s calls on the hot path", n, call)
		}
	}
	advance(host, lib, time.Millisecond)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	if lib.Count("event_query") == 0 || lib.Count("elapsed_time") == 0 {
		t.Error("nothing resolved the events")
	}
	if r.Stats().Written != 40 {
		t.Errorf("stats %+v", r.Stats())
	}
}

// TestCUDAEventPool: a slot's two events are created once and reused lap
// after lap of the ring; Close destroys them all.
func TestCUDAEventPool(t *testing.T) {
	c, host, lib := manualSetup(t, CUDAOptions{AnchorInterval: time.Hour})
	lib.ResetCounts()
	live := lib.LiveEvents()
	const slots = 32
	r := newTestRecorder(t, Config{Rank: 0, Clock: c, BufferEvents: slots, WatchdogTimeout: -1})
	for i := 0; i < 20*slots; i++ {
		r.End(r.Begin(Op{Kind: trace.F, MicroBatch: trace.MicroBatch(i)}))
		if i%8 == 7 {
			advance(host, lib, time.Microsecond)
			if err := r.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Written+uint64(st.Dropped) != 20*slots || st.DeviceErrors != 0 {
		t.Errorf("stats %+v", st)
	}
	if n := lib.Count("event_create"); n != 2*slots {
		t.Errorf("%d events created for %d ops through %d slots, want %d", n, 20*slots, slots, 2*slots)
	}
	if n := lib.LiveEvents(); n != live {
		t.Errorf("%d events alive after Close, want %d (the clock's anchors)", n, live)
	}
	if n := lib.Count("bad_handle"); n != 0 {
		t.Errorf("%d calls with a bad handle", n)
	}
}

// TestCUDAAnchorDrift: the device clock runs 1000 ppm fast and far from
// the host's. Re-anchoring, with the rate estimated between anchors, keeps
// device times on the host time base; with one anchor they would drift.
func TestCUDAAnchorDrift(t *testing.T) {
	_, lib := fakeCUDA(t)
	lib.SetClock(1000, -123_456_789)
	c, host, lib := manualSetup(t, CUDAOptions{AnchorInterval: time.Second})
	r := newTestRecorder(t, Config{Rank: 0, Clock: c, WatchdogTimeout: -1})

	// 10 s later, the writer re-anchors (the interval has passed) and
	// estimates the rate from the two anchors.
	advance(host, lib, 10*time.Second)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	if c.Anchors() != 2 {
		t.Fatalf("%d anchors, want 2", c.Anchors())
	}
	// An op 0.8 s after the second anchor, 200 ms long.
	advance(host, lib, 800*time.Millisecond)
	start := host.Now()
	f := r.Begin(Op{Kind: trace.F})
	lib.Launch(0, int64(200*time.Millisecond))
	r.End(f)
	advance(host, lib, 300*time.Millisecond)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	tr, _, _ := readRank(t, r.Path())
	if tr.Len() != 1 {
		t.Fatalf("rows %v", rowsOf(tr))
	}
	// float32 milliseconds resolve about 100 ns at a second from the anchor.
	e := tr.At(0)
	if !near(e.StartNs, start, 2000) || !near(e.EndNs, start+int64(200*time.Millisecond), 2000) {
		t.Errorf("start %d end %d, want %d and %d (errors %d, %d ns)", e.StartNs, e.EndNs, start,
			start+int64(200*time.Millisecond), e.StartNs-start, e.EndNs-start-int64(200*time.Millisecond))
	}
	// Without re-anchoring, 10.8 s at 1000 ppm would be 10.8 ms off.
	if math.Abs(c.rate-1/1.001) > 1e-7 {
		t.Errorf("rate %v, want %v", c.rate, 1/1.001)
	}
}

// TestCUDAAnchorUncertainty: in real time, an anchor's window is the time
// from record to observed completion; its midpoint is the anchor.
func TestCUDARealTime(t *testing.T) {
	path, lib := fakeCUDA(t)
	lib.SetVisibleDelay(int64(20 * time.Microsecond))
	c, err := OpenCUDA(CUDAOptions{Library: path})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.cur.errNs < 10_000/2 {
		t.Errorf("anchor window half-width %d ns, but completion is visible only 20 us after recording", c.cur.errNs)
	}
	r := newTestRecorder(t, Config{Rank: 0, Clock: c, FlushInterval: time.Millisecond})
	stream := lib.StreamCreate()
	before := c.Now()
	f := r.Begin(Op{Kind: trace.F, Stream: Stream(stream)})
	lib.Launch(stream, int64(2*time.Millisecond))
	r.End(f)
	waitFor(t, "the op to be resolved and written", func() bool { return r.Stats().Written == 1 })
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	tr, _, _ := readRank(t, r.Path())
	e := tr.At(0)
	// The device ran the op for at least the 2 ms kernel, and started no
	// earlier than the host asked (give or take the anchor's window).
	if d := e.EndNs - e.StartNs; d < int64(2*time.Millisecond)-1000 {
		t.Errorf("device duration %d ns, want >= 2 ms", d)
	}
	if e.StartNs < before-2*c.cur.errNs-1000 {
		t.Errorf("start %d before the host began the op at %d", e.StartNs, before)
	}
}

// TestCUDADriverAPI: the same clock over the driver API (libcuda).
func TestCUDADriverAPI(t *testing.T) {
	c, host, lib := manualSetup(t, CUDAOptions{API: "driver"})
	if !strings.Contains(c.Describe(), "driver API") {
		t.Errorf("describe: %s", c.Describe())
	}
	r := newTestRecorder(t, Config{Rank: 0, Clock: c, WatchdogTimeout: -1})
	s := r.Issue(Op{Kind: trace.SendF, Peer: 1})
	lib.Launch(0, 1000)
	r.Complete(s)
	advance(host, lib, time.Millisecond)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	tr, _, _ := readRank(t, r.Path())
	if tr.Len() != 1 || !tr.Completed(0) || tr.EndNs[0]-tr.StartNs[0] < 1000-100 {
		t.Errorf("rows %v", rowsOf(tr))
	}
}

// TestCUDADeviceErrors: a bad stream handle makes the op fall back to host
// times instead of failing or writing a bad row.
func TestCUDADeviceErrors(t *testing.T) {
	c, host, lib := manualSetup(t, CUDAOptions{})
	r := newTestRecorder(t, Config{Rank: 0, Clock: c, WatchdogTimeout: -1})
	var notAStream [64]byte
	f := r.Begin(Op{Kind: trace.F, Stream: Stream(uintptrOf(&notAStream))})
	advance(host, lib, 1000)
	r.End(f)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if r.Stats().DeviceErrors == 0 {
		t.Error("no device error counted")
	}
	tr, _, _ := readRank(t, r.Path())
	if tr.Len() != 1 || tr.EndNs[0]-tr.StartNs[0] != 1000 {
		t.Errorf("rows %v", rowsOf(tr))
	}
}

// TestCUDAPendingOnDevice: an op whose End was called but whose end event
// never executes (a hung kernel) counts as pending: the watchdog writes it
// with a null end and its device start.
func TestCUDAPendingOnDevice(t *testing.T) {
	c, host, lib := manualSetup(t, CUDAOptions{AnchorInterval: time.Hour})
	r := newTestRecorder(t, Config{Rank: 0, Clock: c, WatchdogTimeout: 10 * time.Millisecond})
	stream := lib.StreamCreate()
	start := host.Now()
	recv := r.Issue(Op{Kind: trace.RecvF, Peer: 1, MicroBatch: 2, Stream: Stream(stream)})
	lib.Launch(stream, int64(time.Hour)) // the NCCL kernel never finishes
	r.Complete(recv)
	waitFor(t, "the watchdog", func() bool { return r.Stats().Watchdog > 0 })
	tr, _, _ := readRank(t, r.Path())
	if tr.Len() != 1 || tr.Completed(0) || tr.StartNs[0] != start {
		t.Errorf("rows %v", rowsOf(tr))
	}
}

// TestCUDAUnavailable: no library, or no device, is ErrNoCUDA.
func TestCUDAUnavailable(t *testing.T) {
	if _, err := OpenCUDA(CUDAOptions{Library: "/nonexistent/libcudart.so"}); !errors.Is(err, ErrNoCUDA) {
		t.Errorf("missing library: %v", err)
	}
	path, lib := fakeCUDA(t)
	lib.SetDevices(0)
	if _, err := OpenCUDA(CUDAOptions{Library: path}); !errors.Is(err, ErrNoCUDA) {
		t.Errorf("no device: %v", err)
	}
	lib.SetDevices(1)
	if _, err := OpenCUDA(CUDAOptions{Library: path, Device: 3}); err == nil || !strings.Contains(err.Error(), "device 3") {
		t.Errorf("device out of range: %v", err)
	}
}
