package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

var updateHang = flag.Bool("update-hang", false, "rewrite testdata/hang-example.txt from the CLI's output")

// hangJSONOut is the part of `hang --format json` the tests read.
type hangJSONOut struct {
	Schema    string `json:"schema"`
	Verdict   string `json:"verdict"`
	RootCause struct {
		Rank       int    `json:"rank"`
		Step       int64  `json:"step"`
		MicroBatch int    `json:"microbatch"`
		Reason     string `json:"reason"`
		Summary    string `json:"summary"`
	} `json:"root_cause"`
	Blocked []struct {
		Rank       int    `json:"rank"`
		Kind       string `json:"kind"`
		Peer       int    `json:"peer"`
		Step       int64  `json:"step"`
		MicroBatch int    `json:"microbatch"`
		Seq        int64  `json:"seq"`
		SinceNs    *int64 `json:"since_ns"`
	} `json:"blocked"`
	Cycle      []int `json:"cycle"`
	Mismatches []struct {
		Kind       string `json:"kind"`
		Ranks      []int  `json:"ranks"`
		Step       int64  `json:"step"`
		MicroBatch int    `json:"microbatch"`
		Detail     string `json:"detail"`
	} `json:"mismatches"`
	Ranks []struct {
		Rank      int    `json:"rank"`
		State     string `json:"state"`
		Truncated bool   `json:"truncated"`
		BytesLost int64  `json:"bytes_lost"`
		Lost      bool   `json:"lost"`
	} `json:"ranks"`
}

// hangSim runs `ppprof simulate` into a new directory of per-rank streams
// and returns it.
func hangSim(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	if _, stderr, code := ppprof(t, append([]string{"simulate", "-o", dir}, args...)...); code != 0 {
		t.Fatalf("simulate %v: exit %d: %s", args, code, stderr)
	}
	return dir
}

// hangJSON runs `ppprof hang --format json` and decodes its output.
func hangJSON(t *testing.T, args ...string) (hangJSONOut, string, int) {
	t.Helper()
	stdout, stderr, code := ppprof(t, append([]string{"hang", "--format", "json"}, args...)...)
	var out hangJSONOut
	if code == exitOK || code == exitHangFound {
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("hang JSON: %v\n%s", err, stdout)
		}
	}
	return out, stderr, code
}

// TestHangFlags: bad flags and inputs exit 1 with a message naming the
// problem.
func TestHangFlags(t *testing.T) {
	dir := hangSim(t, "--stages", "2", "--microbatches", "2")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"hang"}, "arg"},
		{[]string{"hang", "--format", "markdown", dir}, "--format"},
		{[]string{"hang", "--format", "xml", dir}, "xml"},
		{[]string{"hang", "--world-size", "-1", dir}, "--world-size"},
		{[]string{"hang", filepath.Join(dir, "nope.arrows")}, "nope.arrows"},
		{[]string{"hang", "--dump-ns", "x", dir}, "dump-ns"},
	}
	for _, c := range cases {
		_, stderr, code := ppprof(t, c.args...)
		if code != exitError || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d naming %q", c.args, code, stderr, exitError, c.want)
		}
	}
}

// TestHangExitCodes: exit 4 for a deadlock, a stall or a mismatch (whether
// or not the job hung), 0 for a clean run; the verdict and root cause in
// both output formats.
func TestHangExitCodes(t *testing.T) {
	base := []string{"--schedule", "1f1b", "--stages", "4", "--microbatches", "8", "--steps", "2", "--dp", "2"}
	cases := []struct {
		fault   string
		code    int
		verdict string
		rank    int
		kind    string // a mismatch kind the report must hold
	}{
		{"", exitOK, "ok", -1, ""},
		{"skip:rank=3,step=1,mb=2", exitHangFound, "deadlock", 3, "order_mismatch"},
		{"crash:rank=5,step=0,mb=4", exitHangFound, "stalled", 5, "missing_send"},
		{"exit:rank=6,step=1", exitHangFound, "stalled", 6, "early_exit"},
		{"exit:rank=6,step=0", exitHangFound, "stalled", 6, "rank_absent"},
		{"shape:rank=2,step=0,mb=3", exitHangFound, "mismatch", 2, "shape_mismatch"},
		{"dtype:rank=4,step=1,mb=0", exitHangFound, "mismatch", 4, "dtype_mismatch"},
		{"reorder:rank=1,step=0,mb=5", exitHangFound, "mismatch", 1, "order_mismatch"},
		{"optskip:rank=7,step=1", exitHangFound, "mismatch", 7, "optimizer_skip_mismatch"},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.fault+"_", ":", "_"), func(t *testing.T) {
			args := base
			if c.fault != "" {
				args = append(slices.Clone(base), "--fault", c.fault)
			}
			dir := hangSim(t, args...)
			out, stderr, code := hangJSON(t, dir)
			if code != c.code || out.Verdict != c.verdict || out.Schema != "ppprof.hang/v1" {
				t.Fatalf("exit %d verdict %q schema %q; want %d %q\n%s", code, out.Verdict, out.Schema, c.code, c.verdict, stderr)
			}
			if out.RootCause.Rank != c.rank {
				t.Errorf("root cause rank %d, want %d: %s", out.RootCause.Rank, c.rank, out.RootCause.Summary)
			}
			if c.kind != "" && !slices.ContainsFunc(out.Mismatches, func(m struct {
				Kind       string `json:"kind"`
				Ranks      []int  `json:"ranks"`
				Step       int64  `json:"step"`
				MicroBatch int    `json:"microbatch"`
				Detail     string `json:"detail"`
			}) bool {
				return m.Kind == c.kind && slices.Contains(m.Ranks, c.rank)
			}) {
				t.Errorf("no %s naming rank %d in %+v", c.kind, c.rank, out.Mismatches)
			}
			stdout, _, tcode := ppprof(t, "hang", dir)
			if tcode != c.code || !strings.Contains(stdout, "Verdict: "+c.verdict+"\n") || !strings.Contains(stdout, "Root cause: "+out.RootCause.Summary) {
				t.Errorf("text: exit %d\n%s", tcode, stdout)
			}
		})
	}
}

// TestHangJSONSkip reads the JSON contract of a skipped micro-batch on a
// DP x TP job: root cause rank, step and micro-batch, the cycle, blocked
// ops with their waiting time, and the first divergence first.
func TestHangJSONSkip(t *testing.T) {
	dir := hangSim(t, "--schedule", "interleaved", "--stages", "4", "--microbatches", "8", "--dp", "2", "--tp", "2",
		"--fault", "skip:rank=10,step=0,mb=3")
	out, _, code := hangJSON(t, dir)
	rc := out.RootCause
	if code != exitHangFound || out.Verdict != "deadlock" || rc.Rank != 10 || rc.Step != 0 || rc.MicroBatch != 3 || rc.Reason != "skipped_microbatch" {
		t.Fatalf("exit %d verdict %s root %+v", code, out.Verdict, rc)
	}
	if !slices.Contains(out.Cycle, 10) {
		t.Errorf("cycle %v lacks rank 10", out.Cycle)
	}
	if len(out.Mismatches) == 0 || out.Mismatches[0].Kind != "order_mismatch" || !slices.Contains(out.Mismatches[0].Ranks, 10) || out.Mismatches[0].MicroBatch != 3 {
		t.Errorf("first mismatch %+v", out.Mismatches)
	}
	if len(out.Blocked) == 0 {
		t.Fatal("no blocked ops")
	}
	for _, b := range out.Blocked {
		if b.SinceNs == nil || *b.SinceNs < 0 || b.Kind == "" {
			t.Errorf("blocked %+v", b)
		}
	}
	if len(out.Ranks) != 16 {
		t.Errorf("%d ranks, want 16", len(out.Ranks))
	}
}

// TestHangCSV diagnoses the hand-written deadlock of ingest/testdata.
func TestHangCSV(t *testing.T) {
	stdout, _, code := ppprof(t, "hang", "../../ingest/testdata/hang2.csv")
	if code != exitHangFound || !strings.Contains(stdout, "Verdict: deadlock") || !strings.Contains(stdout, "Wait-for cycle: rank 0") {
		t.Errorf("exit %d\n%s", code, stdout)
	}
}

// writeStreams writes what a collector writes, one Arrow stream per rank in
// dir, in batches of 16 rows; closed says whether each stream gets its
// end-of-stream marker (a hung or killed process never writes it).
func writeStreams(t *testing.T, dir string, tr *trace.Trace, closed bool) {
	t.Helper()
	for lo := 0; lo < tr.Len(); {
		hi := lo
		for hi < tr.Len() && tr.Rank[hi] == tr.Rank[lo] {
			hi++
		}
		rows := tr.Slice(lo, hi)
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("rank-%05d.arrows", tr.Rank[lo])))
		if err != nil {
			t.Fatal(err)
		}
		if closed {
			err = arrowv1.WriteStream(f, rows, arrowv1.Options{BatchRows: 16})
		} else {
			var sw *arrowv1.StreamWriter
			if sw, err = arrowv1.NewStreamWriter(f, rows.Meta, arrowv1.Options{BatchRows: 16}); err == nil {
				err = sw.Write(rows)
			}
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		lo = hi
	}
}

// cutTail removes the last third of a file: the collector lost its last
// batches (and part of the one before).
func cutTail(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()*2/3); err != nil {
		t.Fatal(err)
	}
}

// TestHangTruncated: a rank whose collector lost the last batches makes the
// dump incomplete, named, with exit 0 and a warning, not a false deadlock;
// files that were only never closed (every file of a hung job) lose
// nothing.
func TestHangTruncated(t *testing.T) {
	c := sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, DP: 2}
	clean, err := sim.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	const victim = 5
	dir := t.TempDir()
	writeStreams(t, dir, clean, true)
	cutTail(t, filepath.Join(dir, "rank-00005.arrows"))
	out, stderr, code := hangJSON(t, dir)
	if code != exitOK || out.Verdict != "incomplete" || out.RootCause.Rank != victim || out.RootCause.Reason != "lost_data" {
		t.Fatalf("exit %d verdict %s root %+v\n%s", code, out.Verdict, out.RootCause, stderr)
	}
	if r := out.Ranks[victim]; !r.Truncated || r.BytesLost <= 0 || !r.Lost {
		t.Errorf("rank %d: %+v", victim, r)
	}
	if !strings.Contains(stderr, "truncated stream") || !strings.Contains(stderr, "warning: verdict incomplete") {
		t.Errorf("stderr lacks the warnings:\n%s", stderr)
	}
	if _, stderr, _ := ppprof(t, "hang", "--quiet", dir); stderr != "" {
		t.Errorf("--quiet printed %q", stderr)
	}

	// The job hung (rank 1 crashed in step 1) and every file was left
	// unclosed: the crash is found, exit 4.
	c.Faults = []sim.Fault{{Kind: sim.FaultCrash, Rank: 1, Step: 1, MicroBatch: 3}}
	hung, err := sim.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	writeStreams(t, dir, hung, false)
	out, stderr, code = hangJSON(t, dir)
	if code != exitHangFound || out.Verdict != "stalled" || out.RootCause.Rank != 1 {
		t.Fatalf("unclosed files: exit %d verdict %s root %+v\n%s", code, out.Verdict, out.RootCause, stderr)
	}
	// Cut the tail of the crashed rank's file as well: now its last events
	// are lost, and what the others wait for may be in them.
	cutTail(t, filepath.Join(dir, "rank-00001.arrows"))
	out, _, code = hangJSON(t, dir)
	if code != exitOK || out.Verdict != "incomplete" || out.RootCause.Rank != 1 {
		t.Errorf("hung and cut: exit %d verdict %s root %+v", code, out.Verdict, out.RootCause)
	}
}

// TestHangREADMEExample keeps the README's hang example true: the CLI's
// output for the example job is testdata/hang-example.txt (go test
// ./cmd/ppprof -update-hang rewrites it), and the docs show that text.
func TestHangREADMEExample(t *testing.T) {
	dir := hangSim(t, "--schedule", "1f1b", "--stages", "4", "--microbatches", "8", "--dp", "2", "--tp", "2", "--steps", "2",
		"--fault", "skip:rank=9,step=1,mb=5")
	stdout, stderr, code := ppprof(t, "hang", dir)
	if code != exitHangFound {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	golden := filepath.Join("testdata", "hang-example.txt")
	if *updateHang {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/ppprof -run TestHangREADMEExample -update-hang writes it)", err)
	}
	if stdout != string(want) {
		t.Errorf("output differs from %s (-update-hang rewrites it):\n%s", golden, stdout)
	}
	var docs string
	for _, p := range []string{"../../README.md"} {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), string(want)) {
			docs = p
		}
	}
	if docs == "" {
		t.Errorf("README.md does not show the example output of testdata/hang-example.txt")
	}
}
