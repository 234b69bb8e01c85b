package seqindex

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestIndexIsMap puts and gets random pairs, dense groups, sparse ones,
// negative and huge numbers, and pairs never noted, in an index built
// dense and one built as a map, against a plain Go map.
func TestIndexIsMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 200 {
		type pair struct {
			g   int32
			seq int64
		}
		var noted []pair
		var r Ranges
		groups := 1 + rng.IntN(6)
		for g := range int32(groups) {
			base := rng.Int64N(1<<40) - 1<<39
			spread := []int64{1, 2, 1000, 1 << 40}[rng.IntN(4)]
			for range rng.IntN(50) {
				p := pair{g, base + rng.Int64N(50)*spread}
				noted = append(noted, p)
				r.Note(p.g, p.seq)
			}
			if rng.IntN(8) == 0 { // the ends of int64
				for _, seq := range []int64{math.MinInt64, math.MaxInt64} {
					noted = append(noted, pair{g, seq})
					r.Note(g, seq)
				}
			}
		}
		most := r.Most()
		for _, dense := range []bool{true, false} {
			x := r.Build(dense)
			want := map[pair]int32{}
			// Noted pairs, then pairs never noted (out of range, other
			// groups, negative groups).
			tries := append([]pair(nil), noted...)
			for range 20 {
				tries = append(tries, pair{int32(rng.IntN(groups+2)) - 1, rng.Int64() - 1<<62})
			}
			for i, p := range tries {
				if v, ok := x.Get(p.g, p.seq); ok != (want[p] > 0) || ok && v != want[p]-1 {
					t.Fatalf("iteration %d, dense %v: Get%v = %d, %v; want %d", iter, dense, p, v, ok, want[p]-1)
				}
				if _, ok := want[p]; !ok {
					x.Put(p.g, p.seq, int32(i))
					want[p] = int32(i) + 1
				}
			}
			distinct := map[pair]bool{}
			for _, p := range noted {
				distinct[p] = true
			}
			if int64(len(distinct)) > most {
				t.Fatalf("iteration %d: %d distinct pairs, Most %d", iter, len(distinct), most)
			}
		}
	}
}
