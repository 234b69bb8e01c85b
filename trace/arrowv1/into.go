package arrowv1

import (
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/ppprof/ppprof/trace"
)

// Rows straight into a merged trace: a reader that merges many inputs
// into one trace and knows how many rows each holds (Rows) makes the
// merged trace's columns once (MakeRows) and has each input decoded into
// its own rows of them (ReadInto), in parallel: no trace per input, no
// copy into the merged one.

// MakeRows returns a trace with n zero rows in every column ("" in the
// string columns), capacity n: what ReadInto decodes into.
func MakeRows(n int) *trace.Trace {
	t := &trace.Trace{}
	t.Grow(n)
	setLen(t, n)
	return t
}

// MakeRowsIn is MakeRows reusing t's columns when each has the capacity
// for n rows (t's rows are overwritten: the string columns' first n rows
// become "", the others hold anything, as ReadInto allows). t may be nil.
func MakeRowsIn(t *trace.Trace, n int) *trace.Trace {
	if t == nil || n < 0 || !fitsCap(t, n) {
		return MakeRows(n)
	}
	setLen(t, n)
	t.Meta = trace.Meta{}
	clearStrings(t)
	return t
}

// clearStrings sets every row of t's string columns to "", on every core
// for a large t (the columns of a streamed chunk: 12 bytes a row).
func clearStrings(t *trace.Trace) {
	n := t.Len()
	w := min(runtime.GOMAXPROCS(0), n>>16)
	if w <= 1 {
		clear(t.Shape)
		clear(t.Dtype)
		clear(t.Group)
		return
	}
	var wg sync.WaitGroup
	per := (n + w - 1) / w
	for lo := 0; lo < n; lo += per {
		hi := min(lo+per, n)
		wg.Go(func() {
			clear(t.Shape[lo:hi])
			clear(t.Dtype[lo:hi])
			clear(t.Group[lo:hi])
		})
	}
	wg.Wait()
}

// fitsCap reports whether every column of t has capacity for n rows.
func fitsCap(t *trace.Trace, n int) bool {
	return cap(t.Rank) >= n && cap(t.Pipeline) >= n && cap(t.Stage) >= n && cap(t.TPRank) >= n &&
		cap(t.Chunk) >= n && cap(t.Step) >= n && cap(t.MicroBatch) >= n && cap(t.Kind) >= n &&
		cap(t.Seq) >= n && cap(t.IssueNs) >= n && cap(t.StartNs) >= n && cap(t.EndNs) >= n &&
		cap(t.Peer) >= n && cap(t.Bytes) >= n && cap(t.Shape) >= n && cap(t.Dtype) >= n &&
		cap(t.Tokens) >= n && cap(t.Flops) >= n && cap(t.MemBytes) >= n && cap(t.Group) >= n &&
		cap(t.GroupSeq) >= n
}

// ReadInto is Read with the input's rows decoded into rows [off, off+n) of
// dst's columns instead of a trace of their own.
//
// Rows [off, off+n) of dst's string columns must hold "" (as MakeRows
// leaves them), and no other goroutine may use those rows meanwhile;
// ReadInto touches no row of dst outside them.
//
// When the input holds exactly n rows and reads without error, placed is
// true and Result.Trace's columns are dst's rows [off, off+n) (with
// capacity n: appending to them does not touch dst's other rows; for n 0,
// Read's empty columns), its metadata the input's. Otherwise placed is false, Result.Trace is a trace
// of its own and rows [off, off+n) of dst hold anything. Either way the
// Result (the trace's rows and metadata included) and the error are
// exactly Read's. A dst whose columns do not all hold off+n rows, or a
// negative off or n, make ReadInto Read.
func ReadInto(data []byte, dst *trace.Trace, off, n int) (res *Result, placed bool, err error) {
	ok := dst != nil && off >= 0 && n >= 0 && fits(dst, off+n)
	var into *rowRange
	if ok && n > 0 {
		into = &rowRange{t: dst, off: off, n: n}
	}
	// No rows: Read's trace (empty, as Read leaves it) is those rows.
	res, _, err = readFramesInto(data, memory.DefaultAllocator, true, false, into, nil)
	if err != nil {
		return nil, false, err
	}
	return res, ok && IsRows(res.Trace, dst, off, n), nil
}

// rowRange is rows [off, off+n) of t's columns.
type rowRange struct {
	t      *trace.Trace
	off, n int
}

// view returns the rows of r as a trace with metadata meta.
func (r *rowRange) view(meta trace.Meta) *trace.Trace {
	v := r.t.Slice(r.off, r.off+r.n)
	v.Meta = meta
	return v
}

// fits reports whether every column of t holds at least n rows.
func fits(t *trace.Trace, n int) bool {
	for _, l := range t.ColumnLens() {
		if l < n {
			return false
		}
	}
	return true
}

// IsRows reports whether every column of v is exactly rows [off, off+n) of
// the same column of t (the same memory, not a copy): what ReadInto
// returns when it placed an input's rows.
func IsRows(v, t *trace.Trace, off, n int) bool {
	if v == nil || t == nil || off < 0 || n < 0 || !fits(t, off+n) {
		return false
	}
	for _, l := range v.ColumnLens() {
		if l != n {
			return false
		}
	}
	if n == 0 {
		return true
	}
	return same(v.Rank, t.Rank, off) && same(v.Pipeline, t.Pipeline, off) && same(v.Stage, t.Stage, off) &&
		same(v.TPRank, t.TPRank, off) && same(v.Chunk, t.Chunk, off) && same(v.Step, t.Step, off) &&
		same(v.MicroBatch, t.MicroBatch, off) && same(v.Kind, t.Kind, off) && same(v.Seq, t.Seq, off) &&
		same(v.IssueNs, t.IssueNs, off) && same(v.StartNs, t.StartNs, off) && same(v.EndNs, t.EndNs, off) &&
		same(v.Peer, t.Peer, off) && same(v.Bytes, t.Bytes, off) && same(v.Shape, t.Shape, off) &&
		same(v.Dtype, t.Dtype, off) && same(v.Tokens, t.Tokens, off) && same(v.Flops, t.Flops, off) &&
		same(v.MemBytes, t.MemBytes, off) && same(v.Group, t.Group, off) && same(v.GroupSeq, t.GroupSeq, off)
}

// same reports whether v starts at row off of t (v is not empty).
func same[T any](v, t []T, off int) bool { return &v[0] == &t[off] }

// copyRows copies every row of src into v (both of the same length).
func copyRows(v, src *trace.Trace) {
	copy(v.Rank, src.Rank)
	copy(v.Pipeline, src.Pipeline)
	copy(v.Stage, src.Stage)
	copy(v.TPRank, src.TPRank)
	copy(v.Chunk, src.Chunk)
	copy(v.Step, src.Step)
	copy(v.MicroBatch, src.MicroBatch)
	copy(v.Kind, src.Kind)
	copy(v.Seq, src.Seq)
	copy(v.IssueNs, src.IssueNs)
	copy(v.StartNs, src.StartNs)
	copy(v.EndNs, src.EndNs)
	copy(v.Peer, src.Peer)
	copy(v.Bytes, src.Bytes)
	copy(v.Shape, src.Shape)
	copy(v.Dtype, src.Dtype)
	copy(v.Tokens, src.Tokens)
	copy(v.Flops, src.Flops)
	copy(v.MemBytes, src.MemBytes)
	copy(v.Group, src.Group)
	copy(v.GroupSeq, src.GroupSeq)
}
