package ingest

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"sort"
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

// TestRowSetFinish: a rowSet's trace is its rows stably sorted by rank,
// issue time and start time (null last), numbered per rank, with the
// pending rows listed in row order, whether the rows came in order or
// not (against a sort of the Events themselves).
func TestRowSetFinish(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 200 {
		n := rng.IntN(60)
		inOrder := round%3 == 0
		var evs []trace.Event
		var pend []bool
		var rs rowSet
		for i := range n {
			e := trace.Event{Rank: trace.Rank(rng.IntN(3)), Kind: trace.SendF, IssueNs: int64(rng.IntN(8)), StartNs: int64(rng.IntN(4)),
				EndNs: trace.NoTime, Peer: trace.NoRank, Shape: []string{"", "[2]", "[4]"}[rng.IntN(3)], Group: "g", GroupSeq: int64(i), Tokens: int64(i)}
			if inOrder {
				e.Rank, e.IssueNs = trace.Rank(i/20), int64(i)
			}
			if rng.IntN(5) == 0 {
				e.StartNs = trace.NoTime
			}
			p := rng.IntN(4) == 0
			evs, pend = append(evs, e), append(pend, p)
			if p {
				rs.addPending(e, i%2 == 0)
			} else {
				rs.add(e)
			}
		}
		got, gotPend := rs.finish(trace.Meta{PP: 3})
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool {
			x, y := evs[idx[a]], evs[idx[b]]
			if x.Rank != y.Rank {
				return x.Rank < y.Rank
			}
			if x.IssueNs != y.IssueNs {
				return x.IssueNs < y.IssueNs
			}
			return timeLess(x.StartNs, y.StartNs)
		})
		want := &trace.Trace{Meta: trace.Meta{PP: 3}}
		var wantPend []pendingP2P
		seq, last := int64(0), trace.Rank(-1)
		for _, i := range idx {
			e := evs[i]
			if e.Rank != last {
				seq, last = 0, e.Rank
			}
			e.Seq = seq
			seq++
			if pend[i] {
				wantPend = append(wantPend, pendingP2P{send: i%2 == 0, row: want.Len()})
			}
			want.Append(e)
		}
		if got.Len() != want.Len() || !reflect.DeepEqual(got.Meta, want.Meta) {
			t.Fatalf("round %d: %d rows (meta %+v), want %d", round, got.Len(), got.Meta, want.Len())
		}
		for i := range got.Len() {
			if got.At(i) != want.At(i) {
				t.Fatalf("round %d (in order %v): row %d %+v, want %+v", round, inOrder, i, got.At(i), want.At(i))
			}
		}
		if !reflect.DeepEqual(gotPend, wantPend) {
			t.Fatalf("round %d: pending %+v, want %+v", round, gotPend, wantPend)
		}
	}
}
