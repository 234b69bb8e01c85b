package ingest

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ppprof/ppprof/trace"
)

// ReadCSV reads a CSV trace: one header row naming columns by the event
// model's names (trace.Columns), in any order, then one event per row.
//
// The columns rank, stage, step, kind, seq, start_ns and end_ns are
// required; the others may be left out and take their defaults (pipeline,
// tp_rank, chunk 0; microbatch -1; issue_ns = start_ns, or end_ns when start
// is null; peer -1; bytes, tokens, flops, mem_bytes 0; shape, dtype, group
// ""; group_seq -1).
// An empty cell is null: trace.NoTime in start_ns and end_ns, the default in
// an optional column, an error in a required one. Unknown columns are
// ignored, header names and numeric cells may carry spaces around them, and
// a UTF-8 byte-order mark before the header is skipped.
//
// Rows come back ordered by (rank, seq) whatever their order in the file,
// and the trace has passed Validate. Meta is Schema 1 and nothing else.
// Errors are *ParseError values naming the line and column.
func ReadCSV(r io.Reader) (*trace.Trace, error) {
	br := bufio.NewReader(r)
	if b, err := br.Peek(len(utf8BOM)); err == nil && bytes.Equal(b, utf8BOM) {
		br.Discard(len(utf8BOM))
	}
	cr := csv.NewReader(br)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, &ParseError{Line: 1, Err: errors.New("no header row")}
	}
	if err != nil {
		return nil, csvError(err)
	}
	bind, err := bindCSVHeader(header)
	if err != nil {
		return nil, &ParseError{Line: 1, Err: err}
	}
	var tt textTrace
	var cells row
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvError(err)
		}
		line, _ := cr.FieldPos(0)
		cells = row{}
		for c := col(0); c < trace.NumColumns; c++ {
			if bind[c] < 0 {
				continue
			}
			if s := rec[bind[c]]; s != "" {
				cells[c] = cell{kind: cellText, s: s}
			} else {
				cells[c] = cell{kind: cellNull}
			}
		}
		e, ce := cells.event()
		if ce != nil {
			return nil, &ParseError{Line: line, Column: ce.col.String(), Err: ce.err}
		}
		tt.add(e, line)
	}
	return tt.finish()
}

// bindCSVHeader maps each model column to its field index in the header
// (-1 when absent), or says which required column is missing or which
// column appears twice.
func bindCSVHeader(header []string) ([trace.NumColumns]int, error) {
	var bind [trace.NumColumns]int
	for i := range bind {
		bind[i] = -1
	}
	for i, name := range header {
		c, ok := colByName[strings.TrimSpace(name)]
		if !ok {
			continue
		}
		if bind[c] >= 0 {
			return bind, fmt.Errorf("header names column %q twice (fields %d and %d)", c, bind[c]+1, i+1)
		}
		bind[c] = i
	}
	var missing []string
	for c := col(0); c < trace.NumColumns; c++ {
		if requiredCols[c] && bind[c] < 0 {
			missing = append(missing, strconv.Quote(c.String()))
		}
	}
	if len(missing) > 0 {
		return bind, fmt.Errorf("header lacks required column(s) %s (header: %s)",
			strings.Join(missing, ", "), quoteCell(strings.Join(header, ",")))
	}
	return bind, nil
}

// csvError turns an encoding/csv error into a *ParseError.
func csvError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		line := pe.Line
		if errors.Is(pe.Err, csv.ErrQuote) {
			return &ParseError{Line: pe.StartLine, Err: errors.New(`a quoted field is not closed, or has a stray '"' inside`)}
		}
		if errors.Is(pe.Err, csv.ErrFieldCount) {
			return &ParseError{Line: line, Err: errors.New("wrong number of fields (the header has a different number)")}
		}
		return &ParseError{Line: line, Err: pe.Err}
	}
	return err
}

// WriteCSV writes t as CSV: a header with every column of trace.Columns in
// schema order, then one row per event. Null times are empty cells. Floats
// are written in their shortest exact form, so ReadCSV(WriteCSV(t)) gives
// t's rows back exactly (in (rank, seq) order); the one exception is a
// "\r\n" inside shape or dtype, which encoding/csv reads back as "\n".
// Metadata is not written.
func WriteCSV(w io.Writer, t *trace.Trace) error {
	bw := bufio.NewWriter(w)
	cw := csv.NewWriter(bw)
	if err := cw.Write(trace.Columns[:]); err != nil {
		return err
	}
	rec := make([]string, trace.NumColumns)
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	tm := func(v int64) string {
		if v == trace.NoTime {
			return ""
		}
		return i64(v)
	}
	for i := 0; i < t.Len(); i++ {
		rec[trace.ColRank] = i64(int64(t.Rank[i]))
		rec[trace.ColPipeline] = i64(int64(t.Pipeline[i]))
		rec[trace.ColStage] = i64(int64(t.Stage[i]))
		rec[trace.ColTPRank] = i64(int64(t.TPRank[i]))
		rec[trace.ColChunk] = i64(int64(t.Chunk[i]))
		rec[trace.ColStep] = i64(t.Step[i])
		rec[trace.ColMicroBatch] = i64(int64(t.MicroBatch[i]))
		rec[trace.ColKind] = t.Kind[i].String()
		rec[trace.ColSeq] = i64(t.Seq[i])
		rec[trace.ColIssueNs] = tm(t.IssueNs[i])
		rec[trace.ColStartNs] = tm(t.StartNs[i])
		rec[trace.ColEndNs] = tm(t.EndNs[i])
		rec[trace.ColPeer] = i64(int64(t.Peer[i]))
		rec[trace.ColBytes] = i64(t.Bytes[i])
		rec[trace.ColShape] = t.Shape[i].String()
		rec[trace.ColDtype] = t.Dtype[i].String()
		rec[trace.ColTokens] = i64(t.Tokens[i])
		rec[trace.ColFlops] = strconv.FormatFloat(t.Flops[i], 'g', -1, 64)
		rec[trace.ColMemBytes] = i64(t.MemBytes[i])
		rec[trace.ColGroup] = t.Group[i].String()
		rec[trace.ColGroupSeq] = i64(t.GroupSeq[i])
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return bw.Flush()
}
