package trace

import (
	"fmt"
	"math"
)

// RowError says which row of a trace broke which rule. Readers wrap it with
// the file name.
type RowError struct {
	Row    int    // 0-based row in the trace as read
	Rank   Rank   // the row's rank
	Column string // the offending column
	Reason string
}

func (e *RowError) Error() string {
	return fmt.Sprintf("row %d (rank %d): %s: %s", e.Row, e.Rank, e.Column, e.Reason)
}

// ColumnLens returns the lengths of t's columns, in the order of Columns
// (rank first).
func (t *Trace) ColumnLens() []int {
	return []int{len(t.Rank), len(t.Pipeline), len(t.Stage), len(t.TPRank), len(t.Chunk), len(t.Step),
		len(t.MicroBatch), len(t.Kind), len(t.Seq), len(t.IssueNs), len(t.StartNs), len(t.EndNs),
		len(t.Peer), len(t.Bytes), len(t.Shape), len(t.Dtype), len(t.Tokens), len(t.Flops), len(t.MemBytes),
		len(t.Group), len(t.GroupSeq)}
}

// Validate is the validity gate every reader runs before handing a trace to
// analyses. It checks each row on its own (kinds, ranges, times) and the
// rules that tie rows together: within a rank, seq strictly increases in row
// order, and the rank keeps one stage, pipeline and TP rank throughout.
// It returns the first violation as a *RowError.
func (t *Trace) Validate() error {
	n := t.Len()
	for i, c := range t.ColumnLens() {
		if c != n {
			return fmt.Errorf("column %s has %d rows, rank has %d", Columns[i], c, n)
		}
	}
	type rankState struct {
		lastSeq  int64
		pipeline int32
		stage    Stage
		tp       int32
	}
	ranks := make(map[Rank]*rankState)
	var cur *rankState // the state of curRank, the previous row's rank
	var curRank Rank
	bad := func(i int, col, format string, args ...any) error {
		return &RowError{Row: i, Rank: t.Rank[i], Column: col, Reason: fmt.Sprintf(format, args...)}
	}
	for i := 0; i < n; i++ {
		r := t.Rank[i]
		switch {
		case r < 0:
			return bad(i, "rank", "negative rank %d", r)
		case t.Pipeline[i] < 0:
			return bad(i, "pipeline", "negative pipeline %d", t.Pipeline[i])
		case t.Stage[i] < 0:
			return bad(i, "stage", "negative stage %d", t.Stage[i])
		case t.TPRank[i] < 0:
			return bad(i, "tp_rank", "negative tp_rank %d", t.TPRank[i])
		case t.Chunk[i] < 0:
			return bad(i, "chunk", "negative chunk %d", t.Chunk[i])
		case t.Step[i] < 0:
			return bad(i, "step", "negative step %d", t.Step[i])
		case t.MicroBatch[i] < NoMicroBatch:
			return bad(i, "microbatch", "micro-batch %d (want >= 0, or -1 for none)", t.MicroBatch[i])
		case !t.Kind[i].Valid():
			return bad(i, "kind", "invalid kind %d", t.Kind[i])
		case t.Bytes[i] < 0:
			return bad(i, "bytes", "negative bytes %d", t.Bytes[i])
		case t.Tokens[i] < 0:
			return bad(i, "tokens", "negative tokens %d", t.Tokens[i])
		case t.MemBytes[i] < 0:
			return bad(i, "mem_bytes", "negative mem_bytes %d", t.MemBytes[i])
		case t.Flops[i] < 0 || math.IsNaN(t.Flops[i]) || math.IsInf(t.Flops[i], 0):
			return bad(i, "flops", "flops %v (want finite, >= 0)", t.Flops[i])
		case t.IssueNs[i] == NoTime:
			return t.timesError(i)
		case t.GroupSeq[i] < NoGroupSeq:
			return bad(i, "group_seq", "group_seq %d (want >= 0, or -1 for unknown)", t.GroupSeq[i])
		}
		if start, end := t.StartNs[i], t.EndNs[i]; end != NoTime && (start == NoTime || end < start) {
			return t.timesError(i)
		}
		k := t.Kind[i]
		if k.IsP2P() {
			if t.Peer[i] < 0 {
				return bad(i, "peer", "%s without a peer", k)
			}
			if t.Peer[i] == r {
				return bad(i, "peer", "%s to itself", k)
			}
		} else if t.Peer[i] < NoRank {
			return bad(i, "peer", "peer %d (want >= 0, or -1 for none)", t.Peer[i])
		}
		// Rows come in runs of one rank: look the rank up once per run.
		st := cur
		if st == nil || r != curRank {
			var ok bool
			if st, ok = ranks[r]; !ok {
				st = &rankState{lastSeq: t.Seq[i], pipeline: t.Pipeline[i], stage: t.Stage[i], tp: t.TPRank[i]}
				ranks[r], cur, curRank = st, st, r
				continue
			}
			cur, curRank = st, r
		}
		if t.Seq[i] <= st.lastSeq {
			return bad(i, "seq", "seq %d not after the rank's previous seq %d", t.Seq[i], st.lastSeq)
		}
		st.lastSeq = t.Seq[i]
		if t.Stage[i] != st.stage {
			return bad(i, "stage", "stage %d, but the rank's earlier rows say stage %d", t.Stage[i], st.stage)
		}
		if t.Pipeline[i] != st.pipeline {
			return bad(i, "pipeline", "pipeline %d, but the rank's earlier rows say %d", t.Pipeline[i], st.pipeline)
		}
		if t.TPRank[i] != st.tp {
			return bad(i, "tp_rank", "tp_rank %d, but the rank's earlier rows say %d", t.TPRank[i], st.tp)
		}
	}
	return nil
}

// ValidateTimes is Validate's checks of the time columns alone (an issue
// time, no end without a start, no end before its start), for a trace
// whose other columns passed Validate and whose times were changed since
// (clock alignment shifts them, and a shift may wrap around).
func (t *Trace) ValidateTimes() error {
	issue, start, end := t.IssueNs[:t.Len()], t.StartNs[:t.Len()], t.EndNs[:t.Len()]
	for i := range issue {
		if s, e := start[i], end[i]; issue[i] == NoTime || e != NoTime && (s == NoTime || e < s) {
			return t.timesError(i)
		}
	}
	return nil
}

// timesError says what is wrong with row i's times: no issue time, an end
// without a start, or an end before its start (the first that holds).
func (t *Trace) timesError(i int) error {
	bad := func(col, format string, args ...any) error {
		return &RowError{Row: i, Rank: t.Rank[i], Column: col, Reason: fmt.Sprintf(format, args...)}
	}
	start, end := t.StartNs[i], t.EndNs[i]
	switch {
	case t.IssueNs[i] == NoTime:
		return bad("issue_ns", "null issue time")
	case start == NoTime:
		return bad("start_ns", "null start with end %d: an op cannot end without starting", end)
	default:
		return bad("end_ns", "end %d before start %d", end, start)
	}
}
