package ingest

import (
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// ChunkStep is Chunk for an analysis of one step (analyze.StepChunks):
// rows holds every row of chunk i of that step (and maybe others), in
// (rank, seq) order, as Chunk gives them; shape holds every row of the
// chunk with only arrowv1.ShapeColumns, the others empty: what the shape
// of the job needs. Of an Arrow file only the record batches holding
// rows of step are decoded whole (arrowv1.ReadRows); of the others only
// those columns (arrowv1.ReadShape), which are all that is checked of
// them. A chunk with a file that is not Arrow, is gzip-compressed or
// holds the step's rows apart (a file of several ranks), and a chunk cut
// between steps, is read whole (Chunk), its shape taken from its rows.
func (c *Chunks) ChunkStep(i int, step int64) (rows, shape *trace.Trace, err error) {
	if i < 0 || i >= len(c.groups) {
		return nil, nil, fmt.Errorf("chunk %d of %d", i, len(c.groups))
	}
	whole := func() (*trace.Trace, *trace.Trace, error) {
		t, err := c.Chunk(i)
		if err != nil {
			return nil, nil, err
		}
		return t, shapeOf(t), nil
	}
	if c.spans != nil && c.spans[i] != nil {
		return whole()
	}
	files := c.groups[i]
	for _, fi := range files {
		if f := c.Files[fi]; f.Format != FormatArrowFile && f.Format != FormatArrowStream || f.Compressed {
			return whole()
		}
	}
	type result struct {
		rows *trace.Trace
		err  error
	}
	// Each file's shape goes to its rows of the chunk's, in file order
	// (the order of Chunk's rows for rank files).
	offs := make([]int, len(files)+1)
	for k, fi := range files {
		offs[k+1] = offs[k] + c.Files[fi].Events
	}
	shape = makeShape(c.meta, offs[len(files)])
	res := make([]result, len(files))
	var apart atomic.Bool // a file's rows of step are not one run
	eachParallel(len(files), func(k int) {
		if apart.Load() {
			return
		}
		fi := files[k]
		r := &res[k]
		scratch, _ := shapeScratch.Get().(*trace.Trace)
		var sh *trace.Trace
		r.rows, sh, r.err = c.fileStep(fi, step, scratch)
		switch {
		case r.err != nil:
		case r.rows == nil:
			apart.Store(true)
		default:
			copyShape(shape, offs[k], sh) // checkFile checked its length
		}
		if sh != nil && sh != r.rows {
			shapeScratch.Put(sh)
		}
	})
	if apart.Load() {
		return whole()
	}
	var parts []*trace.Trace
	for k, r := range res {
		if r.err != nil {
			return nil, nil, &FileError{Path: c.paths[files[k]], Err: r.err}
		}
		if r.rows.Len() > 0 {
			parts = append(parts, r.rows)
		}
	}
	switch len(parts) {
	case 0:
		rows = &trace.Trace{}
	case 1:
		rows = parts[0]
	default:
		if rows, err = mergePartsReturning(parts, false); err != nil {
			return nil, nil, fmt.Errorf("merging %d files: %w", len(parts), err)
		}
	}
	rows.Meta = c.meta
	return rows, shape, nil
}

// fileStep reads file fi for ChunkStep: its rows of step (ReadRows) and
// its shape (ReadShape, into scratch's columns when they are large
// enough), checked against what OpenChunks found of it. rows is nil, with
// no error, when its rows of step are not one run; a file the fast
// decoder does not take is read whole (shape is then rows).
func (c *Chunks) fileStep(fi int, step int64, scratch *trace.Trace) (rows, shape *trace.Trace, err error) {
	f, err := os.Open(c.paths[fi])
	if err != nil {
		return nil, nil, osReason(err)
	}
	defer f.Close()
	data, release, err := arrowv1.MapFileSparse(f)
	if err != nil {
		return nil, nil, osReason(err)
	}
	defer release()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			rows, shape, err = nil, nil, fmt.Errorf("corrupt Arrow data: decoder panicked: %v", p)
		}
	}()
	sh, ok := arrowv1.ReadShape(data, scratch)
	if !ok {
		// What the fast decoder does not take: read it whole (Read says
		// what is wrong, if anything).
		res, err := arrowv1.Read(data)
		if err != nil {
			return nil, nil, err
		}
		t := res.Trace
		t.SortByRankSeq()
		if err := c.checkFile(fi, t); err != nil {
			return nil, nil, err
		}
		return t, t, nil
	}
	if err := c.checkFile(fi, sh); err != nil {
		return nil, sh, err
	}
	lo, hi := -1, -1
	for j, s := range sh.Step {
		if s == step {
			if lo < 0 {
				lo = j
			} else if j != hi {
				return nil, sh, nil // apart
			}
			hi = j + 1
		}
	}
	if lo < 0 {
		return &trace.Trace{}, sh, nil
	}
	res, _, err := arrowv1.ReadRows(data, nil, int64(lo), int64(hi))
	if err != nil {
		return nil, sh, err
	}
	t := res.Trace
	if t.Len() != hi-lo || !slices.Equal(t.Step, sh.Step[lo:hi]) || !slices.Equal(t.Rank, sh.Rank[lo:hi]) {
		return nil, sh, fmt.Errorf("changed while it was read: rows %d to %d of step %d read as other rows", lo, hi, step)
	}
	t.SortByRankSeq()
	return t, sh, nil
}

// checkFile checks t, file fi's rows (or their shape), against what
// OpenChunks found of the file, as Chunk does.
func (c *Chunks) checkFile(fi int, t *trace.Trace) error {
	if t.Len() != c.Files[fi].Events {
		return fmt.Errorf("changed since it was first read: %d events, then %d", c.Files[fi].Events, t.Len())
	}
	if !slices.Equal(t.Ranks(), c.Files[fi].Ranks) || !subset(pipelinesOf(t), c.pipes[fi]) {
		return fmt.Errorf("holds ranks or pipeline replicas its first and last record batches do not show, so it cannot be read a few replicas at a time: use --stream never")
	}
	return nil
}

// shapeScratch recycles the shape columns ReadShape decodes a file into.
var shapeScratch sync.Pool

// makeShape is a trace of n rows of arrowv1.ShapeColumns alone.
func makeShape(meta trace.Meta, n int) *trace.Trace {
	return &trace.Trace{Meta: meta, Rank: make([]trace.Rank, n), Pipeline: make([]int32, n), Stage: make([]trace.Stage, n),
		Step: make([]int64, n), Kind: make([]trace.Kind, n), MicroBatch: make([]trace.MicroBatch, n), Chunk: make([]int32, n)}
}

// shapeOf is t's arrowv1.ShapeColumns alone, copied.
func shapeOf(t *trace.Trace) *trace.Trace {
	out := makeShape(t.Meta, t.Len())
	copyShape(out, 0, t)
	return out
}

// copyShape copies the arrowv1.ShapeColumns of src's rows to dst's rows
// from off.
func copyShape(dst *trace.Trace, off int, src *trace.Trace) {
	copy(dst.Rank[off:], src.Rank)
	copy(dst.Pipeline[off:], src.Pipeline)
	copy(dst.Stage[off:], src.Stage)
	copy(dst.Step[off:], src.Step)
	copy(dst.Kind[off:], src.Kind)
	copy(dst.MicroBatch[off:], src.MicroBatch)
	copy(dst.Chunk[off:], src.Chunk)
}
