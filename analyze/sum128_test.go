package analyze

import (
	"math"
	"math/big"
	"math/rand"
	"testing"
)

// TestSum128: the 128-bit sum is exact (checked against math/big) and so
// the same in any order, also where float64 sums of the same terms are
// not; below 2^53 it rounds as float64 does.
func TestSum128(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for trial := range 200 {
		xs := make([]int64, 1+rng.Intn(50))
		for i := range xs {
			switch rng.Intn(3) {
			case 0:
				xs[i] = rng.Int63() // near 2^63: float64 sums round
			case 1:
				xs[i] = -rng.Int63()
			default:
				xs[i] = rng.Int63n(1e9)
			}
		}
		if trial%4 == 0 {
			xs = append(xs, math.MinInt64, math.MaxInt64)
		}
		want := new(big.Int)
		var s sum128
		for _, x := range xs {
			want.Add(want, big.NewInt(x))
			s.add(x)
		}
		wantF, _ := new(big.Float).SetInt(want).Float64()
		// Two roundings at most (the high and the low words): within 2 ulp.
		if got := s.float(); math.Abs(got-wantF) > 2*ulp(wantF) {
			t.Fatalf("trial %d: sum %v, want %v", trial, got, wantF)
		}
		// Any order, and any split into partial sums, gives the same.
		rng.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
		var a, b sum128
		cut := rng.Intn(len(xs) + 1)
		for _, x := range xs[:cut] {
			a.add(x)
		}
		for _, x := range xs[cut:] {
			b.add(x)
		}
		b.addSum(a)
		if b != s {
			t.Fatalf("trial %d: reordered and split sum %+v, want %+v", trial, b, s)
		}
	}
	// Small sums: exactly what a float64 sum gives.
	var s sum128
	f := 0.0
	for i := range int64(1000) {
		s.add(i * 12345)
		f += float64(i * 12345)
	}
	if s.float() != f {
		t.Errorf("small sum %v, want %v", s.float(), f)
	}
}

func ulp(x float64) float64 {
	return math.Nextafter(math.Abs(x), math.Inf(1)) - math.Abs(x)
}
