package ingest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// TestAlignClocksManyFiles aligns files (one rank each, each its own
// clock) that share collectives of one group: each rank's clock is off by
// a known skew, so the offset alignClocks finds for it must undo that
// skew exactly. Sizes on both sides of allPairsDomains: every pair of
// files, and each file against the lowest one; skews under a millisecond
// (the end-time differences kept in 32 bits) and up to 10 s (64 bits).
func TestAlignClocksManyFiles(t *testing.T) {
	for _, c := range []struct{ files, scale int }{{5, 1}, {allPairsDomains, 1}, {allPairsDomains + 1, 1}, {300, 1}, {5, 10_000}, {300, 10_000}} {
		files := c.files
		t.Run(fmt.Sprint(files, "x", c.scale), func(t *testing.T) {
			tr := &trace.Trace{}
			var parts []*part
			skew := func(r int) int64 { return int64(r*7919%1000) * 1000 * int64(c.scale) } // ns, rank 0: 0
			for r := range files {
				parts = append(parts, &part{external: true, info: FileInfo{Path: fmt.Sprintf("_dump_%d", r), Ranks: []trace.Rank{trace.Rank(r)}}})
				for k := range 3 {
					// Collective k of the world group ends at 1 ms + k ms
					// on the true clock; rank r's clock reads skew(r) more.
					end := int64(1_000_000*(k+1)) + skew(r)
					tr.Append(trace.Event{Rank: trace.Rank(r), Kind: trace.AllReduce, Group: "world", GroupSeq: int64(k),
						Peer: trace.NoRank, MicroBatch: trace.NoMicroBatch, Seq: int64(k),
						IssueNs: end - 500, StartNs: end - 400, EndNs: end})
				}
			}
			offs, _, _ := alignClocks(tr, parts)
			if len(offs) != files {
				t.Fatalf("%d offsets for %d files", len(offs), files)
			}
			for r, o := range offs {
				if o.OffsetNs != -skew(r) {
					t.Errorf("rank %d: offset %d ns (%s), want %d", r, o.OffsetNs, o.Method, -skew(r))
				}
				if r > 0 && (o.Method != "collectives" || o.Collectives != 3) {
					t.Errorf("rank %d: method %q from %d collectives, want collectives from 3", r, o.Method, o.Collectives)
				}
			}
			// The times are shifted onto rank 0's clock: every copy of a
			// collective now ends together.
			for i := range tr.Len() {
				if want := int64(1_000_000 * (tr.GroupSeq[i] + 1)); tr.EndNs[i] != want {
					t.Fatalf("row %d (rank %d): end %d after alignment, want %d", i, tr.Rank[i], tr.EndNs[i], want)
				}
			}
		})
	}
}

// TestRankDomains: the domain of every rank, by array (dense ranks) and by
// map (a rank past maxDenseRank, or below 0), is the last part's that
// lists it; ranks no part lists have none.
func TestRankDomains(t *testing.T) {
	for _, extra := range []trace.Rank{0, maxDenseRank + 5, -3} {
		var doms []*part
		want := map[trace.Rank]int{}
		for d := range 6 {
			p := &part{}
			for r := trace.Rank(d * 3); r < trace.Rank(d*3+4); r++ { // overlapping: the last part wins
				p.info.Ranks = append(p.info.Ranks, r)
				want[r] = d
			}
			doms = append(doms, p)
		}
		if extra != 0 {
			doms[2].info.Ranks = append(doms[2].info.Ranks, extra)
			want[extra] = 2
		}
		rd := newRankDomains(doms)
		if (rd.m == nil) != (extra == 0) {
			t.Errorf("extra rank %d: map %v", extra, rd.m != nil)
		}
		for r := trace.Rank(-5); r < 40; r++ {
			d, ok := rd.get(r)
			wd, wok := want[r]
			if ok != wok || d != wd {
				t.Errorf("extra rank %d: rank %d in domain %d (%v), want %d (%v)", extra, r, d, ok, wd, wok)
			}
		}
		if d, ok := rd.get(extra); extra != 0 && (!ok || d != 2) {
			t.Errorf("rank %d in domain %d (%v), want 2", extra, d, ok)
		}
	}
}

// TestMedianMAD: the median (the upper one of an even count) and the
// median absolute deviation, by hand on small lists, and on random lists
// against both computed on copies, sorted.
func TestMedianMAD(t *testing.T) {
	for _, c := range []struct {
		xs       []int64
		med, mad int64
	}{
		{[]int64{5, 1, 9, 3, 7}, 5, 2},        // deviations 4 2 0 2 4
		{[]int64{1, 2, 3, 10}, 3, 2},          // upper median 3; deviations 2 1 0 7
		{[]int64{-4}, -4, 0},                  // one estimate
		{[]int64{7, 7, 7, -100, 7}, 7, 0},     // an outlier
		{[]int64{-30, -10, -20, 40}, -10, 20}, // deviations 20 0 10 50
	} {
		if med, mad := medianMAD(slices.Clone(c.xs)); med != c.med || mad != c.mad {
			t.Errorf("medianMAD(%v) = %d, %d; want %d, %d", c.xs, med, mad, c.med, c.mad)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		xs := make([]int64, 1+rng.IntN(40))
		for i := range xs {
			xs[i] = rng.Int64N(2000) - 1000
		}
		s := slices.Sorted(slices.Values(xs))
		med := s[len(s)/2]
		var dev []int64
		for _, v := range s {
			dev = append(dev, max(v-med, med-v))
		}
		slices.Sort(dev)
		if m, d := medianMAD(xs); m != med || d != dev[len(dev)/2] {
			t.Fatalf("medianMAD = %d, %d; want %d, %d", m, d, med, dev[len(dev)/2])
		}
	}
}
