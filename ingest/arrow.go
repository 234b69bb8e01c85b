//go:build !ppprof_arrow

package ingest

import (
	"errors"

	"github.com/ppprof/ppprof/trace"
)

// sniffArrow recognises Arrow IPC content. Until trace/arrowv1 lands it
// recognises nothing.
func sniffArrow(prefix []byte) Format { return FormatUnknown }

// arrowRead is what readArrow got from an Arrow file or stream.
type arrowRead struct {
	trace     *trace.Trace
	batches   int
	truncated bool
	bytesLost int64
	warning   string // "" when the data was complete
}

// readArrow decodes an Arrow file or stream.
func readArrow(data []byte) (arrowRead, error) {
	return arrowRead{}, errors.New("arrow support not built yet")
}
