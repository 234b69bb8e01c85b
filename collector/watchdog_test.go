package collector

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/trace"
)

// syncBuffer is a bytes.Buffer safe to write from the writer goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond until it holds; the deadline only bounds a broken run.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

type rowKey struct {
	seq     int64
	kind    string
	pending bool
}

func keysOf(tr *trace.Trace) []rowKey {
	var out []rowKey
	for i := 0; i < tr.Len(); i++ {
		out = append(out, rowKey{tr.Seq[i], tr.Kind[i].String(), !tr.Completed(i)})
	}
	return out
}

// TestWatchdogPendingTail: when ops are outstanding and none completes for
// the watchdog timeout, the file gains a tail with the pending ops (null
// end) and the completed ops queued behind them, and the log names them.
// When they complete, the tail is replaced: every op is in the file once.
func TestWatchdogPendingTail(t *testing.T) {
	var log syncBuffer
	r := newTestRecorder(t, Config{Rank: 1, Stage: 1, WatchdogTimeout: 20 * time.Millisecond,
		FlushInterval: 5 * time.Millisecond, Log: &log})
	r.End(r.Begin(Op{Kind: trace.F, Step: 3, MicroBatch: 0}))
	recv := r.Issue(Op{Kind: trace.RecvF, Step: 3, MicroBatch: 1, Peer: 0})
	b := r.Begin(Op{Kind: trace.B, Step: 3, MicroBatch: 0})
	r.End(r.Begin(Op{Kind: trace.MustKind("LOSS"), Step: 3, MicroBatch: 0}))
	waitFor(t, "the watchdog", func() bool { return r.Stats().Watchdog > 0 })

	tr, _, _ := readRank(t, r.Path())
	want := []rowKey{{0, "F", false}, {1, "RECV_F", true}, {2, "B", true}, {3, "LOSS", false}}
	if got := keysOf(tr); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("file while stuck: %v, want %v", got, want)
	}
	if i := 1; tr.Peer[i] != 0 || tr.Step[i] != 3 || tr.MicroBatch[i] != 1 || tr.IssueNs[i] == trace.NoTime {
		t.Errorf("pending recv row: %+v", tr.At(i))
	}
	msg := log.String()
	for _, s := range []string{"rank 1 (stage 1): no op completed for", "2 op(s) pending", "seq 1 RECV_F peer 0 step 3 mb 1", "seq 2 B step 3 mb 0"} {
		if !strings.Contains(msg, s) {
			t.Errorf("log lacks %q:\n%s", s, msg)
		}
	}

	// Still stuck, a new op is posted: the tail follows.
	send := r.Issue(Op{Kind: trace.SendB, Step: 3, MicroBatch: 0, Peer: 0})
	waitFor(t, "the tail to follow", func() bool {
		tr, _, _ := readRank(t, r.Path())
		return tr.Len() == 5
	})

	// The job recovers.
	r.Complete(recv)
	r.End(b)
	r.Complete(send)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	tr, _, _ = readRank(t, r.Path())
	want = []rowKey{{0, "F", false}, {1, "RECV_F", false}, {2, "B", false}, {3, "LOSS", false}, {4, "SEND_B", false}}
	if got := keysOf(tr); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("file after recovery: %v, want %v", got, want)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	tr, info, _ := readRank(t, r.Path())
	if got := keysOf(tr); fmt.Sprint(got) != fmt.Sprint(want) || info.Truncated {
		t.Errorf("closed file: %v (truncated %v), want %v", got, info.Truncated, want)
	}
}

// TestDumpPendingNoTimeout: DumpPending writes the tail at once, and the
// watchdog stays quiet when disabled.
func TestDumpPendingNoTimeout(t *testing.T) {
	r := newTestRecorder(t, Config{Rank: 0, WatchdogTimeout: -1})
	r.Issue(Op{Kind: trace.SendF, Peer: 1, MicroBatch: 4})
	if err := r.DumpPending(); err != nil {
		t.Fatal(err)
	}
	tr, _, _ := readRank(t, r.Path())
	if tr.Len() != 1 || tr.Completed(0) || tr.MicroBatch[0] != 4 {
		t.Errorf("rows %v", rowsOf(tr))
	}
	if r.Stats().Watchdog != 0 {
		t.Error("watchdog fired while disabled")
	}
}

// The child half of the process tests: run by re-executing the test binary.
func TestMain(m *testing.M) {
	switch os.Getenv("PPPROF_COLLECTOR_CHILD") {
	case "":
		code := m.Run()
		removeFakeDir()
		os.Exit(code)
	case "kill":
		childKill(os.Getenv("PPPROF_DIR"))
	case "signals":
		childSignals(os.Getenv("PPPROF_DIR"))
	}
	os.Exit(3)
}

// childKill writes 25 events in batches, then a pending op as a tail, then
// says so and waits to be killed.
func childKill(dir string) {
	r, err := New(Config{Dir: dir, Rank: 2, Stage: 2, BatchEvents: 10, FlushInterval: time.Hour, WatchdogTimeout: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := 0; i < 25; i++ {
		r.End(r.Begin(Op{Kind: trace.F, MicroBatch: trace.MicroBatch(i)}))
	}
	r.Flush()
	r.Issue(Op{Kind: trace.RecvB, Peer: 3, MicroBatch: 9, Step: 1})
	r.DumpPending()
	fmt.Println("ready")
	time.Sleep(time.Hour)
}

// childSignals records with Signals on and waits for SIGUSR1, then SIGTERM.
func childSignals(dir string) {
	r, err := New(Config{Dir: dir, Rank: 0, Signals: DefaultSignals, WatchdogTimeout: -1, FlushInterval: time.Hour})
	if err != nil {
		fmt.Println(err)
		return
	}
	r.End(r.Begin(Op{Kind: trace.F}))
	r.Issue(Op{Kind: trace.SendF, Peer: 1})
	fmt.Println("ready")
	time.Sleep(time.Hour)
}

// startChild starts the test binary as a child in role, killed when the
// test ends, and waits for its "ready" line.
func startChild(t *testing.T, role, dir string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "PPPROF_COLLECTOR_CHILD="+role, "PPPROF_DIR="+dir)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("child said %q (%v); stderr:\n%s", line, err, stderr.String())
	}
	return cmd, &stderr
}

// TestSIGKILLLeavesReadableFile: a process killed with SIGKILL leaves every
// batch written before the kill readable, and its pending tail.
func TestSIGKILLLeavesReadableFile(t *testing.T) {
	dir := t.TempDir()
	cmd, _ := startChild(t, "kill", dir)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	res, err := ingest.Open([]string{dir}, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Trace
	if tr.Len() != 26 {
		t.Fatalf("%d rows after SIGKILL, want 25 completed and 1 pending", tr.Len())
	}
	for i := 0; i < 25; i++ {
		if !tr.Completed(i) || tr.Kind[i] != trace.F || tr.MicroBatch[i] != trace.MicroBatch(i) {
			t.Errorf("row %d: %+v", i, tr.At(i))
		}
	}
	if e := tr.At(25); e.Kind != trace.RecvB || tr.Completed(25) || e.Peer != 3 || e.MicroBatch != 9 || e.Step != 1 {
		t.Errorf("pending row: %+v", e)
	}
	if !res.Files[0].Truncated || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0].Message, "not closed") {
		t.Errorf("warnings %v", res.Warnings)
	}
}

// TestSignals: with Config.Signals, SIGUSR1 writes the pending ops, and
// SIGTERM closes the file properly before the process dies of SIGTERM.
func TestSignals(t *testing.T) {
	dir := t.TempDir()
	cmd, stderr := startChild(t, "signals", dir)
	path := dir + "/rank-00000.arrows"
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the SIGUSR1 dump", func() bool {
		tr, _, _, err := ingest.ReadFile(path)
		return err == nil && tr.Len() == 2
	})
	waitFor(t, "the dump's log line", func() bool {
		return strings.Contains(stderr.String(), "dump requested; 1 op(s) pending")
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("child ended with %v, want death by SIGTERM", err)
	}
	tr, info, warns := readRank(t, path)
	if info.Truncated || len(warns) != 0 || tr.Len() != 2 || !tr.Completed(0) || tr.Completed(1) {
		t.Errorf("after SIGTERM: rows %v, truncated %v, warnings %v", keysOf(tr), info.Truncated, warns)
	}
}
