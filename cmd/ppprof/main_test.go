package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ppprof runs the CLI in-process and returns stdout, stderr and exit code.
func ppprof(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

type analysisJSON struct {
	Schema string `json:"schema"`
	Job    struct {
		WorldSize    int    `json:"world_size"`
		PP           int    `json:"pp"`
		Virtual      int    `json:"virtual"`
		MicroBatches int    `json:"microbatches"`
		Steps        int    `json:"steps"`
		Schedule     string `json:"schedule"`
		Events       int    `json:"events"`
	} `json:"job"`
	StepMs      float64 `json:"step_ms"`
	Utilization struct {
		Pipeline float64  `json:"pipeline"`
		Bubble   float64  `json:"bubble"`
		Balance  float64  `json:"balance"`
		Compute  *float64 `json:"compute"`
	} `json:"utilization"`
	Bubble struct {
		Measured    float64  `json:"measured"`
		Theoretical *float64 `json:"theoretical"`
	} `json:"bubble"`
	Stages []struct {
		Stage                int `json:"stage"`
		PeakLiveMicroBatches int `json:"peak_live_microbatches"`
	} `json:"stages"`
}

func analyzeJSON(t *testing.T, paths ...string) analysisJSON {
	t.Helper()
	stdout, stderr, code := ppprof(t, append([]string{"analyze", "--format", "json"}, paths...)...)
	if code != 0 {
		t.Fatalf("analyze exit %d: %s", code, stderr)
	}
	var a analysisJSON
	if err := json.Unmarshal([]byte(stdout), &a); err != nil {
		t.Fatalf("analyze JSON: %v\n%s", err, stdout)
	}
	return a
}

// TestMeasuredBubbleMatchesTheory is the acceptance test of the core: with
// uniform costs and free P2P, the bubble measured from the simulator's events
// equals the closed form of DESIGN.md.
func TestMeasuredBubbleMatchesTheory(t *testing.T) {
	type tc struct {
		schedule string
		p, m, v  int
	}
	var cases []tc
	for _, pm := range [][2]int{{2, 1}, {2, 4}, {4, 8}, {4, 3}, {3, 7}, {8, 16}, {8, 5}} {
		cases = append(cases, tc{"gpipe", pm[0], pm[1], 1}, tc{"1f1b", pm[0], pm[1], 1})
	}
	for _, pmv := range [][3]int{{2, 4, 2}, {4, 8, 2}, {4, 8, 4}, {3, 6, 3}, {4, 4, 2}} {
		cases = append(cases, tc{"interleaved", pmv[0], pmv[1], pmv[2]})
	}
	dir := t.TempDir()
	for _, c := range cases {
		name := fmt.Sprintf("%s_p%d_m%d_v%d", c.schedule, c.p, c.m, c.v)
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, name+".arrow")
			_, stderr, code := ppprof(t, "simulate", "--schedule", c.schedule, "--stages", fmt.Sprint(c.p),
				"--microbatches", fmt.Sprint(c.m), "--virtual", fmt.Sprint(c.v), "--steps", "2",
				"--fwd-ms", "1.5", "--bwd-ms", "3", "-o", out)
			if code != 0 {
				t.Fatalf("simulate exit %d: %s", code, stderr)
			}
			a := analyzeJSON(t, out)
			want := float64(c.p-1) / float64(c.m+c.p-1)
			if c.schedule == "interleaved" {
				want = float64(c.p-1) / float64(c.v*c.m+c.p-1)
			}
			if rel := math.Abs(a.Bubble.Measured-want) / math.Max(want, 1e-12); rel > 1e-6 && !(want == 0 && a.Bubble.Measured < 1e-9) {
				t.Errorf("measured bubble %.9f, theory %.9f (rel err %.2g)", a.Bubble.Measured, want, rel)
			}
			if a.Schema != "ppprof.analysis/v1" || a.Job.PP != c.p || a.Job.MicroBatches != c.m || a.Job.Steps != 2 {
				t.Errorf("job = %+v", a.Job)
			}
			if a.StepMs <= 0 {
				t.Errorf("step_ms = %v", a.StepMs)
			}
			// (1 - bubble) x balance multiplies back to the utilisation.
			u := a.Utilization
			if math.Abs((1-u.Bubble)*u.Balance-u.Pipeline) > 1e-12 {
				t.Errorf("factors do not multiply back: (1-%v)*%v != %v", u.Bubble, u.Balance, u.Pipeline)
			}
		})
	}
}

// TestPerRankStreams checks -o DIR (one stream per rank, as a collector
// writes) analyses to the same numbers as -o FILE.
func TestPerRankStreams(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "one.arrow")
	ranks := filepath.Join(dir, "ranks")
	if err := os.Mkdir(ranks, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"simulate", "--schedule", "1f1b", "--stages", "4", "--microbatches", "8", "--dp", "2", "--tp", "2", "--jitter", "0.1", "--seed", "7"}
	for _, out := range []string{file, ranks} {
		if _, stderr, code := ppprof(t, append(args, "-o", out)...); code != 0 {
			t.Fatalf("simulate -o %s: exit %d: %s", out, code, stderr)
		}
	}
	entries, err := os.ReadDir(ranks)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 16 || entries[0].Name() != "rank-00000.arrows" || entries[15].Name() != "rank-00015.arrows" {
		t.Fatalf("per-rank files: %d, first %s", len(entries), entries[0].Name())
	}
	a, b := analyzeJSON(t, file), analyzeJSON(t, ranks)
	if a.Bubble.Measured != b.Bubble.Measured || a.StepMs != b.StepMs || a.Job.Events != b.Job.Events || a.Job.WorldSize != 16 {
		t.Errorf("file vs dir differ: %+v vs %+v", a, b)
	}
	// A glob of the rank files reads the same trace.
	c := analyzeJSON(t, filepath.Join(ranks, "rank-*.arrows"))
	if c.Job.Events != a.Job.Events {
		t.Errorf("glob read %d events, want %d", c.Job.Events, a.Job.Events)
	}
}

func TestConvertRoundTrip(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "t.arrow")
	dst := filepath.Join(dir, "u.arrow")
	if _, stderr, code := ppprof(t, "simulate", "--schedule", "zb-h1", "--stages", "3", "--microbatches", "6", "-o", src); code != 0 {
		t.Fatalf("simulate: %s", stderr)
	}
	if _, stderr, code := ppprof(t, "convert", src, "-o", dst, "--compression", "zstd"); code != 0 {
		t.Fatalf("convert: %s", stderr)
	}
	a, b := analyzeJSON(t, src), analyzeJSON(t, dst)
	if a.Bubble.Measured != b.Bubble.Measured || a.Job.Events != b.Job.Events {
		t.Errorf("convert changed the analysis: %+v vs %+v", a, b)
	}
}

func TestTextOutput(t *testing.T) {
	out := filepath.Join(t.TempDir(), "t.arrow")
	if _, stderr, code := ppprof(t, "simulate", "--stages", "4", "--microbatches", "8", "-o", out); code != 0 {
		t.Fatal(stderr)
	}
	stdout, _, code := ppprof(t, "analyze", out)
	if code != 0 {
		t.Fatal(code)
	}
	for _, want := range []string{"PP 4", "8 micro-batches", "measured 0.2727 vs theory 0.2727", "identified: 1f1b", "stage"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestErrors checks exit code 1 and a message naming the file and reason.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	notTrace := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notTrace, []byte("hello, this is not a trace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"missing file", []string{"analyze", filepath.Join(dir, "nope.arrow")}, []string{"nope.arrow"}},
		{"not a trace", []string{"analyze", notTrace}, []string{"notes.txt", "not a trace"}},
		{"bad format", []string{"analyze", "--format", "xml", notTrace}, []string{"--format", "xml"}},
		{"bad step", []string{"analyze", "--step", "x", notTrace}, []string{"--step"}},
		{"bad fault", []string{"simulate", "--fault", "melt:rank=1", "-o", filepath.Join(dir, "x.arrow")}, []string{"--fault", "melt"}},
		{"bad schedule", []string{"simulate", "--schedule", "2f2b", "-o", filepath.Join(dir, "x.arrow")}, []string{"2f2b"}},
		{"no args", []string{"analyze"}, []string{"arg"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := ppprof(t, c.args...)
			if code != exitError {
				t.Errorf("exit %d, want %d; stderr: %s", code, exitError, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
		})
	}
}
