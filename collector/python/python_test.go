// Package python_test runs the Python binding's tests: its unit tests
// (over a fake library), and scripts that record through the real
// libppprof.so, whose files are read back here.
package python_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ppprof/ppprof/collector/internal/buildlib"
	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/trace"
)

// python returns Debian's interpreter (the one with PyTorch in CI), or
// $PPPROF_PYTHON, or python3 from PATH. These tests need no PyTorch.
func python(t *testing.T) string {
	t.Helper()
	for _, py := range []string{os.Getenv("PPPROF_PYTHON"), "/usr/bin/python3", "python3"} {
		if py == "" {
			continue
		}
		if p, err := exec.LookPath(py); err == nil {
			return p
		}
	}
	t.Skip("no python3")
	return ""
}

var lib struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if lib.dir != "" {
		os.RemoveAll(lib.dir)
	}
	os.Exit(code)
}

func sharedLibrary(t *testing.T) string {
	t.Helper()
	if buildlib.CCompiler() == "" {
		t.Skip("no C compiler: building libppprof.so needs cgo")
	}
	lib.once.Do(func() {
		if lib.dir, lib.err = os.MkdirTemp("", "ppprof-python"); lib.err == nil {
			lib.path, lib.err = buildlib.SharedLibrary(lib.dir)
		}
	})
	if lib.err != nil {
		t.Fatal(lib.err)
	}
	return lib.path
}

// command runs a Python script of this directory with the library.
func command(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.Command(python(t), args...)
	cmd.Env = append(os.Environ(), "PPPROF_LIB="+sharedLibrary(t), "PYTHONDONTWRITEBYTECODE=1")
	return cmd
}

// TestPythonUnit runs the binding's unit tests.
func TestPythonUnit(t *testing.T) {
	cmd := exec.Command(python(t), "-m", "unittest", "discover", "-s", "tests", "-v")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python unit tests: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("OK")) {
		t.Errorf("no OK in:\n%s", out)
	}
}

// TestPythonLive records through the real library and reads the file.
func TestPythonLive(t *testing.T) {
	dir := t.TempDir()
	out, err := command(t, "tests/live_record.py", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("live_record.py: %v\n%s", err, out)
	}
	tr, info, warns, err := ingest.ReadFile(filepath.Join(dir, "rank-00001.arrows"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Truncated || len(warns) != 0 {
		t.Errorf("file not closed: %v", warns)
	}
	var got []string
	for i := 0; i < tr.Len(); i++ {
		e := tr.At(i)
		s := fmt.Sprintf("%s/%d/%d", e.Kind, e.Step, e.MicroBatch)
		if e.Kind.IsP2P() {
			s += fmt.Sprintf("/peer%d/%d/%s/%s", e.Peer, e.Bytes, e.Shape, e.Dtype)
		}
		if !tr.Completed(i) {
			s += "/pending"
		}
		got = append(got, s)
	}
	want := []string{
		"RECV_F/0/0/peer0/32/2x8/fp16", "F/0/0", "SEND_F/0/0/peer2/32/2x8/fp16",
		"RECV_F/0/1/peer0/32/2x8/fp16", "F/0/1", "SEND_F/0/1/peer2/32/2x8/fp16",
		"LOSS/0/-1", "OPT_SKIP/0/-1", fmt.Sprintf("DATA/%d/-1", int64(1)<<33),
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("rows\n got %v\nwant %v", got, want)
	}
	m := tr.Meta
	if m.Job != "py-live" || m.PP != 3 || m.Clock != trace.ClockHost || tr.Stage[0] != 1 {
		t.Errorf("metadata %+v", m)
	}
	if !bytes.Contains(out, []byte("'rejected': 1")) {
		t.Errorf("the invalid op was not counted: %s", out)
	}
}

// TestPythonSignals: in a Python process, SIGUSR1 writes the pending ops
// and SIGTERM closes the file before the process dies of SIGTERM.
func TestPythonSignals(t *testing.T) {
	dir := t.TempDir()
	cmd := command(t, "tests/live_record.py", dir, "signals")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	go func() { done <- cmd.Wait() }()
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("script said %q; stderr:\n%s", line, stderr.String())
	}
	path := filepath.Join(dir, "rank-00001.arrows")
	pending := func() bool {
		tr, _, _, err := ingest.ReadFile(path)
		return err == nil && tr.Len() > 0 && !tr.Completed(tr.Len()-1)
	}
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !pending() {
		if time.Now().After(deadline) {
			t.Fatalf("no pending op written after SIGUSR1; stderr:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("still running 30 s after SIGTERM")
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("script ended with %v, want death by SIGTERM; stderr:\n%s", err, stderr.String())
	}
	tr, info, _, err := ingest.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Truncated || tr.Len() != 10 || tr.Kind[9] != trace.RecvB || tr.Completed(9) {
		t.Errorf("after SIGTERM: %d rows, truncated %v; want 10 rows, closed, the last RECV_B pending", tr.Len(), info.Truncated)
	}
}

// TestPythonBenchmark logs the binding's cost per event (no assertion on
// time: machines differ).
func TestPythonBenchmark(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	out, err := command(t, "bench.py", "100000").CombinedOutput()
	if err != nil {
		t.Fatalf("bench.py: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("dropped 0")) {
		t.Errorf("events dropped: %s", out)
	}
	t.Logf("Python binding, host clock:\n%s", out)
}
