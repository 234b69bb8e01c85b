package report

import (
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// pqTree is every file under dir: its path relative to dir and its bytes.
func pqTree(t *testing.T, dir string) map[string][]byte {
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

func sameTree(t *testing.T, what string, got, want map[string][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d files, want %d", what, len(got), len(want))
	}
	for k, b := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s: no %s", what, k)
		case !bytes.Equal(g, b):
			t.Errorf("%s: %s differs (%d bytes, want %d)", what, k, len(g), len(b))
		}
	}
}

func pqJob(t *testing.T) *trace.Trace {
	t.Helper()
	tr, err := sim.Run(sim.Config{Job: "parts", Schedule: "interleaved", Stages: 4, MicroBatches: 8, Steps: 2, TP: 2, DP: 3,
		P2PLatencyUs: 10, Jitter: 0.05, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestParquetWriterParts: a trace written part by part, one pipeline
// replica at a time (as a streamed export hands them), gives the files of
// the trace written whole, to the byte; so does the trace's rows in any
// order; a (step, rank) met again in a later part gets a file of its own.
func TestParquetWriterParts(t *testing.T) {
	tr := pqJob(t)
	root := t.TempDir()
	whole := filepath.Join(root, "whole")
	if err := WriteParquet(whole, tr); err != nil {
		t.Fatal(err)
	}
	want := pqTree(t, whole)
	if len(want) != 2*24 {
		t.Fatalf("%d files, want 48 (2 steps x 24 ranks)", len(want))
	}

	byPipe := map[int32][]int{}
	for i := range tr.Len() {
		byPipe[tr.Pipeline[i]] = append(byPipe[tr.Pipeline[i]], i)
	}
	w, err := NewParquetWriter(filepath.Join(root, "parts"), ByStepRank)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if err := w.Write(tr.Permute(byPipe[p])); err != nil {
			t.Fatal(err)
		}
	}
	if w.Files() != len(want) {
		t.Errorf("Files() = %d, want %d", w.Files(), len(want))
	}
	sameTree(t, "by replica", pqTree(t, filepath.Join(root, "parts")), want)

	// Rows in no order: grouped by sorting, the same files.
	idx := make([]int, tr.Len())
	for i := range idx {
		idx[i] = i
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(idx), func(a, b int) { idx[a], idx[b] = idx[b], idx[a] })
	if err := WriteParquet(filepath.Join(root, "shuffled"), tr.Permute(idx)); err != nil {
		t.Fatal(err)
	}
	sameTree(t, "shuffled", pqTree(t, filepath.Join(root, "shuffled")), want)

	// Rank 5's step 1 in two writes: part-0 holds the first half of its
	// rows, part-1 the rest, in seq order.
	var rows []int
	for i := range tr.Len() {
		if tr.Rank[i] == 5 && tr.Step[i] == 1 {
			rows = append(rows, i)
		}
	}
	slices.SortFunc(rows, func(a, b int) int { return int(tr.Seq[a] - tr.Seq[b]) })
	half := len(rows) / 2
	dir := filepath.Join(root, "split")
	if w, err = NewParquetWriter(dir, ByStepRank); err != nil {
		t.Fatal(err)
	}
	for _, part := range [][]int{rows[:half], rows[half:]} {
		if err := w.Write(tr.Permute(part)); err != nil {
			t.Fatal(err)
		}
	}
	for k, part := range [][]int{rows[:half], rows[half:]} {
		pf := readPQ(t, filepath.Join(dir, "step=1", "rank=5", fmt.Sprintf("part-%d.parquet", k)))
		if pf.rows != len(part) || pf.i64["seq"][0] != tr.Seq[part[0]] || pf.i64["seq"][pf.rows-1] != tr.Seq[part[len(part)-1]] {
			t.Errorf("part-%d: %d rows, seq %d..%d; want %d rows, seq %d..%d", k, pf.rows, pf.i64["seq"][0], pf.i64["seq"][pf.rows-1],
				len(part), tr.Seq[part[0]], tr.Seq[part[len(part)-1]])
		}
	}
}

// TestParquetEveryValue reads every file of an export back and compares
// every column of every row with the trace's rows of its (step, rank) in
// seq order (the files are written on every core, each from its own
// buffers).
func TestParquetEveryValue(t *testing.T) {
	tr := pqJob(t)
	// Some events never end (null end_ns and duration_ns).
	for i := range tr.Len() {
		if i%97 == 0 {
			tr.EndNs[i] = trace.NoTime
		}
	}
	dir := t.TempDir()
	if err := WriteParquet(dir, tr); err != nil {
		t.Fatal(err)
	}
	parts := map[[2]int64][]int{}
	for i := range tr.Len() {
		k := [2]int64{tr.Step[i], int64(tr.Rank[i])}
		parts[k] = append(parts[k], i)
	}
	checked := 0
	for k, rows := range parts {
		slices.SortFunc(rows, func(a, b int) int { return int(tr.Seq[a] - tr.Seq[b]) })
		pf := readPQ(t, filepath.Join(dir, fmt.Sprintf("step=%d", k[0]), fmt.Sprintf("rank=%d", k[1]), "part-0.parquet"))
		checked += sameRows(t, fmt.Sprint(k), pf, tr, rows)
	}
	if checked != tr.Len() {
		t.Errorf("%d rows checked of %d", checked, tr.Len())
	}
}

// sameRows checks that pf holds rows of tr, in that order, every column;
// rank too when pf has it. It returns the rows checked.
func sameRows(t *testing.T, what string, pf *pqFile, tr *trace.Trace, rows []int) int {
	t.Helper()
	if pf.rows != len(rows) {
		t.Fatalf("%s: %d rows, want %d", what, pf.rows, len(rows))
	}
	_, withRank := pf.i32["rank"]
	// Nullable columns: values of the defined rows only.
	nth := map[string]int{}
	next := func(col string, ok bool) (int64, bool) {
		if !ok {
			return 0, false
		}
		j := nth[col]
		nth[col]++
		return pf.i64[col][j], true
	}
	for j, i := range rows {
		e := tr.At(i)
		got := fmt.Sprintln(pf.str["job"][j], pf.i32["pipeline"][j], pf.i32["stage"][j], pf.i32["tp_rank"][j], pf.i32["chunk"][j],
			pf.i32["microbatch"][j], pf.str["kind"][j], pf.i64["seq"][j], pf.i32["peer"][j], pf.i64["bytes"][j], pf.str["shape"][j],
			pf.str["dtype"][j], pf.i64["tokens"][j], pf.f64["flops"][j], pf.i64["mem_bytes"][j])
		// Strings as UTF-8, U+FFFD for bytes that are not.
		u := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
		want := fmt.Sprintln(u(tr.Meta.Job), e.Pipeline, e.Stage, e.TPRank, e.Chunk, e.MicroBatch, e.Kind, e.Seq, e.Peer, e.Bytes, u(e.Shape),
			u(e.Dtype), e.Tokens, e.Flops, e.MemBytes)
		if got != want {
			t.Fatalf("%s row %d: %s, want %s", what, j, got, want)
		}
		if withRank && pf.i32["rank"][j] != int32(e.Rank) {
			t.Fatalf("%s row %d: rank %d, want %d", what, j, pf.i32["rank"][j], e.Rank)
		}
		for _, c := range []struct {
			name string
			v    int64
			ok   bool
		}{{"issue_ns", e.IssueNs, e.IssueNs != trace.NoTime}, {"start_ns", e.StartNs, e.StartNs != trace.NoTime},
			{"end_ns", e.EndNs, e.EndNs != trace.NoTime}, {"duration_ns", e.EndNs - e.StartNs, e.EndNs != trace.NoTime && e.StartNs != trace.NoTime}} {
			if (pf.defs[c.name][j] == 1) != c.ok {
				t.Fatalf("%s row %d: %s defined %v, want %v", what, j, c.name, pf.defs[c.name][j] == 1, c.ok)
			}
			if v, ok := next(c.name, c.ok); ok && v != c.v {
				t.Fatalf("%s row %d: %s %d, want %d", what, j, c.name, v, c.v)
			}
		}
	}
	return len(rows)
}

// TestParquetByStep: the ByStep layout writes a file per step (per step
// and part written), rank a column after job, each file the step's rows
// in (rank, seq) order with every value; a trace in no order gives the
// same files.
func TestParquetByStep(t *testing.T) {
	tr := pqJob(t)
	root := t.TempDir()
	write := func(name string, parts ...*trace.Trace) string {
		t.Helper()
		dir := filepath.Join(root, name)
		w, err := NewParquetWriter(dir, ByStep)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			if err := w.Write(p); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	// The step's rows in (rank, seq) order, of the rows given.
	stepRows := func(rows []int, step int64) []int {
		var out []int
		for _, i := range rows {
			if tr.Step[i] == step {
				out = append(out, i)
			}
		}
		slices.SortFunc(out, func(a, b int) int {
			if tr.Rank[a] != tr.Rank[b] {
				return int(tr.Rank[a] - tr.Rank[b])
			}
			return int(tr.Seq[a] - tr.Seq[b])
		})
		return out
	}
	all := make([]int, tr.Len())
	for i := range all {
		all[i] = i
	}
	whole := write("whole", tr)
	files := pqTree(t, whole)
	if len(files) != 2 {
		t.Fatalf("files %v, want step=0/part-0.parquet and step=1/part-0.parquet", slices.Sorted(maps.Keys(files)))
	}
	checked := 0
	for step := range int64(2) {
		pf := readPQ(t, filepath.Join(whole, fmt.Sprintf("step=%d", step), "part-0.parquet"))
		if pf.names[0] != "job" || pf.names[1] != "rank" {
			t.Errorf("columns %v: want job, rank, ...", pf.names)
		}
		checked += sameRows(t, fmt.Sprintf("step %d", step), pf, tr, stepRows(all, step))
	}
	if checked != tr.Len() {
		t.Errorf("%d rows checked of %d", checked, tr.Len())
	}
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(all), func(a, b int) { all[a], all[b] = all[b], all[a] })
	sameTree(t, "shuffled", pqTree(t, write("shuffled", tr.Permute(all))), files)

	// By replica: part-N for the N-th part that holds the step.
	byPipe := map[int32][]int{}
	for i := range tr.Len() {
		byPipe[tr.Pipeline[i]] = append(byPipe[tr.Pipeline[i]], i)
	}
	parts := write("parts", tr.Permute(byPipe[0]), tr.Permute(byPipe[1]), tr.Permute(byPipe[2]))
	if got := pqTree(t, parts); len(got) != 6 {
		t.Errorf("%d files by replica, want 6 (2 steps x 3 parts)", len(got))
	}
	for p := range int32(3) {
		for step := range int64(2) {
			pf := readPQ(t, filepath.Join(parts, fmt.Sprintf("step=%d", step), fmt.Sprintf("part-%d.parquet", p)))
			sameRows(t, fmt.Sprintf("replica %d step %d", p, step), pf, tr, stepRows(byPipe[p], step))
		}
	}
}
