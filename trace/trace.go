package trace

import "github.com/ppprof/ppprof/internal/hugepage"

// Trace is a set of events stored column by column. Row i of every column
// describes the same event. Columns are exported so analyses can scan them
// directly; they must all have length Len(). Use Append to add rows.
//
// StartNs and EndNs hold NoTime for null: an op that never started, or one
// still pending when the trace was written.
type Trace struct {
	Meta Meta

	Rank       []Rank
	Pipeline   []int32
	Stage      []Stage
	TPRank     []int32
	Chunk      []int32
	Step       []int64
	MicroBatch []MicroBatch
	Kind       []Kind
	Seq        []int64
	IssueNs    []int64
	StartNs    []int64 // NoTime when null
	EndNs      []int64 // NoTime when null
	Peer       []Rank  // NoRank when not a P2P op
	Bytes      []int64
	Shape      []Str // interned strings (Str): "" when unknown
	Dtype      []Str
	Tokens     []int64
	Flops      []float64
	MemBytes   []int64
	Group      []Str   // process group of a collective or P2P op ("" when none)
	GroupSeq   []int64 // the op's sequence number within Group; NoGroupSeq when unknown
}

// Event is one row of a Trace, for code that builds traces row by row or
// prints one event. Analyses over large traces should read the columns.
type Event struct {
	Rank       Rank
	Pipeline   int32
	Stage      Stage
	TPRank     int32
	Chunk      int32
	Step       int64
	MicroBatch MicroBatch
	Kind       Kind
	Seq        int64
	IssueNs    int64
	StartNs    int64 // NoTime when null
	EndNs      int64 // NoTime when null
	Peer       Rank  // NoRank when not a P2P op
	Bytes      int64
	Shape      string
	Dtype      string
	Tokens     int64
	Flops      float64
	MemBytes   int64
	Group      string // process group ("" when none)
	GroupSeq   int64  // sequence number within Group; NoGroupSeq when unknown. An Event literal that leaves it out says 0: set NoGroupSeq.
}

// RowBytes is the memory one row takes in a Trace's columns.
const RowBytes = 122

// Len returns the number of events.
func (t *Trace) Len() int { return len(t.Rank) }

// Grow makes room for n more events without reallocating.
func (t *Trace) Grow(n int) {
	t.Rank = grow(t.Rank, n)
	t.Pipeline = grow(t.Pipeline, n)
	t.Stage = grow(t.Stage, n)
	t.TPRank = grow(t.TPRank, n)
	t.Chunk = grow(t.Chunk, n)
	t.Step = grow(t.Step, n)
	t.MicroBatch = grow(t.MicroBatch, n)
	t.Kind = grow(t.Kind, n)
	t.Seq = grow(t.Seq, n)
	t.IssueNs = grow(t.IssueNs, n)
	t.StartNs = grow(t.StartNs, n)
	t.EndNs = grow(t.EndNs, n)
	t.Peer = grow(t.Peer, n)
	t.Bytes = grow(t.Bytes, n)
	t.Shape = grow(t.Shape, n)
	t.Dtype = grow(t.Dtype, n)
	t.Tokens = grow(t.Tokens, n)
	t.Flops = grow(t.Flops, n)
	t.MemBytes = grow(t.MemBytes, n)
	t.Group = grow(t.Group, n)
	t.GroupSeq = grow(t.GroupSeq, n)
}

func grow[T any](s []T, n int) []T {
	if cap(s)-len(s) >= n {
		return s
	}
	// Huge pages for a large column, asked before its first touch: on
	// some machines a fresh small page costs 40x its share of a huge one
	// (internal/hugepage).
	out := hugepage.Make[T](len(s) + n)[:len(s)]
	copy(out, s)
	return out
}

// Append adds one event as the last row.
func (t *Trace) Append(e Event) {
	t.appendRow(e, Intern(e.Shape), Intern(e.Dtype), Intern(e.Group))
}

// InternCache remembers the last string of each string column a caller
// appended and its id: rows mostly repeat the last row's shape, dtype and
// group, and Intern takes a lock that every core reading a trace shares.
type InternCache struct{ shape, dtype, group lastStr }

type lastStr struct {
	s  string
	id Str
}

func (c *lastStr) intern(s string) Str {
	if s != c.s {
		c.s, c.id = s, Intern(s)
	}
	return c.id
}

// AppendCached is Append, with c looking up the strings.
func (t *Trace) AppendCached(e Event, c *InternCache) {
	t.appendRow(e, c.shape.intern(e.Shape), c.dtype.intern(e.Dtype), c.group.intern(e.Group))
}

func (t *Trace) appendRow(e Event, shape, dtype, group Str) {
	t.Rank = append(t.Rank, e.Rank)
	t.Pipeline = append(t.Pipeline, e.Pipeline)
	t.Stage = append(t.Stage, e.Stage)
	t.TPRank = append(t.TPRank, e.TPRank)
	t.Chunk = append(t.Chunk, e.Chunk)
	t.Step = append(t.Step, e.Step)
	t.MicroBatch = append(t.MicroBatch, e.MicroBatch)
	t.Kind = append(t.Kind, e.Kind)
	t.Seq = append(t.Seq, e.Seq)
	t.IssueNs = append(t.IssueNs, e.IssueNs)
	t.StartNs = append(t.StartNs, e.StartNs)
	t.EndNs = append(t.EndNs, e.EndNs)
	t.Peer = append(t.Peer, e.Peer)
	t.Bytes = append(t.Bytes, e.Bytes)
	t.Shape = append(t.Shape, shape)
	t.Dtype = append(t.Dtype, dtype)
	t.Tokens = append(t.Tokens, e.Tokens)
	t.Flops = append(t.Flops, e.Flops)
	t.MemBytes = append(t.MemBytes, e.MemBytes)
	t.Group = append(t.Group, group)
	t.GroupSeq = append(t.GroupSeq, e.GroupSeq)
}

// At returns row i as an Event.
func (t *Trace) At(i int) Event {
	return Event{
		Rank:       t.Rank[i],
		Pipeline:   t.Pipeline[i],
		Stage:      t.Stage[i],
		TPRank:     t.TPRank[i],
		Chunk:      t.Chunk[i],
		Step:       t.Step[i],
		MicroBatch: t.MicroBatch[i],
		Kind:       t.Kind[i],
		Seq:        t.Seq[i],
		IssueNs:    t.IssueNs[i],
		StartNs:    t.StartNs[i],
		EndNs:      t.EndNs[i],
		Peer:       t.Peer[i],
		Bytes:      t.Bytes[i],
		Shape:      t.Shape[i].String(),
		Dtype:      t.Dtype[i].String(),
		Tokens:     t.Tokens[i],
		Flops:      t.Flops[i],
		MemBytes:   t.MemBytes[i],
		Group:      t.Group[i].String(),
		GroupSeq:   t.GroupSeq[i],
	}
}

// Started reports whether event i has a start time.
func (t *Trace) Started(i int) bool { return t.StartNs[i] != NoTime }

// Completed reports whether event i has an end time (it did not hang).
func (t *Trace) Completed(i int) bool { return t.EndNs[i] != NoTime }

// AppendRows appends rows [from, to) of src to t. Metadata is not touched.
func (t *Trace) AppendRows(src *Trace, from, to int) {
	t.Rank = append(t.Rank, src.Rank[from:to]...)
	t.Pipeline = append(t.Pipeline, src.Pipeline[from:to]...)
	t.Stage = append(t.Stage, src.Stage[from:to]...)
	t.TPRank = append(t.TPRank, src.TPRank[from:to]...)
	t.Chunk = append(t.Chunk, src.Chunk[from:to]...)
	t.Step = append(t.Step, src.Step[from:to]...)
	t.MicroBatch = append(t.MicroBatch, src.MicroBatch[from:to]...)
	t.Kind = append(t.Kind, src.Kind[from:to]...)
	t.Seq = append(t.Seq, src.Seq[from:to]...)
	t.IssueNs = append(t.IssueNs, src.IssueNs[from:to]...)
	t.StartNs = append(t.StartNs, src.StartNs[from:to]...)
	t.EndNs = append(t.EndNs, src.EndNs[from:to]...)
	t.Peer = append(t.Peer, src.Peer[from:to]...)
	t.Bytes = append(t.Bytes, src.Bytes[from:to]...)
	t.Shape = append(t.Shape, src.Shape[from:to]...)
	t.Dtype = append(t.Dtype, src.Dtype[from:to]...)
	t.Tokens = append(t.Tokens, src.Tokens[from:to]...)
	t.Flops = append(t.Flops, src.Flops[from:to]...)
	t.MemBytes = append(t.MemBytes, src.MemBytes[from:to]...)
	t.Group = append(t.Group, src.Group[from:to]...)
	t.GroupSeq = append(t.GroupSeq, src.GroupSeq[from:to]...)
}

// StepRows returns a new Trace holding t's rows of step, in t's order
// (metadata copied). A rank's rows of one step are consecutive in a trace
// in (rank, seq) order: they are copied a run at a time.
func (t *Trace) StepRows(step int64) *Trace {
	var runs [][2]int
	n := 0
	steps := t.Step
	for lo := 0; lo < len(steps); {
		if steps[lo] != step {
			lo++
			continue
		}
		hi := lo + 1
		for hi < len(steps) && steps[hi] == step {
			hi++
		}
		runs, n = append(runs, [2]int{lo, hi}), n+hi-lo
		lo = hi
	}
	out := &Trace{Meta: t.Meta}
	out.Grow(n)
	for _, r := range runs {
		out.AppendRows(t, r[0], r[1])
	}
	return out
}

// Slice returns a new Trace holding rows [from, to) of t; the columns share
// t's backing arrays. Metadata is copied.
func (t *Trace) Slice(from, to int) *Trace {
	return &Trace{
		Meta:       t.Meta,
		Rank:       t.Rank[from:to:to],
		Pipeline:   t.Pipeline[from:to:to],
		Stage:      t.Stage[from:to:to],
		TPRank:     t.TPRank[from:to:to],
		Chunk:      t.Chunk[from:to:to],
		Step:       t.Step[from:to:to],
		MicroBatch: t.MicroBatch[from:to:to],
		Kind:       t.Kind[from:to:to],
		Seq:        t.Seq[from:to:to],
		IssueNs:    t.IssueNs[from:to:to],
		StartNs:    t.StartNs[from:to:to],
		EndNs:      t.EndNs[from:to:to],
		Peer:       t.Peer[from:to:to],
		Bytes:      t.Bytes[from:to:to],
		Shape:      t.Shape[from:to:to],
		Dtype:      t.Dtype[from:to:to],
		Tokens:     t.Tokens[from:to:to],
		Flops:      t.Flops[from:to:to],
		MemBytes:   t.MemBytes[from:to:to],
		Group:      t.Group[from:to:to],
		GroupSeq:   t.GroupSeq[from:to:to],
	}
}

// Column positions in Columns (and in the Arrow schema v1, CSV and JSONL
// orders of the codecs).
const (
	ColRank = iota
	ColPipeline
	ColStage
	ColTPRank
	ColChunk
	ColStep
	ColMicroBatch
	ColKind
	ColSeq
	ColIssueNs
	ColStartNs
	ColEndNs
	ColPeer
	ColBytes
	ColShape
	ColDtype
	ColTokens
	ColFlops
	ColMemBytes
	ColGroup
	ColGroupSeq
	NumColumns // the number of columns
)

// Columns lists the column names of the event model in schema order.
var Columns = [NumColumns]string{
	"rank", "pipeline", "stage", "tp_rank", "chunk", "step", "microbatch",
	"kind", "seq", "issue_ns", "start_ns", "end_ns", "peer", "bytes", "shape",
	"dtype", "tokens", "flops", "mem_bytes", "group", "group_seq",
}
