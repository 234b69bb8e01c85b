package report

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ppprof/ppprof/sim"
)

// BenchmarkWriteParquet exports a job shaped like the fleet trace's
// partitions (interleaved, 64 micro-batches: ~750 events per step and
// rank) of 64 ranks and 2 steps: 128 files.
func BenchmarkWriteParquet(b *testing.B) {
	tr, err := sim.Run(sim.Config{Job: "bench", Schedule: "interleaved", Stages: 8, MicroBatches: 64, Steps: 2, TP: 2, DP: 4,
		P2PLatencyUs: 10, Jitter: 0.05, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := WriteParquet(filepath.Join(dir, strconv.Itoa(i)), tr); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(tr.Len())*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
