// Package pptrain_test runs the pipeline-parallel training example
// (train.py) with the collector and checks what ppprof makes of its trace.
package pptrain_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/trace"
)

// python is the interpreter with PyTorch: Debian's, unless PPPROF_PYTHON
// names another.
func python(t *testing.T) string {
	t.Helper()
	py := os.Getenv("PPPROF_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	out, err := exec.Command(py, "-c", "import torch, torch.distributed as d; assert d.is_available() and d.is_gloo_available()").CombinedOutput()
	if err != nil {
		t.Skipf("%s has no PyTorch with gloo (%v: %s): install python3-torch (CI does) to run the training job", py, err, bytes.TrimSpace(out))
	}
	return py
}

// The shared library and the ppprof command, built once.
var built struct {
	once      sync.Once
	dir       string
	lib, tool string
	root      string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

func build(t *testing.T) (lib, tool, root string) {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s): building libppprof.so needs cgo", cc)
	}
	built.once.Do(func() {
		if built.root, built.err = moduleRoot(); built.err != nil {
			return
		}
		if built.dir, built.err = os.MkdirTemp("", "ppprof-pptrain"); built.err != nil {
			return
		}
		built.lib = filepath.Join(built.dir, "libppprof.so")
		if built.err = goBuild(built.root, "-buildmode=c-shared", "-o", built.lib, "./collector/capi"); built.err != nil {
			return
		}
		built.tool = filepath.Join(built.dir, "ppprof")
		built.err = goBuild(built.root, "-o", built.tool, "./cmd/ppprof")
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.lib, built.tool, built.root
}

// goTool is the go command of the toolchain running the test.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command(goTool(), "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

func goBuild(root string, args ...string) error {
	cmd := exec.Command(goTool(), append([]string{"build"}, args...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// job is a running train.py: its process group is killed when the test
// ends, whatever happens.
type job struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func start(t *testing.T, args ...string) *job {
	t.Helper()
	py := python(t)
	lib, _, root := build(t)
	j := &job{done: make(chan struct{})}
	j.cmd = exec.Command(py, append([]string{filepath.Join(root, "examples", "pp_train", "train.py")}, args...)...)
	j.cmd.Env = append(os.Environ(), "PPPROF_LIB="+lib, "PYTHONPATH="+filepath.Join(root, "collector", "python"),
		"OMP_NUM_THREADS=1")
	j.cmd.Stdout, j.cmd.Stderr = &j.out, &j.out
	j.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.kill)
	go func() {
		j.err = j.cmd.Wait()
		close(j.done)
	}()
	return j
}

// kill sends SIGKILL to the job's whole process group (the ranks are
// children of train.py) and waits for train.py.
func (j *job) kill() {
	syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
	<-j.done
}

// wait waits for the job to end by itself; the timeout only bounds a
// broken run.
func (j *job) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-j.done:
	case <-time.After(timeout):
		j.kill()
		t.Fatalf("train.py still running after %v; output:\n%s", timeout, j.out.String())
	}
	if j.err != nil {
		t.Fatalf("train.py: %v; output:\n%s", j.err, j.out.String())
	}
}

// ppprof runs the ppprof command and returns its stdout and exit code.
func ppprof(t *testing.T, args ...string) ([]byte, int) {
	t.Helper()
	_, tool, _ := build(t)
	cmd := exec.Command(tool, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stdout.Bytes(), 0
	case errors.As(err, &ee):
		if ee.ExitCode() == 1 {
			t.Logf("ppprof %s: exit 1: %s", strings.Join(args, " "), stderr.String())
		}
		return stdout.Bytes(), ee.ExitCode()
	}
	t.Fatalf("ppprof %s: %v", strings.Join(args, " "), err)
	return nil, 0
}

const (
	stages       = 4
	microbatches = 8
	steps        = 4
)

// TestTrainingJob trains the 4-stage transformer with 1F1B for a few steps
// with the collector on, then checks the trace: every op of the schedule
// on every rank, in 1F1B order, and ppprof analyze's view of it.
func TestTrainingJob(t *testing.T) {
	out := t.TempDir()
	summary := filepath.Join(t.TempDir(), "summary.json")
	j := start(t, "--out", out, "--steps", fmt.Sprint(steps), "--microbatches", fmt.Sprint(microbatches),
		"--summary", summary)
	j.wait(t, 5*time.Minute)

	// It trained: the loss went down.
	var sum struct {
		Losses []float64 `json:"losses"`
	}
	if data, err := os.ReadFile(summary); err != nil || json.Unmarshal(data, &sum) != nil || len(sum.Losses) != steps {
		t.Fatalf("summary %s: %v", summary, err)
	}
	if sum.Losses[steps-1] >= sum.Losses[0] {
		t.Errorf("loss did not decrease: %v", sum.Losses)
	}

	// The files: one per rank, closed, every op complete.
	res, err := ingest.Open([]string{out}, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != stages || len(res.Warnings) != 0 {
		t.Errorf("%d files, warnings %v", len(res.Files), res.Warnings)
	}
	checkOps(t, res.Trace)

	// ppprof analyze.
	data, code := ppprof(t, "analyze", "--format", "json", out)
	if code != 0 {
		t.Fatalf("ppprof analyze: exit %d", code)
	}
	var a struct {
		Job struct {
			WorldSize    int    `json:"world_size"`
			PP           int    `json:"pp"`
			MicroBatches int    `json:"microbatches"`
			Steps        int    `json:"steps"`
			Schedule     string `json:"schedule"`
		} `json:"job"`
		Schedule *struct {
			Identified string `json:"identified"`
		} `json:"schedule"`
		Bubble struct {
			Measured    float64 `json:"measured"`
			Theoretical float64 `json:"theoretical"`
		} `json:"bubble"`
	}
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatalf("analyze JSON: %v\n%s", err, data)
	}
	if a.Job.PP != stages || a.Job.WorldSize != stages || a.Job.MicroBatches != microbatches || a.Job.Steps != steps {
		t.Errorf("analyze job: %+v", a.Job)
	}
	if a.Schedule == nil {
		t.Log("analyze JSON has no schedule.identified: the op order was checked above")
	} else if a.Schedule.Identified != "1f1b" {
		t.Errorf("schedule identified as %q, want 1f1b", a.Schedule.Identified)
	}
	// Theory for 1F1B: (p-1)/(m+p-1) = 3/11. On a CPU shared by four
	// processes the measured bubble is near it, a little above (P2P over
	// gloo is slow next to the compute); far from it means the trace is
	// wrong (times, labels, or a stage missing).
	theory := float64(stages-1) / float64(microbatches+stages-1)
	if d := a.Bubble.Theoretical - theory; d < -0.05 || d > 0.05 {
		t.Errorf("theoretical bubble %.3f, want about %.3f", a.Bubble.Theoretical, theory)
	}
	if m := a.Bubble.Measured; m < theory/2 || m > theory+0.4 {
		t.Errorf("measured bubble %.3f, outside [%.3f, %.3f] around the theory %.3f", m, theory/2, theory+0.4, theory)
	}
	t.Logf("bubble measured %.3f, theoretical %.3f (closed form %.3f)", a.Bubble.Measured, a.Bubble.Theoretical, theory)
}

// oneF1B is stage s's order of F and B in one step: warmup forwards, then
// one forward one backward, then the remaining backwards.
func oneF1B(s, p, m int) []string {
	warmup := min(p-s-1, m)
	var order []string
	for i := 0; i < warmup; i++ {
		order = append(order, fmt.Sprintf("F%d", i))
	}
	for i := 0; i < m-warmup; i++ {
		order = append(order, fmt.Sprintf("F%d", warmup+i), fmt.Sprintf("B%d", i))
	}
	for i := m - warmup; i < m; i++ {
		order = append(order, fmt.Sprintf("B%d", i))
	}
	return order
}

// checkOps checks every rank's ops: complete, the 1F1B order of F and B in
// each step, the P2P ops each stage must do, one optimizer step per step.
func checkOps(t *testing.T, tr *trace.Trace) {
	t.Helper()
	type key struct {
		rank trace.Rank
		step int64
	}
	order := map[key][]string{}
	count := map[key]map[string]int{}
	for i := 0; i < tr.Len(); i++ {
		k := key{tr.Rank[i], tr.Step[i]}
		if count[k] == nil {
			count[k] = map[string]int{}
		}
		kind := tr.Kind[i]
		count[k][kind.String()]++
		if !tr.Completed(i) {
			t.Errorf("rank %d: %s of step %d mb %d never completed", tr.Rank[i], kind, tr.Step[i], tr.MicroBatch[i])
		}
		if kind.IsCompute() {
			order[k] = append(order[k], fmt.Sprintf("%s%d", kind, tr.MicroBatch[i]))
		}
		if kind.IsP2P() {
			want := tr.Rank[i] + 1
			if kind == trace.RecvF || kind == trace.SendB {
				want = tr.Rank[i] - 1
			}
			if tr.Peer[i] != want {
				t.Errorf("rank %d: %s to/from %d, want %d", tr.Rank[i], kind, tr.Peer[i], want)
			}
		}
	}
	for r := 0; r < stages; r++ {
		for s := int64(0); s < steps; s++ {
			k := key{trace.Rank(r), s}
			if got, want := strings.Join(order[k], " "), strings.Join(oneF1B(r, stages, microbatches), " "); got != want {
				t.Errorf("rank %d step %d: F/B order\n got %s\nwant %s", r, s, got, want)
			}
			m := microbatches
			want := map[string]int{"F": m, "B": m, "OPT": 1}
			if r > 0 {
				want["RECV_F"], want["SEND_B"] = m, m
			}
			if r < stages-1 {
				want["SEND_F"], want["RECV_B"] = m, m
			}
			if fmt.Sprint(count[k]) != fmt.Sprint(want) {
				t.Errorf("rank %d step %d: ops %v, want %v", r, s, count[k], want)
			}
		}
	}
}

// TestTrainingJobHang runs the job with a bug: rank 1 skips micro-batch 3
// of step 1. The pipeline deadlocks; the collector's watchdog writes each
// rank's pending ops; the job is killed with SIGKILL (as a scheduler
// would), and ppprof hang, on what the ranks left, names rank 1, step 1
// and micro-batch 3, with exit code 4.
func TestTrainingJobHang(t *testing.T) {
	python(t)
	if _, code := ppprof(t, "hang", "--help"); code != 0 {
		t.Skip("ppprof hang is not built yet (exit code of 'ppprof hang --help' was not 0)")
	}
	out := t.TempDir()
	j := start(t, "--out", out, "--steps", "3", "--microbatches", fmt.Sprint(microbatches),
		"--skip", "1:1:3", "--watchdog", "2")

	// Wait until every rank's file shows its pending ops: the watchdog
	// found the job stuck. The deadline only bounds a broken run.
	deadline := time.Now().Add(5 * time.Minute)
	for !allPending(out) {
		select {
		case <-j.done:
			t.Fatalf("the job ended instead of hanging (%v):\n%s", j.err, j.out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pending ops written after 5 minutes; output:\n%s", j.out.String())
		}
	}
	j.kill()
	if !strings.Contains(j.out.String(), "no op completed for") {
		t.Errorf("no watchdog report in the output:\n%s", j.out.String())
	}

	data, code := ppprof(t, "hang", "--format", "json", out)
	if code != 4 {
		t.Errorf("ppprof hang: exit %d, want 4 (hang found)\n%s", code, data)
	}
	var h struct {
		Verdict   string `json:"verdict"`
		RootCause struct {
			Rank       *int   `json:"rank"`
			Step       *int64 `json:"step"`
			MicroBatch *int   `json:"microbatch"`
			Summary    string `json:"summary"`
		} `json:"root_cause"`
	}
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatalf("hang JSON: %v\n%s", err, data)
	}
	rc := h.RootCause
	if h.Verdict == "ok" || rc.Rank == nil || *rc.Rank != 1 {
		t.Fatalf("hang: verdict %q, root cause %+v; want rank 1", h.Verdict, rc)
	}
	if rc.Step != nil && rc.MicroBatch != nil {
		if *rc.Step != 1 || *rc.MicroBatch != 3 {
			t.Errorf("root cause step %d mb %d, want step 1 mb 3 (%s)", *rc.Step, *rc.MicroBatch, rc.Summary)
		}
	} else if !strings.Contains(rc.Summary, "micro-batch 3") || !strings.Contains(rc.Summary, "step 1") {
		t.Errorf("root cause %q does not name step 1 and micro-batch 3", rc.Summary)
	}
	t.Logf("ppprof hang: %s: %s", h.Verdict, rc.Summary)
}

// allPending reports whether every rank's file holds an op with no end.
func allPending(dir string) bool {
	for r := 0; r < stages; r++ {
		tr, _, _, err := ingest.ReadFile(filepath.Join(dir, fmt.Sprintf("rank-%05d.arrows", r)))
		if err != nil {
			return false
		}
		pending := false
		for i := 0; i < tr.Len() && !pending; i++ {
			pending = !tr.Completed(i)
		}
		if !pending {
			return false
		}
	}
	return true
}
