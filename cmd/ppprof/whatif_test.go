package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/ingest"
)

// simTrace simulates args into a fresh file and returns its path.
func simTrace(t *testing.T, args ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.arrow")
	if _, errs, code := ppprof(t, append(append([]string{"simulate"}, args...), "-o", path)...); code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, errs)
	}
	return path
}

// TestWhatIfCommand: the JSON contract end to end; a slow stage's balanced
// prediction is the sim of the job without it.
func TestWhatIfCommand(t *testing.T) {
	slow := simTrace(t, "--schedule", "1f1b", "--stages", "4", "--microbatches", "8", "--steps", "2",
		"--slow-stage", "3", "--slow-factor", "1.5")
	fixed := simTrace(t, "--schedule", "1f1b", "--stages", "4", "--microbatches", "8", "--steps", "2")
	out, errs, code := ppprof(t, "whatif", slow, "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Schema    string  `json:"schema"`
		StepMs    float64 `json:"step_ms"`
		Scenarios []struct {
			Name    string   `json:"name"`
			StepMs  *float64 `json:"step_ms"`
			Speedup *float64 `json:"speedup"`
			Detail  string   `json:"detail"`
		} `json:"scenarios"`
		Verdict struct {
			Kind string `json:"kind"`
		} `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := analyzeJSON(t, fixed).StepMs
	if doc.Schema != "ppprof.whatif/v1" || len(doc.Scenarios) != 7 || doc.Scenarios[0].Name != "balanced" ||
		doc.Scenarios[0].StepMs == nil || !whatIfNear(*doc.Scenarios[0].StepMs, want) || doc.Verdict.Kind != "slow_stage" {
		t.Errorf("balanced predicted %v, the job without the slow stage takes %v ms:\n%s", doc.Scenarios[0].StepMs, want, out)
	}

	out, _, code = ppprof(t, "whatif", slow, "--scenario", "free_p2p", "--scenario", "zb_h1", "--step", "1")
	if code != 0 || !strings.Contains(out, "free_p2p") || !strings.Contains(out, "zb_h1") || strings.Contains(out, "balanced  ") ||
		!strings.Contains(out, "Critical path") {
		t.Errorf("text, two scenarios: exit %d\n%s", code, out)
	}
}

func whatIfNear(a, b float64) bool { d := a - b; return d < 1e-9*b+1e-12 && d > -1e-9*b-1e-12 }

func TestWhatIfCommandErrors(t *testing.T) {
	tr := simTrace(t, "--schedule", "1f1b", "--stages", "2", "--microbatches", "2")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"whatif"}, "requires at least 1 arg"},
		{[]string{"whatif", tr, "--scenario", "faster"}, `unknown scenario "faster"`},
		{[]string{"whatif", tr, "--format", "yaml"}, "--format"},
		{[]string{"whatif", tr, "--step", "x"}, "--step"},
		{[]string{"whatif", filepath.Join(t.TempDir(), "missing.arrow")}, "missing.arrow"},
		{[]string{"whatif", tr, "--step", "7"}, "step 7"},
		{[]string{"whatif", tr, "--stream", "sideways"}, `--stream "sideways"`},
		{[]string{"whatif", tr, "--step", "0", "--max-memory", "lots"}, "--max-memory"},
	} {
		_, errs, code := ppprof(t, tc.args...)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestWhatIfStepStream: the what-if of one step read a few pipeline
// replicas at a time (--stream always, and auto: rank files, or under a
// small memory budget), keeping only that step's events, prints what it
// prints read whole; what cannot be streamed is refused under always and
// read whole under auto.
func TestWhatIfStepStream(t *testing.T) {
	dir := fleetDir(t, "--schedule", "interleaved", "--dp", "3", "--tp", "2", "--jitter", "0.1", "--p2p-latency-us", "20", "--opt-ms", "1")
	var modes []string
	defer func(f func(string)) { readAs = f }(readAs)
	readAs = func(m string) { modes = append(modes, m) }
	for _, step := range []string{"0", "2"} {
		for _, format := range []string{"json", "text"} {
			whole, stderr, code := ppprof(t, "whatif", "--stream", "never", "--step", step, "--format", format, dir)
			if code != 0 {
				t.Fatalf("--stream never: exit %d: %s", code, stderr)
			}
			if format == "json" && !strings.Contains(whole, `"steps": 1`) {
				t.Fatalf("--step %s: not one step replayed: %s", step, whole)
			}
			for _, args := range [][]string{{"--stream", "always"}, {"--stream", "always", "--max-memory", "64K"}, {"--max-memory", "64K"}} {
				modes = nil
				got, stderr, code := ppprof(t, append([]string{"whatif", "--step", step, "--format", format, dir}, args...)...)
				if code != 0 || got != whole {
					t.Errorf("--step %s %v --format %s: exit %d (%s), same output %v", step, args, format, code, stderr, got == whole)
				}
				if !slices.Equal(modes, []string{"streamed"}) {
					t.Errorf("--step %s %v: read %v, want streamed", step, args, modes)
				}
			}
		}
	}
	// The default: one step of rank files streamed, however small (only
	// the step's batches decoded); one step of one file read whole; every
	// step streamed under a small budget (TestWhatIfAllStream).
	one := simTrace(t, "--schedule", "1f1b", "--stages", "4", "--microbatches", "8", "--steps", "2")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--step", "1", dir}, []string{"streamed"}},
		{[]string{"--step", "1", one}, nil},
		{[]string{"--max-memory", "64K", dir}, []string{"streamed"}},
	} {
		modes = nil
		if _, stderr, code := ppprof(t, append([]string{"whatif"}, tc.args...)...); code != 0 || !slices.Equal(modes, tc.want) {
			t.Errorf("%v: exit %d (%s), read %v, want %v", tc.args, code, stderr, modes, tc.want)
		}
	}
	// A step without events: the error of the whole read.
	_, wantErr, wantCode := ppprof(t, "whatif", "--step", "9", "--stream", "never", dir)
	_, gotErr, gotCode := ppprof(t, "whatif", "--step", "9", dir)
	if wantCode != 1 || gotCode != wantCode || gotErr != wantErr || !strings.Contains(gotErr, "no events for step 9") {
		t.Errorf("step 9: streamed exit %d %q, whole exit %d %q", gotCode, gotErr, wantCode, wantErr)
	}
	// Other tools' formats are not streamed.
	prof, err := filepath.Abs("../../ingest/testdata/torchprof")
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := ppprof(t, "whatif", "--step", "0", "--stream", "always", prof); code != 1 || !strings.Contains(stderr, "--stream never") {
		t.Errorf("--stream always of Kineto files: exit %d, %q", code, stderr)
	}
	a, _, c1 := ppprof(t, "whatif", "--step", "0", "--max-memory", "64K", "--format", "json", prof)
	b, _, c2 := ppprof(t, "whatif", "--step", "0", "--stream", "never", "--format", "json", prof)
	if c1 != c2 || a != b {
		t.Errorf("Kineto, auto under a small budget vs never: exits %d %d, same output %v", c1, c2, a == b)
	}
}

// TestWhatIfAllStream: the what-if of every step read a few whole steps
// at a time (--stream always, and auto under a small memory budget)
// prints what it prints read whole, in every format; what cannot be
// chunked is refused under always and read whole under auto; a file that
// cannot be cut between steps and would not fit is refused with the
// reason.
func TestWhatIfAllStream(t *testing.T) {
	dir := fleetDir(t, "--schedule", "interleaved", "--steps", "5", "--dp", "3", "--tp", "2", "--jitter", "0.1", "--p2p-latency-us", "20",
		"--opt-ms", "1", "--slow-stage", "2", "--slow-factor", "1.3")
	var modes []string
	defer func(f func(string)) { readAs = f }(readAs)
	readAs = func(m string) { modes = append(modes, m) }
	defer func(f func(int, int)) { cutAs = f }(cutAs)
	var chunks int
	cutAs = func(_, n int) { chunks = n }
	for _, format := range []string{"json", "text", "markdown"} {
		whole, stderr, code := ppprof(t, "whatif", "--stream", "never", "--format", format, dir)
		if code != 0 {
			t.Fatalf("--stream never: exit %d: %s", code, stderr)
		}
		if format == "json" && !strings.Contains(whole, `"steps": 5`) {
			t.Fatalf("not every step replayed: %s", whole)
		}
		// 256K: chunks of at most 256K/10/280 = 93 rows, at least a
		// record batch (64 rows) of each file: a step each.
		for _, args := range [][]string{{"--stream", "always"}, {"--stream", "always", "--max-memory", "256K"}, {"--max-memory", "256K"}} {
			modes, chunks = nil, 0
			got, stderr, code := ppprof(t, append([]string{"whatif", "--format", format, dir}, args...)...)
			if code != 0 || got != whole {
				t.Errorf("%v --format %s: exit %d (%s), same output %v:\n%s", args, format, code, stderr, got == whole, got)
			}
			if !slices.Equal(modes, []string{"streamed"}) {
				t.Errorf("%v: read %v, want streamed", args, modes)
			}
			if slices.Contains(args, "256K") && chunks != 5 {
				t.Errorf("%v: %d chunks, want a step each", args, chunks)
			}
		}
	}
	// Fits: read whole under auto.
	modes = nil
	if _, stderr, code := ppprof(t, "whatif", dir); code != 0 || modes != nil {
		t.Errorf("auto: exit %d (%s), read %v", code, stderr, modes)
	}
	// Other tools' formats are not streamed.
	prof, err := filepath.Abs("../../ingest/testdata/torchprof")
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := ppprof(t, "whatif", "--stream", "always", prof); code != 1 || !strings.Contains(stderr, "--stream never") {
		t.Errorf("--stream always of Kineto files: exit %d, %q", code, stderr)
	}
	a, _, c1 := ppprof(t, "whatif", "--max-memory", "64K", "--format", "json", prof)
	b, _, c2 := ppprof(t, "whatif", "--stream", "never", "--format", "json", prof)
	if c1 != c2 || a != b {
		t.Errorf("Kineto, auto under a small budget vs never: exits %d %d, same output %v", c1, c2, a == b)
	}
	// One file of every rank cannot be cut between steps: read as one
	// chunk when it fits, refused when not.
	one := simTrace(t, "--schedule", "1f1b", "--stages", "4", "--microbatches", "8", "--steps", "3")
	wantOne, _, _ := ppprof(t, "whatif", "--stream", "never", "--format", "json", one)
	if got, stderr, code := ppprof(t, "whatif", "--stream", "always", "--format", "json", one); code != 0 || got != wantOne {
		t.Errorf("--stream always of one file: exit %d (%s), same output %v", code, stderr, got == wantOne)
	}
	rows, _, err := ingest.CountRows([]string{one})
	if err != nil {
		t.Fatal(err)
	}
	defer func(f func() int64) { machineMemory = f }(machineMemory)
	machineMemory = func() int64 { return rows*whatIfBytesPerEvent - 1 }
	for _, args := range [][]string{{"--stream", "always"}, {"--max-memory", "64K"}} {
		if _, stderr, code := ppprof(t, append([]string{"whatif", one}, args...)...); code != 1 || !strings.Contains(stderr, "cannot be cut between steps") || !strings.Contains(stderr, "give --step N") {
			t.Errorf("%v: one file the what-if could not hold: exit %d, %q", args, code, stderr)
		}
	}
}

func TestPartitionCommand(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "layers.csv")
	body := "layer,fwd_ms,bwd_ms,act_bytes\n"
	for range 9 {
		body += "block,1,2,1000\n"
	}
	body += "loss,4,2,0\n"
	if err := os.WriteFile(csv, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := ppprof(t, "partition", "--layers", csv, "--stages", "4", "--microbatches", "8", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Schema       string  `json:"schema"`
		Sizes        []int   `json:"sizes"`
		BottleneckMs float64 `json:"bottleneck_ms"`
		StepMs       float64 `json:"step_ms"`
		Even         struct {
			Sizes        []int   `json:"sizes"`
			BottleneckMs float64 `json:"bottleneck_ms"`
		} `json:"even"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// 9 layers of 3 ms and a 6 ms loss: the last stage takes one layer
	// (9 ms) and no other more than 3, which beats the even 3, 2, 2, 2 (its
	// last stage 12 ms); 2, 3, 3, 1 and 3, 3, 2, 1 tie, the earliest cut
	// wins.
	if doc.Schema != "ppprof.partition/v1" || doc.BottleneckMs != 9 || fmt.Sprint(doc.Sizes) != "[2 3 3 1]" ||
		doc.Even.BottleneckMs != 12 || fmt.Sprint(doc.Even.Sizes) != "[3 2 2 2]" || doc.StepMs <= 0 {
		t.Errorf("%+v", doc)
	}
	out, _, code = ppprof(t, "partition", "--layers", csv, "--stages", "2")
	if code != 0 || !strings.Contains(out, "layers per stage") || !strings.Contains(out, "even split") {
		t.Errorf("text: exit %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"partition", "--stages", "2"}, `"layers" not set`},
		{[]string{"partition", "--layers", csv}, `"stages" not set`},
		{[]string{"partition", "--layers", csv, "--stages", "10"}, "every stage needs a layer"},
		{[]string{"partition", "--layers", csv, "--stages", "2", "--schedule", "interleaved"}, "interleaved"},
		{[]string{"partition", "--layers", csv, "--stages", "4", "--mem-limit", "100"}, "fits"},
		{[]string{"partition", "--layers", filepath.Join(dir, "nope.csv"), "--stages", "2"}, "nope.csv"},
	} {
		_, errs, code := ppprof(t, tc.args...)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestWhatIfAllStreamTooMany: a trace whose what-if of every step would
// keep more than the machine's memory for its statistics is refused
// before its chunks are read, with --step N as the way out, even when
// each chunk of it would fit.
func TestWhatIfAllStreamTooMany(t *testing.T) {
	dir := fleetDir(t, "--schedule", "1f1b", "--steps", "24", "--dp", "2")
	rows, _, err := ingest.CountRows([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func(f func() int64) { machineMemory = f }(machineMemory)
	for _, tc := range []struct {
		mem  int64
		fail bool
	}{{rows*whatIfKeptBytesPerEvent - 1, true}, {rows * whatIfKeptBytesPerEvent, false}} {
		machineMemory = func() int64 { return tc.mem }
		_, stderr, code := ppprof(t, "whatif", "--stream", "always", "--max-memory", "1M", dir)
		if tc.fail && (code != 1 || !strings.Contains(stderr, fmt.Sprintf("%d events need", rows)) || !strings.Contains(stderr, "give --step N")) {
			t.Errorf("memory %d: exit %d, %q", tc.mem, code, stderr)
		}
		if !tc.fail && code != 0 {
			t.Errorf("memory %d: exit %d: %s", tc.mem, code, stderr)
		}
	}
}
