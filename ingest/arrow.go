package ingest

import (
	"fmt"

	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// sniffArrow recognises Arrow IPC content (file or stream).
func sniffArrow(prefix []byte) Format {
	switch arrowv1.Sniff(prefix) {
	case arrowv1.FormatFile:
		return FormatArrowFile
	case arrowv1.FormatStream:
		return FormatArrowStream
	}
	return FormatUnknown
}

// arrowRead is what readArrow got from an Arrow file or stream.
type arrowRead struct {
	trace     *trace.Trace
	rows      int64 // rows of the whole input (more than trace holds after a head read)
	batches   int
	truncated bool
	bytesLost int64
	warning   string // "" when the data was complete
}

// readArrow decodes an Arrow file or stream with arrowv1, which validates
// the trace. A stream cut off mid-batch keeps its complete batches; a stream
// that ends after a whole batch but without the end-of-stream marker (its
// writer never closed it: the process died or hung) keeps them all. Both
// are warnings, not errors: a hung job's dump is exactly such a file.
//
// A panic in the decoder is turned into an error, so that one corrupt rank
// file cannot bring the command down; the fuzz test fails on such errors so
// that the decoder gets fixed.
//
// With head set only the first record batch is decoded (arrowv1.ReadHead):
// trace holds its rows, rows counts the input's. With into (and not head),
// the rows are decoded into those rows of into.t where the input holds
// into.n rows (arrowv1.ReadInto): trace is then those rows. With span
// (and not head), only rows [span.lo, span.hi) are decoded
// (arrowv1.ReadRows): trace is those rows, in into's rows when into is
// as many rows (arrowv1.ReadRowsInto).
func readArrow(data []byte, head bool, into *rowRange, span *rowsRead) (ar arrowRead, err error) {
	defer func() {
		if p := recover(); p != nil {
			ar, err = arrowRead{}, fmt.Errorf("corrupt Arrow data: decoder panicked: %v", p)
		}
	}()
	var res *arrowv1.Result
	var rows int64
	if head {
		res, rows, err = arrowv1.ReadHead(data)
	} else if span != nil {
		if into.holds(span) {
			// Into the file's rows of a cut chunk (Chunks.placeSpans).
			res, _, err = arrowv1.ReadRowsInto(data, span.ix, span.lo, span.hi, into.t, into.off)
		} else {
			res, _, err = arrowv1.ReadRows(data, span.ix, span.lo, span.hi)
		}
		if res != nil {
			rows = int64(res.Trace.Len())
		}
	} else if into != nil {
		res, _, err = arrowv1.ReadInto(data, into.t, into.off, into.n)
		if res != nil {
			rows = int64(res.Trace.Len())
		}
	} else {
		res, err = arrowv1.Read(data)
		if res != nil {
			rows = int64(res.Trace.Len())
		}
	}
	if err != nil {
		return ar, err
	}
	return arrowReadOf(res, rows), nil
}

// arrowReadOf is readArrow's answer from arrowv1's result (rows: the
// input's rows).
func arrowReadOf(res *arrowv1.Result, rows int64) (ar arrowRead) {
	ar = arrowRead{trace: res.Trace, rows: rows, batches: res.Batches, truncated: res.Truncated}
	if !res.Truncated {
		return ar
	}
	what := "stream"
	if res.Format == arrowv1.FormatFile {
		what = "file"
	}
	events := plural(int(rows), "event")
	lost := res.BytesTotal - res.BytesUsed
	if lost <= 0 {
		ar.warning = fmt.Sprintf("%s not closed: the writer did not finish; kept all %s (%s)", what, plural(res.Batches, "batch"), events)
		return ar
	}
	ar.bytesLost = lost
	ar.warning = fmt.Sprintf("truncated %s: kept %s (%s), lost %d of %d bytes (%s)",
		what, plural(res.Batches, "complete batch"), events, lost, res.BytesTotal, percent(lost, res.BytesTotal))
	return ar
}

// setArrow sets p from what readArrow read with opt.
func (p *part) setArrow(ar arrowRead, opt readOpts) {
	p.t = ar.trace
	p.into = opt.into
	p.headOnly, p.fileRows = opt.head, ar.rows
	p.info.Batches = ar.batches
	p.info.Truncated = p.info.Truncated || ar.truncated
	p.info.BytesLost = ar.bytesLost
	if ar.warning != "" {
		p.warnf("%s", ar.warning)
	}
}

// percent shows part/whole as "5.4%", never rounding a loss to "0.0%".
func percent(part, whole int64) string {
	if whole <= 0 {
		return "100%"
	}
	p := 100 * float64(part) / float64(whole)
	if p > 0 && p < 0.1 {
		return "<0.1%"
	}
	return fmt.Sprintf("%.1f%%", p)
}
