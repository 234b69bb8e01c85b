package ingest

import (
	"testing"

	"github.com/ppprof/ppprof/trace/arrowv1"
)

// arrowSeeds are FuzzSniffAndRead seeds in both Arrow formats: a small
// stream, the same stream cut mid-batch and unclosed, and a small file.
func arrowSeeds(f *testing.F) [][]byte {
	tr := fEvents(0, 6)
	stream := arrowStream(f, tr, arrowv1.Options{BatchRows: 2})
	unclosed, ends := streamBatches(f, tr, 2)
	return [][]byte{
		stream,
		unclosed,
		unclosed[:(ends[1]+ends[2])/2],
		arrowFile(f, tr, arrowv1.Options{BatchRows: 4}),
	}
}
