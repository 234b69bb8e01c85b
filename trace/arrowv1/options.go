package arrowv1

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// Compression is the codec applied to record batch bodies (Arrow IPC body
// compression, one frame per buffer). Readers detect it from each message, so
// it only matters when writing.
type Compression string

// The codecs Arrow IPC defines.
const (
	None Compression = ""     // bodies stored as is
	LZ4  Compression = "lz4"  // LZ4 frame: fast, about 2-4x smaller on traces
	ZSTD Compression = "zstd" // Zstandard: slower to write, smallest
)

// ParseCompression reads a codec name as given on a command line: "" or
// "none", "lz4", "zstd" (case-insensitive).
func ParseCompression(s string) (Compression, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none":
		return None, nil
	case "lz4":
		return LZ4, nil
	case "zstd":
		return ZSTD, nil
	}
	return None, fmt.Errorf("unknown compression %q (want none, lz4 or zstd)", s)
}

// DefaultBatchRows is the number of rows per record batch when
// Options.BatchRows is 0.
const DefaultBatchRows = 65536

// Options control how a trace is written. The zero value writes
// uncompressed batches of DefaultBatchRows rows.
type Options struct {
	Compression Compression
	BatchRows   int // rows per record batch; 0 means DefaultBatchRows
	// Progress, when set, is called by WriteFile after each record batch
	// with the rows written so far and the trace's rows (a large trace
	// takes seconds to write; ppprof convert draws a bar with it).
	Progress func(done, total int)
}

// batchRows returns the effective rows per batch.
func (o Options) batchRows() int {
	if o.BatchRows == 0 {
		return DefaultBatchRows
	}
	return o.BatchRows
}

// ipcOptions checks o and returns the arrow-go writer options it implies.
func (o Options) ipcOptions() ([]ipc.Option, error) {
	if o.BatchRows < 0 {
		return nil, fmt.Errorf("batch rows %d: want >= 0", o.BatchRows)
	}
	switch o.Compression {
	case None:
		return nil, nil
	case LZ4:
		return []ipc.Option{ipc.WithLZ4()}, nil
	case ZSTD:
		return []ipc.Option{ipc.WithZstd()}, nil
	}
	return nil, fmt.Errorf("unknown compression %q (want none, lz4 or zstd)", string(o.Compression))
}
