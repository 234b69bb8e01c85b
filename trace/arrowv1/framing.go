package arrowv1

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// IPC framing: each message is an optional continuation marker 0xFFFFFFFF,
// an int32 metadata length, the Message flatbuffer (padded) and a body of
// the length the flatbuffer gives. A zero length ends the stream. Streams
// written before Arrow 0.15 have no marker (the "legacy" framing); their
// end-of-stream marker is a bare zero length.

const (
	continuation = 0xFFFFFFFF
	maxMetaLen   = 64 << 20 // arrow-go's own default limit on metadata size
)

// frame is one complete IPC message found in the input.
type frame struct {
	start int    // offset of its first byte (marker or length)
	meta  []byte // Message flatbuffer, padding included
	body  []byte
	end   int // offset just past the body
	info  msgInfo
}

// frameStatus says what readFrame found at an offset.
type frameStatus int

const (
	frameOK        frameStatus = iota // a complete, verified message
	frameEOS                          // the end-of-stream marker
	frameTruncated                    // the input ends inside the message
)

// framing is the style of a stream, fixed by its first message.
type framing int

const (
	framingUnknown framing = iota
	framingContinuation
	framingLegacy
)

// readFrame reads the message at data[pos:]. A message whose bytes are all
// present but do not verify is an error; one cut off by the end of data is
// frameTruncated. end is the offset just past what was read (the message or
// the end-of-stream marker) or, with an error, past what was examined.
func readFrame(data []byte, pos int, style framing) (fr frame, status frameStatus, end int, err error) {
	return readFrameIn(data, pos, style, nil)
}

// rowSpan limits framing to the record batches a read of rows [lo, hi)
// decodes: the bodies of batches wholly before lo are not checked (only
// their message headers, for their lengths and rows), and framing stops
// after the batch that reaches row hi. at counts the rows framed so far.
type rowSpan struct {
	lo, hi, at int64
	// headers: of the bodies checked, check only that their buffers lie
	// inside them (checkRanges), not the compressed buffers' length
	// prefixes, which a decoder checks (lightSpan).
	headers bool
}

// lightSpan frames every message, checking of their bodies only the
// buffers' ranges: for readers that decode few of the record batches and
// check the buffers they decompress (ReadShape, ReadHead, Rows), so that
// the bodies of a mapped file are not read.
func lightSpan() *rowSpan { return &rowSpan{hi: math.MaxInt64, headers: true} }

// checks reports whether the body of a message with header info must be
// checked: every message but a record batch wholly before lo.
func (s *rowSpan) checks(info *msgInfo) bool {
	return s == nil || info.header != headerRecordBatch || s.at+info.rows > s.lo
}

// readFrameIn is readFrame, not checking the bodies of record batches
// that span leaves out (nil: checks every one).
func readFrameIn(data []byte, pos int, style framing, span *rowSpan) (fr frame, status frameStatus, end int, err error) {
	rem := len(data) - pos
	if rem < 4 {
		return fr, frameTruncated, pos, nil
	}
	var metaLen int64
	prefix := 4
	switch w := binary.LittleEndian.Uint32(data[pos:]); {
	case w == continuation:
		if style == framingLegacy {
			return fr, 0, pos + 4, errors.New("continuation marker in a legacy-framed stream")
		}
		if rem < 8 {
			return fr, frameTruncated, pos, nil
		}
		metaLen = int64(int32(binary.LittleEndian.Uint32(data[pos+4:])))
		if metaLen == 0 {
			return fr, frameEOS, pos + 8, nil
		}
		prefix = 8
	case style == framingContinuation:
		return fr, 0, pos + 4, fmt.Errorf("bad continuation marker %#08x", w)
	case w == 0:
		return fr, frameEOS, pos + 4, nil
	default:
		metaLen = int64(int32(w))
	}
	if metaLen < 0 || metaLen > maxMetaLen {
		return fr, 0, pos + prefix, fmt.Errorf("metadata length %d out of range", metaLen)
	}
	if int64(rem) < int64(prefix)+metaLen {
		return fr, frameTruncated, pos, nil
	}
	bodyStart := pos + prefix + int(metaLen)
	fr.start = pos
	fr.meta = data[pos+prefix : bodyStart]
	if fr.info, err = verifyMessage(fr.meta); err != nil {
		return fr, 0, bodyStart, fmt.Errorf("bad %s metadata: %w", headerName(fr.info.header), err)
	}
	if int64(len(data)-bodyStart) < fr.info.bodyLen {
		return fr, frameTruncated, pos, nil
	}
	fr.end = bodyStart + int(fr.info.bodyLen)
	fr.body = data[bodyStart:fr.end]
	if !span.checks(&fr.info) {
		return fr, frameOK, fr.end, nil
	}
	check := fr.info.checkBody
	if span != nil && span.headers {
		check = fr.info.checkRanges
	}
	if err := check(fr.body); err != nil {
		return fr, 0, fr.end, fmt.Errorf("bad %s: %w", headerName(fr.info.header), err)
	}
	return fr, frameOK, fr.end, nil
}

// streamScan is the result of framing an IPC stream.
type streamScan struct {
	frames  []frame
	used    int  // offset just past the last complete message or the end-of-stream marker
	eos     bool // the end-of-stream marker was found
	records int  // record batch frames
}

// scanStream frames the IPC stream starting at data[start:], stopping at the
// end-of-stream marker or where the input ends part way. A message that is
// all there but does not verify is an error naming the batch it would
// belong to, except inside a tail of zero bytes (what a file system can
// leave at the end of a file after a node crash), which counts as the end
// of the input.
func scanStream(data []byte, start int) (streamScan, error) {
	return scanStreamIn(data, start, nil)
}

// scanStreamIn is scanStream framing only what span needs (nil: all): it
// stops after the record batch that reaches row span.hi, as if the input
// ended there (used is then the end of that batch).
func scanStreamIn(data []byte, start int, span *rowSpan) (streamScan, error) {
	s := streamScan{used: start}
	style := framingUnknown
	pos := start
	// Where a run of zero bytes ending the input starts (len(data): none).
	// A lightSpan checks in full the bodies of messages reaching into it:
	// one that fails there ends the input, as zeroTail decides when every
	// body is checked.
	zeros := -1
	if span != nil && span.headers {
		zeros = len(data)
		for zeros > start && data[zeros-1] == 0 {
			zeros--
		}
	}
	for {
		if span != nil && span.at >= span.hi {
			return s, nil
		}
		fr, status, end, err := readFrameIn(data, pos, style, span)
		if err == nil && status == frameOK && zeros >= 0 && zeros < len(data) && zeros < end {
			if cerr := fr.info.checkBody(fr.body); cerr != nil {
				err = fmt.Errorf("bad %s: %w", headerName(fr.info.header), cerr)
			}
		}
		if err != nil {
			if zeroTail(data, pos, end) {
				return s, nil
			}
			return s, fmt.Errorf("decoding batch %d: message at byte %d: %w", s.records, pos, err)
		}
		switch status {
		case frameTruncated:
			return s, nil
		case frameEOS:
			s.used, s.eos = end, true
			return s, nil
		}
		if style == framingUnknown {
			style = framingLegacy
			if binary.LittleEndian.Uint32(data[pos:]) == continuation {
				style = framingContinuation
			}
		}
		if first := len(s.frames) == 0; first != (fr.info.header == headerSchema) {
			if first {
				return s, fmt.Errorf("first message is a %s, not a schema", headerName(fr.info.header))
			}
			return s, fmt.Errorf("decoding batch %d: message at byte %d: a second schema", s.records, pos)
		}
		if fr.info.header == headerRecordBatch {
			s.records++
			if span != nil {
				span.at += fr.info.rows
			}
		}
		s.frames = append(s.frames, fr)
		s.used, pos = end, end
	}
}

// zeroTail reports whether the failure of the message at pos, found in
// data[pos:examined], is explained by a zero-filled end of file: data ends
// in a run of zero bytes that starts inside what was examined.
func zeroTail(data []byte, pos, examined int) bool {
	z := len(data)
	for z > pos && data[z-1] == 0 {
		z--
	}
	return z < len(data) && z < examined
}
