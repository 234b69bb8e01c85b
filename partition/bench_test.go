package partition

import (
	"math/rand"
	"testing"
)

// BenchmarkSolve200x64: 200 layers of random cost on 64 stages under 1F1B
// with a memory limit; the target is well under a second per Solve.
func BenchmarkSolve200x64(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	m := &Model{Embedding: &Layer{Name: "embedding", FwdMs: 2, BwdMs: 3, ActBytes: 1 << 20},
		Loss: &Layer{Name: "loss", FwdMs: 4, BwdMs: 2, ActBytes: 1 << 20}}
	for range 200 {
		m.Layers = append(m.Layers, Layer{Name: "block", FwdMs: 1 + rng.Float64(), BwdMs: 2 + 2*rng.Float64(), ActBytes: 1 << 24})
	}
	opt := Options{Stages: 64, MicroBatches: 256, MemLimitBytes: 64 << 30}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Solve(m, opt); err != nil {
			b.Fatal(err)
		}
	}
}
