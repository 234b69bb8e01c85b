package ingest

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/ppprof/ppprof/trace"
)

// col indexes trace.Columns: the event model's columns in schema order.
type col int

func (c col) String() string { return trace.Columns[c] }

// requiredCols must be present as columns (CSV header) in every text trace;
// the same set the Arrow schema requires. start_ns and end_ns must be
// present but their cells may be null.
var requiredCols = [trace.NumColumns]bool{
	trace.ColRank: true, trace.ColStage: true, trace.ColStep: true, trace.ColKind: true, trace.ColSeq: true,
	trace.ColStartNs: true, trace.ColEndNs: true,
}

// colByName maps a column name to its index.
var colByName = func() map[string]col {
	m := make(map[string]col, trace.NumColumns)
	for c := col(0); c < trace.NumColumns; c++ {
		m[trace.Columns[c]] = c
	}
	return m
}()

// cellKind says what a cell of a text trace holds.
type cellKind uint8

const (
	cellAbsent cellKind = iota // no such column / key
	cellNull                   // empty CSV cell, JSON null
	cellText                   // CSV text or a JSON string
	cellNumber                 // a JSON number literal
	cellOther                  // a JSON bool, object or array
)

// cell is one value of one row of a text trace, before typing. For
// cellOther, s describes the value ("true", "an object").
type cell struct {
	kind cellKind
	s    string
}

// cellError is a bad cell: which column, and why. Readers add the line.
type cellError struct {
	col col
	err error
}

// row is the cells of one row, indexed by column.
type row [trace.NumColumns]cell

// event types the cells of r into an event, applying the defaults of
// absent or null optional columns (DESIGN.md): pipeline, tp_rank, chunk 0,
// microbatch -1, issue_ns = start_ns (or end_ns when start is null), peer
// -1, bytes, tokens, flops, mem_bytes 0, shape, dtype and group "",
// group_seq -1 (trace.NoGroupSeq). A null
// start_ns or end_ns is trace.NoTime.
func (r *row) event() (trace.Event, *cellError) {
	var e trace.Event
	var err *cellError
	i32 := func(c col, def int32) int32 {
		v, ce := r.integer(c, 32, int64(def))
		if ce != nil && err == nil {
			err = ce
		}
		return int32(v)
	}
	i64 := func(c col, def int64) int64 {
		v, ce := r.integer(c, 64, def)
		if ce != nil && err == nil {
			err = ce
		}
		return v
	}
	str := func(c col) string {
		v, ce := r.str(c)
		if ce != nil && err == nil {
			err = ce
		}
		return v
	}
	e.Rank = trace.Rank(i32(trace.ColRank, 0))
	e.Pipeline = i32(trace.ColPipeline, 0)
	e.Stage = trace.Stage(i32(trace.ColStage, 0))
	e.TPRank = i32(trace.ColTPRank, 0)
	e.Chunk = i32(trace.ColChunk, 0)
	e.Step = i64(trace.ColStep, 0)
	e.MicroBatch = trace.MicroBatch(i32(trace.ColMicroBatch, int32(trace.NoMicroBatch)))
	kind := str(trace.ColKind)
	e.Seq = i64(trace.ColSeq, 0)
	e.StartNs = i64(trace.ColStartNs, trace.NoTime)
	e.EndNs = i64(trace.ColEndNs, trace.NoTime)
	e.IssueNs = i64(trace.ColIssueNs, trace.NoTime)
	e.Peer = trace.Rank(i32(trace.ColPeer, int32(trace.NoRank)))
	e.Bytes = i64(trace.ColBytes, 0)
	e.Shape = str(trace.ColShape)
	e.Dtype = str(trace.ColDtype)
	e.Tokens = i64(trace.ColTokens, 0)
	e.Flops = r.float(trace.ColFlops, &err)
	e.MemBytes = i64(trace.ColMemBytes, 0)
	e.Group = str(trace.ColGroup)
	e.GroupSeq = i64(trace.ColGroupSeq, trace.NoGroupSeq)
	if err != nil {
		return e, err
	}
	k, kerr := trace.ParseKind(strings.TrimSpace(kind))
	if kerr != nil {
		return e, &cellError{trace.ColKind, kerr}
	}
	e.Kind = k
	if e.IssueNs == trace.NoTime {
		e.IssueNs = e.StartNs
		if e.IssueNs == trace.NoTime {
			e.IssueNs = e.EndNs
		}
		if e.IssueNs == trace.NoTime {
			return e, &cellError{trace.ColIssueNs, errors.New("null, and start_ns and end_ns are null too: no time to take the issue time from")}
		}
	}
	return e, nil
}

// missing is the error for a required cell that is absent or null.
func (r *row) missing(c col) *cellError {
	if r[c].kind == cellAbsent {
		return &cellError{c, errors.New("missing, but the column is required")}
	}
	return &cellError{c, errors.New("null, but the column is required")}
}

// integer types cell c as an integer of the given bit size. Absent or null
// optional cells (and null start_ns / end_ns) take def. JSON strings that
// hold an integer are accepted: emitters quote int64 values that a JSON
// double cannot hold exactly.
func (r *row) integer(c col, bits int, def int64) (int64, *cellError) {
	cl := r[c]
	switch cl.kind {
	case cellAbsent, cellNull:
		if requiredCols[c] && c != trace.ColStartNs && c != trace.ColEndNs {
			return def, r.missing(c)
		}
		return def, nil
	case cellOther:
		return def, &cellError{c, fmt.Errorf("want an integer, got %s", cl.s)}
	}
	s := strings.TrimSpace(cl.s)
	v, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return def, &cellError{c, fmt.Errorf("%s is out of range for int%d", quoteCell(cl.s), bits)}
		}
		return def, &cellError{c, fmt.Errorf("%s is not an integer", quoteCell(cl.s))}
	}
	return v, nil
}

// float types cell c as a float64; absent or null is 0. On error it sets
// *errp unless an earlier error is there.
func (r *row) float(c col, errp **cellError) float64 {
	cl := r[c]
	var ce *cellError
	var v float64
	switch cl.kind {
	case cellAbsent, cellNull:
	case cellOther:
		ce = &cellError{c, fmt.Errorf("want a number, got %s", cl.s)}
	default:
		f, err := strconv.ParseFloat(strings.TrimSpace(cl.s), 64)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange):
			ce = &cellError{c, fmt.Errorf("%s is not a number", quoteCell(cl.s))}
		case err != nil || math.IsInf(f, 0) || math.IsNaN(f):
			ce = &cellError{c, fmt.Errorf("%s is not a finite number", quoteCell(cl.s))}
		default:
			v = f
		}
	}
	if ce != nil && *errp == nil {
		*errp = ce
	}
	return v
}

// str types cell c as a string; absent or null is "" (an error for the
// required kind column). A JSON number is not a string.
func (r *row) str(c col) (string, *cellError) {
	cl := r[c]
	switch cl.kind {
	case cellAbsent, cellNull:
		if requiredCols[c] {
			return "", r.missing(c)
		}
		return "", nil
	case cellNumber:
		return "", &cellError{c, fmt.Errorf("want a string, got the number %s", cl.s)}
	case cellOther:
		return "", &cellError{c, fmt.Errorf("want a string, got %s", cl.s)}
	}
	return cl.s, nil
}

// quoteCell quotes a cell for an error message, shortening long ones.
func quoteCell(s string) string {
	const max = 40
	if len(s) > max {
		return fmt.Sprintf("%q...", s[:max])
	}
	return strconv.Quote(s)
}

// textTrace collects the rows of a CSV or JSONL file with the line each
// came from, then orders and validates them.
type textTrace struct {
	t     trace.Trace
	lines []int // line of each row, 1-based
}

func (tt *textTrace) add(e trace.Event, line int) {
	tt.t.Append(e)
	tt.lines = append(tt.lines, line)
}

// finish orders the rows by (rank, seq), as trace.Merge does, so a file may
// list its rows in any order (by end time, say); then it runs the validity
// gate and names the line of the first bad row. The metadata is Schema 1
// and nothing else (see the package comment).
func (tt *textTrace) finish() (*trace.Trace, error) {
	t := &tt.t
	t.Meta = trace.Meta{Schema: trace.SchemaMajor}
	n := t.Len()
	idx := make([]int, n)
	sorted := true
	for i := range idx {
		idx[i] = i
		if i > 0 && (t.Rank[i] < t.Rank[i-1] || t.Rank[i] == t.Rank[i-1] && t.Seq[i] < t.Seq[i-1]) {
			sorted = false
		}
	}
	lines := tt.lines
	if !sorted {
		sort.SliceStable(idx, func(a, b int) bool {
			i, j := idx[a], idx[b]
			if t.Rank[i] != t.Rank[j] {
				return t.Rank[i] < t.Rank[j]
			}
			return t.Seq[i] < t.Seq[j]
		})
		t = t.Permute(idx)
		lines = make([]int, n)
		for k, i := range idx {
			lines[k] = tt.lines[i]
		}
	}
	if err := t.Validate(); err != nil {
		var re *trace.RowError
		if !errors.As(err, &re) || re.Row < 0 || re.Row >= n {
			return nil, err
		}
		pe := &ParseError{Line: lines[re.Row], Column: re.Column, Err: &rowReason{re: re}}
		if re.Column == "seq" && re.Row > 0 && t.Rank[re.Row-1] == re.Rank && t.Seq[re.Row-1] == t.Seq[re.Row] {
			pe.Err = &rowReason{re: re, msg: fmt.Sprintf("rank %d: seq %d again (also on line %d): seq must be unique per rank",
				re.Rank, t.Seq[re.Row], lines[re.Row-1])}
		}
		return nil, pe
	}
	return t, nil
}

// rowReason shows a validity-gate error by its reason (the line and column
// are already in the ParseError around it) and unwraps to it.
type rowReason struct {
	re  *trace.RowError
	msg string
}

func (r *rowReason) Error() string {
	if r.msg != "" {
		return r.msg
	}
	return fmt.Sprintf("rank %d: %s", r.re.Rank, r.re.Reason)
}

func (r *rowReason) Unwrap() error { return r.re }
