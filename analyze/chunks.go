package analyze

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"

	"github.com/ppprof/ppprof/trace"
)

// Chunks is a trace too large to hold at once, handed to RunChunks a part
// at a time. A chunk is itself a trace: some of the whole trace's rows,
// with the whole trace's metadata.
//
// Every row of one (step, pipeline) window must be in the same chunk (a
// chunk holding whole pipeline replicas, such as the rank files of some
// data-parallel replicas, satisfies this), every row in exactly one chunk,
// and a chunk's rows in the order the whole trace has them (for a trace
// read by ingest: rank, then seq). Chunk may be called several times for
// the same chunk (once per visit of the windows, unless the chunk is
// kept or packed: see Options.KeepRows and PackBytes) and must return the
// same rows every time.
// The first chunk's metadata is taken for the whole trace's.
type Chunks interface {
	NumChunks() int
	Chunk(c int) (*trace.Trace, error)
}

// Recycler is a Chunks that takes back a chunk's trace its caller is done
// with, to read a later chunk into its columns (ingest.Chunks). RunChunks
// hands back each chunk it has packed (Options.PackBytes) after its scan,
// but the last (whose columns the visits unpack into), and uses nothing
// of it afterwards.
type Recycler interface {
	Recycle(t *trace.Trace)
}

// StepChunks is a Chunks that reads one step of a chunk for less than the
// whole chunk (ingest.Chunks). rows holds every row of chunk c of step
// (and maybe rows of other steps), in (rank, seq) order, the same every
// time; shape holds every row of the chunk, in parts (a source's files),
// with at least the columns the job's shape is gathered from (rank,
// pipeline, stage, step, kind, micro-batch, chunk: scanTotals). The parts
// need only last until the next call: a source may reuse their memory
// (the 302M-event fleet trace's one-step analysis spent 3.3 s of its 21
// s of CPU concatenating its files' shapes into fresh memory). RunChunks
// of one step (Options.Step) reads it instead of Chunk.
type StepChunks interface {
	ChunkStep(c int, step int64) (rows *trace.Trace, shape []*trace.Trace, err error)
}

// wholeTrace is one trace as a single chunk (Run).
type wholeTrace struct{ t *trace.Trace }

func (w wholeTrace) NumChunks() int                  { return 1 }
func (w wholeTrace) Chunk(int) (*trace.Trace, error) { return w.t, nil }

// RunChunks analyses a trace delivered in chunks, one chunk held at a time
// (besides those kept, Options.KeepRows, and those held packed,
// Options.PackBytes). Its report is the one Run gives for the whole trace,
// to the bit: every pass works window by window and reduces the windows'
// results in window order, whichever chunk held them.
//
// The index scan reads every chunk (and measures its windows), then the
// passes visit the windows three times (see Run), plus once more for the
// windows whose stragglers are replayed and, if the metadata's stage count
// proves wrong, for the measure. Chunks kept or packed are read once (a
// packed chunk is unpacked by each visit); the others are read by each.
// An error from Chunks.Chunk (or a chunk that does not hold the windows it
// held the first time) ends the analysis with that error.
func RunChunks(src Chunks, opt Options) (*Report, error) {
	if src.NumChunks() == 0 {
		return nil, fmt.Errorf("trace has no events")
	}
	ix, err := newChunkedIndex(src, nil, opt)
	if err != nil {
		return nil, err
	}
	return run(ix, opt)
}

// chunkState is one chunk of an index's source.
type chunkState struct {
	wins   []int         // its windows, as indices into index.windows, ascending
	kept   *trace.Trace  // its rows when kept between passes; nil otherwise
	packed *trace.Packed // its rows packed, when not kept but packed (Options.PackBytes); nil otherwise
	rows   int           // rows kept or packed: the source's, or its windows' only when one step is analysed
	// srcRows: the source chunk's rows, all steps (what a chunk read
	// again holds).
	srcRows int
}

// scanTotals are what the passes need of the whole trace beyond its windows,
// gathered chunk by chunk as the index is built.
type scanTotals struct {
	meta      trace.Meta
	events    int
	maxStage  trace.Stage
	fMBs      mbSet // micro-batches of F rows (Job.MicroBatches)
	ranks     map[trace.Rank]bool
	stageRank map[trace.Stage]trace.Rank // lowest rank per stage
	lastStep  map[trace.Rank]int64       // last step each rank has rows in
	maxMB     int64                      // largest micro-batch and chunk of any row (memory tables), at least 0
	maxChunk  int64
}

// add gathers t's rows. Rows come in runs of one rank (a trace in (rank,
// seq) order has one per rank), and a rank's stage rarely changes: the maps
// are looked up once per run or per change of stage, not once per row.
func (s *scanTotals) add(t *trace.Trace) {
	n := t.Len()
	s.events += n
	ranks, stages, steps, kinds, mbs, chunks := t.Rank, t.Stage, t.Step, t.Kind, t.MicroBatch, t.Chunk
	for lo := 0; lo < n; {
		r := ranks[lo]
		last := steps[lo]
		prev := trace.Stage(-1)
		hi := lo
		for ; hi < n && ranks[hi] == r; hi++ {
			if st := stages[hi]; st != prev {
				s.maxStage = max(s.maxStage, st)
				if low, ok := s.stageRank[st]; !ok || r < low {
					s.stageRank[st] = r
				}
				prev = st
			}
			last = max(last, steps[hi])
			mb := mbs[hi]
			if kinds[hi] == trace.F && mb >= 0 {
				s.fMBs.add(int64(mb))
			}
			s.maxMB = max(s.maxMB, int64(mb))
			s.maxChunk = max(s.maxChunk, int64(chunks[hi]))
		}
		s.ranks[r] = true
		if l, ok := s.lastStep[r]; !ok || last > l {
			s.lastStep[r] = last
		}
		lo = hi
	}
}

// mbSet is a set of micro-batch ids: a bitmap for small ids, a map beyond.
type mbSet struct {
	bits  []uint64
	large map[int64]bool
}

const mbSetBits = 1 << 20

func (m *mbSet) add(mb int64) {
	if mb >= mbSetBits {
		if m.large == nil {
			m.large = map[int64]bool{}
		}
		m.large[mb] = true
		return
	}
	w := int(mb >> 6)
	if w >= len(m.bits) {
		m.bits = append(m.bits, make([]uint64, w+1-len(m.bits))...)
	}
	m.bits[w] |= 1 << (mb & 63)
}

func (m *mbSet) len() int {
	n := len(m.large)
	for _, w := range m.bits {
		n += bits.OnesCount64(w)
	}
	return n
}

// newChunkedIndex builds the index of src: one scan of every chunk groups
// its rows into windows, gathers the totals and measures the windows. A
// window's measure depends on the number of stages p of the whole trace,
// known only at the end: the scan measures with the best guess so far (the
// metadata's PP, or more stages when rows say so); windows measured with a
// p that proves wrong are measured again (a second read of their chunks,
// which a trace whose metadata states its stages, or whose first chunk
// holds every stage, never needs). whole is src's one trace when src is a
// whole trace held in memory (Run), else nil.
func newChunkedIndex(src Chunks, whole *trace.Trace, opt Options) (*index, error) {
	ix := &index{t: whole, src: src, opt: opt}
	if ss, ok := src.(StepChunks); ok && whole == nil && opt.Step >= 0 {
		ix.stepSrc = ss
	}
	tot := &scanTotals{maxStage: -1, ranks: map[trace.Rank]bool{},
		stageRank: map[trace.Stage]trace.Rank{}, lastStep: map[trace.Rank]int64{}}
	type key struct {
		step int64
		pipe int32
	}
	seen := map[key]int{} // window -> chunk
	ix.chunks = make([]chunkState, src.NumChunks())
	kept := 0
	packed, packing := int64(0), opt.PackBytes > 0
	var packer *trace.Packer
	compute := 0 // F, B and W rows of the chunks read so far
	var scratch []measureScratch
	for c := range ix.chunks {
		if len(ix.chunks) > 1 {
			opt.reportChunk(0, "windows", c, len(ix.chunks))
		}
		t, shape, err := ix.readChunk(c)
		if err != nil {
			return nil, err
		}
		if c == 0 {
			tot.meta = t.Meta
		}
		for _, part := range shape {
			tot.add(part)
		}
		srcRows, compacted := t.Len(), false
		ws, rows := groupWindowsIn(t, opt, ix.spareRows)
		ix.spareRows = nil
		if whole == nil && opt.Step >= 0 {
			// One step asked for: the chunk keeps, packs and unpacks the
			// rows of its windows only (the totals above saw them all).
			if windowRows(ws) < t.Len() {
				t2 := t.StepRows(opt.Step)
				if r, ok := src.(Recycler); ok {
					r.Recycle(t)
				}
				t, compacted = t2, true
				ws, rows = groupWindowsIn(t, opt, rows)
			}
		}
		if packing { // only the pack budget needs the count
			for _, k := range t.Kind {
				compute += b2i(k.IsCompute())
			}
		}
		guess := max(tot.meta.PP, int(tot.maxStage)+1)
		if n := workers(len(ws)); len(scratch) < n {
			scratch = make([]measureScratch, n)
		}
		forEach(len(ws), func(w, k int) {
			g := ws[k]
			g.t = t
			g.measured, g.idle = measureWindow(t, g, guess, &scratch[w])
			g.measuredP = guess
		})
		for _, g := range ws {
			k := key{g.step, g.pipeline}
			if prev, ok := seen[k]; ok {
				return nil, fmt.Errorf("step %d, pipeline %d has rows in chunks %d and %d: a window must be in one chunk", g.step, g.pipeline, prev, c)
			}
			seen[k] = c
			g.chunk, g.size, g.t = c, len(g.rows), t
		}
		ix.windows = append(ix.windows, ws...)
		ix.chunks[c].rows, ix.chunks[c].srcRows = t.Len(), srcRows
		if whole != nil || kept+t.Len() <= opt.KeepRows {
			ix.chunks[c].kept = t
			kept += t.Len()
		} else {
			// Pack while the packed chunks fit; once one does not, the
			// rest are read again (packing them would be wasted work).
			// The lists the medians keep of every compute op share the
			// budget: listBytesPerCompute each, for the whole trace as
			// the chunks read so far predict it.
			// And unless every chunk is packed, the visits unpack the
			// packed ones into columns beside those they read the others
			// into: one chunk's columns more.
			if packing {
				n, done := int64(len(ix.chunks)), int64(c+1)
				lists := int64(listBytesPerCompute) * int64(compute) * n / done
				if packed+lists >= opt.PackBytes {
					packing = false
				} else {
					if packer == nil {
						// One packer for every chunk: their blocks share
						// slabs as one large trace's would.
						packer = trace.NewPacker(t.Len() * len(ix.chunks))
					}
					cols := visitColumns
					if opt.packAll {
						cols = packAllColumns
					}
					p := packer.PackColumns(t, cols)
					need := packed + p.Bytes() + lists
					if all := (packed + p.Bytes()) * n / done; all+lists > opt.PackBytes && packMixColumns {
						need += int64(t.Len()) * trace.RowBytes
					}
					if need <= opt.PackBytes {
						ix.chunks[c].packed = p
						packed += p.Bytes()
					} else {
						packing, packer = false, nil
					}
				}
			}
			if ix.chunks[c].packed != nil {
				// The visits take a packed chunk's windows from their
				// runs of rows (attach), not by grouping it again.
				forEach(len(ws), func(_, k int) { ws[k].runs = rowRunsOf(ws[k].rows) })
			}
			for _, g := range ws {
				g.rows, g.t = nil, nil
			}
			ix.spareRows = rows
			// Nothing refers to a packed chunk's trace any more: a source
			// that recycles takes it back for the next chunk to be read
			// into; the last one is what the visits unpack into. (A
			// chunk cut to one step's rows handed its source's columns
			// back already.)
			if ix.chunks[c].packed != nil {
				if r, ok := src.(Recycler); ok && c+1 < len(ix.chunks) && !compacted {
					r.Recycle(t)
				} else {
					ix.spare = t
				}
			}
		}
	}
	slices.SortFunc(ix.windows, func(a, b *window) int {
		return cmp.Or(cmp.Compare(a.step, b.step), cmp.Compare(a.pipeline, b.pipeline))
	})
	for k, g := range ix.windows {
		ix.chunks[g.chunk].wins = append(ix.chunks[g.chunk].wins, k)
	}
	ix.tot = tot
	ix.p = int(tot.maxStage) + 1
	if err := catchChunkError(ix.remeasure); err != nil {
		return nil, err
	}
	return ix, nil
}

// chunkError is the panic forWindows raises when a chunk cannot be loaded;
// catchChunkError, around every caller of the passes, turns it back into
// the error. (Passes read the results of the windows visited before them:
// stopping them all at once is simpler than checking after each.)
type chunkError struct{ err error }

// catchChunkError runs fn and returns the error of a chunk that could not
// be loaded during it (nil when none).
func catchChunkError(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			ce, ok := r.(chunkError)
			if !ok {
				panic(r)
			}
			err = ce.err
		}
	}()
	fn()
	return nil
}

// remeasure measures again the windows the scan measured with another
// number of stages than the trace's, and counts the complete windows.
func (ix *index) remeasure() {
	scratch := make([]measureScratch, workers(len(ix.windows)))
	ix.forWindows(func(k int) bool { return ix.windows[k].measuredP != ix.p }, func(w, k int) {
		g := ix.windows[k]
		g.measured, g.idle = measureWindow(g.t, g, ix.p, &scratch[w])
		g.measuredP = ix.p
	})
	for _, g := range ix.windows {
		if g.measured.Complete && g.measured.EndNs > g.measured.StartNs {
			ix.complete++
		}
	}
}

// forWindows calls fn(w, k) for every window k of the index for which want
// is true (every window when want is nil), with the window's rows at hand
// (ix.windows[k].t and .rows), chunk by chunk: each chunk's windows run on
// the worker pool (forEach; w names the goroutine, w < workers(number of
// windows)), then the chunk is let go unless it is kept. A chunk none of
// whose windows is wanted is not loaded. An error loading a chunk panics
// with a chunkError (see catchChunkError).
func (ix *index) forWindows(want func(k int) bool, fn func(w, k int)) {
	var ks []int
	for c := range ix.chunks {
		cs := &ix.chunks[c]
		ks = ks[:0]
		for _, k := range cs.wins {
			if want == nil || want(k) {
				ks = append(ks, k)
			}
		}
		if len(ks) == 0 {
			continue
		}
		// Handed out pipeline by pipeline, each in step order: a worker's
		// windows in a row are then most often one pipeline's, whose
		// replays share a topology (newReplayIn). (Passes reduce per
		// window, in window order: the order they run in is free.)
		slices.SortStableFunc(ks, func(a, b int) int { return cmp.Compare(ix.windows[a].pipeline, ix.windows[b].pipeline) })
		ix.load(c)
		forEach(len(ks), func(w, i int) { fn(w, ks[i]) })
		ix.release(c)
	}
}

// forChunks calls fn(c) for every chunk c that holds windows and for
// which want is true (every such chunk when want is nil), in order, with
// its windows' rows at hand (ix.windows[k].t and .rows for k in
// ix.chunks[c].wins), then lets the chunk go unless it is kept: for a
// pass that needs several windows of a chunk at once (the what-if's
// steps). A chunk not wanted is not loaded. An error loading a chunk
// panics with a chunkError.
func (ix *index) forChunks(want func(c int) bool, fn func(c int)) {
	for c := range ix.chunks {
		if len(ix.chunks[c].wins) == 0 || want != nil && !want(c) {
			continue
		}
		ix.load(c)
		fn(c)
		ix.release(c)
	}
}

// load attaches chunk c's rows to its windows, unless it is kept (they
// are then attached already). An error panics with a chunkError.
func (ix *index) load(c int) {
	if ix.chunks[c].kept != nil {
		return
	}
	if ix.onChunk != nil {
		ix.onChunk(c, len(ix.chunks))
	}
	if err := ix.attach(c); err != nil {
		panic(chunkError{err})
	}
}

// release lets chunk c's rows go, unless it is kept: its windows' rows
// are nil again, and the columns and row array kept for the next chunk.
func (ix *index) release(c int) {
	cs := &ix.chunks[c]
	if cs.kept != nil {
		return
	}
	t := ix.windows[cs.wins[0]].t
	for _, k := range cs.wins {
		ix.windows[k].rows, ix.windows[k].t = nil, nil
	}
	if cs.packed != nil {
		ix.spare = t
	}
	ix.spareRows, ix.rowsInUse = ix.rowsInUse, nil
}

// attach loads chunk c (unpacks it when packed) and hands each of its
// windows its rows.
func (ix *index) attach(c int) error {
	cs := &ix.chunks[c]
	var t *trace.Trace
	if cs.packed != nil {
		// Into the columns of the chunk unpacked before (ix.spare: no
		// allocation, no zeroing, no page faults per chunk and visit):
		// forWindows lets a chunk's windows go before it hands its
		// columns back, and nothing keeps a chunk's trace beyond its
		// windows (TestRunChunksIsRun unpacks every chunk into the same
		// columns).
		cols := ix.cols
		if cols == 0 {
			cols = trace.AllColumns
		}
		runs := ix.haveRuns(cs)
		if !runs {
			cols |= regroupColumns
		}
		t = cs.packed.UnpackColumns(ix.spare, cols)
		ix.spare = nil
		if t.Len() != cs.rows {
			return fmt.Errorf("chunk %d changed between reads: %d rows, then %d", c, cs.rows, t.Len())
		}
		if runs {
			ix.attachRuns(cs, t)
			return nil
		}
	} else {
		var err error
		if t, _, err = ix.readChunk(c); err != nil {
			return err
		}
	}
	ws, rows := groupWindowsIn(t, Options{Step: ix.opt.Step}, ix.spareRows)
	ix.spareRows, ix.rowsInUse = nil, rows
	if t.Len() != cs.srcRows || len(ws) != len(cs.wins) {
		return fmt.Errorf("chunk %d changed between reads: %d rows in %d windows, then %d rows in %d", c, cs.srcRows, len(cs.wins), t.Len(), len(ws))
	}
	for i, g := range ws {
		dst := ix.windows[cs.wins[i]]
		if dst.step != g.step || dst.pipeline != g.pipeline || dst.size != len(g.rows) {
			return fmt.Errorf("chunk %d changed between reads: step %d, pipeline %d", c, g.step, g.pipeline)
		}
		dst.t, dst.rows = t, g.rows
	}
	return nil
}

// readChunk reads chunk c: its rows, and the rows the job's shape is
// gathered from, in parts (all of the chunk's: the same trace, unless the
// source reads one step for less, StepChunks; the parts last until the
// next readChunk).
func (ix *index) readChunk(c int) (rows *trace.Trace, shape []*trace.Trace, err error) {
	if ix.stepSrc == nil {
		t, err := ix.src.Chunk(c)
		return t, []*trace.Trace{t}, err
	}
	return ix.stepSrc.ChunkStep(c, ix.opt.Step)
}

// windowRows is the number of rows of windows ws.
func windowRows(ws []*window) int {
	n := 0
	for _, g := range ws {
		n += len(g.rows)
	}
	return n
}

// rowRun is rows [lo, hi) of a chunk.
type rowRun struct{ lo, hi int }

// listBytesPerCompute is at most what the analysis keeps of each compute
// op (F, B or W) of the whole trace until the end: its duration in the
// per-stage lists of the statistics (4 bytes: analyzeStats's blockList;
// only for ops in no op group when the statistics share the groups' lists,
// statsVisitSharing) and its duration and tokens in the op groups (8:
// opGroupsBuilder; 4 when every group's ops have one token count); twice
// that where a duration does not fit in 32 bits (4.3 s). RunChunks counts
// them against Options.PackBytes, not counting on the savings.
const listBytesPerCompute = 12

// packMixColumns makes RunChunks count, when not every chunk will fit
// packed, the columns of one chunk more against Options.PackBytes. Tests
// turn it off to mix packed and re-read chunks on traces of a few chunks
// (where the extra columns outweigh every chunk packed).
var packMixColumns = true

// rowRunsOf returns rows (increasing) as runs of consecutive rows, or nil
// when they are not in a few long runs (then they are grouped again):
// a window's rows are a run per rank (rows in rank, seq order; a rank's
// rows of one step are consecutive), a few hundred runs for thousands of
// rows.
func rowRunsOf(rows []int) []rowRun {
	var out []rowRun
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j] == rows[j-1]+1 {
			j++
		}
		out = append(out, rowRun{rows[i], rows[j-1] + 1})
		if len(out) > len(rows)/8+1 {
			return nil
		}
		i = j
	}
	return out
}

// haveRuns reports whether every window of chunk cs has the runs of rows
// the scan found (window.runs): attachRuns can then hand them their rows,
// and the chunk need not be grouped again.
func (ix *index) haveRuns(cs *chunkState) bool {
	for _, k := range cs.wins {
		if g := ix.windows[k]; g.runs == nil && g.size > 0 {
			return false
		}
	}
	return true
}

// attachRuns hands the windows of chunk cs, unpacked into t, their rows
// from the runs the scan found (window.runs), each window's on the worker
// pool: what grouping the chunk again (groupWindows, on one core) would
// give. Every window must have its runs (haveRuns).
func (ix *index) attachRuns(cs *chunkState, t *trace.Trace) {
	total := 0
	for _, k := range cs.wins {
		total += ix.windows[k].size
	}
	all := rowsBuf(ix.spareRows, total)
	ix.spareRows, ix.rowsInUse = nil, all
	off := 0
	for _, k := range cs.wins {
		g := ix.windows[k]
		g.t, g.rows = t, all[off:off+g.size:off+g.size]
		off += g.size
	}
	forEach(len(cs.wins), func(_, i int) {
		g := ix.windows[cs.wins[i]]
		at := 0
		for _, r := range g.runs {
			dst := g.rows[at : at+r.hi-r.lo]
			for j := range dst {
				dst[j] = r.lo + j
			}
			at += len(dst)
		}
	})
}

// windowFlops is the FLOPs of a window's compute rows (computeFactors).
type windowFlops struct {
	sum     float64
	missing bool // some compute row records no FLOPs
}

// visit is the per-window part of a pass: window(w, k) for every window k
// it wants (want nil: every window), with the rows at hand, on worker w;
// then finish, once, on the calling goroutine. Passes that only need what
// earlier passes finished visit the windows together (index.visit): one
// read of each chunk serves them all.
type visit struct {
	want   func(k int) bool
	window func(w, k int)
	finish func()
}

// visit runs the passes vs over the windows in one forWindows, then their
// finish functions in order.
func (ix *index) visit(vs ...visit) { ix.visitColumns(trace.AllColumns, vs...) }

// visitColumns is visit for passes whose windows read only the columns
// cols of their rows: packed chunks are unpacked with only those (the
// finish functions, which may visit windows again, get every column).
func (ix *index) visitColumns(cols trace.ColumnSet, vs ...visit) {
	wants := func(v visit, k int) bool { return v.window != nil && (v.want == nil || v.want(k)) }
	ix.cols = cols
	ix.forWindows(func(k int) bool {
		for _, v := range vs {
			if wants(v, k) {
				return true
			}
		}
		return false
	}, func(w, k int) {
		for _, v := range vs {
			if wants(v, k) {
				v.window(w, k)
			}
		}
	})
	ix.cols = 0
	for _, v := range vs {
		if v.finish != nil {
			v.finish()
		}
	}
}

// isReplayable is replayable by window index.
func (ix *index) isReplayable(k int) bool { return replayable(ix.windows[k]) }
