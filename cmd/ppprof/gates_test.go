package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func simulateTo(t *testing.T, path string, args ...string) {
	t.Helper()
	if _, stderr, code := ppprof(t, append([]string{"simulate", "-o", path}, args...)...); code != 0 {
		t.Fatalf("simulate %v: exit %d: %s", args, code, stderr)
	}
}

// TestFailOn: the 4x8 1F1B bubble is 3/11 = 0.2727, so 'bubble>0.25' crosses
// (exit 3) and 'bubble>0.3' does not (exit 0).
func TestFailOn(t *testing.T) {
	tr := filepath.Join(t.TempDir(), "t.arrow")
	simulateTo(t, tr, "--stages", "4", "--microbatches", "8")
	cases := []struct {
		gates []string
		code  int
		err   string
	}{
		{[]string{"bubble>0.25"}, exitFailOn, "bubble>0.25 (bubble.measured = 0.272727)"},
		{[]string{"bubble>0.3"}, exitOK, ""},
		{[]string{"bubble>0.3", "balance<1.01"}, exitFailOn, "balance<1.01"},
		{[]string{"step_ms>32"}, exitFailOn, "step_ms = 33"},
		{[]string{"step_ms>33"}, exitOK, ""},
		{[]string{"mfu<0.4"}, exitError, "unknown for this trace"},
		{[]string{"bubbel>0.3"}, exitError, `unknown name "bubbel"`},
		{[]string{"bubble>>0.3"}, exitError, "not a number"},
	}
	for _, c := range cases {
		args := []string{"analyze", tr, "--format", "json"}
		for _, g := range c.gates {
			args = append(args, "--fail-on", g)
		}
		stdout, stderr, code := ppprof(t, args...)
		if code != c.code || !strings.Contains(stderr, c.err) {
			t.Errorf("%v: exit %d stderr %q; want exit %d containing %q", c.gates, code, stderr, c.code, c.err)
		}
		if c.code == exitFailOn && !strings.Contains(stdout, `"schema"`) {
			t.Errorf("%v: the report must still be printed when a gate fails", c.gates)
		}
	}
}

// TestDiff: a stage slowed by 1.5x makes the 4x8 1F1B step longer; the
// default gate (step_ms>5%) fails the build, a loose one does not, and a
// saved JSON analysis works as the baseline.
func TestDiff(t *testing.T) {
	dir := t.TempDir()
	base, slow := filepath.Join(dir, "base.arrow"), filepath.Join(dir, "slow.arrow")
	simulateTo(t, base, "--stages", "4", "--microbatches", "8")
	simulateTo(t, slow, "--stages", "4", "--microbatches", "8", "--slow-stage", "1", "--slow-factor", "1.5")

	stdout, stderr, code := ppprof(t, "diff", base, slow)
	if code != exitFailOn || !strings.Contains(stderr, "step_ms>5%") {
		t.Fatalf("default gates: exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stdout, "stages.1.busy_ms") || !strings.Contains(stdout, "+50.00") {
		t.Errorf("diff text lacks the stage 1 +50%% busy change:\n%s", stdout)
	}
	if _, _, code := ppprof(t, "diff", base, slow, "--fail-on", "step_ms>100%"); code != exitOK {
		t.Errorf("loose gate: exit %d", code)
	}
	if _, _, code := ppprof(t, "diff", base, base); code != exitOK {
		t.Errorf("identical traces: exit %d", code)
	}

	saved, _, code := ppprof(t, "analyze", base, "--format", "json")
	if code != 0 {
		t.Fatal(code)
	}
	savedPath := filepath.Join(dir, "base.json")
	if err := os.WriteFile(savedPath, []byte(saved), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, code = ppprof(t, "diff", savedPath, slow, "--format", "json", "--fail-on", "step_ms>5%")
	if code != exitFailOn {
		t.Fatalf("saved baseline: exit %d", code)
	}
	var d struct {
		Schema  string `json:"schema"`
		Changes []struct {
			Name     string   `json:"name"`
			DeltaPct *float64 `json:"delta_pct"`
		} `json:"changes"`
		Crossed []struct {
			Threshold string `json:"threshold"`
		} `json:"crossed"`
	}
	if err := json.Unmarshal([]byte(stdout), &d); err != nil {
		t.Fatal(err)
	}
	if d.Schema != "ppprof.diff/v1" || len(d.Crossed) != 1 || d.Crossed[0].Threshold != "step_ms>5%" {
		t.Errorf("diff JSON: %+v", d)
	}
	for _, c := range d.Changes {
		if c.Name == "stages.1.busy_ms" && (c.DeltaPct == nil || *c.DeltaPct < 49.999 || *c.DeltaPct > 50.001) {
			t.Errorf("stage 1 busy change %v, want +50%%", c.DeltaPct)
		}
	}
}

// TestSlowWorkerFlag: --slow-worker slows one replica's stage only, which
// whatif's verdict tells from a slow stage.
func TestSlowWorkerFlag(t *testing.T) {
	tr := filepath.Join(t.TempDir(), "t.arrow")
	simulateTo(t, tr, "--stages", "4", "--microbatches", "8", "--dp", "2", "--slow-worker", "pipeline=1,stage=2,factor=1.5")
	stdout, stderr, code := ppprof(t, "analyze", tr, "--format", "json")
	if code != 0 {
		t.Fatal(stderr)
	}
	var a struct {
		Steps []struct {
			Pipeline int     `json:"pipeline"`
			WindowMs float64 `json:"window_ms"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(stdout), &a); err != nil {
		t.Fatal(err)
	}
	// Stage 2 of pipeline 1 costs 1.5x: 8 x (1+2) x 0.5 = 12 ms more busy on
	// the critical stage, so pipeline 1's window is longer than pipeline 0's.
	if len(a.Steps) != 2 || a.Steps[1].Pipeline != 1 || a.Steps[1].WindowMs <= a.Steps[0].WindowMs {
		t.Errorf("steps %+v: pipeline 1 must be slower", a.Steps)
	}
	if _, stderr, code := ppprof(t, "simulate", "--slow-worker", "stage=x", "-o", tr); code != exitError || !strings.Contains(stderr, "--slow-worker") {
		t.Errorf("bad spec: exit %d, %s", code, stderr)
	}
}
