package ingest

import (
	"cmp"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"unsafe"

	"github.com/ppprof/ppprof/internal/hugepage"
	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// mergeParts is trace.Merge for Open, with the same result and errors, but
// merging column by column and releasing each part's copy of a column once
// it is copied: a large job's files are held about once, not twice (the
// parts and the merged trace). The parts are left without rows (their
// metadata kept).
//
// Freed part columns are small and scattered (one rank file each), so the
// merged columns cannot reuse them: for a large trace, every sixteenth of
// its columns (at least mergeReturnBytes) freed is handed back to the
// operating system (debug.FreeOSMemory, a full collection) before the next
// column is allocated. (Every quarter and at least 512 MB, a 16384-rank
// job's Flight Recorder dumps peaked at 6.05 GB instead of 5.60, and a
// 4096-rank job's at 1.79 GB instead of 1.45, in about the same time: on
// the VM of docs/performance.md, memory touched beyond the few GB it has
// at hand costs about 4-5 s a GB.)
func mergeParts(parts []*trace.Trace) (*trace.Trace, error) {
	return mergePartsReturning(parts, true)
}

// mergePartsInto is mergePartsReturning(parts, false) into the columns of
// dst where they are large enough (a trace its owner no longer uses, nor
// any of its columns; nil: none), instead of fresh memory: a chunk merged
// from many files' rows, chunk after chunk (Chunks.Chunk of a chunk cut
// between steps), faults in and zeroes no new pages. The merged trace is
// the one mergePartsReturning gives.
func mergePartsInto(dst *trace.Trace, parts []*trace.Trace) (*trace.Trace, error) {
	return mergeWith(parts, false, dst)
}

// mergePartsReturning is mergeParts; with returnMemory false, freed columns
// are left to the collector instead of being handed back to the operating
// system: what a merge repeated for every chunk of a trace wants
// (Chunks.Chunk), as the next chunk reuses the memory at once.
func mergePartsReturning(parts []*trace.Trace, returnMemory bool) (*trace.Trace, error) {
	return mergeWith(parts, returnMemory, nil)
}

// mergeWith is mergePartsReturning, the merged columns made in dst's
// where large enough (dst nil: fresh).
func mergeWith(parts []*trace.Trace, returnMemory bool, dst *trace.Trace) (*trace.Trace, error) {
	// The metadata and its conflicts: Merge on rowless copies.
	heads := make([]*trace.Trace, len(parts))
	n := 0
	for i, p := range parts {
		heads[i] = &trace.Trace{Meta: p.Meta}
		n += p.Len()
	}
	out, err := trace.Merge(heads...)
	if err != nil {
		return nil, err
	}
	// Collections during the copy would free nothing (the parts are live
	// until their columns are dropped, which mergeCol does, collecting
	// itself): turn them off for the merge. A memory limit (GOMEMLIMIT)
	// still applies.
	defer pauseGC().resume()
	if order := partsInRankOrder(parts); order != nil {
		// The concatenation in this order is already in (rank, seq)
		// order: no sort, and no second copy of every column.
		parts = order
	}
	m := &colMerger{parts: parts, n: n, every: max(mergeReturnBytes, int64(n)*rowBytes/16), off: make([]int, len(parts)+1), dst: dst}
	if !returnMemory {
		m.every = math.MaxInt64
		m.recycle = true
	} else {
		// What the read left (garbage not collected yet, pages freed but
		// not handed back) goes back before the first column is made: the
		// merge is a read's peak otherwise (Flight Recorder dumps: the
		// parts, their garbage and the first merged columns at once).
		m.freed = m.every
	}
	for i, p := range parts {
		m.off[i+1] = m.off[i] + p.Len()
	}
	out.Shape = mergeCol(m, func(t *trace.Trace) *[]trace.Str { return &t.Shape })
	out.Dtype = mergeCol(m, func(t *trace.Trace) *[]trace.Str { return &t.Dtype })
	out.Group = mergeCol(m, func(t *trace.Trace) *[]trace.Str { return &t.Group })
	out.Step = mergeCol(m, func(t *trace.Trace) *[]int64 { return &t.Step })
	out.Seq = mergeCol(m, func(t *trace.Trace) *[]int64 { return &t.Seq })
	out.IssueNs = mergeCol(m, func(t *trace.Trace) *[]int64 { return &t.IssueNs })
	out.StartNs = mergeCol(m, func(t *trace.Trace) *[]int64 { return &t.StartNs })
	out.EndNs = mergeCol(m, func(t *trace.Trace) *[]int64 { return &t.EndNs })
	out.Bytes = mergeCol(m, func(t *trace.Trace) *[]int64 { return &t.Bytes })
	out.Tokens = mergeCol(m, func(t *trace.Trace) *[]int64 { return &t.Tokens })
	out.Flops = mergeCol(m, func(t *trace.Trace) *[]float64 { return &t.Flops })
	out.MemBytes = mergeCol(m, func(t *trace.Trace) *[]int64 { return &t.MemBytes })
	out.GroupSeq = mergeCol(m, func(t *trace.Trace) *[]int64 { return &t.GroupSeq })
	out.Rank = mergeCol(m, func(t *trace.Trace) *[]trace.Rank { return &t.Rank })
	out.Pipeline = mergeCol(m, func(t *trace.Trace) *[]int32 { return &t.Pipeline })
	out.Stage = mergeCol(m, func(t *trace.Trace) *[]trace.Stage { return &t.Stage })
	out.TPRank = mergeCol(m, func(t *trace.Trace) *[]int32 { return &t.TPRank })
	out.Chunk = mergeCol(m, func(t *trace.Trace) *[]int32 { return &t.Chunk })
	out.MicroBatch = mergeCol(m, func(t *trace.Trace) *[]trace.MicroBatch { return &t.MicroBatch })
	out.Peer = mergeCol(m, func(t *trace.Trace) *[]trace.Rank { return &t.Peer })
	out.Kind = mergeCol(m, func(t *trace.Trace) *[]trace.Kind { return &t.Kind })
	if m.recycle {
		for _, p := range parts {
			arrowv1.Recycle(p)
		}
	}
	out.SortByRankSeq()
	return out, nil
}

// partsInRankOrder returns the parts in the order whose concatenation is
// in (rank, seq) order, as SortByRankSeq would order the rows of their
// concatenation in the given order, when there is one other than the
// given order: every part's rows in (rank, seq) order and the parts'
// ranges of (rank, seq) not overlapping, not even at their ends. A
// Flight Recorder dump per rank, read in the order of the files' names
// (_dump_0, _dump_1, _dump_10, ...), is such a set: without this the
// merged 8.2M rows of 4096 dumps were sorted and copied once more (6 s of
// CPU and a second copy of every column at the peak). Otherwise nil.
func partsInRankOrder(parts []*trace.Trace) []*trace.Trace {
	type span struct {
		part          int
		firstR, lastR trace.Rank
		firstS, lastS int64
	}
	spans := make([]span, 0, len(parts))
	for i, p := range parts {
		n := p.Len()
		if n == 0 {
			continue
		}
		for j := 1; j < n; j++ {
			if p.Rank[j] < p.Rank[j-1] || p.Rank[j] == p.Rank[j-1] && p.Seq[j] < p.Seq[j-1] {
				return nil
			}
		}
		spans = append(spans, span{part: i, firstR: p.Rank[0], lastR: p.Rank[n-1], firstS: p.Seq[0], lastS: p.Seq[n-1]})
	}
	before := func(r1 trace.Rank, s1 int64, r2 trace.Rank, s2 int64) bool {
		return r1 < r2 || r1 == r2 && s1 < s2
	}
	inOrder := true
	for i := 1; i < len(spans) && inOrder; i++ {
		inOrder = before(spans[i-1].lastR, spans[i-1].lastS, spans[i].firstR, spans[i].firstS)
	}
	if inOrder {
		return nil // as given (or some part overlaps its neighbour: below)
	}
	slices.SortFunc(spans, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.firstR, b.firstR), cmp.Compare(a.firstS, b.firstS))
	})
	for i := 1; i < len(spans); i++ {
		if !before(spans[i-1].lastR, spans[i-1].lastS, spans[i].firstR, spans[i].firstS) {
			return nil
		}
	}
	out := make([]*trace.Trace, 0, len(parts))
	for _, sp := range spans {
		out = append(out, parts[sp.part])
	}
	for _, p := range parts {
		if p.Len() == 0 {
			out = append(out, p) // rowless parts: anywhere
		}
	}
	return out
}

// mergeReturnBytes is the fewest bytes of freed part columns mergeParts
// lets pile up before handing them back to the operating system.
const mergeReturnBytes = 256 << 20

// rowBytes is the size of one row of trace.Trace's columns.
const rowBytes = trace.RowBytes

// colMerger tracks the column bytes freed since they were last returned.
type colMerger struct {
	parts []*trace.Trace
	off   []int // first row of each part in the merged trace; off[len(parts)] = n
	n     int
	every int64 // bytes freed between two returns
	freed int64
	// recycle keeps the parts' columns (instead of dropping each once
	// copied) for arrowv1.Recycle after the merge.
	recycle bool
	// dst: a trace whose columns the merged ones are made in, where
	// large enough (mergePartsInto); nil for fresh memory.
	dst *trace.Trace
}

// mergeCol concatenates one column of every part and empties the parts'.
// The parts are copied on GOMAXPROCS goroutines, each a run of parts of
// about the same number of rows.
func mergeCol[T any](m *colMerger, col func(*trace.Trace) *[]T) []T {
	if m.freed >= m.every {
		debug.FreeOSMemory()
		m.freed = 0
	}
	// Huge pages for the merged column, asked before the copies first
	// touch it: its pages are all fresh (the parts' freed columns are
	// scattered small spans, handed back above), and a fresh 4 KiB page
	// costs a fault of its own (internal/hugepage). Or dst's column,
	// when large enough: pages faulted in already.
	var out []T
	reused := false
	if m.dst != nil {
		if d := *col(m.dst); cap(d) >= m.n {
			out, reused = d[:m.n], true
		}
	}
	if !reused {
		out = hugepage.Make[T](m.n)
	}
	workers := max(1, min(runtime.GOMAXPROCS(0), len(m.parts)))
	var wg sync.WaitGroup
	first := 0
	for w := range workers {
		// Parts [first, last) hold rows up to (w+1)/workers of the trace.
		last := first
		for last < len(m.parts) && (w == workers-1 || m.off[last] < m.n/workers*(w+1)) {
			last++
		}
		wg.Add(1)
		go func(first, last int) {
			defer wg.Done()
			for i := first; i < last; i++ {
				c := col(m.parts[i])
				if k := copy(out[m.off[i]:m.off[i+1]], *c); reused && m.off[i]+k < m.off[i+1] {
					// A part without the column (or short of it): zeros,
					// as in fresh memory.
					clear(out[m.off[i]+k : m.off[i+1]])
				}
				if !m.recycle {
					*c = nil
				}
			}
		}(first, last)
		first = last
	}
	wg.Wait()
	if !m.recycle {
		m.freed += int64(m.n) * int64(unsafe.Sizeof(*new(T)))
	}
	return out
}
