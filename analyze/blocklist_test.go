package analyze

import (
	"math/rand"
	"slices"
	"testing"
)

// TestBlockList: what is added comes back in order, in blocks that start
// small, double and stop at listBlock; the distribution of the blocks is
// the one of the same values in one slice, computed by sorting.
func TestBlockList(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	for _, n := range []int{0, 1, listFirst, listFirst + 1, 3*listBlock + 17, 1 << 19} {
		var l blockList
		want := make([]int64, n)
		for i := range want {
			want[i] = rng.Int63n(1e9) - 1e3
			l.add(want[i])
		}
		bs := l.blocks(nil)
		if got := slices.Concat(bs...); l.n != n || !slices.Equal(got, want) {
			t.Fatalf("n %d: %d values back (n %d), not the ones added", n, len(got), l.n)
		}
		for i, b := range bs {
			if c, w := cap(b), min(listFirst<<i, listBlock); c != w {
				t.Fatalf("n %d: block %d holds %d values, want %d", n, i, c, w)
			}
			if len(b) == 0 {
				t.Fatalf("n %d: block %d is empty", n, i)
			}
		}
		if n == 0 {
			if d := distOf(bs, 0, nil); d != (Dist{}) {
				t.Fatalf("no values: %+v", d)
			}
			continue
		}
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
		d := distOf(bs, n, make([]int64, n))
		if d.N != n || d.MinMs != float64(s[0])/1e6 || d.MaxMs != float64(s[n-1])/1e6 ||
			d.MedianMs != med/1e6 || d.P95Ms != float64(p95)/1e6 {
			t.Fatalf("n %d: %+v; want min %d max %d median %v p95 %d", n, d, s[0], s[n-1], med, p95)
		}
		if mean := sum / float64(n) / 1e6; d.MeanMs < mean*(1-1e-12) || d.MeanMs > mean*(1+1e-12) {
			t.Fatalf("n %d: mean %v, want %v", n, d.MeanMs, mean)
		}
	}
}
