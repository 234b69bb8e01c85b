//go:build cgo

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ppprof/ppprof/collector"
	"github.com/ppprof/ppprof/collector/internal/buildlib"
	"github.com/ppprof/ppprof/collector/internal/fakecuda"
	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/trace"
)

func TestParseConfig(t *testing.T) {
	cfg, spec, err := parseConfig(`dir=/tmp/x; rank=5; stage=2; pipeline=1; tp_rank=1
		job = my job ; world_size=8; pp=4; tp=2; dp=1; virtual=2; microbatches=16; schedule=interleaved;
		device=H100; peak_flops=9.9e14; clock=virtual; virtual_start_ns=77; buffer_events=1024; batch_events=64;
		flush_ms=250; fsync=1; compression=zstd; watchdog_ms=-1; signals=usr1,term; log=none;;`)
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Meta
	if cfg.Dir != "/tmp/x" || cfg.Rank != 5 || cfg.Stage != 2 || cfg.Pipeline != 1 || cfg.TPRank != 1 ||
		m.Job != "my job" || m.WorldSize != 8 || m.PP != 4 || m.TP != 2 || m.Virtual != 2 || m.MicroBatches != 16 ||
		m.Schedule != "interleaved" || m.Device != "H100" || m.PeakFlops != 9.9e14 ||
		cfg.BufferEvents != 1024 || cfg.BatchEvents != 64 || cfg.FlushInterval != 250*time.Millisecond ||
		!cfg.Fsync || cfg.Compression != "zstd" || cfg.WatchdogTimeout != -time.Millisecond ||
		len(cfg.Signals) != 2 || cfg.Signals[1] != syscall.SIGTERM {
		t.Errorf("config %+v", cfg)
	}
	if spec.clock != "virtual" || spec.virtualStart != 77 {
		t.Errorf("clock %+v", spec)
	}
	_, spec, err = parseConfig("dir=d;clock=cuda;cuda_library=/x/libcudart.so;cuda_api=driver;cuda_device=1;anchor_interval_ms=500")
	if err != nil || spec.clock != "cuda" || spec.cuda.Library != "/x/libcudart.so" || spec.cuda.API != "driver" ||
		spec.cuda.Device != 1 || spec.cuda.AnchorInterval != 500*time.Millisecond {
		t.Errorf("cuda spec %+v, %v", spec, err)
	}
	for _, bad := range []string{"", "rank=1", "dir=a;dir=b", "dir=a;rank=x", "dir=a;colour=red", "dir=a;clock=sundial",
		"dir=a;signals=hup", "dir=a;compression=gzip", "dir=a;pp=-1", "dir=a;fsync=maybe", "dir=a;novalue"} {
		if _, _, err := parseConfig(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if lib.dir != "" {
		os.RemoveAll(lib.dir)
	}
	os.Exit(code)
}

// The shared library is built once per test binary.
var lib struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func sharedLibrary(t *testing.T) (dir, path, cc string) {
	t.Helper()
	cc = buildlib.CCompiler()
	if cc == "" {
		t.Skip("no C compiler (gcc or $CC): the C ABI tests need one")
	}
	lib.once.Do(func() {
		if lib.dir, lib.err = os.MkdirTemp("", "ppprof-capi"); lib.err == nil {
			lib.path, lib.err = buildlib.SharedLibrary(lib.dir)
		}
	})
	if lib.err != nil {
		t.Fatal(lib.err)
	}
	return lib.dir, lib.path, cc
}

// compile builds a C program against ppprof.h and the shared library.
func compile(t *testing.T, src string) string {
	t.Helper()
	libDir, _, cc := sharedLibrary(t)
	exe := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	out, err := exec.Command(cc, "-Wall", "-Werror", "-O2", "-I", ".", "-o", exe, src,
		"-L", libDir, "-lppprof", "-Wl,-rpath,"+libDir).CombinedOutput()
	if err != nil {
		t.Fatalf("compiling %s: %v\n%s", src, err, out)
	}
	return exe
}

// TestCExample compiles example/example.c, runs it as the two ranks of a
// pipeline, and reads what they wrote.
func TestCExample(t *testing.T) {
	exe := compile(t, "example/example.c")
	dir := t.TempDir()
	for rank := range 2 {
		out, err := exec.Command(exe, dir, string(rune('0'+rank))).CombinedOutput()
		if err != nil {
			t.Fatalf("rank %d: %v\n%s", rank, err, out)
		}
		for _, want := range []string{"a forward posted as P2P: -1 (bad kind: F is not a P2P kind", "recorded 36, written 36, dropped 0, rejected 1"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("rank %d output lacks %q:\n%s", rank, want, out)
			}
		}
	}
	res, err := ingest.Open([]string{dir}, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Trace
	if tr.Len() != 72 || len(res.Warnings) != 0 {
		t.Fatalf("%d events, warnings %v", tr.Len(), res.Warnings)
	}
	m := tr.Meta
	if m.Job != "c-example" || m.PP != 2 || m.MicroBatches != 4 || m.Clock != trace.ClockHost {
		t.Errorf("metadata %+v", m)
	}
	counts := map[string]int{}
	for i := 0; i < tr.Len(); i++ {
		counts[tr.Kind[i].String()]++
		if !tr.Completed(i) {
			t.Errorf("row %d pending", i)
		}
	}
	want := map[string]int{"F": 16, "B": 16, "SEND_F": 8, "RECV_F": 8, "SEND_B": 8, "RECV_B": 8, "DATA": 4, "OPT": 2, "OPT_SKIP": 2}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("%d %s rows, want %d", counts[k], k, n)
		}
	}
}

// TestCBenchmark measures the C ABI's cost per event and logs it (no
// assertion on time: machines differ).
func TestCBenchmark(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	exe := compile(t, "testdata/bench.c")
	out, err := exec.Command(exe, t.TempDir(), "200000").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "dropped 0") {
		t.Errorf("events dropped: %s", out)
	}
	t.Logf("C ABI, host clock:\n%s", out)
}

// TestCABIErrors drives the exported functions from Go: errors are codes
// with a message, handles are checked, closed handles refuse.
func TestCABIErrors(t *testing.T) {
	// The last error is the calling thread's, as a C caller reads it: the
	// calls and the reads of it on one thread (a goroutine may move
	// between two cgo calls, and read another thread's, empty, error).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dir := t.TempDir()
	h := initGoT(t, "dir="+dir+";rank=1;clock=virtual;virtual_start_ns=100;log=none")
	if h <= 0 {
		t.Fatalf("init: %d %s", h, lastError())
	}
	if rc := initGoT(t, "rank=1"); rc != -1 || !strings.Contains(lastError(), "dir is required") {
		t.Errorf("init without dir: %d %q", rc, lastError())
	}
	if rc := initGoT(t, "dir="+dir+";clock=cuda;cuda_library=/nonexistent.so"); rc != -4 {
		t.Errorf("clock=cuda without CUDA: %d %q", rc, lastError())
	}
	f := beginGo(h, int(trace.F), 0, 0)
	if f <= 0 {
		t.Fatalf("begin: %d %s", f, lastError())
	}
	if rc := setTimeGo(h, 150); rc != 0 {
		t.Errorf("set_time: %d", rc)
	}
	if rc := endGo(h, f); rc != 0 {
		t.Errorf("end: %d", rc)
	}
	if s := beginGo(h, int(trace.SendF), 0, 0); s != -1 || !strings.Contains(lastError(), "use ppprof_p2p_issue") {
		t.Errorf("begin SEND_F: %d %q", s, lastError())
	}
	if s := beginGo(h, 70000, 0, 0); s != -1 {
		t.Errorf("begin of kind 70000: %d", s)
	}
	if s := beginGo(h, int(trace.F), -3, 0); s != -1 || !strings.Contains(lastError(), "step -3") {
		t.Errorf("negative step: %d %q", s, lastError())
	}
	if s := beginGo(99, int(trace.F), 0, 0); s != -2 {
		t.Errorf("bad handle: %d", s)
	}
	if rc := closeGo(h); rc != 0 {
		t.Fatalf("close: %d %s", rc, lastError())
	}
	if rc := closeGo(h); rc != -2 {
		t.Errorf("second close: %d", rc)
	}
	tr, _, _, err := ingest.ReadFile(filepath.Join(dir, "rank-00001.arrows"))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Len() != 1 || tr.StartNs[0] != 100 || tr.EndNs[0] != 150 {
		t.Errorf("rows: %d, %+v", tr.Len(), tr.At(0))
	}
}

// TestCABIAuto: clock=auto falls back to the host clock without a GPU.
func TestCABIAuto(t *testing.T) {
	if _, err := collector.OpenCUDA(collector.CUDAOptions{}); !errors.Is(err, collector.ErrNoCUDA) {
		t.Skip("this machine has CUDA")
	}
	dir := t.TempDir()
	h := initGoT(t, "dir="+dir+";log=none")
	if h <= 0 {
		t.Fatalf("init: %s", lastError())
	}
	closeGo(h)
	tr, _, _, err := ingest.ReadFile(filepath.Join(dir, "rank-00000.arrows"))
	if err != nil || tr.Meta.Clock != trace.ClockHost {
		t.Errorf("%v, clock %q", err, tr.Meta.Clock)
	}
}

// initGoT is initGo, closing the recorder when the test ends.
func initGoT(t *testing.T, config string) int {
	h := initGo(config)
	if h > 0 {
		t.Cleanup(func() { closeGo(h) })
	}
	return h
}

// TestCABICUDA drives the C hot path's CUDA branch against the fake CUDA
// library: events recorded from C on the caller's stream, resolved by the
// Go writer, device times in the file; the hot path only records.
func TestCABICUDA(t *testing.T) {
	if buildlib.CCompiler() == "" {
		t.Skip("no C compiler")
	}
	libPath, err := fakecuda.Build(t.TempDir())
	if err != nil {
		t.Skip(err)
	}
	fake, err := fakecuda.Open(libPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	h := initGoT(t, "dir="+dir+";rank=0;clock=cuda;cuda_library="+libPath+";log=none;flush_ms=10")
	if h <= 0 {
		t.Fatalf("init: %d %s", h, lastError())
	}
	stream := fake.StreamCreate()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fake.ResetCounts()
	f := beginOnGo(h, int(trace.F), 0, 0, uint64(stream))
	fake.Launch(stream, int64(2*time.Millisecond))
	if rc := endGo(h, f); f <= 0 || rc != 0 {
		t.Fatalf("begin %d, end %d: %s", f, rc, lastError())
	}
	if n := fake.ThreadCount("event_record"); n != 2 {
		t.Errorf("%d event records on the hot path, want 2", n)
	}
	for _, call := range []string{"event_query", "elapsed_time", "set_device"} {
		if n := fake.ThreadCount(call); n != 0 {
			t.Errorf("%d %s calls on the hot path", n, call)
		}
	}
	if rc := closeGo(h); rc != 0 {
		t.Fatalf("close: %s", lastError())
	}
	tr, _, _, err := ingest.ReadFile(filepath.Join(dir, "rank-00000.arrows"))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Len() != 1 || !tr.Completed(0) || tr.Meta.Clock != trace.ClockCUDAEvent {
		t.Fatalf("rows %d, clock %q", tr.Len(), tr.Meta.Clock)
	}
	if d := tr.EndNs[0] - tr.StartNs[0]; d < int64(2*time.Millisecond)-1000 {
		t.Errorf("device duration %d ns, want >= 2 ms (the kernel)", d)
	}
}
