package ingest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/ppprof/ppprof/trace"
)

// ReadJSONL reads a JSONL trace: one JSON object per line whose keys are
// the event model's column names (trace.Columns). Required and optional
// columns and their defaults are those of ReadCSV; a null or missing
// start_ns or end_ns is trace.NoTime, and null in an optional column is its
// default. Numbers are decoded exactly (int64 timestamps do not pass through
// float64), and integer columns also accept a string holding an integer.
// Unknown keys are ignored; blank lines are allowed.
//
// Rows come back ordered by (rank, seq) whatever their order in the file,
// and the trace has passed Validate. Meta is Schema 1 and nothing else.
// Errors are *ParseError values naming the line (and column when one is at
// fault).
func ReadJSONL(r io.Reader) (*trace.Trace, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var tt textTrace
	var cells row
	for line := 1; ; line++ {
		text, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, err
		}
		if line == 1 {
			text = bytes.TrimPrefix(text, utf8BOM)
		}
		if len(bytes.TrimSpace(text)) > 0 {
			if perr := parseJSONLine(text, &cells); perr != nil {
				perr.Line = line
				return nil, perr
			}
			e, ce := cells.event()
			if ce != nil {
				return nil, &ParseError{Line: line, Column: ce.col.String(), Err: ce.err}
			}
			tt.add(e, line)
		}
		if err == io.EOF {
			break
		}
	}
	return tt.finish()
}

// parseJSONLine decodes one JSONL line into cells. The returned error's
// Line is left for the caller to fill.
func parseJSONLine(text []byte, cells *row) *ParseError {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return &ParseError{Err: fmt.Errorf("invalid JSON: %v", jsonErrText(err))}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &ParseError{Err: errors.New("more than one JSON value on the line (JSONL holds one object per line)")}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return &ParseError{Err: fmt.Errorf("want a JSON object, got %s", describeJSON(v))}
	}
	*cells = row{}
	for k, val := range obj {
		c, ok := colByName[k]
		if !ok {
			continue
		}
		switch x := val.(type) {
		case nil:
			cells[c] = cell{kind: cellNull}
		case string:
			cells[c] = cell{kind: cellText, s: x}
		case json.Number:
			cells[c] = cell{kind: cellNumber, s: string(x)}
		default:
			cells[c] = cell{kind: cellOther, s: describeJSON(x)}
		}
	}
	return nil
}

// jsonErrText rewords encoding/json's errors for one line of input.
func jsonErrText(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the line ends inside a JSON value"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d of the line)", se, se.Offset)
	}
	return err.Error()
}

// describeJSON names a decoded JSON value's type for error messages.
func describeJSON(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "the string " + quoteCell(x)
	case json.Number:
		return "the number " + string(x)
	}
	return fmt.Sprintf("%T", v)
}

// WriteJSONL writes t as JSONL: one object per event with every column of
// trace.Columns as a key, in schema order; null times are JSON null. Floats
// are written in their shortest exact form, so ReadJSONL(WriteJSONL(t))
// gives t's rows back exactly (in (rank, seq) order), except that invalid
// UTF-8 in shape or dtype becomes U+FFFD as in encoding/json. A non-finite
// flops value, which JSON cannot hold, is an error. Metadata is not written.
func WriteJSONL(w io.Writer, t *trace.Trace) error {
	bw := bufio.NewWriter(w)
	var b []byte
	for i := 0; i < t.Len(); i++ {
		if f := t.Flops[i]; math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("row %d: flops %v cannot be written as JSON", i, f)
		}
		b = b[:0]
		key := func(c col) {
			if c == 0 {
				b = append(b, '{', '"')
			} else {
				b = append(b, ',', '"')
			}
			b = append(b, trace.Columns[c]...)
			b = append(b, '"', ':')
		}
		i64 := func(c col, v int64) {
			key(c)
			b = strconv.AppendInt(b, v, 10)
		}
		tm := func(c col, v int64) {
			if v == trace.NoTime {
				key(c)
				b = append(b, "null"...)
				return
			}
			i64(c, v)
		}
		str := func(c col, s string) {
			key(c)
			b = appendJSONString(b, s)
		}
		i64(trace.ColRank, int64(t.Rank[i]))
		i64(trace.ColPipeline, int64(t.Pipeline[i]))
		i64(trace.ColStage, int64(t.Stage[i]))
		i64(trace.ColTPRank, int64(t.TPRank[i]))
		i64(trace.ColChunk, int64(t.Chunk[i]))
		i64(trace.ColStep, t.Step[i])
		i64(trace.ColMicroBatch, int64(t.MicroBatch[i]))
		str(trace.ColKind, t.Kind[i].String())
		i64(trace.ColSeq, t.Seq[i])
		tm(trace.ColIssueNs, t.IssueNs[i])
		tm(trace.ColStartNs, t.StartNs[i])
		tm(trace.ColEndNs, t.EndNs[i])
		i64(trace.ColPeer, int64(t.Peer[i]))
		i64(trace.ColBytes, t.Bytes[i])
		str(trace.ColShape, t.Shape[i].String())
		str(trace.ColDtype, t.Dtype[i].String())
		i64(trace.ColTokens, t.Tokens[i])
		key(trace.ColFlops)
		b = strconv.AppendFloat(b, t.Flops[i], 'g', -1, 64)
		i64(trace.ColMemBytes, t.MemBytes[i])
		str(trace.ColGroup, t.Group[i].String())
		i64(trace.ColGroupSeq, t.GroupSeq[i])
		b = append(b, '}', '\n')
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// appendJSONString appends s as a JSON string literal: '"' and '\\'
// escaped, control characters as \u00XX, invalid UTF-8 as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
