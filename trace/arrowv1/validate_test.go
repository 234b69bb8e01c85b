package arrowv1

import (
	"fmt"
	"math"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// TestQuickValid: validate gives t.Validate's answer on traces of one
// rank broken in every way Validate checks, and takes the quick path
// (quickValid) for the unbroken ones.
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
	}
	quick := 0
	for trial := range 200 {
		rows := 1 + rng.Intn(40)
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
		if quickValid(tr) {
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

// clone copies every column of t.
func clone(t *trace.Trace) *trace.Trace {
	u := &trace.Trace{Meta: t.Meta}
	u.AppendRows(t, 0, t.Len())
	return u
}
