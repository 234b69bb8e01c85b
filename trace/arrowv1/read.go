package arrowv1

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/ppprof/ppprof/trace"
)

// ErrNotArrow says the input is not Arrow IPC at all (neither format's
// signature is there).
var ErrNotArrow = errors.New("not an arrow ipc file or stream")

// ErrNoSchema says the input is Arrow IPC cut off before the end of its
// schema message (or empty): a writer that died before writing anything.
// It holds no events and no metadata.
var ErrNoSchema = errors.New("truncated before the schema: no events")

// Result is what Read recovered from an input.
type Result struct {
	Trace      *trace.Trace // the events, validated; never nil when Read succeeds
	Format     Format
	Batches    int   // complete record batches read
	Truncated  bool  // the input ended part way: see Read
	BytesTotal int64 // len(data)
	BytesUsed  int64 // bytes up to the end of the last complete message; BytesTotal-BytesUsed were lost
}

// Read decodes an Arrow IPC file or stream holding a v1 trace and runs
// trace.Validate on it.
//
// A stream cut at any byte (a job killed mid-write) yields every record
// batch that is complete before the cut, with Truncated set and BytesUsed
// the end of the last complete message. A stream without the end-of-stream
// marker counts as truncated even when it ends exactly at a message
// boundary (BytesUsed == BytesTotal): its writer never closed it, so the
// job did not exit cleanly. A tail of zero bytes where a message should be
// (what a file system can leave after a node crash) also reads as a
// truncation. Bytes after the end-of-stream marker are ignored.
//
// A file is read through its footer. A file whose footer is missing or
// unusable (a killed job writing the file format) is read as the stream
// embedded after its magic, and is always Truncated.
//
// Errors: ErrNotArrow for input that is not Arrow IPC (a legacy-framed
// stream cut inside its first message also looks like that); ErrNoSchema
// for Arrow input cut before the end of the schema; a message that is all there
// but corrupt gives "decoding batch N: ..." (N counts from 0); metadata
// without ppprof.schema gives "not a ppprof trace", a newer schema major
// version a *trace.SchemaVersionError; a column of the wrong type or a
// missing required column a *ColumnError; rows that fail trace.Validate its
// *trace.RowError. Read never panics on bad input, and a corrupt length
// cannot make it hold more than 64 MiB + 64*len(data) bytes of decoded
// buffers. On error the Result is nil.
//
// The returned trace shares no memory with data. Read is safe for
// concurrent use.
func Read(data []byte) (*Result, error) {
	return read(data, memory.DefaultAllocator)
}

func read(data []byte, mem memory.Allocator) (*Result, error) {
	return readWith(data, mem, true)
}

// readWith is read with the fast decoder (decode_fast.go) tried first when
// fast is set; tests compare it with the checked path alone.
func readWith(data []byte, mem memory.Allocator, fast bool) (*Result, error) {
	res, _, err := readFramesWith(data, mem, fast, false)
	return res, err
}

// ReadHead is Read of the first and the last record batches alone (with
// the schema and the dictionaries), for a quick look at a large file: which
// ranks and pipelines it holds (a file sorted by rank holds one rank when
// its first and last batches do), its metadata. Result.Trace holds those
// batches' rows, validated; Batches, Truncated and the byte counts describe
// the whole input, and rows is the number of rows of all its complete
// record batches (as Rows counts them). The batches between are framed
// (their message headers checked) but not decoded: one that would fail to
// decode or validate is not found here.
func ReadHead(data []byte) (res *Result, rows int64, err error) {
	// The other batches' bodies are not read (lightSpan): of a mapped
	// file, only their headers' pages are touched. What fails so is read
	// again the way Read frames, for Read's error.
	if res, rows, err = readFramesLight(data, memory.DefaultAllocator, true, true, nil, nil, true); err == nil {
		return res, rows, nil
	}
	return readFramesWith(data, memory.DefaultAllocator, true, true)
}

// ReadRows is Read of rows [lo, hi) of the input alone, numbered as Read
// numbers them (0 is the first row of the first record batch): only the
// record batches holding them are decoded (with the schema and the
// dictionaries) and validated; those before are framed (their message
// headers checked, not their bodies), those after not even that.
// Result.Trace holds exactly those rows, in columns of their own;
// Batches, Truncated, the byte counts and rows describe the input up to
// the batch holding row hi-1 (a file's footer, when it has a usable one,
// is read whole). [lo, hi) must be a non-empty range of the
// input's rows. With StepRuns it reads a large file a few steps at a time:
// given StepRuns' Index of the input (ix, else nil), it frames only the
// messages it decodes (an input changed since is an error).
func ReadRows(data []byte, ix *Index, lo, hi int64) (res *Result, rows int64, err error) {
	return readFramesInto(data, memory.DefaultAllocator, true, false, nil, &spanRead{lo: lo, hi: hi, ix: ix})
}

// ReadRowsInto is ReadRows with rows [lo, hi) copied into rows
// [off, off+hi-lo) of dst's columns instead of columns of their own (as
// ReadRowsAtInto for a file read with pread): placed reports whether
// Result.Trace's columns are those rows of dst (IsRows). The Result and
// the error are ReadRows'. No other goroutine may use those rows
// meanwhile; no row of dst outside them is touched. A dst whose columns
// do not all hold off+hi-lo rows, or a negative off, make it ReadRows.
func ReadRowsInto(data []byte, ix *Index, lo, hi int64, dst *trace.Trace, off int) (res *Result, placed bool, err error) {
	into := intoRows(dst, off, hi-lo)
	res, _, err = readFramesInto(data, memory.DefaultAllocator, true, false, nil, &spanRead{lo: lo, hi: hi, ix: ix, into: into})
	if err != nil {
		return nil, false, err
	}
	return res, into != nil && IsRows(res.Trace, dst, off, into.n), nil
}

// intoRows is rows [off, off+n) of dst, or nil when dst's columns do not
// all hold them (or off or n is not positive, n zero included).
func intoRows(dst *trace.Trace, off int, n int64) *rowRange {
	if dst == nil || off < 0 || n <= 0 || n != int64(int(n)) || !fits(dst, off+int(n)) {
		return nil
	}
	return &rowRange{t: dst, off: off, n: int(n)}
}

// spanRead is what ReadRows reads: rows [lo, hi), framed where ix says
// when it is not nil.
type spanRead struct {
	lo, hi int64
	ix     *Index
	// read: only the bytes of the messages ix places for rows [lo, hi)
	// were read into the input (ReadRowsAt); a frame reaching past its
	// message's place, or a read needing earlier batches, fails with
	// errUnread instead of looking at the rest.
	read bool
	// into, when not nil: the rows are copied into these rows of a
	// trace made for many files' (ReadRowsAtInto) instead of columns
	// of their own, when they are as many.
	into *rowRange
}

// errUnread is what a read of the bytes ReadRowsAt read fails with when
// it needs others.
var errUnread = errors.New("needs bytes that were not read")

// readFramesWith is Read (head false) and ReadHead (head true).
func readFramesWith(data []byte, mem memory.Allocator, fast, head bool) (*Result, int64, error) {
	return readFramesInto(data, mem, fast, head, nil, nil)
}

// readFramesInto is readFramesWith, decoding into the rows into (when not
// nil) when the input holds that many rows (ReadInto), or only rows
// [span.lo, span.hi) when span is not nil (ReadRows).
func readFramesInto(data []byte, mem memory.Allocator, fast, head bool, into *rowRange, span *spanRead) (*Result, int64, error) {
	return readFramesLight(data, mem, fast, head, into, span, false)
}

// readFramesLight is readFramesInto; with light (and no span), it frames
// the input without reading the bodies (lightSpan), and checks in full
// only the bodies of the messages it decodes.
func readFramesLight(data []byte, mem memory.Allocator, fast, head bool, into *rowRange, span *spanRead, light bool) (*Result, int64, error) {
	res := &Result{BytesTotal: int64(len(data)), Format: Sniff(data)}
	if cutBeforeSchema(data) {
		return nil, 0, ErrNoSchema
	}
	var frames []frame
	// A read of some rows frames the input up to them (rowSpan); fileSpan
	// and streamSpan are fresh for each try.
	var fileSpan, streamSpan *rowSpan
	switch {
	case span != nil:
		fileSpan, streamSpan = &rowSpan{lo: span.lo, hi: span.hi}, &rowSpan{lo: span.lo, hi: span.hi}
	case light:
		fileSpan, streamSpan = lightSpan(), lightSpan()
	}
	switch {
	case span != nil && span.ix != nil:
		// The messages are framed where the index says (pick, below).
		if len(data) != span.ix.size {
			return nil, 0, fmt.Errorf("%w: %d bytes, then %d", errChanged, span.ix.size, len(data))
		}
		res.BytesUsed = int64(len(data))
	case res.Format == FormatFile:
		var ok bool
		frames, ok = fileFramesIn(data, fileSpan)
		if ok {
			res.BytesUsed = res.BytesTotal
			break
		}
		s, err := scanStreamIn(data, fileStreamStart, streamSpan)
		if err != nil {
			return nil, 0, err
		}
		frames, res.Truncated, res.BytesUsed = s.frames, true, int64(s.used)
	case res.Format == FormatStream:
		s, err := scanStreamIn(data, 0, streamSpan)
		if err != nil {
			return nil, 0, err
		}
		// A read of some rows that stopped framing after them saw no end.
		stopped := streamSpan != nil && streamSpan.at >= streamSpan.hi
		frames, res.Truncated, res.BytesUsed = s.frames, !s.eos && !stopped, int64(s.used)
	default:
		return nil, 0, ErrNotArrow
	}
	if len(frames) == 0 && (span == nil || span.ix == nil) {
		return nil, 0, ErrNoSchema
	}
	var rows int64
	total, last := 0, -1 // record batches; the last one's frame
	for i, fr := range frames {
		if fr.info.header == headerRecordBatch {
			rows += fr.info.rows
			total++
			last = i
		}
	}
	if into != nil && (head || span != nil || rows != int64(into.n)) {
		into = nil
	}
	all := frames
	from := int64(0) // the first decoded row's number in the input
	// pick returns the frames of a read of rows [lo, hi) and from.
	pick := func(lo, hi int64) ([]frame, int64, error) {
		if span.ix != nil {
			return span.ix.framesIn(data, lo, hi, span.read)
		}
		f, from := spanFrames(all, lo, hi)
		return f, from, nil
	}
	if span != nil {
		if span.ix != nil {
			rows, total = span.ix.rows(), span.ix.Batches()
		}
		if lo, hi := span.lo, span.hi; lo < 0 || lo >= hi || hi > rows {
			return nil, 0, fmt.Errorf("rows %d to %d asked of %d", lo, hi, rows)
		}
		var err error
		if frames, from, err = pick(span.lo, span.hi); err != nil {
			return nil, 0, err
		}
	}
	if head && total > 2 {
		// Every dictionary, the first and the last record batch.
		var keep []frame
		seen := 0
		for i, fr := range frames {
			if fr.info.header == headerRecordBatch {
				seen++
				if seen != 1 && i != last {
					continue
				}
			}
			keep = append(keep, fr)
		}
		frames = keep
	}
	if light && span == nil {
		for _, fr := range frames {
			if err := fr.info.checkBody(fr.body); err != nil {
				return nil, 0, fmt.Errorf("bad %s: %w", headerName(fr.info.header), err)
			}
		}
	}
	// The fast decoder takes what ppprof writes; what it does not take,
	// and every error, goes through arrow-go (decodeFrames).
	decode := func(frames []frame) (t *trace.Trace, batches int, err error) {
		ok := false
		if fast {
			t, batches, ok = fastReadInto(frames, len(data), into)
		}
		if !ok {
			t, batches, err = decodeFrames(frames, &limitAllocator{mem: mem, limit: readLimit(len(data))})
			if err != nil {
				return nil, 0, err
			}
			if into != nil && t.Len() == into.n {
				v := into.view(t.Meta)
				copyRows(v, t)
				t = v
			}
		}
		return t, batches, nil
	}
	t, batches, err := decode(frames)
	if err != nil {
		return nil, 0, err
	}
	if span != nil && from > 0 && neverStarted(t) {
		// A row that never started and records no issue time takes its
		// rank's previous issue time, which may lie in a batch before
		// those decoded: decode from the first.
		if span.read {
			return nil, 0, errUnread
		}
		if frames, from, err = pick(0, span.hi); err != nil {
			return nil, 0, err
		}
		if t, batches, err = decode(frames); err != nil {
			return nil, 0, err
		}
	}
	res.Trace, res.Batches = t, batches
	if head || span != nil {
		res.Batches = total
	}
	if err := validate(t); err != nil {
		return nil, 0, fmt.Errorf("invalid trace: %w", err)
	}
	if span != nil {
		if int64(t.Len()) < span.hi-from {
			return nil, 0, fmt.Errorf("rows %d to %d asked: the batches holding them decoded to %d rows from row %d", span.lo, span.hi, t.Len(), from)
		}
		a, b := int(span.lo-from), int(span.hi-from)
		var out *trace.Trace
		switch {
		case span.into != nil && span.into.n == b-a:
			// Into their rows of the caller's trace.
			out = span.into.view(t.Meta)
		case a != 0 || b != t.Len():
			// The rows asked for, in columns of their own: a slice would
			// pin the whole batches' columns, and a caller recycling it
			// (Recycle) would count only its rows of them.
			out = newTrace(t.Meta, b-a)
		}
		if out != nil {
			// The batches' columns are the next read's.
			copyRows(out, t.Slice(a, b))
			Recycle(t)
			res.Trace = out
		}
	}
	return res, rows, nil
}

// spanFrames returns frames' dictionaries and the record batches holding
// rows [lo, hi), and the number of the first row of those batches.
func spanFrames(frames []frame, lo, hi int64) (keep []frame, from int64) {
	at, first := int64(0), true
	for _, fr := range frames {
		if fr.info.header == headerRecordBatch {
			n := fr.info.rows
			at += n
			if at <= lo || at-n >= hi {
				continue
			}
			if first {
				from, first = at-n, false
			}
		}
		keep = append(keep, fr)
	}
	return keep, from
}

// neverStarted reports whether some row of t has neither a start nor an
// end time (its issue time, when not recorded, is its rank's previous:
// decoder.finish).
func neverStarted(t *trace.Trace) bool {
	for i, s := range t.StartNs {
		if s == trace.NoTime && t.EndNs[i] == trace.NoTime {
			return true
		}
	}
	return false
}

// cutBeforeSchema reports whether data is too short to hold a schema but is
// the start of an Arrow file or stream (or empty).
func cutBeforeSchema(data []byte) bool {
	if len(data) < len(magic) && bytes.HasPrefix(magic, data) {
		return true // includes the empty input
	}
	if len(data) < fileStreamStart && bytes.HasPrefix(data, magic) {
		return true
	}
	if len(data) < 8 {
		return bytes.Count(data[:min(len(data), 4)], []byte{0xff}) == min(len(data), 4)
	}
	return false
}

// fileFrames locates the messages of a complete Arrow file through its
// footer: the schema message at byte 8, then the dictionary and record
// batch blocks the footer lists. ok is false when the footer is missing or
// does not agree with the messages, so the file must be read as a stream.
func fileFrames(data []byte) (frames []frame, ok bool) {
	return fileFramesIn(data, nil)
}

// fileFramesIn is fileFrames framing only what span needs (nil: all; see
// rowSpan): the record batches up to the one that reaches row span.hi.
func fileFramesIn(data []byte, span *rowSpan) (frames []frame, ok bool) {
	const tail = 4 + 6 // footer length, magic
	n := len(data)
	if n < fileStreamStart+tail || !bytes.Equal(data[n-len(magic):], magic) {
		return nil, false
	}
	footerLen := int64(int32(binary.LittleEndian.Uint32(data[n-tail:])))
	footerStart := int64(n-tail) - footerLen
	if footerLen <= 0 || footerStart < fileStreamStart {
		return nil, false
	}
	footer, err := verifyFooter(data[footerStart : n-tail])
	if err != nil {
		return nil, false
	}
	body := data[:footerStart]
	schema, status, _, err := readFrame(body, fileStreamStart, framingUnknown)
	if err != nil || status != frameOK || schema.info.header != headerSchema {
		return nil, false
	}
	frames = append(frames, schema)
	// A footer that lists fewer dictionaries than the schema has
	// dictionary-encoded fields does not agree with the messages (every
	// dictionary comes before the first record batch): the file is read
	// as a stream, which finds the dictionaries where they are. Checked
	// here, not left to the decoder, so that a read of a few rows (span),
	// which frames only the first record batches, frames as a whole read
	// does (FuzzRead found a footer whose dictionary list was corrupted
	// to empty: Read scanned the stream, ReadRows trusted the footer).
	if len(footer.records) > 0 && len(footer.dicts) < schema.info.dictFields {
		return nil, false
	}
	add := func(blocks []block, header byte) bool {
		for _, b := range blocks {
			if header == headerRecordBatch && span != nil && span.at >= span.hi {
				break
			}
			if b.offset < fileStreamStart || b.offset >= int64(len(body)) {
				return false
			}
			fr, status, _, err := readFrameIn(body, int(b.offset), framingUnknown, span)
			if err != nil || status != frameOK || fr.info.header != header ||
				int64(fr.end)-b.offset != int64(b.metaLen)+b.bodyLen {
				return false
			}
			if header == headerRecordBatch && span != nil {
				span.at += fr.info.rows
			}
			frames = append(frames, fr)
		}
		return true
	}
	if !add(footer.dicts, headerDictionaryBatch) || !add(footer.records, headerRecordBatch) {
		return nil, false
	}
	// Blocks must not overlap (nor repeat): a footer listing one large
	// message many times would make a small file decode for a long time.
	spans := make([][2]int, len(frames))
	for i, fr := range frames {
		spans[i] = [2]int{fr.start, fr.end}
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	for i := 1; i < len(spans); i++ {
		if spans[i][0] < spans[i-1][1] {
			return nil, false
		}
	}
	return frames, true
}

// Rows returns the number of rows of the complete record batches of an
// Arrow IPC file or stream, from its message headers alone: no buffer is
// read, decompressed or decoded (of a mapped file, only the pages of the
// headers are touched), so it costs a small fraction of Read. It is the
// number of events Read would return for data that decodes and validates.
// Errors are Read's for input that cannot be framed: ErrNotArrow,
// ErrNoSchema, a corrupt message (not a corrupt compressed buffer's
// length prefix, which only a decoder reads).
func Rows(data []byte) (int64, error) {
	frames, err := framesOfIn(data, lightSpan())
	if err != nil {
		// Read's error: framed again, checking everything it checks.
		_, err = framesOf(data)
		if err == nil {
			err = errors.New("framing failed without reading the bodies, and succeeded reading them") // unreachable: headers check less
		}
		return 0, err
	}
	var n int64
	for _, fr := range frames {
		if fr.info.header == headerRecordBatch {
			n += fr.info.rows
		}
	}
	return n, nil
}

// framesOf frames the complete messages of an Arrow IPC file (through its
// footer, else as the stream after its magic) or stream, with Read's
// errors for input that cannot be framed.
func framesOf(data []byte) ([]frame, error) { return framesOfIn(data, nil) }

// framesOfIn is framesOf framing only what span needs (nil: all; a
// lightSpan: every message, not reading the bodies).
func framesOfIn(data []byte, span *rowSpan) ([]frame, error) {
	if cutBeforeSchema(data) {
		return nil, ErrNoSchema
	}
	switch Sniff(data) {
	case FormatFile:
		fileSpan := span
		if span != nil {
			fileSpan = &rowSpan{lo: span.lo, hi: span.hi, headers: span.headers}
		}
		if frames, ok := fileFramesIn(data, fileSpan); ok {
			return frames, nil
		}
		s, err := scanStreamIn(data, fileStreamStart, span)
		if err != nil {
			return nil, err
		}
		return s.frames, nil
	case FormatStream:
		s, err := scanStreamIn(data, 0, span)
		if err != nil {
			return nil, err
		}
		return s.frames, nil
	}
	return nil, ErrNotArrow
}
