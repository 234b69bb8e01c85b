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
		want, err := trace.Merge(splitByRank(whole)...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := mergeParts(parts)
		if err != nil {
			t.Fatal(err)
		}
		if d := trace.Diff(want, got); d != "" {
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
