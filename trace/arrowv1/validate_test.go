package arrowv1

import (
	"fmt"
	"math"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// TestQuickValid: validate gives t.Validate's answer on traces of one
// rank broken in every way Validate checks, and takes the quick path
// (trace.OneRankValid) for the unbroken ones. Traces of up to 300 rows:
// from 64 rows on, the AVX2 kernels check most of the columns, the Go
// loops the rows after a multiple of their width.
func TestQuickValid(t *testing.T) {
	rng := newRand(3)
	breaks := []func(tr *trace.Trace, i int){
		func(tr *trace.Trace, i int) { tr.Rank[i] = -1 },
		func(tr *trace.Trace, i int) { tr.Rank[i]++ },
		func(tr *trace.Trace, i int) { tr.Pipeline[i]++ },
		func(tr *trace.Trace, i int) { tr.Pipeline[i] = -1 },
		func(tr *trace.Trace, i int) { tr.Stage[i]++ },
		func(tr *trace.Trace, i int) { tr.Stage[i] = -3 },
		func(tr *trace.Trace, i int) { tr.TPRank[i]++ },
		func(tr *trace.Trace, i int) { tr.TPRank[i] = -1 },
		func(tr *trace.Trace, i int) { tr.Chunk[i] = -1 },
		func(tr *trace.Trace, i int) { tr.Step[i] = -1 },
		func(tr *trace.Trace, i int) { tr.MicroBatch[i] = -2 },
		func(tr *trace.Trace, i int) { tr.Kind[i] = trace.KindInvalid },
		func(tr *trace.Trace, i int) { tr.Kind[i] = 999 },
		func(tr *trace.Trace, i int) { tr.Kind[i], tr.Peer[i] = trace.SendF, trace.NoRank },
		func(tr *trace.Trace, i int) { tr.Kind[i], tr.Peer[i] = trace.RecvB, tr.Rank[i] },
		func(tr *trace.Trace, i int) { tr.Kind[i], tr.Peer[i] = trace.F, -2 },
		func(tr *trace.Trace, i int) { tr.Seq[i] = tr.Seq[max(0, i-1)] },
		func(tr *trace.Trace, i int) { tr.Seq[i] = math.MinInt64 },
		func(tr *trace.Trace, i int) { tr.IssueNs[i] = trace.NoTime },
		func(tr *trace.Trace, i int) { tr.StartNs[i], tr.EndNs[i] = trace.NoTime, 5 },
		func(tr *trace.Trace, i int) { tr.StartNs[i], tr.EndNs[i] = 10, 5 },
		func(tr *trace.Trace, i int) { tr.Bytes[i] = -1 },
		func(tr *trace.Trace, i int) { tr.Tokens[i] = -1 },
		func(tr *trace.Trace, i int) { tr.MemBytes[i] = math.MinInt64 },
		func(tr *trace.Trace, i int) { tr.Flops[i] = -1 },
		func(tr *trace.Trace, i int) { tr.Flops[i] = math.NaN() },
		func(tr *trace.Trace, i int) { tr.Flops[i] = math.Inf(1) },
		func(tr *trace.Trace, i int) { tr.GroupSeq[i] = -2 },
		func(tr *trace.Trace, i int) { tr.GroupSeq[i] = math.MaxInt64 }, // valid, but not quick
		func(tr *trace.Trace, i int) { tr.Shape = tr.Shape[:i] },
		// A column negative on every row: one value throughout, but not
		// a valid one.
		func(tr *trace.Trace, _ int) { fillCol(tr.Rank, -1) },
		func(tr *trace.Trace, _ int) { fillCol(tr.Pipeline, -2) },
		func(tr *trace.Trace, _ int) { fillCol(tr.Stage, -1) },
		func(tr *trace.Trace, _ int) { fillCol(tr.TPRank, -7) },
		// Values whose differences wrap in 64 bits.
		func(tr *trace.Trace, i int) { tr.Seq[i] = math.MaxInt64 },
		func(tr *trace.Trace, i int) {
			tr.Seq[i] = math.MinInt64
			if i > 0 {
				tr.Seq[i-1] = math.MaxInt64
			}
		},
		func(tr *trace.Trace, i int) { tr.StartNs[i], tr.EndNs[i] = trace.NoTime, -5 },
		func(tr *trace.Trace, i int) { tr.StartNs[i], tr.EndNs[i] = 2, math.MinInt64+1 },
		func(tr *trace.Trace, i int) { tr.Flops[i] = math.Copysign(0, -1) }, // valid, but not quick
		func(tr *trace.Trace, i int) { tr.Flops[i] = math.MaxFloat64 },
		func(tr *trace.Trace, i int) { tr.Flops[i] = math.Inf(-1) },
	}
	quick := 0
	for trial := range 200 {
		rows := 1 + rng.Intn(300)
		tr := randomTrace(rng, rows, testKinds)
		// One rank: the first row's, on every row.
		for i := range tr.Rank {
			tr.Rank[i], tr.Pipeline[i], tr.Stage[i], tr.TPRank[i] = tr.Rank[0], tr.Pipeline[0], tr.Stage[0], tr.TPRank[0]
			if tr.Peer[i] == tr.Rank[i] {
				tr.Peer[i]++
			}
			tr.Seq[i] = int64(10 * i)
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("trial %d: the unbroken trace: %v", trial, err)
		}
		if tr.OneRankValid() {
			quick++
		}
		for b, brk := range breaks {
			u := tr.Slice(0, tr.Len())
			u = clone(u)
			brk(u, rng.Intn(rows))
			want, got := fmt.Sprint(u.Validate()), fmt.Sprint(validate(u))
			if got != want {
				t.Fatalf("trial %d, break %d: validate says %s, Validate %s", trial, b, got, want)
			}
		}
	}
	if quick < 150 {
		t.Errorf("only %d of 200 valid one-rank traces took the quick path", quick)
	}
}

// fillCol sets every row of c to v.
func fillCol[T any](c []T, v T) {
	for i := range c {
		c[i] = v
	}
}

// clone copies every column of t.
func clone(t *trace.Trace) *trace.Trace {
	u := &trace.Trace{Meta: t.Meta}
	u.AppendRows(t, 0, t.Len())
	return u
}
