package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// writeRankFiles writes each rank of tr as its own Arrow stream in dir, as
// the collector does, and returns dir.
func writeRankFiles(t testing.TB, dir string, tr *trace.Trace) string {
	return writeRankFilesBatch(t, dir, tr, 64)
}

// writeRankFilesBatch is writeRankFiles with batch rows per record batch.
func writeRankFilesBatch(t testing.TB, dir string, tr *trace.Trace, batch int) string {
	t.Helper()
	for _, r := range tr.Ranks() {
		var b bytes.Buffer
		if err := arrowv1.WriteStream(&b, rankSlice(tr, r), arrowv1.Options{Compression: arrowv1.LZ4, BatchRows: batch}); err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, fmt.Sprintf("rank-%05d.arrows", r), b.Bytes())
	}
	return dir
}

// TestOpenChunksIsOpen: the chunks of a job's rank files hold, between
// them, exactly the rows Open gives, each chunk whole pipeline replicas
// within its row budget, with the job's metadata.
func TestOpenChunksIsOpen(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "interleaved", Stages: 4, MicroBatches: 8, DP: 4, TP: 2, Steps: 2,
		Jitter: 0.1, Seed: 3, OptMs: 1, P2PLatencyUs: 10, P2PGbps: 100})
	if err != nil {
		t.Fatal(err)
	}
	dir := writeRankFiles(t, t.TempDir(), tr)
	whole, err := Open([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	perPipe := tr.Len() / 4
	for _, maxRows := range []int{0, 1, perPipe, 2 * perPipe, 3 * perPipe} {
		c, err := OpenChunks([]string{dir}, maxRows, Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[int]int{0: 1, 1: 4, perPipe: 4, 2 * perPipe: 2, 3 * perPipe: 2}[maxRows]
		if c.NumChunks() != want {
			t.Errorf("maxRows %d: %d chunks, want %d", maxRows, c.NumChunks(), want)
		}
		if c.Events != whole.Trace.Len() || len(c.Files) != len(whole.Files) {
			t.Errorf("maxRows %d: %d events in %d files, Open: %d in %d", maxRows, c.Events, len(c.Files), whole.Trace.Len(), len(whole.Files))
		}
		seen := map[trace.Rank]bool{}
		rows := 0
		for i := range c.NumChunks() {
			ch, err := c.Chunk(i)
			if err != nil {
				t.Fatal(err)
			}
			if ch.Len() != c.Rows(i) {
				t.Errorf("chunk %d: %d rows, said %d", i, ch.Len(), c.Rows(i))
			}
			if maxRows > 0 && ch.Len() > max(maxRows, perPipe) {
				t.Errorf("maxRows %d: chunk %d has %d rows", maxRows, i, ch.Len())
			}
			if !reflect.DeepEqual(ch.Meta, whole.Trace.Meta) {
				t.Errorf("chunk %d meta %+v, want %+v", i, ch.Meta, whole.Trace.Meta)
			}
			pipes := map[int32]bool{}
			for _, p := range ch.Pipeline {
				pipes[p] = true
			}
			// Its rows are Open's rows of its ranks, in the same order.
			for _, r := range ch.Ranks() {
				if seen[r] {
					t.Fatalf("rank %d in two chunks", r)
				}
				seen[r] = true
				got, exp := rankSlice(ch, r), rankSlice(whole.Trace, r)
				got.Meta = exp.Meta
				if d := trace.Diff(got, exp); d != "" {
					t.Fatalf("maxRows %d chunk %d rank %d: rows differ from Open's: %s", maxRows, i, r, d)
				}
			}
			rows += ch.Len()
			for p := range pipes { // whole pipelines: every rank of p is here
				for j := 0; j < whole.Trace.Len(); j++ {
					if whole.Trace.Pipeline[j] == p && !seen[whole.Trace.Rank[j]] {
						t.Fatalf("chunk %d holds pipeline %d but not its rank %d", i, p, whole.Trace.Rank[j])
					}
				}
			}
		}
		if rows != whole.Trace.Len() {
			t.Errorf("chunks hold %d rows, Open %d", rows, whole.Trace.Len())
		}
	}
}

// TestOpenChunksErrors: what Open refuses OpenChunks refuses with the same
// error; other tools' formats are not chunkable; a file that changes
// between reads is named.
func TestOpenChunksErrors(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 4, DP: 2, Steps: 1})
	if err != nil {
		t.Fatal(err)
	}
	dir := writeRankFiles(t, t.TempDir(), tr)

	// The same rank twice.
	dup := t.TempDir()
	writeRankFiles(t, dup, tr)
	writeFile(t, dup, "again.csv", csvBytes(t, rankSlice(tr, 1)))
	_, errOpen := Open([]string{dup}, Options{})
	_, errChunks := OpenChunks([]string{dup}, 0, Options{})
	var rc *RankConflictError
	if !errors.As(errChunks, &rc) || errOpen == nil || errChunks.Error() != errOpen.Error() {
		t.Errorf("rank twice: OpenChunks %v, Open %v", errChunks, errOpen)
	}

	// A Kineto trace beside them.
	kin := t.TempDir()
	writeRankFiles(t, kin, tr)
	src, err := os.ReadFile("testdata/torchprof/rank0.pt.trace.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, kin, "zz.json.gz", src)
	if _, err := OpenChunks([]string{kin}, 0, Options{}); !errors.Is(err, ErrNotChunkable) || !strings.Contains(err.Error(), "zz.json.gz") {
		t.Errorf("Kineto file: %v", err)
	}

	// Empty directory, missing path: Open's errors.
	for _, p := range []string{t.TempDir(), filepath.Join(dir, "nope")} {
		_, e1 := Open([]string{p}, Options{})
		_, e2 := OpenChunks([]string{p}, 0, Options{})
		if e1 == nil || e2 == nil || e1.Error() != e2.Error() {
			t.Errorf("%s: OpenChunks %v, Open %v", p, e2, e1)
		}
	}

	// A file rewritten with fewer rows after the first read.
	c, err := OpenChunks([]string{dir}, 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r0 := rankSlice(tr, 0)
	var b bytes.Buffer
	if err := arrowv1.WriteStream(&b, r0.Slice(0, r0.Len()-1), arrowv1.Options{}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "rank-00000.arrows", b.Bytes())
	_, err = c.Chunk(0)
	if err == nil || !strings.Contains(err.Error(), "rank-00000.arrows") || !strings.Contains(err.Error(), "changed") {
		t.Errorf("changed file: %v", err)
	}
	if _, err := c.Chunk(c.NumChunks()); err == nil {
		t.Error("chunk out of range: no error")
	}
}

// TestCountRows: Arrow files are counted exactly from their headers;
// other files are guessed from their size.
func TestCountRows(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 4, DP: 2, Steps: 2})
	if err != nil {
		t.Fatal(err)
	}
	dir := writeRankFiles(t, t.TempDir(), tr)
	n, exact, err := CountRows([]string{dir})
	if err != nil || !exact || n != int64(tr.Len()) {
		t.Errorf("rank files: %d rows, exact %v, %v; want %d exact", n, exact, err, tr.Len())
	}
	csv := csvBytes(t, tr)
	p := writeFile(t, t.TempDir(), "all.csv", csv)
	n, exact, err = CountRows([]string{dir, p})
	if want := int64(tr.Len()) + int64(len(csv))/guessBytesPerEvent; err != nil || exact || n != want {
		t.Errorf("with a CSV: %d rows, exact %v, %v; want %d, not exact", n, exact, err, want)
	}
	if _, _, err := CountRows([]string{filepath.Join(dir, "nope")}); err == nil {
		t.Error("missing path: no error")
	}
	// A rank file cut short (a killed job's): counted, on every core as
	// the others, no more than it held.
	files, err := filepath.Glob(filepath.Join(dir, "*.arrows"))
	if err != nil || len(files) < 2 {
		t.Fatalf("rank files: %v, %v", files, err)
	}
	st, err := os.Stat(files[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(files[1], st.Size()/2); err != nil {
		t.Fatal(err)
	}
	n, _, err = CountRows([]string{dir})
	if err != nil || n <= 0 || n >= int64(tr.Len()) {
		t.Errorf("a file cut in half: %d rows, %v; want fewer than %d", n, err, tr.Len())
	}
}

// TestCountRowsOver: counting stops once past the limit, and whether the
// files hold more than the limit is CountRows' answer whatever the limit.
func TestCountRowsOver(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 4, DP: 4, Steps: 2})
	if err != nil {
		t.Fatal(err)
	}
	dir := writeRankFiles(t, t.TempDir(), tr)
	files, err := filepath.Glob(filepath.Join(dir, "*.arrows"))
	if err != nil || len(files) != 8 {
		t.Fatalf("rank files: %v, %v", files, err)
	}
	total := int64(tr.Len())
	for limit := int64(-1); limit <= total+1; limit += max(1, total/17) {
		for _, l := range []int64{limit, total - 1, total} {
			n, exact, err := CountRowsOver([]string{dir}, l)
			if err != nil || !exact || n > total || (n > l) != (total > l) {
				t.Errorf("limit %d: %d rows, exact %v, %v; want over the limit as %d rows are", l, n, exact, err, total)
			}
			if total <= l && n != total {
				t.Errorf("limit %d: %d rows, want all %d", l, n, total)
			}
		}
	}
	// On one core the files are counted in order: past the limit after
	// the first, the others are not read.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	first, _, err := CountRows(files[:1])
	if err != nil || first <= 0 || first >= total {
		t.Fatalf("first file: %d rows, %v", first, err)
	}
	if n, _, err := CountRowsOver([]string{dir}, first-1); err != nil || n != first {
		t.Errorf("limit under the first file's rows: counted %d, %v; want its %d alone", n, err, first)
	}
	if n, _, err := CountRowsOver([]string{dir}, first); err != nil || n <= first || n >= total {
		t.Errorf("limit at the first file's rows: counted %d, %v; want the first two files' (of %d)", n, err, total)
	}
	// A guess counts towards the limit as CountRows adds it.
	csv := csvBytes(t, tr)
	p := writeFile(t, t.TempDir(), "all.csv", csv)
	guess := int64(len(csv)) / guessBytesPerEvent
	if n, exact, err := CountRowsOver([]string{p, dir}, guess-1); err != nil || exact || n != guess {
		t.Errorf("a CSV first: %d rows, exact %v, %v; want its guess %d alone, not exact", n, exact, err, guess)
	}
}

// TestOpenChunksHead: OpenChunks decodes a rank file's first and last
// batches only; a file of several ranks sorted by rank is read whole; a
// file that hides another rank between its first and last batches is
// refused, naming it, when its chunk is read.
func TestOpenChunksHead(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 4, DP: 2, Steps: 3})
	if err != nil {
		t.Fatal(err)
	}
	// All ranks in one file, sorted, small batches (what convert writes).
	dir := t.TempDir()
	var b bytes.Buffer
	if err := arrowv1.WriteStream(&b, tr, arrowv1.Options{BatchRows: 16}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "all.arrows", b.Bytes())
	c, err := OpenChunks([]string{dir}, 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Files[0].Ranks; len(got) != len(tr.Ranks()) {
		t.Errorf("ranks %v, want %v", got, tr.Ranks())
	}
	ch, err := c.Chunk(0)
	if err != nil || ch.Len() != tr.Len() {
		t.Fatalf("chunk: %v, %d rows of %d", err, ch.Len(), tr.Len())
	}

	// Rank 0, then rank 1, then rank 0 again, one batch each.
	r0, r1 := rankSlice(tr, 0), rankSlice(tr, 1)
	odd := &trace.Trace{Meta: tr.Meta}
	odd.AppendRows(r0, 0, 16)
	odd.AppendRows(r1, 0, 16)
	odd.AppendRows(r0, 16, 32)
	b.Reset()
	if err := arrowv1.WriteStream(&b, odd, arrowv1.Options{BatchRows: 16}); err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	writeFile(t, dir, "odd.arrows", b.Bytes())
	if c, err = OpenChunks([]string{dir}, 0, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Chunk(0); err == nil || !strings.Contains(err.Error(), "odd.arrows") || !strings.Contains(err.Error(), "--stream never") {
		t.Errorf("a rank hidden between batches: %v", err)
	}
}

// TestChunksMapFiles: with MapFiles (hang's reads), every chunk holds the
// rows it holds read through a buffer, and a rank file cut short since
// OpenChunks is an error naming it, not a crash.
func TestChunksMapFiles(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, DP: 3, TP: 2, Steps: 2,
		Jitter: 0.1, Seed: 5, P2PLatencyUs: 10, P2PGbps: 100})
	if err != nil {
		t.Fatal(err)
	}
	dir := writeRankFiles(t, t.TempDir(), tr)
	perPipe := tr.Len() / 3
	read, err := OpenChunks([]string{dir}, perPipe, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mapped, err := OpenChunks([]string{dir}, perPipe, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mapped.MapFiles()
	if read.NumChunks() != 3 || mapped.NumChunks() != 3 {
		t.Fatalf("%d and %d chunks, want 3", read.NumChunks(), mapped.NumChunks())
	}
	for i := range read.NumChunks() {
		a, err := read.Chunk(i)
		if err != nil {
			t.Fatal(err)
		}
		b, err := mapped.Chunk(i)
		if err != nil {
			t.Fatal(err)
		}
		if d := trace.Diff(a, b); d != "" {
			t.Fatalf("chunk %d mapped differs from chunk %d read: %s", i, i, d)
		}
	}
	victim := filepath.Join(dir, fmt.Sprintf("rank-%05d.arrows", tr.Rank[0]))
	st, err := os.Stat(victim)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(victim, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	for i := range mapped.NumChunks() {
		if _, err := mapped.Chunk(i); err != nil {
			if !strings.Contains(err.Error(), victim) {
				t.Errorf("chunk %d: %v: does not name %s", i, err, victim)
			}
			return
		}
	}
	t.Errorf("no chunk failed with %s cut in half", victim)
}
