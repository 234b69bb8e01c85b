package main

import (
	"bytes"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/ingest"
)

// filesUnder is every file under dir, by path relative to dir.
func filesUnder(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExportParquetStream: the Parquet export of every step of a job's
// rank files, streamed a pipeline replica at a time (--stream always; auto
// from parquetAutoStreamRows events, and whenever the trace would not fit
// read whole), writes the files it writes read whole (--stream never), to
// the byte, with the same output and warnings; the other exports of every
// step still read the trace whole, and say so.
func TestExportParquetStream(t *testing.T) {
	var modes []string
	defer func(rows int64, f func(string)) { parquetAutoStreamRows, readAs = rows, f }(parquetAutoStreamRows, readAs)
	readAs = func(m string) { modes = append(modes, m) }
	parquetAutoStreamRows = 1
	job := t.TempDir()
	if _, stderr, code := ppprof(t, "simulate", "--fleet", "--schedule", "interleaved", "--stages", "4", "--microbatches", "8",
		"--steps", "3", "--tp", "2", "--dp", "4", "--jitter", "0.1", "--opt-ms", "1", "--fleet-batch-rows", "64", "-o", job); code != 0 {
		t.Fatalf("simulate --fleet: exit %d: %s", code, stderr)
	}
	// A rank file that lost its tail: its warning printed once either way.
	cutTail(t, filepath.Join(job, "rank-00005.arrows"))
	rows, _, err := ingest.CountRows([]string{job})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	export := func(name string, args ...string) (map[string][]byte, string, string) {
		t.Helper()
		modes = nil
		dir := filepath.Join(out, name)
		stdout, stderr, code := ppprof(t, append([]string{"export", "--parquet", dir, job}, args...)...)
		if code != exitOK {
			t.Fatalf("%s: exit %d: %s", name, code, stderr)
		}
		return filesUnder(t, dir), strings.ReplaceAll(stdout, dir, "DIR"), stderr
	}
	want, wantOut, wantErr := export("never", "--stream", "never")
	// 3 steps of 32 ranks, but rank 5's last step, lost with its tail.
	if len(want) != 3*32-1 || !strings.Contains(wantErr, "rank-00005.arrows") || modes[0] != "whole" {
		t.Fatalf("--stream never: %d files (want 95), read %v, stderr %q", len(want), modes, wantErr)
	}
	// Memory for the trace read whole twice over, and a tenth of it: auto
	// streams for speed, then for memory.
	// Chunks of a tenth of the memory: with the whole trace's worth twice
	// over, a replica each; with a tenth of it, a replica each too (a
	// chunk holds one at least). Under auto without --max-memory, the
	// small job is one chunk (a million events' worth), read whole.
	for _, tc := range []struct {
		name, mode string
		args       []string
	}{
		{"always", "streamed", []string{"--stream", "always"}},
		{"auto", "whole", nil},
		{"auto-fits", "streamed", []string{"--max-memory", strconv.FormatInt(rows*whatIfBytesPerEvent*2, 10)}},
		{"auto-too-large", "streamed", []string{"--max-memory", strconv.FormatInt(rows*whatIfBytesPerEvent/10, 10)}},
	} {
		got, gotOut, gotErr := export(tc.name, tc.args...)
		if len(modes) != 1 || modes[0] != tc.mode {
			t.Errorf("%s: read %v, want %s", tc.name, modes, tc.mode)
		}
		if gotOut != wantOut || gotErr != wantErr {
			t.Errorf("%s: stdout %q, stderr %q; want %q, %q", tc.name, gotOut, gotErr, wantOut, wantErr)
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d files, want %d", tc.name, len(got), len(want))
		}
		for k, b := range want {
			if !bytes.Equal(got[k], b) {
				t.Errorf("%s: %s differs from the export read whole", tc.name, k)
			}
		}
	}
	// By step: a file per step read whole, a file per step and replica
	// streamed a replica at a time; a layout that is not one is refused.
	if byStep, _, _ := export("by-step", "--parquet-partition", "step", "--stream", "never"); len(byStep) != 3 || byStep["step=2/part-0.parquet"] == nil {
		t.Errorf("--parquet-partition step, read whole: files %v, want one per step", slices.Sorted(maps.Keys(byStep)))
	}
	if byStep, _, _ := export("by-step-streamed", "--parquet-partition", "step", "--max-memory", strconv.FormatInt(rows*whatIfBytesPerEvent*2, 10)); len(byStep) != 3*4 || byStep["step=2/part-3.parquet"] == nil {
		t.Errorf("--parquet-partition step, streamed: files %v, want one per step and replica", slices.Sorted(maps.Keys(byStep)))
	}
	if _, stderr, code := ppprof(t, "export", "--parquet", filepath.Join(out, "bad"), "--parquet-partition", "rank", job); code != exitError || !strings.Contains(stderr, "--parquet-partition") {
		t.Errorf("--parquet-partition rank: exit %d, %q", code, stderr)
	}
	// Below parquetAutoStreamRows, auto reads whole.
	parquetAutoStreamRows = rows + 1
	if export("small", "--max-memory", strconv.FormatInt(rows*whatIfBytesPerEvent*2, 10)); len(modes) != 1 || modes[0] != "whole" {
		t.Errorf("below parquetAutoStreamRows: read %v, want whole", modes)
	}
	// The pprof profile and the Chrome trace of every step need the
	// trace whole.
	pprof := filepath.Join(out, "p.pb.gz")
	_, stderr, code := ppprof(t, "export", "--stream", "always", "--pprof", pprof, job)
	if code != exitError || !strings.Contains(stderr, "--parquet alone streams every step") {
		t.Errorf("--stream always --pprof: exit %d, stderr %q", code, stderr)
	}
	_, stderr, code = ppprof(t, "export", "--max-memory", strconv.FormatInt(rows*whatIfBytesPerEvent/10, 10), "--pprof", pprof,
		"--parquet", filepath.Join(out, "with-pprof"), job)
	if code != exitOK {
		// The trace fits the machine; --max-memory sizes the plan only.
		t.Errorf("--pprof --parquet, small --max-memory: exit %d, stderr %q", code, stderr)
	}
}
