package arrowv1

import (
	"fmt"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// BenchmarkQuickValid measures the validation of a decoded rank file, in
// ns per row: a rank file of the fleet trace's size (6K rows, in the
// caches) and a large one (128K rows). "quick" is what reads use
// (trace.OneRankValid); "Validate" the general check it stands in for,
// in the same run. (Against the Go loops it replaced, one a check, as
// the twenty-sixth session measured it: 7.0-7.7 against 9.6-10.6 ns a row
// in the caches; no gain at 128K rows, bound by memory.)
func BenchmarkQuickValid(b *testing.B) {
	full := benchTrace()
	for _, n := range []int{6 << 10, full.Len() / 8} {
		t := full.Slice(0, n) // one rank's rows
		for _, f := range []struct {
			name string
			fn   func(*trace.Trace) bool
		}{{"quick", (*trace.Trace).OneRankValid}, {"Validate", func(t *trace.Trace) bool { return t.Validate() == nil }}} {
			b.Run(fmt.Sprintf("rows=%d/%s", n, f.name), func(b *testing.B) {
				for b.Loop() {
					if !f.fn(t) {
						b.Fatal("the benchmark trace does not pass the check")
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/row")
			})
		}
	}
}
