package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/trace"
)

// TestAnalyzeStream: a job analysed a few pipeline replicas at a time
// (--stream always) prints, in every format, exactly what it prints read
// whole (--stream never); auto reads a small job whole; what cannot be
// streamed is refused under always and read whole under auto.
func TestAnalyzeStream(t *testing.T) {
	dir := t.TempDir()
	if _, stderr, code := ppprof(t, "simulate", "--fleet", "--schedule", "1f1b", "--stages", "4", "--microbatches", "8",
		"--steps", "3", "--dp", "4", "--tp", "2", "--jitter", "0.1", "--p2p-latency-us", "20", "--opt-ms", "1",
		"--fleet-batch-rows", "64", "-o", dir); code != 0 {
		t.Fatalf("simulate --fleet: exit %d: %s", code, stderr)
	}
	for _, format := range []string{"json", "text", "markdown"} {
		whole, stderr, code := ppprof(t, "analyze", "--stream", "never", "--format", format, dir)
		if code != 0 {
			t.Fatalf("--stream never: exit %d: %s", code, stderr)
		}
		for _, mode := range []string{"always", "auto"} {
			got, stderr, code := ppprof(t, "analyze", "--stream", mode, "--format", format, dir)
			if code != 0 {
				t.Fatalf("--stream %s: exit %d: %s", mode, code, stderr)
			}
			if got != whole {
				t.Errorf("--stream %s --format %s differs from --stream never", mode, format)
			}
		}
	}

	// One step: streamed, the other steps' events are read for the job's
	// shape only (ingest.Chunks.ChunkStep); the same output.
	for _, step := range []string{"0", "2"} {
		whole, _, _ := ppprof(t, "analyze", "--stream", "never", "--step", step, "--format", "json", dir)
		for _, mem := range []string{"", "64K"} {
			args := []string{"analyze", "--stream", "always", "--step", step, "--format", "json", dir}
			if mem != "" {
				args = append(args, "--max-memory", mem)
			}
			if got, stderr, code := ppprof(t, args...); code != 0 || got != whole {
				t.Errorf("--step %s, --max-memory %q: exit %d (%s), same output %v", step, mem, code, stderr, got == whole)
			}
		}
	}

	// A small memory budget: auto streams, in chunks of one replica, those
	// that fit in two fifths of 64K packed and the others read again by
	// each pass; the same output.
	whole, _, _ := ppprof(t, "analyze", "--stream", "never", "--format", "json", dir)
	if small, stderr, code := ppprof(t, "analyze", "--max-memory", "64K", "--format", "json", dir); code != 0 || small != whole {
		t.Errorf("--max-memory 64K: exit %d (%s), same output %v", code, stderr, small == whole)
	}
	if _, stderr, code := ppprof(t, "analyze", "--max-memory", "lots", dir); code == 0 || !strings.Contains(stderr, "--max-memory") {
		t.Errorf("--max-memory lots: exit %d: %s", code, stderr)
	}

	// Thresholds apply the same way.
	_, stderr, code := ppprof(t, "analyze", "--stream", "always", "--fail-on", "bubble>0.01", dir)
	if code != 3 {
		t.Errorf("--stream always --fail-on bubble>0.01: exit %d, want 3 (%s)", code, stderr)
	}

	// Other tools' formats need every file at once.
	prof, err := filepath.Abs("../../ingest/testdata/torchprof")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(prof); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = ppprof(t, "analyze", "--stream", "always", prof)
	if code == 0 || !strings.Contains(stderr, "needs every file at once") || !strings.Contains(stderr, "--stream never") {
		t.Errorf("--stream always on Kineto: exit %d: %s", code, stderr)
	}
	a, _, c1 := ppprof(t, "analyze", "--stream", "auto", "--format", "json", prof)
	b, _, c2 := ppprof(t, "analyze", "--stream", "never", "--format", "json", prof)
	if c1 != 0 || c2 != 0 || a != b {
		t.Errorf("Kineto, auto vs never: exits %d %d, same output %v", c1, c2, a == b)
	}
	if _, stderr, code := ppprof(t, "analyze", "--stream", "sometimes", dir); code == 0 || !strings.Contains(stderr, "want auto, always or never") {
		t.Errorf("--stream sometimes: exit %d: %s", code, stderr)
	}
}

// TestHangStream: a hung job diagnosed a few pipeline replicas at a time
// (--stream always, or auto under a small --max-memory) prints, in both
// formats, exactly what it prints read whole (--stream never), with the
// same exit status: for faults that hang the job, one that does not, and a
// rank whose file lost its tail; what cannot be streamed is refused under
// always and read whole under auto.
func TestHangStream(t *testing.T) {
	base := []string{"simulate", "--fleet", "--schedule", "1f1b", "--stages", "4", "--microbatches", "8",
		"--steps", "3", "--dp", "4", "--tp", "2", "--p2p-latency-us", "20", "--opt-ms", "1", "--fleet-batch-rows", "64"}
	cases := []struct {
		name, fault, cut string
		code             int
	}{
		{"crash", "crash:rank=13,step=1,mb=3", "", exitHangFound},
		{"skip", "skip:rank=18,step=2,mb=5", "", exitHangFound},
		{"shape", "shape:rank=3,step=0,mb=2", "", exitHangFound},
		{"exit", "exit:rank=30,step=1", "", exitHangFound},
		{"reorder", "reorder:rank=9,step=1,mb=2", "", exitHangFound},
		{"clean", "", "", exitOK},
		{"crash, a file cut", "crash:rank=13,step=1,mb=3", "rank-00013.arrows", exitOK},
	}
	for _, tc := range cases {
		dir := t.TempDir()
		args := append(slices.Clone(base), "-o", dir)
		if tc.fault != "" {
			args = append(args, "--fault", tc.fault)
		}
		if _, stderr, code := ppprof(t, args...); code != 0 {
			t.Fatalf("%s: simulate: exit %d: %s", tc.name, code, stderr)
		}
		if tc.cut != "" {
			cutTail(t, filepath.Join(dir, tc.cut))
		}
		for _, format := range []string{"json", "text"} {
			whole, stderr, code := ppprof(t, "hang", "--stream", "never", "--format", format, dir)
			if code != tc.code {
				t.Fatalf("%s: --stream never: exit %d, want %d: %s", tc.name, code, tc.code, stderr)
			}
			for _, mode := range [][]string{{"--stream", "always"}, {"--stream", "auto"}, {"--max-memory", "64K"}} {
				got, stderr, c := ppprof(t, append([]string{"hang", "--format", format}, append(mode, dir)...)...)
				if c != code || got != whole {
					t.Errorf("%s: %v --format %s: exit %d (%s), want %d; same output %v", tc.name, mode, format, c, stderr, code, got == whole)
				}
			}
		}
	}

	prof, err := filepath.Abs("../../ingest/testdata/torchprof")
	if err != nil {
		t.Fatal(err)
	}
	_, stderr, code := ppprof(t, "hang", "--stream", "always", prof)
	if code != 1 || !strings.Contains(stderr, "needs every file at once") || !strings.Contains(stderr, "--stream never") {
		t.Errorf("--stream always on Kineto: exit %d: %s", code, stderr)
	}
	a, _, c1 := ppprof(t, "hang", "--stream", "auto", "--max-memory", "1K", "--format", "json", prof)
	b, _, c2 := ppprof(t, "hang", "--stream", "never", "--format", "json", prof)
	if c1 != c2 || a != b {
		t.Errorf("Kineto, auto vs never: exits %d %d, same output %v", c1, c2, a == b)
	}
	for _, bad := range [][]string{{"--stream", "sometimes"}, {"--max-memory", "lots"}} {
		if _, stderr, code := ppprof(t, append([]string{"hang"}, append(bad, prof)...)...); code != 1 || !strings.Contains(stderr, bad[0]) && !strings.Contains(stderr, "want auto") {
			t.Errorf("%v: exit %d: %s", bad, code, stderr)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"8G": 8 << 30, "512M": 512 << 20, "512MiB": 512 << 20, "1.5GB": 3 << 29,
		"1024": 1024, "2k": 2048, " 1 T ": 1 << 40} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-1G", "0", "lots", "1e30T", "NaN"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

// TestAnalyzeStreamAutoFits: under --stream auto, a large input that fits
// in memory is streamed by analyze and hang when its files make enough
// chunks (a job of many replicas), and read whole when they do not (one
// replica), with the same output, exit status and warnings, printed once,
// either way.
func TestAnalyzeStreamAutoFits(t *testing.T) {
	var modes []string
	defer func(rows, hangRows int64, f func(string)) {
		autoStreamRows, hangAutoStreamRows, readAs = rows, hangRows, f
	}(autoStreamRows, hangAutoStreamRows, readAs)
	readAs = func(m string) { modes = append(modes, m) }
	autoStreamRows, hangAutoStreamRows = 1, 1
	sim := []string{"simulate", "--fleet", "--schedule", "1f1b", "--stages", "4", "--microbatches", "8",
		"--steps", "3", "--tp", "2", "--jitter", "0.1", "--opt-ms", "1", "--fleet-batch-rows", "64"}
	for _, cmd := range []struct {
		name     string
		perEvent int64
		rows     *int64
		args     []string // simulate's, for the job the command reads
	}{
		{"analyze", analysedBytesPerEvent, &autoStreamRows, nil},
		{"hang", hangBytesPerEvent, &hangAutoStreamRows, []string{"--fault", "skip:rank=2,step=2,mb=5"}},
	} {
		for _, tc := range []struct {
			dp   int
			want string
		}{{4, "streamed"}, {1, "whole"}} {
			dir := t.TempDir()
			args := append(slices.Clone(sim), append(cmd.args, "--dp", strconv.Itoa(tc.dp), "-o", dir)...)
			if _, stderr, code := ppprof(t, args...); code != 0 {
				t.Fatalf("%s: simulate --fleet: exit %d: %s", cmd.name, code, stderr)
			}
			// A rank file that lost its tail: a warning to print once.
			cutTail(t, filepath.Join(dir, "rank-00005.arrows"))
			rows, exact, err := ingest.CountRows([]string{dir})
			if err != nil || !exact {
				t.Fatalf("CountRows: %d, %v, %v", rows, exact, err)
			}
			// Memory for twice the trace read whole (so auto would not
			// stream for memory), in chunks of a fifth of it: one replica
			// each.
			mem := strconv.FormatInt(rows*cmd.perEvent*2+1, 10)
			plan, err := planStreamFast([]string{dir}, "auto", mem, false, cmd.perEvent, *cmd.rows)
			if err != nil || !plan.stream || !plan.optional {
				t.Fatalf("%s, dp %d: plan %+v, %v: want an optional stream", cmd.name, tc.dp, plan, err)
			}
			wantOut, wantErr, wantCode := ppprof(t, cmd.name, "--stream", "never", "--format", "json", dir)
			if !strings.Contains(wantErr, "rank-00005.arrows") || wantCode != exitOK && cmd.name == "analyze" {
				t.Fatalf("%s, dp %d, --stream never: exit %d, stderr %q", cmd.name, tc.dp, wantCode, wantErr)
			}
			modes = nil
			out, stderr, code := ppprof(t, cmd.name, "--max-memory", mem, "--format", "json", dir)
			if code != wantCode || out != wantOut || stderr != wantErr {
				t.Errorf("%s, dp %d, auto: exit %d (want %d), same output %v, stderr %q, want %q", cmd.name, tc.dp, code, wantCode, out == wantOut, stderr, wantErr)
			}
			if len(modes) != 1 || modes[0] != tc.want {
				t.Errorf("%s, dp %d, auto: read %v, want %s", cmd.name, tc.dp, modes, tc.want)
			}
			// A file that is not a trace any more: the same error either
			// way (auto gives up streaming and the whole read says what
			// is wrong).
			if err := os.WriteFile(filepath.Join(dir, "rank-00002.arrows"), []byte("ARROW1\x00\x00garbage"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, wantErr, wantCode = ppprof(t, cmd.name, "--stream", "never", dir)
			_, gotErr, gotCode := ppprof(t, cmd.name, "--max-memory", mem, dir)
			if wantCode != 1 || gotCode != wantCode || gotErr != wantErr {
				t.Errorf("%s, dp %d, a corrupt file: auto exit %d %q, never exit %d %q", cmd.name, tc.dp, gotCode, gotErr, wantCode, wantErr)
			}
		}
	}
}

// TestTooLargeToReadWhole: the commands that read a trace whole refuse,
// before decoding it, an input whose events would not fit in the
// machine's memory as the model alone (the machine made one byte smaller
// than that), naming the events and what to do. One byte more and they
// read it; with the machine's memory unknown nothing is refused; and
// analyze under --stream auto (which plans with its own measure of the
// memory), and diff, which analyses as it does, are not refused.
func TestTooLargeToReadWhole(t *testing.T) {
	tr := filepath.Join(t.TempDir(), "t.arrow")
	simulateTo(t, tr, "--stages", "4", "--microbatches", "8", "--steps", "4")
	rows, exact, err := ingest.CountRows([]string{tr})
	if err != nil || !exact || rows == 0 {
		t.Fatalf("CountRows: %d, %v, %v", rows, exact, err)
	}
	defer func(f func() int64) { machineMemory = f }(machineMemory)
	small := rows*trace.RowBytes - 1
	machineMemory = func() int64 { return small }
	out := filepath.Join(t.TempDir(), "out.arrow")
	for _, args := range [][]string{
		{"whatif", tr},
		{"convert", "-o", out, tr},
		{"export", "--pprof", filepath.Join(t.TempDir(), "p.pb.gz"), tr},
		{"report", "--html", filepath.Join(t.TempDir(), "r.html"), tr},
		{"analyze", "--stream", "never", tr},
		{"hang", "--stream", "never", tr},
	} {
		_, stderr, code := ppprof(t, args...)
		want := fmt.Sprintf("%d events need at least", rows)
		if code != exitError || !strings.Contains(stderr, want) || !strings.Contains(stderr, "more than this machine's") {
			t.Errorf("%v: exit %d, stderr %q: want exit %d and %q", args, code, stderr, exitError, want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("convert wrote %s though it refused the input", out)
	}
	// One byte more and it fits; unknown memory refuses nothing.
	for _, mem := range []int64{small + 1, 0} {
		machineMemory = func() int64 { return mem }
		for _, args := range [][]string{{"whatif", tr}, {"analyze", "--stream", "never", tr}, {"hang", "--stream", "never", tr}} {
			if _, stderr, code := ppprof(t, args...); code == exitError {
				t.Errorf("memory %d, %v: exit %d: %s", mem, args, code, stderr)
			}
		}
	}
	machineMemory = func() int64 { return small }
	if _, stderr, code := ppprof(t, "analyze", tr); code != exitOK {
		t.Errorf("analyze (--stream auto) of a trace larger than the machine: exit %d: %s", code, stderr)
	}
	if _, stderr, code := ppprof(t, "diff", tr, tr); code != exitOK {
		t.Errorf("diff (which analyses as analyze --stream auto) of a trace larger than the machine: exit %d: %s", code, stderr)
	}
}

// TestAnalyzeStreamCutSteps: a job of one pipeline replica streamed with
// a small memory budget is cut between steps (the replica is larger than
// a chunk may be) and prints what it prints read whole, in every format.
// Where even the replica's events would not fit in the machine's memory
// as the model alone, analyze still reads it (cut), and hang, which reads
// replicas whole, refuses it with the reason.
func TestAnalyzeStreamCutSteps(t *testing.T) {
	dir := t.TempDir()
	if _, stderr, code := ppprof(t, "simulate", "--fleet", "--schedule", "interleaved", "--stages", "4", "--microbatches", "8",
		"--steps", "6", "--dp", "1", "--tp", "2", "--jitter", "0.1", "--p2p-latency-us", "20", "--opt-ms", "1",
		"--fleet-batch-rows", "64", "-o", dir); code != 0 {
		t.Fatalf("simulate --fleet: exit %d: %s", code, stderr)
	}
	rows, _, err := ingest.CountRows([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func(f func(int, int)) { cutAs = f }(cutAs)
	var cut, chunks int
	cutAs = func(c, n int) { cut, chunks = c, n }
	// cutRows = 256K/320 = 819 rows, chunks of 256K/10/320 = 81.
	for _, format := range []string{"json", "text", "markdown"} {
		whole, stderr, code := ppprof(t, "analyze", "--stream", "never", "--format", format, dir)
		if code != 0 {
			t.Fatalf("--stream never: exit %d: %s", code, stderr)
		}
		cut, chunks = 0, 0
		got, stderr, code := ppprof(t, "analyze", "--stream", "always", "--max-memory", "256K", "--format", format, dir)
		if code != 0 {
			t.Fatalf("--stream always --max-memory 256K: exit %d: %s", code, stderr)
		}
		if cut != 1 || chunks < 6 {
			t.Errorf("%d replicas cut into %d chunks, want the one cut into a chunk a step or more (%d rows)", cut, chunks, rows)
		}
		if got != whole {
			t.Errorf("--format %s: cut between steps differs from --stream never", format)
		}
	}
	defer func(f func() int64) { machineMemory = f }(machineMemory)
	machineMemory = func() int64 { return rows*trace.RowBytes - 1 }
	if _, stderr, code := ppprof(t, "analyze", "--stream", "always", "--max-memory", "256K", dir); code != exitOK {
		t.Errorf("analyze of a replica larger than the machine, cut: exit %d: %s", code, stderr)
	}
	_, stderr, code := ppprof(t, "hang", "--stream", "always", dir)
	if want := fmt.Sprintf("a pipeline replica of %d events needs at least", rows); code != exitError || !strings.Contains(stderr, want) {
		t.Errorf("hang of a replica larger than the machine: exit %d, stderr %q: want %q", code, stderr, want)
	}
	// One file of every rank (rank by rank: its steps go back at each
	// rank) cannot be cut: analyze refuses it too, saying why.
	one := filepath.Join(t.TempDir(), "t.arrow")
	simulateTo(t, one, "--stages", "4", "--microbatches", "8", "--steps", "6")
	n, _, err := ingest.CountRows([]string{one})
	if err != nil {
		t.Fatal(err)
	}
	machineMemory = func() int64 { return n*trace.RowBytes - 1 }
	_, stderr, code = ppprof(t, "analyze", "--stream", "always", "--max-memory", "256K", one)
	if code != exitError || !strings.Contains(stderr, fmt.Sprintf("a pipeline replica of %d events", n)) || !strings.Contains(stderr, "cannot be cut between steps") {
		t.Errorf("analyze of an uncuttable replica larger than the machine: exit %d, stderr %q", code, stderr)
	}
	machineMemory = func() int64 { return n * trace.RowBytes }
	if _, stderr, code := ppprof(t, "analyze", "--stream", "always", "--max-memory", "256K", one); code != exitOK {
		t.Errorf("analyze of an uncuttable replica that fits: exit %d: %s", code, stderr)
	}
}

// TestAnalyzeStepAutoStreams: under --stream auto, one step of a job's
// rank files is streamed (only that step's batches decoded whole) even
// in one chunk, small or large (large inputs that fit are streamed only
// in enough chunks otherwise), with the output of a whole read; one file
// of every rank is read whole.
func TestAnalyzeStepAutoStreams(t *testing.T) {
	var modes []string
	defer func(f func(string)) { readAs = f }(readAs)
	readAs = func(m string) { modes = append(modes, m) }
	dir := t.TempDir()
	if _, stderr, code := ppprof(t, "simulate", "--fleet", "--schedule", "1f1b", "--stages", "4", "--microbatches", "8",
		"--steps", "3", "--dp", "1", "--tp", "2", "--opt-ms", "1", "--fleet-batch-rows", "16", "-o", dir); code != 0 {
		t.Fatalf("simulate --fleet: exit %d: %s", code, stderr)
	}
	one := filepath.Join(t.TempDir(), "t.arrow")
	simulateTo(t, one, "--stages", "4", "--microbatches", "8", "--steps", "3")
	defer func(rows int64) { autoStreamRows = rows }(autoStreamRows)
	for _, tc := range []struct {
		path, want string
		large      bool // auto would stream it anyway, optionally (for speed)
	}{{dir, "streamed", false}, {dir, "streamed", true}, {one, "whole", false}} {
		autoStreamRows = 0
		if tc.large {
			autoStreamRows = 1
		}
		want, stderr, code := ppprof(t, "analyze", "--stream", "never", "--step", "1", "--format", "json", tc.path)
		if code != 0 {
			t.Fatalf("%s, --stream never: exit %d: %s", tc.path, code, stderr)
		}
		modes = nil
		got, stderr, code := ppprof(t, "analyze", "--step", "1", "--format", "json", tc.path)
		if code != 0 || got != want {
			t.Errorf("%s, auto: exit %d (%s), same output %v", tc.path, code, stderr, got == want)
		}
		if len(modes) != 1 || modes[0] != tc.want {
			t.Errorf("%s, auto --step 1: read %v, want %s", tc.path, modes, tc.want)
		}
	}
}

// fleetDir simulates a small fleet job (4 stages, 8 micro-batches, 3
// steps, 64-row record batches, and args, which may override them) into a
// fresh directory of rank files and returns it.
func fleetDir(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	base := []string{"simulate", "--fleet", "--stages", "4", "--microbatches", "8", "--steps", "3", "--fleet-batch-rows", "64", "-o", dir}
	if _, stderr, code := ppprof(t, append(base, args...)...); code != 0 {
		t.Fatalf("simulate --fleet %v: exit %d: %s", args, code, stderr)
	}
	return dir
}

// TestDiffStream: diff analyses a trace as analyze --stream auto does: a
// streamed analysis gives the same comparison as a whole read, and a saved
// analysis is compared as it is.
func TestDiffStream(t *testing.T) {
	dir := fleetDir(t, "--schedule", "1f1b", "--dp", "4", "--tp", "2", "--jitter", "0.1", "--opt-ms", "1")
	saved := filepath.Join(t.TempDir(), "base.json")
	js, stderr, code := ppprof(t, "analyze", "--stream", "never", "--format", "json", dir)
	if code != 0 {
		t.Fatalf("analyze: exit %d: %s", code, stderr)
	}
	if err := os.WriteFile(saved, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	var modes []string
	defer func(rows int64, f func(string)) { autoStreamRows, readAs = rows, f }(autoStreamRows, readAs)
	readAs = func(m string) { modes = append(modes, m) }
	rows, exact, err := ingest.CountRows([]string{dir})
	if err != nil || !exact {
		t.Fatalf("CountRows: %d, %v, %v", rows, exact, err)
	}
	// Memory for twice the trace analysed whole, in chunks of a fifth of
	// it (one replica each), as TestAnalyzeStreamAutoFits.
	mem := strconv.FormatInt(rows*analysedBytesPerEvent*2+1, 10)
	var outs []string
	for _, rows := range []int64{0, 1} { // whole, then streamed (the rule on)
		autoStreamRows, modes = rows, nil
		out, stderr, code := ppprof(t, "diff", saved, dir, "--format", "json", "--max-memory", mem)
		if code != 0 {
			t.Fatalf("diff: exit %d: %s", code, stderr)
		}
		want := []string{"whole", "streamed"}[rows]
		if !slices.Equal(modes, []string{want}) {
			t.Errorf("autoStreamRows %d: read %v, want %s", rows, modes, want)
		}
		outs = append(outs, out)
	}
	if outs[0] != outs[1] {
		t.Errorf("diff streamed differs from diff read whole:\n%s\n%s", outs[1], outs[0])
	}
	if out, stderr, code := ppprof(t, "diff", saved, dir, "--format", "json", "--stream", "always"); code != 0 || out != outs[0] {
		t.Errorf("--stream always: exit %d (%s), same output %v", code, stderr, out == outs[0])
	}
	if _, stderr, code := ppprof(t, "diff", saved, dir, "--stream", "often"); code != 1 || !strings.Contains(stderr, "want auto, always or never") {
		t.Errorf("--stream often: exit %d, %q", code, stderr)
	}
	if !strings.Contains(outs[0], `"delta": 0`) {
		t.Errorf("a trace against its own saved analysis: no zero delta in %s", outs[0])
	}
}

// TestFlightRecorderTooLarge: Flight Recorder dumps, which every command
// reads whole, are refused before anything is decoded when the machine's
// memory is under frPeakPerByte times their size (hang and analyze, under
// --stream auto or never, and convert), and read when it is not.
func TestFlightRecorderTooLarge(t *testing.T) {
	dir := filepath.Join("..", "..", "ingest", "testdata", "fr", "proto2")
	size, err := ingest.InputBytes([]string{dir})
	if err != nil || size == 0 {
		t.Fatalf("InputBytes: %d, %v", size, err)
	}
	defer func(f func() int64) { machineMemory = f }(machineMemory)
	need := int64(float64(size) * frPeakPerByte)
	out := filepath.Join(t.TempDir(), "out.arrow")
	cases := [][]string{{"hang", dir}, {"hang", "--stream", "never", dir}, {"analyze", dir}, {"convert", "-o", out, dir}}
	machineMemory = func() int64 { return need - 1 }
	for _, args := range cases {
		_, stderr, code := ppprof(t, args...)
		if code != exitError || !strings.Contains(stderr, "of Flight Recorder dumps need at least") || !strings.Contains(stderr, "more than this machine's") {
			t.Errorf("%v: exit %d, stderr %q: want the dumps refused", args, code, stderr)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("convert wrote %s though it refused the input", out)
	}
	for _, mem := range []int64{need, 0} {
		machineMemory = func() int64 { return mem }
		for _, args := range cases {
			if _, stderr, code := ppprof(t, args...); code == exitError {
				t.Errorf("memory %d, %v: exit %d: %s", mem, args, code, stderr)
			}
		}
	}
}
