//go:build cgo

package collector

import (
	"fmt"
	"testing"

	"github.com/ppprof/ppprof/collector/internal/ringapi"
	"github.com/ppprof/ppprof/trace"
)

// TestRingLayout: the Go ring types have the layout of ring.h's, which the
// C ABI's hot path writes.
func TestRingLayout(t *testing.T) {
	c, g := cLayout(), goLayout()
	if len(c) != len(g) {
		t.Fatalf("%d C values, %d Go values", len(c), len(g))
	}
	if fmt.Sprint(c) != fmt.Sprint(g) {
		t.Errorf("layouts differ:\n   C %v\n  Go %v", c, g)
	}
	if c[0] != 128 {
		t.Errorf("slot is %d bytes, want 128", c[0])
	}
}

// TestCMemoryRing records with the ring and the virtual clock in C memory,
// as the C ABI has them.
func TestCMemoryRing(t *testing.T) {
	if raceEnabled {
		// Atomics on C memory order nothing for the race detector, so
		// every slot read looks like a race.
		t.Skip("the race detector cannot see happens-before through C memory")
	}
	ringapi.CMemory.Store(true)
	defer ringapi.CMemory.Store(false)
	clk := NewVirtualClock(10)
	r := newTestRecorder(t, Config{Rank: 1, Clock: clk, BufferEvents: 64})
	if !r.cmem || r.ctl.virtualPtr == 0 {
		t.Fatalf("ring in C memory %v, virtual clock cell %#x", r.cmem, r.ctl.virtualPtr)
	}
	for i := 0; i < 200; i++ {
		s := r.Issue(Op{Kind: trace.SendF, Peer: 2, MicroBatch: trace.MicroBatch(i), Shape: "2x2", Dtype: "bf16"})
		clk.Advance(5)
		r.Complete(s)
		if i%16 == 15 {
			if err := r.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r.End(1) // after Close: the ring is freed; this must not touch it
	tr, _, _ := readRank(t, r.Path())
	if tr.Len() != 200 || tr.Shape[199].String() != "2x2" || tr.EndNs[199]-tr.StartNs[199] != 5 {
		t.Errorf("%d rows, last %+v", tr.Len(), tr.At(tr.Len()-1))
	}
}
