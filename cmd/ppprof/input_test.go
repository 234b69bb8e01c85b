package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withStdin runs f with what "-" reads set to data (a pipe).
func withStdin(t *testing.T, data []byte, f func()) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		w.Write(data)
		w.Close()
	}()
	old := stdin
	stdin = r
	defer func() { stdin = old }()
	f()
}

// TestStdin pipes traces into analyze and hang as "-": the 4x8 1F1B
// bubble is 3/11, a skipped micro-batch is a deadlock (exit 4) naming the
// rank that skipped it, and the copy made of standard input is gone when
// the command returns.
func TestStdin(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir := t.TempDir()
	good, hung := filepath.Join(dir, "t.arrow"), filepath.Join(dir, "h.arrow")
	simulateTo(t, good, "--stages", "4", "--microbatches", "8")
	simulateTo(t, hung, "--stages", "4", "--microbatches", "8", "--fault", "skip:rank=1,step=0,mb=3")
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	withStdin(t, data, func() {
		out, stderr, code := ppprof(t, "analyze", "--format", "json", "-")
		if code != exitOK {
			t.Fatalf("analyze -: exit %d: %s", code, stderr)
		}
		var a analysisJSON
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			t.Fatal(err)
		}
		if math.Abs(a.Bubble.Measured-3.0/11) > 1e-9 || a.Job.PP != 4 {
			t.Errorf("bubble %v of PP %d, want 3/11 of PP 4", a.Bubble.Measured, a.Job.PP)
		}
	})
	if data, err = os.ReadFile(hung); err != nil {
		t.Fatal(err)
	}
	withStdin(t, data, func() {
		out, stderr, code := ppprof(t, "hang", "-")
		if code != exitHangFound || !strings.Contains(out, "deadlock") || !strings.Contains(out, "rank 1") {
			t.Errorf("hang -: exit %d\n%s%s", code, out, stderr)
		}
	})
	withStdin(t, []byte("not a trace"), func() {
		_, stderr, code := ppprof(t, "analyze", "-")
		if code != exitError || !strings.HasPrefix(stderr, "ppprof: -: ") {
			t.Errorf("analyze - of no trace: exit %d, %q: want 1 and an error naming -", code, stderr)
		}
	})
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in TMPDIR: %v", left)
	}
}
