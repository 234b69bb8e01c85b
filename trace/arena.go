package trace

import (
	"sync"
	"unsafe"

	"github.com/ppprof/ppprof/internal/hugepage"
)

// A ColumnArena hands out the columns of many small traces built row by
// row (the parts of a large read: a Flight Recorder dump per rank, a few
// thousand rows each) from slabs of several MB, one series of slabs per
// column, asked for huge pages before their first touch. Allocated each
// on its own, a part's columns are small objects in 4 KiB pages, each
// page a fault of its own the first time it is written (a 4096-rank job's
// dumps: 1 GB of parts, 185K faults); a slab's huge pages take one fault
// per 2 MiB (internal/hugepage).
//
// Columns of one kind share slabs, so that a merge that copies one
// column of every part and drops the parts' (ingest's mergeCol) frees
// whole slabs. A slab stays allocated while any column cut from it is
// referenced. A ColumnArena may be used from several goroutines.
type ColumnArena struct {
	mu       sync.Mutex
	rows     int // the rows expected in all
	rank     arenaSlab[Rank]
	pipeline arenaSlab[int32]
	stage    arenaSlab[Stage]
	tpRank   arenaSlab[int32]
	chunk    arenaSlab[int32]
	step     arenaSlab[int64]
	mb       arenaSlab[MicroBatch]
	kind     arenaSlab[Kind]
	seq      arenaSlab[int64]
	issue    arenaSlab[int64]
	start    arenaSlab[int64]
	end      arenaSlab[int64]
	peer     arenaSlab[Rank]
	nbytes   arenaSlab[int64]
	shape    arenaSlab[Str]
	dtype    arenaSlab[Str]
	tokens   arenaSlab[int64]
	flops    arenaSlab[float64]
	mem      arenaSlab[int64]
	group    arenaSlab[Str]
	groupSeq arenaSlab[int64]
}

// A slab holds a quarter of a column of the rows expected, from two huge
// pages (hugepage.MinBytes) to 16 MB. The end of a column's last slab
// that no part reached is never touched, so never faulted in.
const (
	arenaSlabMin = hugepage.MinBytes
	arenaSlabMax = 16 << 20
)

// NewColumnArena returns an arena for traces of about rows events in all.
func NewColumnArena(rows int) *ColumnArena { return &ColumnArena{rows: rows} }

type arenaSlab[T any] struct{ free []T }

// grow returns col with room for n more rows: col itself when it has it,
// else its rows copied into the current slab (a new one when it is
// full). A column of more than an eighth of a slab gets memory of its own.
func (s *arenaSlab[T]) grow(col []T, n, rows int) []T {
	if cap(col)-len(col) >= n {
		return col
	}
	m := len(col) + n
	size := int(unsafe.Sizeof(*new(T)))
	// Whole huge pages (hugepage.Make starts a slab on one).
	bytes := min(max(rows/4*size, arenaSlabMin), arenaSlabMax)
	elems := (bytes + hugepage.Size - 1) &^ (hugepage.Size - 1) / size
	if m > elems/8 {
		return grow(col, n)
	}
	if len(s.free) < m {
		s.free = hugepage.Make[T](elems)
	}
	// Capped at m: an append past it reallocates instead of writing
	// over the next column cut from the slab.
	out := s.free[:len(col):m]
	s.free = s.free[m:]
	copy(out, col)
	return out
}

// GrowIn is Grow with the columns that need room cut from a's slabs (a
// nil a: Grow).
func (t *Trace) GrowIn(n int, a *ColumnArena) {
	if a == nil {
		t.Grow(n)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.rows
	t.Rank = a.rank.grow(t.Rank, n, b)
	t.Pipeline = a.pipeline.grow(t.Pipeline, n, b)
	t.Stage = a.stage.grow(t.Stage, n, b)
	t.TPRank = a.tpRank.grow(t.TPRank, n, b)
	t.Chunk = a.chunk.grow(t.Chunk, n, b)
	t.Step = a.step.grow(t.Step, n, b)
	t.MicroBatch = a.mb.grow(t.MicroBatch, n, b)
	t.Kind = a.kind.grow(t.Kind, n, b)
	t.Seq = a.seq.grow(t.Seq, n, b)
	t.IssueNs = a.issue.grow(t.IssueNs, n, b)
	t.StartNs = a.start.grow(t.StartNs, n, b)
	t.EndNs = a.end.grow(t.EndNs, n, b)
	t.Peer = a.peer.grow(t.Peer, n, b)
	t.Bytes = a.nbytes.grow(t.Bytes, n, b)
	t.Shape = a.shape.grow(t.Shape, n, b)
	t.Dtype = a.dtype.grow(t.Dtype, n, b)
	t.Tokens = a.tokens.grow(t.Tokens, n, b)
	t.Flops = a.flops.grow(t.Flops, n, b)
	t.MemBytes = a.mem.grow(t.MemBytes, n, b)
	t.Group = a.group.grow(t.Group, n, b)
	t.GroupSeq = a.groupSeq.grow(t.GroupSeq, n, b)
}
