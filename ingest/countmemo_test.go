package ingest

import (
	"os"
	"testing"
	"time"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// TestCountMemo: CountRows remembers each Arrow file's rows for
// placeRows, as long as the file keeps its size and modification time; a
// file changed since is counted again, and a count that is stale all the
// same (the file rewritten to the same size and given back its time)
// still reads as a read without placement does.
func TestCountMemo(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 6, DP: 2, Steps: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	lz4 := func(r *trace.Trace) []byte {
		return arrowStream(t, r, arrowv1.Options{Compression: arrowv1.LZ4, BatchRows: 16})
	}
	dir := t.TempDir()
	paths := writeRanks(t, dir, tr, rankName, lz4)
	rows, exact, err := CountRows([]string{dir})
	if err != nil || !exact || rows != int64(tr.Len()) {
		t.Fatalf("CountRows: %d rows, exact %v, %v; want %d", rows, exact, err, tr.Len())
	}
	ranks := tr.Ranks()
	for i, p := range paths {
		n, size, ok := rememberedRows(p)
		st, _ := os.Stat(p)
		if want := rankSlice(tr, ranks[i]).Len(); !ok || n != int64(want) || size != st.Size() {
			t.Fatalf("%s: remembered %d rows of %d bytes (%v), want %d of %d", p, n, size, ok, want, st.Size())
		}
	}
	// Another modification time, or another size: counted again.
	victim := paths[1]
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(victim, later, later); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := rememberedRows(victim); ok {
		t.Fatal("a file touched since it was counted: its count taken from the memo")
	}
	if _, _, ok := rememberedRows(paths[2]); !ok {
		t.Fatal("an unchanged file's count forgotten")
	}
	// A stale count that looks current (a file rewritten to the same size
	// within the file system's time resolution), more rows or fewer than
	// the file has: the read is the read without placement.
	for _, delta := range []int64{5, -3} {
		dir2 := t.TempDir()
		paths2 := writeRanks(t, dir2, tr, rankName, lz4)
		if _, _, err := CountRows([]string{dir2}); err != nil {
			t.Fatal(err)
		}
		countMemo.Lock()
		c := countMemo.files[paths2[2]]
		c.rows += delta
		countMemo.files[paths2[2]] = c
		countMemo.Unlock()
		if n, _, ok := rememberedRows(paths2[2]); !ok || n != c.rows {
			t.Fatal("the stale count not taken: the test does not test what it says")
		}
		sameResult(t, "stale count", relative(openWith([]string{dir2}, true)), relative(openWith([]string{dir2}, false)))
	}
}
