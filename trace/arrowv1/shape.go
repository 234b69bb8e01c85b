package arrowv1

import "github.com/ppprof/ppprof/trace"

// ShapeColumns are the columns ReadShape decodes: what the shape of a job
// needs of every event (its ranks, stages, replicas, steps, micro-batches
// and chunks, and which events are forward passes).
var ShapeColumns = trace.ColumnsOf(trace.ColRank, trace.ColPipeline, trace.ColStage, trace.ColStep,
	trace.ColKind, trace.ColMicroBatch, trace.ColChunk)

// ReadShape decodes only ShapeColumns of every complete record batch of
// an Arrow IPC file or stream: a trace of Read's rows, in Read's order,
// whose other columns are empty (nil). The rows are checked on those
// columns alone (Validate's rules for them: nothing negative, a
// micro-batch of -1 or more, a known kind); nothing else of the input is
// decoded or checked. It is for learning a job's shape from events whose
// other columns are not needed (an analysis of one step). ok is false for
// input the fast decoder does not take, or rows that break those rules:
// Read says what is wrong with such input, if anything.
//
// into, when not nil, is a trace ReadShape returned before that the caller
// is done with: its columns are reused when large enough.
func ReadShape(data []byte, into *trace.Trace) (t *trace.Trace, ok bool) {
	if !littleEndian {
		return nil, false
	}
	defer func() {
		// As in fastReadInto: the checks are meant to make this
		// unreachable; a panic only answers "cannot".
		if p := recover(); p != nil {
			t, ok = nil, false
		}
	}()
	// The bodies' buffers are read only where they are decoded: of a
	// mapped file, the pages of the other columns are not touched.
	frames, err := framesOfIn(data, lightSpan())
	if err != nil || len(frames) == 0 {
		return nil, false
	}
	return shapeFrames(frames, len(data), into)
}

// ReadShapeRows is ReadShape of rows [lo, hi) of the input alone (numbered
// as Read numbers them), framed where ix, StepRuns' index of the input,
// says: only the record batches holding them are decoded. The trace's
// columns may share memory with into's.
func ReadShapeRows(data []byte, ix *Index, lo, hi int64, into *trace.Trace) (t *trace.Trace, ok bool) {
	if !littleEndian || ix == nil || lo < 0 || lo >= hi || hi > ix.rows() {
		return nil, false
	}
	defer func() {
		if p := recover(); p != nil {
			t, ok = nil, false
		}
	}()
	frames, from, err := ix.frames(data, lo, hi)
	if err != nil {
		return nil, false
	}
	if t, ok = shapeFrames(frames, len(data), into); !ok || int64(t.Len()) < hi-from {
		return nil, false
	}
	a, b := int(lo-from), int(hi-from)
	return &trace.Trace{Meta: t.Meta, Rank: t.Rank[a:b], Pipeline: t.Pipeline[a:b], Stage: t.Stage[a:b], Step: t.Step[a:b],
		Kind: t.Kind[a:b], MicroBatch: t.MicroBatch[a:b], Chunk: t.Chunk[a:b]}, true
}

// shapeFrames decodes the shape of frames (a schema, then dictionary and
// record batches) of an input of size bytes: ReadShape.
func shapeFrames(frames []frame, size int, into *trace.Trace) (t *trace.Trace, ok bool) {
	plan, ok := planFor(frames[0])
	if !ok {
		return nil, false
	}
	rows := 0
	for _, fr := range frames[1:] {
		if fr.info.header == headerRecordBatch {
			rows += int(fr.info.rows)
		}
	}
	if int64(rows)*32 > readLimit(size) {
		return nil, false
	}
	if into != nil && cap(into.Rank) >= rows && cap(into.Pipeline) >= rows && cap(into.Stage) >= rows &&
		cap(into.Step) >= rows && cap(into.Kind) >= rows && cap(into.MicroBatch) >= rows && cap(into.Chunk) >= rows {
		t = &trace.Trace{Meta: plan.meta, Rank: into.Rank[:rows], Pipeline: into.Pipeline[:rows], Stage: into.Stage[:rows],
			Step: into.Step[:rows], Kind: into.Kind[:rows], MicroBatch: into.MicroBatch[:rows], Chunk: into.Chunk[:rows]}
	} else {
		t = &trace.Trace{Meta: plan.meta,
			Rank: make([]trace.Rank, rows), Pipeline: make([]int32, rows), Stage: make([]trace.Stage, rows),
			Step: make([]int64, rows), Kind: make([]trace.Kind, rows), MicroBatch: make([]trace.MicroBatch, rows),
			Chunk: make([]int32, rows)}
	}
	d := newDecoder()
	sc := getScratch()
	defer sc.put()
	var lut []trace.Kind
	base := 0
	for i := range frames[1:] {
		fr := &frames[1+i]
		switch fr.info.header {
		case headerDictionaryBatch:
			if lut, ok = plan.dictionary(fr, lut, d); !ok {
				return nil, false
			}
		case headerRecordBatch:
			if !plan.shapeBatch(t, base, fr, lut, d, sc) {
				return nil, false
			}
			base += int(fr.info.rows)
		default:
			return nil, false
		}
	}
	if plan.kindDic && lut == nil && rows > 0 {
		return nil, false
	}
	// Validate's rules for these columns.
	var neg int64
	for i := range rows {
		neg |= int64(t.Rank[i]) | int64(t.Pipeline[i]) | int64(t.Stage[i]) | t.Step[i] | int64(t.Chunk[i]) | (int64(t.MicroBatch[i]) + 1)
	}
	if neg < 0 {
		return nil, false
	}
	for _, k := range t.Kind {
		if !k.Valid() {
			return nil, false
		}
	}
	return t, true
}

// shapeBatch is batch for ShapeColumns alone: it decodes record batch fr
// into rows [base, base+rows) of those columns of t.
func (p *fastPlan) shapeBatch(t *trace.Trace, base int, fr *frame, lut []trace.Kind, d *decoder, sc *fastScratch) bool {
	bc, ok := p.cols(fr, sc)
	if !ok {
		return false
	}
	for _, c := range []int{trace.ColRank, trace.ColPipeline, trace.ColStage, trace.ColStep, trace.ColKind, trace.ColMicroBatch, trace.ColChunk} {
		if fi := p.col[c]; fi >= 0 && !bc.field(fi) || fi < 0 && c == trace.ColKind {
			return false
		}
	}
	end := base + bc.n
	return bc.i32(trace.ColRank, asInt32(t.Rank[base:end]), 0) &&
		bc.i32(trace.ColStage, asInt32(t.Stage[base:end]), 0) &&
		bc.i64(trace.ColStep, t.Step[base:end], 0) &&
		bc.i32(trace.ColPipeline, t.Pipeline[base:end], 0) &&
		bc.i32(trace.ColChunk, t.Chunk[base:end], 0) &&
		bc.i32(trace.ColMicroBatch, asInt32(t.MicroBatch[base:end]), int32(trace.NoMicroBatch)) &&
		p.kinds(t.Kind[base:end], bc.n, bc.ns, bc.bb, lut, d, sc)
}
