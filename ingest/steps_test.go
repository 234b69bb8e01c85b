package ingest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// stepWindows returns the (step, pipeline) windows of t's rows.
func stepWindows(t *trace.Trace) map[[2]int64]int {
	out := map[[2]int64]int{}
	for i := range t.Len() {
		out[[2]int64{t.Step[i], int64(t.Pipeline[i])}]++
	}
	return out
}

// TestCutSteps: replicas larger than the limit are cut between steps into
// chunks of at most maxRows rows, or four record batches of each file if
// that is more (or one step), which between them hold exactly Open's rows,
// each (step, replica) window whole in one chunk, in (rank, seq) order;
// replicas within the limit stay whole.
func TestCutSteps(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "interleaved", Stages: 4, MicroBatches: 8, DP: 2, TP: 2, Steps: 7,
		Jitter: 0.1, Seed: 5, OptMs: 1, P2PLatencyUs: 10, P2PGbps: 100})
	if err != nil {
		t.Fatal(err)
	}
	perPipe := tr.Len() / 2
	perStep := perPipe / 7 // every step of a replica has as many rows
	for _, cfg := range []struct{ batch, limit, maxRows, wantCut, batches int }{
		{8, 0, 1, 0, 0},                     // never
		{8, perPipe, 1, 0, 0},               // replicas within the limit
		{8, perPipe - 1, 1, 2, 0},           // one step a chunk
		{8, perPipe - 1, 3 * perStep, 2, 0}, // three steps a chunk
		{8, perPipe - 1, perPipe, 0, 0},     // cut to one chunk: left whole
		{64, perPipe - 1, 1, 2, 0},          // four batches of each file: several steps a chunk
		{64, perPipe - 1, 1, 2, 1},          // one batch of each file (CutStepsBatches): fewer steps a chunk
	} {
		nb := cfg.batches
		if nb == 0 {
			nb = 4 // CutSteps
		}
		// cfg.batch rows per record batch; four batches of each file of
		// a replica (4 stages x TP 2: 8 files), each file's batches as
		// long on average as its rows over their count.
		dir := writeRankFilesBatch(t, t.TempDir(), tr, cfg.batch)
		least := 0
		for _, r := range tr.Ranks() {
			if n := rankSlice(tr, r).Len(); tr.Pipeline[slices.Index(tr.Rank, r)] == 0 {
				least += nb * (n / ((n + cfg.batch - 1) / cfg.batch))
			}
		}
		whole, err := Open([]string{dir}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := OpenChunks([]string{dir}, 1, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if c.NumChunks() != 2 {
			t.Fatalf("%d chunks before cutting, want the 2 replicas", c.NumChunks())
		}
		cut := c.CutSteps
		if cfg.batches != 0 {
			cut = func(limit, maxRows int, progress func(done, total int)) int {
				return c.CutStepsBatches(limit, maxRows, cfg.batches, progress)
			}
		}
		if got := cut(cfg.limit, cfg.maxRows, nil); got != cfg.wantCut {
			t.Errorf("%+v: %d chunks cut, want %d", cfg, got, cfg.wantCut)
		}
		var all []*trace.Trace
		inChunk := map[[2]int64]int{}
		for i := range c.NumChunks() {
			ch, err := c.Chunk(i)
			if err != nil {
				t.Fatalf("%+v: chunk %d: %v", cfg, i, err)
			}
			if ch.Len() != c.Rows(i) {
				t.Errorf("%+v: chunk %d: %d rows, said %d", cfg, i, ch.Len(), c.Rows(i))
			}
			ws := stepWindows(ch)
			steps := map[int64]bool{}
			for w := range ws {
				steps[w[0]] = true
			}
			if limit := max(cfg.maxRows, least); cfg.wantCut > 0 && ch.Len() > limit && len(steps) > 1 {
				t.Errorf("%+v: chunk %d: %d rows of %d steps, over %d", cfg, i, ch.Len(), len(steps), limit)
			}
			if cfg.wantCut > 0 && !steps[6] && ch.Len() <= max(cfg.maxRows, least)-perStep {
				// Another step would have fitted (the replica's last
				// chunk may be short).
				t.Errorf("%+v: chunk %d: %d rows of %d steps: cut finer than max(%d, %d batches of each file: %d rows)", cfg, i, ch.Len(), len(steps), cfg.maxRows, nb, least)
			}
			for w := range ws {
				if prev, ok := inChunk[w]; ok {
					t.Fatalf("%+v: window %v in chunks %d and %d", cfg, w, prev, i)
				}
				inChunk[w] = i
			}
			if !slices.IsSortedFunc(rowKeys(ch), func(a, b [2]int64) int {
				if a[0] != b[0] {
					return int(a[0] - b[0])
				}
				return int(a[1] - b[1])
			}) {
				t.Errorf("%+v: chunk %d not in (rank, seq) order", cfg, i)
			}
			all = append(all, ch)
		}
		merged, err := mergePartsReturning(all, false)
		if err != nil {
			t.Fatal(err)
		}
		merged.Meta = whole.Trace.Meta
		if d := trace.Diff(merged, whole.Trace); d != "" {
			t.Fatalf("%+v: the chunks' rows are not Open's: %s", cfg, d)
		}
	}
}

// rowKeys is each row's (rank, seq).
func rowKeys(t *trace.Trace) [][2]int64 {
	out := make([][2]int64, t.Len())
	for i := range out {
		out[i] = [2]int64{int64(t.Rank[i]), t.Seq[i]}
	}
	return out
}

// TestCutStepsLeavesWhole: a replica with a file that cannot be cut
// between steps (a CSV file; an Arrow file whose steps go back) is left
// whole; and a file changed after the cut is named when its chunk is read.
func TestCutStepsLeavesWhole(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 4, DP: 1, Steps: 4, OptMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	dir := writeRankFilesBatch(t, t.TempDir(), tr, 2)
	r0 := rankSlice(tr, 0)
	// Rank 1's steps go back: its rows in file order run 2, 3, 0, 1
	// (seq renumbered to stay increasing, as a file must).
	r1 := rankSlice(tr, 1)
	var idx []int
	for _, from := range []int64{2, 3, 0, 1} {
		for i := range r1.Len() {
			if r1.Step[i] == from {
				idx = append(idx, i)
			}
		}
	}
	back := r1.Permute(idx)
	for i := range back.Seq {
		back.Seq[i] = int64(i)
	}
	writeArrowStream(t, filepath.Join(dir, "rank-00001.arrows"), back)
	c, err := OpenChunks([]string{dir}, 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.CutSteps(1, 1, nil); got != 0 {
		t.Errorf("steps going back in rank 1's file: %d chunks cut, want 0", got)
	}
	// Put rank 1 right: cut; then rank 0's file loses its last step.
	writeArrowStream(t, filepath.Join(dir, "rank-00001.arrows"), r1)
	c, err = OpenChunks([]string{dir}, 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var last [2]int
	if got := c.CutSteps(1, 1, func(done, total int) { last = [2]int{done, total} }); got != 1 || c.NumChunks() != 4 {
		t.Fatalf("%d cut into %d chunks, want 1 into 4 (one a step)", got, c.NumChunks())
	}
	if last != [2]int{2, 2} {
		t.Errorf("progress ended at %d of %d files, want 2 of 2", last[0], last[1])
	}
	var keep []int
	for i := range r0.Len() {
		if r0.Step[i] != 3 {
			keep = append(keep, i)
		}
	}
	writeArrowStream(t, filepath.Join(dir, "rank-00000.arrows"), r0.Permute(keep))
	if _, err := c.Chunk(3); err == nil {
		t.Error("rank 0's file lost step 3 after the cut: no error reading its chunk")
	}
}

// writeArrowStream writes tr to path as writeRankFilesBatch(..., 2) writes
// a rank.
func writeArrowStream(t *testing.T, path string, tr *trace.Trace) {
	t.Helper()
	var b bytes.Buffer
	if err := arrowv1.WriteStream(&b, tr, arrowv1.Options{Compression: arrowv1.LZ4, BatchRows: 2}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rankFilesJob simulates c into one Arrow stream per rank (batches of
// batch rows) and returns the job read whole and in chunks of one replica.
func rankFilesJob(t *testing.T, c sim.Config, batch int) (*Result, *Chunks) {
	t.Helper()
	tr, err := sim.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	dir := writeRankFilesBatch(t, t.TempDir(), tr, batch)
	whole, err := Open([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := OpenChunks([]string{dir}, 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return whole, ch
}

// TestChunkStep: a chunk read for one step holds Open's rows of that step
// for the chunk's ranks (and no rows of other steps, rank files being
// one run of each step), and the shape of all its rows: Chunk's columns.
// A chunk cut between steps is read whole.
func TestChunkStep(t *testing.T) {
	whole, c := rankFilesJob(t, sim.Config{Schedule: "interleaved", Stages: 4, MicroBatches: 8, DP: 2, TP: 2, Steps: 4,
		Jitter: 0.1, Seed: 9, OptMs: 1, P2PLatencyUs: 10, P2PGbps: 100}, 16)
	check := func(c *Chunks) {
		for i := range c.NumChunks() {
			all, err := c.Chunk(i)
			if err != nil {
				t.Fatal(err)
			}
			for step := int64(0); step <= 4; step++ {
				rows, parts, err := c.ChunkStep(i, step)
				if err != nil {
					t.Fatalf("chunk %d step %d: %v", i, step, err)
				}
				shape := &trace.Trace{}
				for _, p := range parts {
					shape.Rank, shape.Pipeline, shape.Stage = append(shape.Rank, p.Rank...), append(shape.Pipeline, p.Pipeline...), append(shape.Stage, p.Stage...)
					shape.Step, shape.Kind = append(shape.Step, p.Step...), append(shape.Kind, p.Kind...)
					shape.MicroBatch, shape.Chunk = append(shape.MicroBatch, p.MicroBatch...), append(shape.Chunk, p.Chunk...)
				}
				want := &trace.Trace{Meta: whole.Trace.Meta}
				for j := range all.Len() {
					if all.Step[j] == step {
						want.AppendRows(all, j, j+1)
					}
				}
				rows.Meta = want.Meta
				if d := trace.Diff(rows, want); d != "" {
					t.Fatalf("chunk %d step %d: rows differ from Open's: %s", i, step, d)
				}
				if !slices.Equal(shape.Rank, all.Rank) || !slices.Equal(shape.Pipeline, all.Pipeline) || !slices.Equal(shape.Stage, all.Stage) ||
					!slices.Equal(shape.Step, all.Step) || !slices.Equal(shape.Kind, all.Kind) || !slices.Equal(shape.MicroBatch, all.MicroBatch) ||
					!slices.Equal(shape.Chunk, all.Chunk) {
					t.Fatalf("chunk %d step %d: shape differs from the chunk's columns", i, step)
				}
			}
		}
	}
	check(c)
	// Chunk's rows are Open's: for each replica, its rows of every step.
	n := 0
	for i := range c.NumChunks() {
		ch, _ := c.Chunk(i)
		n += ch.Len()
	}
	if n != whole.Trace.Len() {
		t.Fatalf("chunks hold %d rows, Open %d", n, whole.Trace.Len())
	}
	// Cut between steps: the same, each file's rows of the chunk's steps
	// read through its index.
	if c.CutSteps(1, 1, nil) != 2 || c.NumChunks() <= 2 {
		t.Fatal("not cut")
	}
	check(c)
}

// TestChunkStepApart: a chunk with a file of two ranks (sorted by rank,
// so a step's rows are two runs) is read whole, and still gives Open's
// rows of the step and the chunk's shape; the other files' shapes, read
// before the fallback, are not lost or reused under it.
func TestChunkStepApart(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 4, TP: 2, Steps: 3, Seed: 2, OptMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr.SortByRankSeq()
	dir := t.TempDir()
	both := &trace.Trace{Meta: tr.Meta}
	for _, r := range tr.Ranks() {
		part := rankSlice(tr, r)
		if r <= 1 {
			both.AppendRows(part, 0, part.Len())
			continue
		}
		var b bytes.Buffer
		if err := arrowv1.WriteStream(&b, part, arrowv1.Options{Compression: arrowv1.LZ4, BatchRows: 8}); err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, fmt.Sprintf("rank-%05d.arrows", r), b.Bytes())
	}
	var b bytes.Buffer
	if err := arrowv1.WriteStream(&b, both, arrowv1.Options{Compression: arrowv1.LZ4, BatchRows: 8}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "ranks-0-1.arrows", b.Bytes())
	c, err := OpenChunks([]string{dir}, 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.NumChunks() != 1 {
		t.Fatalf("%d chunks, want 1 (one replica)", c.NumChunks())
	}
	all, err := c.Chunk(0)
	if err != nil {
		t.Fatal(err)
	}
	for step := int64(0); step < 3; step++ {
		rows, parts, err := c.ChunkStep(0, step)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		want := &trace.Trace{Meta: all.Meta}
		n := 0
		for j := range all.Len() {
			if all.Step[j] == step {
				want.AppendRows(all, j, j+1)
			}
		}
		got := rows.StepRows(step)
		got.Meta = want.Meta
		if d := trace.Diff(got, want); d != "" {
			t.Fatalf("step %d: rows differ from Chunk's: %s", step, d)
		}
		var steps []int64
		for _, p := range parts {
			n += p.Len()
			steps = append(steps, p.Step...)
		}
		if n != all.Len() || !slices.Equal(steps, all.Step) {
			t.Fatalf("step %d: shape of %d rows, want the chunk's %d", step, n, all.Len())
		}
	}
}

// TestReadStep: the rows ReadStep gathers of a step, from every chunk, are
// Open's rows of that step, in (rank, seq) order with the job's metadata;
// a step without rows gives an empty trace.
func TestReadStep(t *testing.T) {
	whole, c := rankFilesJob(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 4, DP: 3, TP: 2, Steps: 3,
		Jitter: 0.1, Seed: 4, OptMs: 1, P2PLatencyUs: 10, P2PGbps: 100}, 8)
	if c.NumChunks() < 3 {
		t.Fatalf("%d chunks: want one per replica", c.NumChunks())
	}
	for step := int64(0); step <= 3; step++ {
		var calls []int
		got, err := c.ReadStep(step, func(done, total int) {
			if total != c.NumChunks() {
				t.Errorf("progress total %d, want %d", total, c.NumChunks())
			}
			calls = append(calls, done)
		})
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		want := &trace.Trace{Meta: whole.Trace.Meta}
		for j := range whole.Trace.Len() {
			if whole.Trace.Step[j] == step {
				want.AppendRows(whole.Trace, j, j+1)
			}
		}
		if d := trace.Diff(got, want); d != "" {
			t.Fatalf("step %d: ReadStep differs from Open's rows of the step: %s", step, d)
		}
		if step == 3 && got.Len() != 0 {
			t.Errorf("step 3 (none): %d rows", got.Len())
		}
		if len(calls) != c.NumChunks() || calls[len(calls)-1] != c.NumChunks() {
			t.Errorf("step %d: progress %v", step, calls)
		}
	}
}

// TestCutChunksRecycled: chunks cut between steps, each handed back
// (Recycle) with junk in every row before the next is read, are merged
// into the handed-back columns and hold what they hold read into fresh
// memory.
func TestCutChunksRecycled(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "interleaved", Stages: 4, MicroBatches: 8, DP: 2, TP: 2, Steps: 6,
		Jitter: 0.1, Seed: 5, OptMs: 1, P2PLatencyUs: 10, P2PGbps: 100})
	if err != nil {
		t.Fatal(err)
	}
	dir := writeRankFilesBatch(t, t.TempDir(), tr, 8)
	open := func() *Chunks {
		c, err := OpenChunks([]string{dir}, 0, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if cut := c.CutStepsBatches(1, 1, 1, nil); cut != 1 || c.NumChunks() < 3 {
			t.Fatalf("cut %d groups into %d chunks", cut, c.NumChunks())
		}
		return c
	}
	// The chunks as read with each file's rows in columns of their own,
	// merged (noPlace), against those read into their rows of the chunk
	// (Chunks.placeSpans, arrowv1.ReadRowsAtInto).
	noPlace.Store(true)
	t.Cleanup(func() { noPlace.Store(false) })
	c := open()
	var want []*trace.Trace
	for i := range c.NumChunks() {
		ch, err := c.Chunk(i)
		if err != nil {
			t.Fatal(err)
		}
		cp := &trace.Trace{Meta: ch.Meta}
		cp.AppendRows(ch, 0, ch.Len())
		want = append(want, cp)
	}
	noPlace.Store(false)
	c = open()
	reused := 0
	before, placedBefore := rowsReadAt.Load(), placedMerges.Load()
	var prev *trace.Trace
	for i := range c.NumChunks() {
		a, err := c.Chunk(i)
		if err != nil {
			t.Fatal(err)
		}
		if prev != nil && &a.Rank[:1][0] == &prev.Rank[:1][0] {
			reused++
		}
		if d := trace.Diff(want[i], a); d != "" || !reflect.DeepEqual(want[i].Meta, a.Meta) {
			t.Fatalf("chunk %d: %s", i, d)
		}
		scribble(a)
		c.Recycle(a)
		prev = a
	}
	if reused == 0 {
		t.Errorf("no chunk of %d merged into a recycled chunk's columns", c.NumChunks())
	}
	// Each file's rows of a chunk read with pread (arrowv1.ReadRowsAt).
	if n := rowsReadAt.Load() - before; n < int64(c.NumChunks()) {
		t.Errorf("%d reads of a file's rows answered by ReadRowsAt for %d chunks", n, c.NumChunks())
	}
	// Into their rows of the chunk, every chunk.
	if n := placedMerges.Load() - placedBefore; n != int64(c.NumChunks()) {
		t.Errorf("%d of %d chunks read into their own rows", n, c.NumChunks())
	}
	// The files mapped (Chunks.MapFiles; what a file over sparseMax
	// gets): the same rows, into their rows of the chunk too
	// (arrowv1.ReadRowsInto).
	c = open()
	c.MapFiles()
	before, placedBefore = rowsReadAt.Load(), placedMerges.Load()
	for i := range c.NumChunks() {
		a, err := c.Chunk(i)
		if err != nil {
			t.Fatal(err)
		}
		if d := trace.Diff(want[i], a); d != "" || !reflect.DeepEqual(want[i].Meta, a.Meta) {
			t.Fatalf("mapped, chunk %d: %s", i, d)
		}
		scribble(a)
		c.Recycle(a)
	}
	if n := rowsReadAt.Load() - before; n != 0 {
		t.Errorf("mapped: %d reads answered with pread", n)
	}
	if n := placedMerges.Load() - placedBefore; n != int64(c.NumChunks()) {
		t.Errorf("mapped: %d of %d chunks read into their own rows", n, c.NumChunks())
	}
}
