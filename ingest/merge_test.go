package ingest

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// splitByRank cuts t into one part per rank, each with t's metadata.
func splitByRank(t *trace.Trace) []*trace.Trace {
	var parts []*trace.Trace
	for lo := 0; lo < t.Len(); {
		hi := lo
		for hi < t.Len() && t.Rank[hi] == t.Rank[lo] {
			hi++
		}
		p := &trace.Trace{Meta: t.Meta}
		p.AppendRows(t, lo, hi)
		parts = append(parts, p)
		lo = hi
	}
	return parts
}

// mergeDiff merges parts with mergeParts and ref (the same rows) with
// trace.Merge, and returns how the two differ ("" when they do not).
func mergeDiff(t *testing.T, ref, parts []*trace.Trace) string {
	t.Helper()
	want, err := trace.Merge(ref...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := mergeParts(parts)
	if err != nil {
		t.Fatal(err)
	}
	return trace.Diff(want, got)
}

// TestMergeParts checks that mergeParts gives trace.Merge's trace, in
// either order of the parts, and its metadata conflicts, and that it
// empties the parts.
func TestMergeParts(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 0))
	whole := randomTrace(rng, 6, 50)
	whole.SortByRankSeq()
	for _, reverse := range []bool{false, true} {
		parts := splitByRank(whole)
		if reverse {
			for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
				parts[i], parts[j] = parts[j], parts[i]
			}
		}
		if d := mergeDiff(t, splitByRank(whole), parts); d != "" {
			t.Errorf("reverse %v: %s", reverse, d)
		}
		for _, p := range parts {
			if p.Len() != 0 || len(p.Shape) != 0 || len(p.Kind) != 0 {
				t.Fatalf("a part keeps %d rows", p.Len())
			}
		}
	}
	parts := splitByRank(whole)
	parts[0].Meta.Job, parts[1].Meta.Job = "a", "b"
	_, err := mergeParts(parts)
	var mc *trace.MetaConflictError
	if !errors.As(err, &mc) || mc.APart != 0 || mc.BPart != 1 {
		t.Errorf("conflict: %v", err)
	}
}

// TestMergePartsOrders checks mergeParts against trace.Merge (the parts
// concatenated in the order given, then sorted stably by rank and seq)
// on parts cut and ordered many ways: one rank each or several, shuffled,
// empty parts, parts whose (rank, seq) ranges overlap or touch (equal
// keys in two parts), and parts whose own rows are out of order. Where the
// parts can be laid end to end in rank order mergeParts skips the sort;
// either way the rows must be Merge's, in its order.
func TestMergePartsOrders(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 0))
	for iter := range 300 {
		whole := randomTrace(rng, 1+rng.IntN(8), 1+rng.IntN(40))
		whole.SortByRankSeq()
		if iter%5 == 0 && whole.Len() > 2 {
			// Equal keys: a row's seq repeated, in a part of its own below.
			i := 1 + rng.IntN(whole.Len()-1)
			if whole.Rank[i] == whole.Rank[i-1] {
				whole.Seq[i] = whole.Seq[i-1]
			}
		}
		// Cut into parts at random row boundaries, some empty.
		var parts []*trace.Trace
		for lo := 0; lo < whole.Len(); {
			hi := min(whole.Len(), lo+rng.IntN(2*whole.Len()/3+2))
			p := &trace.Trace{Meta: whole.Meta}
			p.AppendRows(whole, lo, hi)
			parts = append(parts, p)
			lo = hi
		}
		switch iter % 4 {
		case 1: // a part's rows out of order
			if p := parts[rng.IntN(len(parts))]; p.Len() > 1 {
				q := &trace.Trace{Meta: p.Meta}
				q.AppendRows(p, p.Len()-1, p.Len())
				q.AppendRows(p, 0, p.Len()-1)
				*p = *q
			}
		case 2: // two parts' ranges overlap: deal one part's rows into two
			if i := rng.IntN(len(parts)); parts[i].Len() > 1 {
				p := parts[i]
				a, b := &trace.Trace{Meta: p.Meta}, &trace.Trace{Meta: p.Meta}
				for j := range p.Len() {
					if j%2 == 0 {
						a.AppendRows(p, j, j+1)
					} else {
						b.AppendRows(p, j, j+1)
					}
				}
				parts[i] = a
				parts = append(parts, b)
			}
		}
		parts = append(parts, &trace.Trace{Meta: whole.Meta})
		rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
		copies := make([]*trace.Trace, len(parts))
		for i, p := range parts {
			copies[i] = &trace.Trace{Meta: p.Meta}
			copies[i].AppendRows(p, 0, p.Len())
		}
		if d := mergeDiff(t, copies, parts); d != "" {
			t.Fatalf("iteration %d, %d parts: %s", iter, len(parts), d)
		}
	}
}
