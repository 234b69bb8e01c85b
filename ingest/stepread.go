package ingest

import (
	"fmt"
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
// chunk with only arrowv1.ShapeColumns, the others empty, in parts (one
// per file, in file order): what the shape of the job needs. The parts
// are valid until the next ChunkStep, which reuses their memory. Of an
// Arrow file only the record batches holding rows of step are decoded
// whole (arrowv1.ReadRows); of the others only
// those columns (arrowv1.ReadShape), which are all that is checked of
// them. A chunk with a file that is not Arrow, is gzip-compressed or
// holds the step's rows apart (a file of several ranks) is read whole
// (Chunk), its shape taken from its rows. Of a chunk cut between steps
// (CutSteps) each file's rows of its steps are read the same way, through
// the file's index (arrowv1.ReadShapeRows, ReadRows).
func (c *Chunks) ChunkStep(i int, step int64) (rows *trace.Trace, shape []*trace.Trace, err error) {
	if i < 0 || i >= len(c.groups) {
		return nil, nil, fmt.Errorf("chunk %d of %d", i, len(c.groups))
	}
	c.recycleShapes() // the previous call's parts are the caller's no longer
	whole := func() (*trace.Trace, []*trace.Trace, error) {
		c.recycleShapes()
		t, err := c.Chunk(i)
		if err != nil {
			return nil, nil, err
		}
		return t, []*trace.Trace{shapeOf(t)}, nil
	}
	var spans []*rowsRead // of a cut chunk: each file's rows of its steps
	if c.spans != nil {
		spans = c.spans[i]
	}
	var files []int
	var fspans []*rowsRead // of files: nil for a chunk not cut
	for k, fi := range c.groups[i] {
		if f := c.Files[fi]; f.Format != FormatArrowFile && f.Format != FormatArrowStream || f.Compressed {
			return whole()
		}
		if spans == nil {
			files, fspans = append(files, fi), append(fspans, nil)
		} else if spans[k] != nil {
			files, fspans = append(files, fi), append(fspans, spans[k])
		}
	}
	type result struct {
		rows, shape *trace.Trace
		err         error
	}
	// Each file's shape is a part of the chunk's, in file order (the
	// order of Chunk's rows for rank files), read into recycled columns.
	res := make([]result, len(files))
	var apart atomic.Bool // a file's rows of step are not one run
	eachParallel(len(files), func(k int) {
		if apart.Load() {
			return
		}
		fi := files[k]
		r := &res[k]
		scratch, _ := shapeScratch.Get().(*trace.Trace)
		r.rows, r.shape, r.err = c.fileStep(fi, fspans[k], c.stepsOf(i), step, scratch)
		if r.err == nil && r.rows == nil {
			apart.Store(true)
		}
		if r.shape == r.rows && r.shape != nil {
			// A file read whole: its rows are merged below, which
			// takes their columns; the shape keeps a copy.
			r.shape = shapeOf(r.shape)
		}
	})
	for _, r := range res {
		if r.shape != nil {
			c.shapes = append(c.shapes, r.shape)
		}
	}
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
	return rows, slices.Clone(c.shapes), nil
}

// recycleShapes hands the shape parts ChunkStep holds back to the pool
// its files' shapes are read into.
func (c *Chunks) recycleShapes() {
	for _, sh := range c.shapes {
		shapeScratch.Put(sh)
	}
	c.shapes = c.shapes[:0]
}

// stepsOf is the steps [first, last] of cut chunk i; nil for a chunk not
// cut.
func (c *Chunks) stepsOf(i int) *[2]int64 {
	if c.spans == nil || c.spans[i] == nil {
		return nil
	}
	return &c.steps[i]
}

// fileStep reads file fi for ChunkStep: its rows of step (ReadRows) and
// its shape (ReadShape, into scratch's columns when they are large
// enough), checked against what OpenChunks found of it; of a chunk cut
// between steps (sp, the file's rows of the chunk's steps, in): of those
// rows only. rows is nil, with no error, when its rows of step are not
// one run; a file the fast decoder does not take is read whole (shape is
// then rows).
func (c *Chunks) fileStep(fi int, sp *rowsRead, in *[2]int64, step int64, scratch *trace.Trace) (rows, shape *trace.Trace, err error) {
	f, err := openRead(c.paths[fi])
	if err != nil {
		return nil, nil, osReason(err)
	}
	defer f.Close()
	// Read whole when small (MapFile: a recycled buffer under 4 MB), else
	// mapped. ReadShape decodes 7 of each batch's 21 columns: through a
	// mapping, the page faults on its headers and those columns' pages
	// cost more than reading the whole file on some machines (the fleet
	// trace's 2.2 MB rank files, one step: docs/performance-history.md,
	// "Before and after the nineteenth session").
	data, release, err := arrowv1.MapFile(f)
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
	if sp != nil {
		return c.spanStep(fi, data, sp, in, step, scratch)
	}
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
	rows, err = stepRun(data, nil, 0, sh, step)
	return rows, sh, err
}

// stepRun reads the rows of step of a file (data, its index ix or nil)
// whose rows from base have the shape sh: one run of rows (ReadRows),
// checked against sh, in (rank, seq) order; none, an empty trace; nil,
// with no error, when they are not one run.
func stepRun(data []byte, ix *arrowv1.Index, base int64, sh *trace.Trace, step int64) (*trace.Trace, error) {
	a, b := -1, -1
	for j, s := range sh.Step {
		if s == step {
			if a < 0 {
				a = j
			} else if j != b {
				return nil, nil // apart
			}
			b = j + 1
		}
	}
	if a < 0 {
		return &trace.Trace{}, nil
	}
	res, _, err := arrowv1.ReadRows(data, ix, base+int64(a), base+int64(b))
	if err != nil {
		return nil, err
	}
	t := res.Trace
	if t.Len() != b-a || !slices.Equal(t.Step, sh.Step[a:b]) || !slices.Equal(t.Rank, sh.Rank[a:b]) {
		return nil, fmt.Errorf("changed while it was read: rows %d to %d of step %d read as other rows", base+int64(a), base+int64(b), step)
	}
	t.SortByRankSeq()
	return t, nil
}

// spanStep is fileStep of the rows sp of file fi (its rows of steps in,
// of a chunk cut between steps), from data, through sp's index.
func (c *Chunks) spanStep(fi int, data []byte, sp *rowsRead, in *[2]int64, step int64, scratch *trace.Trace) (rows, shape *trace.Trace, err error) {
	sh, ok := arrowv1.ReadShapeRows(data, sp.ix, sp.lo, sp.hi, scratch)
	if !ok {
		// What the fast decoder does not take, or a file changed since
		// it was indexed: its rows read whole (ReadRows says what is
		// wrong, if anything).
		res, _, err := arrowv1.ReadRows(data, sp.ix, sp.lo, sp.hi)
		if err != nil {
			return nil, nil, err
		}
		t := res.Trace
		t.SortByRankSeq()
		return t, t, c.checkSpanRows(fi, t, sp, in)
	}
	if err := c.checkSpanRows(fi, sh, sp, in); err != nil {
		return nil, sh, err
	}
	rows, err = stepRun(data, sp.ix, sp.lo, sh, step)
	return rows, sh, err
}

// checkSpanRows checks t, the rows sp of file fi (or their shape) read
// for a chunk cut between steps in, as Chunk does (checkSpan).
func (c *Chunks) checkSpanRows(fi int, t *trace.Trace, sp *rowsRead, in *[2]int64) error {
	if int64(t.Len()) != sp.hi-sp.lo {
		return fmt.Errorf("changed since it was first read: rows %d to %d asked, %d read", sp.lo, sp.hi, t.Len())
	}
	for _, s := range t.Step {
		if s < in[0] || s > in[1] {
			return fmt.Errorf("changed since it was first read: rows %d to %d hold step %d, not only steps %d to %d", sp.lo, sp.hi, s, in[0], in[1])
		}
	}
	if !subset(t.Ranks(), c.Files[fi].Ranks) || !subset(pipelinesOf(t), c.pipes[fi]) {
		return fmt.Errorf("holds ranks or pipeline replicas its first and last record batches do not show, so it cannot be read a few replicas at a time: use --stream never")
	}
	return nil
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

// ReadStep returns every row of step, from every chunk, as one trace in
// (rank, seq) order with the job's metadata: what a command that needs one
// step whole (ppprof whatif --step N) reads of a trace too large to read
// whole. Each chunk is read as ChunkStep reads it (of an Arrow rank file
// only the record batches holding the step are decoded whole, of the
// others the columns the job's shape needs) and only the step's rows are
// kept. progress, when not nil, is told the chunks read.
func (c *Chunks) ReadStep(step int64, progress func(done, total int)) (*trace.Trace, error) {
	out := &trace.Trace{}
	for i := range c.NumChunks() {
		rows, _, err := c.ChunkStep(i, step)
		if err != nil {
			return nil, err
		}
		for lo, n := 0, rows.Len(); lo < n; {
			if rows.Step[lo] != step {
				lo++
				continue
			}
			hi := lo + 1
			for hi < n && rows.Step[hi] == step {
				hi++
			}
			out.AppendRows(rows, lo, hi)
			lo = hi
		}
		if progress != nil {
			progress(i+1, c.NumChunks())
		}
	}
	c.recycleShapes()
	out.Meta = c.meta
	out.SortByRankSeq()
	return out, nil
}
