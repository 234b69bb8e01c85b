package ingest

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
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

// TestAlignClocksParallelPairs: the pairs' lists filled by several
// goroutines (pairMedians) give every file the offset one goroutine gives,
// and the true one: 640 dumps in tensor-parallel groups of 8 (28 pairs a
// group, each its own list), with collectives of their group and of the
// world, skewed clocks.
func TestAlignClocksParallelPairs(t *testing.T) {
	const files, tp = 640, 8
	skew := func(r int) int64 { return int64(r*7919%1000) * 1000 } // ns, rank 0: 0
	build := func() (*trace.Trace, []*part) {
		tr := &trace.Trace{}
		var parts []*part
		for r := range files {
			parts = append(parts, &part{external: true, info: FileInfo{Path: fmt.Sprintf("_dump_%d", r), Ranks: []trace.Rank{trace.Rank(r)}}})
			seq := int64(0)
			add := func(group string, gseq int64, end int64) {
				end += skew(r)
				tr.Append(trace.Event{Rank: trace.Rank(r), Kind: trace.AllReduce, Group: group, GroupSeq: gseq,
					Peer: trace.NoRank, MicroBatch: trace.NoMicroBatch, Seq: seq, IssueNs: end - 500, StartNs: end - 400, EndNs: end})
				seq++
			}
			for k := range 4 {
				// Collective k of rank r's TP group, then of the world,
				// end at these times on the true clock (with a jitter of a
				// few ns per rank that the medians see through).
				add(fmt.Sprintf("tp%d", r/tp), int64(k), int64(1_000_000*(2*k+1))+int64(r%3))
				add("world", int64(k), int64(1_000_000*(2*k+2)))
			}
		}
		return tr, parts
	}
	run := func(workers int) []ClockOffset {
		defer func(w, r int) { pairFillWorkers, p2pChannelRows = w, r }(pairFillWorkers, p2pChannelRows)
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(workers))
		pairFillWorkers = workers
		p2pChannelRows = 100 // the times shifted in ranges too
		tr, parts := build()
		offs, _, _ := alignClocks(tr, parts)
		// Every row shifted onto the true clock: world collective k ends
		// at (2k+2) ms on every rank.
		for i := range tr.Len() {
			if g := tr.Group[i].String(); g == "world" {
				if want := int64(1_000_000 * (2*tr.GroupSeq[i] + 2)); tr.EndNs[i] != want {
					t.Fatalf("%d goroutines: rank %d's world collective %d ends at %d, want %d", workers, tr.Rank[i], tr.GroupSeq[i], tr.EndNs[i], want)
				}
			}
		}
		return offs
	}
	one, many := run(1), run(3)
	if len(one) != files || len(many) != files {
		t.Fatalf("%d and %d offsets for %d files", len(one), len(many), files)
	}
	for r := range files {
		if !reflect.DeepEqual(one[r], many[r]) {
			t.Fatalf("rank %d: one goroutine %+v, three %+v", r, one[r], many[r])
		}
		if d := many[r].OffsetNs + skew(r); d < -2 || d > 2 {
			t.Errorf("rank %d: offset %d ns, want %d within the jitter", r, many[r].OffsetNs, -skew(r))
		}
	}
}

// TestP2PChannelsInRanges: p2pChannels listing rows in ranges on several
// goroutines gives every channel the rows, in row order, that one pass
// over the trace gives: rows of a rank in runs that cross the ranges,
// rows skipped, other tools' SEND and RECV.
func TestP2PChannelsInRanges(t *testing.T) {
	defer func(n int) { p2pChannelRows = n }(p2pChannelRows)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(5))
	p2pChannelRows = 7
	rng := rand.New(rand.NewPCG(7, 8))
	send, err1 := trace.ParseKind("SEND")
	recv, err2 := trace.ParseKind("RECV")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	kinds := []trace.Kind{trace.SendF, trace.RecvF, trace.SendB, trace.RecvB, trace.F, send, recv}
	for trial := range 50 {
		tr := &trace.Trace{}
		n := 1 + rng.IntN(600)
		r := trace.Rank(rng.IntN(6))
		for i := range n {
			if rng.IntN(20) == 0 {
				r = trace.Rank(rng.IntN(6)) // runs of a rank, in any order
			}
			k := kinds[rng.IntN(len(kinds))]
			peer := trace.Rank(rng.IntN(6))
			if k == trace.F {
				peer = trace.NoRank
			}
			tr.Append(trace.Event{Rank: r, Kind: k, Peer: peer, Seq: int64(i), MicroBatch: trace.NoMicroBatch, GroupSeq: -1})
		}
		skip := make([]bool, n)
		for i := range skip {
			skip[i] = rng.IntN(5) == 0
		}
		for _, sk := range [][]bool{nil, skip} {
			ws, wr := p2pChannelsIn(tr, sk, 0, n)
			gs, gr := p2pChannels(tr, sk)
			if !reflect.DeepEqual(ws, gs) || !reflect.DeepEqual(wr, gr) {
				t.Fatalf("trial %d (%d rows, skip %v): in ranges\n%v\n%v\nin one pass\n%v\n%v", trial, n, sk != nil, gs, gr, ws, wr)
			}
		}
	}
}
