package trace

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"
)

// TestColumnArena builds traces row by row in an arena from several
// goroutines and checks each holds its own rows (columns cut from a slab
// never overlap), that consecutive small traces share a slab (the arena
// is used, not the heap), that appending past a trace's room leaves its
// neighbour alone, and that a column too large for a slab gets memory
// of its own.
func TestColumnArena(t *testing.T) {
	a := NewColumnArena(1 << 20)
	row := func(tr, i int) Event {
		return Event{Rank: Rank(tr), Pipeline: int32(i), Stage: Stage(tr % 7), Step: int64(tr*1000 + i), Kind: Kind(i % 5),
			Seq: int64(i), StartNs: int64(i) * 10, EndNs: int64(i)*10 + 5, IssueNs: int64(i) * 9, Peer: NoRank,
			Shape: fmt.Sprint(i % 3), Dtype: "bf16", Tokens: int64(tr), Flops: float64(i), MemBytes: int64(tr + i), GroupSeq: NoGroupSeq}
	}
	const traces, rows = 64, 300
	ts := make([]*Trace, traces)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for k := g; k < traces; k += 4 {
				tr := &Trace{}
				tr.GrowIn(rows, a)
				for i := range rows {
					tr.Append(row(k, i))
				}
				ts[k] = tr
			}
		})
	}
	wg.Wait()
	check := func(k int) {
		t.Helper()
		want := &Trace{}
		for i := range rows {
			want.Append(row(k, i))
		}
		if d := Diff(want, ts[k]); d != "" {
			t.Fatalf("trace %d: %s", k, d)
		}
	}
	for k := range ts {
		check(k)
	}

	// Two traces grown one after the other on one goroutine: the second's
	// columns start where the first's room ends.
	x, y := &Trace{}, &Trace{}
	x.GrowIn(10, a)
	y.GrowIn(10, a)
	end := unsafe.Add(unsafe.Pointer(unsafe.SliceData(x.StartNs)), cap(x.StartNs)*8)
	if end != unsafe.Pointer(unsafe.SliceData(y.StartNs)) {
		t.Fatal("two small traces' columns are not cut from one slab")
	}
	for i := range 10 {
		x.Append(row(1, i))
		y.Append(row(2, i))
	}
	x.Append(row(1, 10)) // past x's room: reallocated, not over y's rows
	for i := range 10 {
		if y.StartNs[i] != int64(i)*10 || y.Rank[i] != 2 {
			t.Fatalf("y's row %d overwritten: %+v", i, y.At(i))
		}
	}
	if x.Len() != 11 || x.StartNs[10] != 100 {
		t.Fatalf("x has %d rows, last start %d", x.Len(), x.StartNs[x.Len()-1])
	}

	// Rows kept when a trace grows in the arena again.
	y.GrowIn(50, a)
	for i := range 10 {
		if y.Seq[i] != int64(i) || y.Rank[i] != 2 {
			t.Fatalf("row %d lost when growing: %+v", i, y.At(i))
		}
	}

	// A column over an eighth of a slab: its own memory, exactly sized.
	big := &Trace{}
	big.GrowIn(1<<20, a)
	if cap(big.StartNs) != 1<<20 {
		t.Fatalf("big column: capacity %d, want %d", cap(big.StartNs), 1<<20)
	}
	var nilArena *ColumnArena
	z := &Trace{}
	z.GrowIn(5, nilArena) // Grow
	if cap(z.Rank) != 5 {
		t.Fatalf("nil arena: capacity %d", cap(z.Rank))
	}
}
