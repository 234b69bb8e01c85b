package arrowv1

import (
	"fmt"
	"testing"
)

// BenchmarkQuickValid measures the validation of a decoded rank file
// (quickValid), in ns per row: a rank file of the fleet trace's size (6K
// rows, in the caches) and a large one (128K rows).
func BenchmarkQuickValid(b *testing.B) {
	full := benchTrace()
	for _, n := range []int{6 << 10, full.Len() / 8} {
		t := full.Slice(0, n) // one rank's rows
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			for b.Loop() {
				if !quickValid(t) {
					b.Fatal("the benchmark trace does not pass quickValid")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/row")
		})
	}
}
