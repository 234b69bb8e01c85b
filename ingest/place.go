package ingest

import (
	"errors"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// Decoding straight into the merged trace. When the row count of every
// file is known before the files are decoded (the Arrow files of a job:
// arrowv1.Rows counts them from the record batch headers; Chunks knows
// them from its first pass), the merged trace's columns are made once and
// each file is decoded into its own rows of them (arrowv1.ReadInto), in
// file order: no trace per file, and no copy into the merged trace.
//
// The counts are only a plan. A file that does not read as counted (its
// row count differs, it is not Arrow after all, its rows had to be sorted
// or completed: anything that leaves its part's trace other than its rows
// of the merged trace) has a trace of its own, and the files are then
// merged as before (mergeParts) from their parts, placed or not: the
// result is the same either way, only slower.

// For tests: noPlace turns placing off (every file has a trace of its
// own, merged by mergeParts); placedMerges counts the merges mergePlaced
// did; afterPlace, when set, runs between Open's count of the rows and
// its read of the files.
var (
	noPlace      atomic.Bool
	placedMerges atomic.Int64
	afterPlace   func()
)

// rowRange is rows [off, off+n) of t's columns.
type rowRange struct {
	t      *trace.Trace
	off, n int
}

// holds reports whether r (possibly nil) is as many rows as span, a
// file's rows of a cut chunk (Chunks.placeSpans): they are read into it.
func (r *rowRange) holds(span *rowsRead) bool {
	return r != nil && span != nil && int64(r.n) == span.hi-span.lo
}

// placeRows counts the rows of the inputs that are Arrow files and, when
// there are at least two, makes a trace with rows for all of them and
// gives each its rows, in input order (inputs[i].into). It returns that
// trace, or nil when it placed nothing. Inputs it cannot count (other
// formats, compressed or unreadable files) get no rows: they are read as
// before.
func placeRows(inputs []input) *trace.Trace {
	if len(inputs) < 2 || noPlace.Load() {
		return nil
	}
	counts := make([]int64, len(inputs))
	sizes := make([]int64, len(inputs))
	eachParallel(len(inputs), func(i int) { counts[i], sizes[i] = countArrow(inputs[i].path) })
	var total, bytes int64
	placed := 0
	for i, n := range counts {
		if n >= 0 {
			total += n
			bytes += sizes[i]
			placed++
		}
	}
	// A corrupt header may claim any number of rows: make no more than a
	// read of these files may hold (arrowv1's readLimit, over all of them).
	if placed < 2 || total == 0 || total*rowBytes > placeLimit(bytes) || total != int64(int(total)) {
		return nil
	}
	t := arrowv1.MakeRows(int(total))
	off := 0
	for i, n := range counts {
		if n >= 0 {
			inputs[i].into = &rowRange{t: t, off: off, n: int(n)}
			off += int(n)
		}
	}
	return t
}

// placeLimit is the most bytes of rows placeRows makes for Arrow files of
// size bytes in all.
func placeLimit(size int64) int64 { return 64<<20 + 64*size }

// countArrow returns the rows of the uncompressed Arrow file at path and
// its size, from its record batch headers (arrowv1.Rows); rows is -1 when
// it is anything else or cannot be counted.
func countArrow(path string) (rows, size int64) {
	if n, size, ok := rememberedRows(path); ok {
		if n*rowBytes > placeLimit(size) {
			return -1, 0
		}
		return n, size
	}
	f, err := openRead(path)
	if err != nil {
		return -1, 0
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return -1, 0
	}
	prefix := make([]byte, 8)
	if n, _ := f.ReadAt(prefix, 0); sniffArrow(prefix[:n]) == FormatUnknown {
		return -1, 0
	}
	data, release, err := arrowv1.MapFile(f)
	if err != nil {
		return -1, 0
	}
	defer release()
	n, err := countRows(data)
	if err != nil || n*rowBytes > placeLimit(int64(len(data))) {
		return -1, 0
	}
	return n, int64(len(data))
}

// countRows is arrowv1.Rows, a fault (a file truncated while mapped) or a
// panic an error.
func countRows(data []byte) (n int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			n, err = 0, errors.New("cannot count")
		}
	}()
	return arrowv1.Rows(data)
}

// tiles reports whether every part's trace is its rows of t (as placeRows
// or Chunk gave them, read there by arrowv1.ReadInto) and the parts' rows,
// in order, are all of t's: the concatenation mergeParts would make.
func tiles(t *trace.Trace, parts []*trace.Trace, into []*rowRange) bool {
	if t == nil || len(parts) != len(into) {
		return false
	}
	off := 0
	for i, p := range parts {
		r := into[i]
		if r == nil || r.t != t || r.off != off || !arrowv1.IsRows(p, t, r.off, r.n) {
			return false
		}
		off += r.n
	}
	return off == t.Len()
}

// mergePlaced is mergeParts for parts that tile t: t, with the merged
// metadata, ordered by (rank, seq). The parts are left without rows, as
// mergeParts leaves them.
func mergePlaced(t *trace.Trace, parts []*trace.Trace) (*trace.Trace, error) {
	heads := make([]*trace.Trace, len(parts))
	for i, p := range parts {
		heads[i] = &trace.Trace{Meta: p.Meta}
	}
	out, err := trace.Merge(heads...)
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		*p = trace.Trace{Meta: p.Meta}
	}
	t.Meta = out.Meta
	t.SortByRankSeq()
	placedMerges.Add(1)
	return t, nil
}

// Pausing the collector. debug.SetGCPercent is process-wide and Open may
// run on several goroutines at once: the pauses are counted, the first
// turns collections off and the last one to end restores the percentage
// the first found.
var gcPauses struct {
	sync.Mutex
	n       int
	percent int
}

// gcPause is one pause of the collector; resume ends it once (later calls
// do nothing).
type gcPause struct{ resumed bool }

// pauseGC turns collections off (debug.SetGCPercent(-1)) until every
// pause has resumed. A memory limit (debug.SetMemoryLimit, GOMEMLIMIT)
// still starts collections.
func pauseGC() *gcPause {
	gcPauses.Lock()
	defer gcPauses.Unlock()
	if gcPauses.n == 0 {
		gcPauses.percent = debug.SetGCPercent(-1)
	}
	gcPauses.n++
	return &gcPause{}
}

func (g *gcPause) resume() {
	if g.resumed {
		return
	}
	g.resumed = true
	gcPauses.Lock()
	defer gcPauses.Unlock()
	gcPauses.n--
	if gcPauses.n == 0 {
		debug.SetGCPercent(gcPauses.percent)
	}
}
