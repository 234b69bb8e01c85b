package analyze

import (
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// TestBlockList: what is added comes back in order, in blocks that start
// small, double and stop at listBlock, whether the list stayed narrow (32
// bits), went wide in the middle (a value that does not fit), or was
// widened at the end; the distribution of the blocks is the one of the
// same values in one slice, computed by sorting.
func TestBlockList(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	for _, n := range []int{0, 1, listFirst, listFirst + 1, 3*listBlock + 17, 1 << 19} {
		for _, how := range []string{"narrow", "wide at the middle", "negative first", "widened after"} {
			var l blockList
			want := make([]int64, n)
			for i := range want {
				want[i] = rng.Int63n(1e9)
				switch {
				case how == "wide at the middle" && i == n/2:
					want[i] = 1 << 33 // over 32 bits
				case how == "negative first" && i == 0:
					want[i] = -1e3
				}
				l.add(want[i])
			}
			wide := how != "narrow" && n > 0 && how != "widened after"
			if l.wide != wide {
				t.Fatalf("%s, n %d: wide %v, want %v", how, n, l.wide, wide)
			}
			var got []int64
			var sizes []int
			if how == "narrow" {
				bs := l.blocks32(nil)
				for _, b := range bs {
					for _, v := range b {
						got = append(got, int64(v))
					}
					sizes = append(sizes, cap(b))
				}
				if n > 0 {
					checkDist(t, how, want, distOf(bs, n, make([]uint32, n)))
				}
			} else {
				l.widen()
				bs := l.blocks(nil)
				got = slices.Concat(bs...)
				for _, b := range bs {
					sizes = append(sizes, cap(b))
				}
				if n == 0 {
					if d := distOf(bs, 0, nil); d != (Dist{}) {
						t.Fatalf("no values: %+v", d)
					}
				} else {
					checkDist(t, how, want, distOf(bs, n, make([]int64, n)))
				}
			}
			if l.n != n || !slices.Equal(got, want) {
				t.Fatalf("%s, n %d: %d values back (n %d), not the ones added", how, n, len(got), l.n)
			}
			for i, c := range sizes {
				if w := min(listFirst<<i, listBlock); c != w {
					t.Fatalf("%s, n %d: block %d holds %d values, want %d", how, n, i, c, w)
				}
			}
		}
	}
}

// checkDist compares d with the distribution of want worked out by
// sorting.
func checkDist(t *testing.T, how string, want []int64, d Dist) {
	t.Helper()
	n := len(want)
	s := slices.Clone(want)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += float64(x)
	}
	p95 := s[max((95*n+99)/100-1, 0)]
	med := float64(s[n/2])
	if n%2 == 0 {
		med = (float64(s[n/2-1]) + med) / 2
	}
	if d.N != n || d.MinMs != float64(s[0])/1e6 || d.MaxMs != float64(s[n-1])/1e6 ||
		d.MedianMs != med/1e6 || d.P95Ms != float64(p95)/1e6 {
		t.Fatalf("%s, n %d: %+v; want min %d max %d median %v p95 %d", how, n, d, s[0], s[n-1], med, p95)
	}
	if mean := sum / float64(n) / 1e6; math.Abs(d.MeanMs-mean) > 1e-12*math.Abs(mean) {
		t.Fatalf("%s, n %d: mean %v, want %v", how, n, d.MeanMs, mean)
	}
}

// TestStatsNarrowIsWide: the reports are the same, to the bit, whether
// the per-stage duration lists stay in 32 bits or are all made wide, on
// the chunk tests' corpus and on a job with one forward of 5 s (over 32
// bits of ns: the list it falls in goes wide, the others' are widened to
// match when the statistics are taken).
func TestStatsNarrowIsWide(t *testing.T) {
	corpus := chunkCorpus(t)
	long := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, DP: 2, Steps: 3, OptMs: 1, Jitter: 0.1, Seed: 5})
	at := -1
	for i := range long.Len() {
		if long.Kind[i] == trace.F && long.Stage[i] == 1 && long.Step[i] == 1 {
			at = i
			break
		}
	}
	if at < 0 {
		t.Fatal("no forward of stage 1 in step 1")
	}
	// Everything on the rank after it moves 5 s later.
	shift := int64(5e9) - (long.EndNs[at] - long.StartNs[at])
	for i := range long.Len() {
		if long.Rank[i] == long.Rank[at] && long.Seq[i] >= long.Seq[at] {
			if i != at {
				long.StartNs[i] += shift
				long.IssueNs[i] += shift
			}
			long.EndNs[i] += shift
		}
	}
	corpus["one forward of 5 s"] = long
	for name, tr := range corpus {
		narrow, err := Run(tr, Options{Step: AllSteps})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		statsWide = true
		wide, err := Run(tr, Options{Step: AllSteps})
		statsWide = false
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := reportDiff(wide, narrow); d != "" {
			t.Errorf("%s: reports differ:\n%s", name, d)
		}
		if name == "one forward of 5 s" && narrow.Stages[1].F.MaxMs != 5000 {
			t.Errorf("%s: stage 1's longest forward %v ms, want 5000", name, narrow.Stages[1].F.MaxMs)
		}
	}
}
