package arrowv1

import (
	"bytes"
	"encoding/binary"
	"maps"
	"math/bits"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/zstd"

	"github.com/ppprof/ppprof/trace"
)

// The fast decoder reads the record batches of a v1 trace as ppprof writes
// them without arrow-go's array machinery: each column buffer is copied (or
// decompressed) straight into the trace's column, a batch at a time, with
// batches decoded in parallel into their own rows. It handles the schema
// ppprof writes (the v1 columns, any subset of the optional ones, in any
// order; kind a dictionary with int16 or int32 indices, or utf8; shape,
// dtype and group utf8), uncompressed, LZ4 or ZSTD bodies, on a
// little-endian machine. For anything else, and for any input that does
// not check out (a length, an offset, an index, a kind name, a null where
// one is not allowed), it gives up and decodeFrames, the arrow-go path,
// reads the input and reports what is wrong: the two paths give the same
// traces, and the fast path never decides an error.

// fastField is how one schema field is laid out in a record batch.
type fastField struct {
	col     int // v1 column, -1 for none
	buf     int // index of its first buffer
	dictID  int64
	indexW  int // kind as a dictionary: index width in bytes (2 or 4); 0 for plain utf8
	nullble bool
}

// fastPlan is what the schema says about every record batch.
type fastPlan struct {
	meta    trace.Meta
	fields  []fastField
	col     [trace.NumColumns]int // field of each v1 column, -1 when absent
	nbuf    int                   // buffers per record batch
	kindDic bool
}

// plans caches fastPlans by schema message: the files of one job (a rank
// each) usually have the same schema, which arrow-go then parses once,
// not once per file. A plan in the cache is never changed (reads copy it).
var plans struct {
	sync.Mutex
	m map[string]*fastPlan
}

// maxPlans bounds the plan cache; past it, the cache starts over.
const maxPlans = 256

// planFor returns the plan of a read for the schema frame: a copy of the
// cached one, with its own metadata map.
func planFor(schemaFrame frame) (*fastPlan, bool) {
	if len(schemaFrame.body) != 0 {
		return nil, false
	}
	plans.Lock()
	cached := plans.m[string(schemaFrame.meta)]
	plans.Unlock()
	if cached == nil {
		var ok bool
		if cached, ok = newFastPlan(schemaFrame); !ok {
			return nil, false
		}
		plans.Lock()
		if plans.m == nil || len(plans.m) >= maxPlans {
			plans.m = map[string]*fastPlan{}
		}
		plans.m[string(schemaFrame.meta)] = cached
		plans.Unlock()
	}
	p := *cached
	p.meta.Extra = maps.Clone(p.meta.Extra)
	return &p, true
}

// fastRead decodes frames (a verified schema, then dictionary and record
// batches) with the fast decoder. ok is false when it does not handle the
// input; the caller then uses decodeFrames. n is the input's size, which
// bounds what may be allocated (readLimit).
func fastRead(frames []frame, n int) (t *trace.Trace, batches int, ok bool) {
	return fastReadInto(frames, n, nil)
}

// fastReadInto is fastRead, with the rows decoded into into when it is not
// nil (ok is then false unless the frames hold into.n rows).
func fastReadInto(frames []frame, n int, into *rowRange) (t *trace.Trace, batches int, ok bool) {
	if !littleEndian || len(frames) == 0 {
		return nil, 0, false
	}
	defer func() {
		// The checks below are meant to make this unreachable; a panic
		// only sends the input to the checked path.
		if p := recover(); p != nil {
			t, batches, ok = nil, 0, false
		}
	}()
	plan, ok := planFor(frames[0])
	if !ok {
		return nil, 0, false
	}
	// 1. Dictionaries in message order: the kind table each record batch
	// sees; and where each batch's rows go.
	type job struct {
		fr   *frame
		base int
		lut  []trace.Kind
	}
	var jobs []job
	var lut []trace.Kind
	dec := newDecoder()
	rows := 0
	for i := 1; i < len(frames); i++ {
		fr := &frames[i]
		switch fr.info.header {
		case headerDictionaryBatch:
			var ok bool
			if lut, ok = plan.dictionary(fr, lut, dec); !ok {
				return nil, 0, false
			}
		case headerRecordBatch:
			jobs = append(jobs, job{fr: fr, base: rows, lut: lut})
			rows += int(fr.info.rows)
		default:
			return nil, 0, false
		}
	}
	if plan.kindDic && lut == nil && rows > 0 {
		return nil, 0, false
	}
	// The model holds about 160 bytes per row: stay within what the input
	// may make the checked path hold (readLimit).
	if int64(rows)*160 > readLimit(n) {
		return nil, 0, false
	}
	if into != nil {
		if rows != into.n {
			return nil, 0, false
		}
		t = into.view(plan.meta)
	} else {
		t = newTrace(plan.meta, rows)
	}

	// 2. Record batches, in parallel. The workers fault as the caller
	// does (debug.SetPanicOnFault): on a mapped file cut short under
	// the read, a caller that asked for a panic gets one it can
	// recover (the checked path then reads the input on its own
	// goroutine), not a worker crashing the process.
	pof := debug.SetPanicOnFault(false)
	debug.SetPanicOnFault(pof)
	workers := max(1, min(runtime.GOMAXPROCS(0), len(jobs)))
	decs := make([]*decoder, workers)
	decs[0] = dec
	for w := 1; w < workers; w++ {
		decs[w] = newDecoder()
	}
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			debug.SetPanicOnFault(pof)
			defer func() {
				if p := recover(); p != nil {
					failed.Store(true)
				}
			}()
			sc := getScratch()
			defer sc.put()
			for !failed.Load() {
				k := int(next.Add(1) - 1)
				if k >= len(jobs) {
					return
				}
				j := jobs[k]
				if !plan.batch(t, j.base, j.fr, j.lut, decs[w], sc) {
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() {
		return nil, 0, false
	}
	for _, d := range decs {
		if d.pending {
			dec.pending = true
		}
	}
	dec.finish(t)
	return t, len(jobs), true
}

// littleEndian is true on machines whose memory order is Arrow's.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// setLen sets every column of t to n rows (t has the capacity).
func setLen(t *trace.Trace, n int) {
	t.Rank, t.Pipeline, t.Stage, t.TPRank, t.Chunk = t.Rank[:n], t.Pipeline[:n], t.Stage[:n], t.TPRank[:n], t.Chunk[:n]
	t.Step, t.MicroBatch, t.Kind, t.Seq = t.Step[:n], t.MicroBatch[:n], t.Kind[:n], t.Seq[:n]
	t.IssueNs, t.StartNs, t.EndNs, t.Peer, t.Bytes = t.IssueNs[:n], t.StartNs[:n], t.EndNs[:n], t.Peer[:n], t.Bytes[:n]
	t.Shape, t.Dtype, t.Tokens, t.Flops, t.MemBytes = t.Shape[:n], t.Dtype[:n], t.Tokens[:n], t.Flops[:n], t.MemBytes[:n]
	t.Group, t.GroupSeq = t.Group[:n], t.GroupSeq[:n]
}

// newFastPlan reads the schema frame: arrow-go parses it (so metadata and
// column errors are the checked path's), and the fields' buffer layout and
// dictionary ids come from the flatbuffer.
func newFastPlan(schemaFrame frame) (*fastPlan, bool) {
	rdr, err := ipc.NewReaderFromMessageReader(&frameReader{frames: []frame{schemaFrame}, mem: memory.DefaultAllocator},
		ipc.WithEnsureNativeEndian(false))
	if err != nil {
		return nil, false
	}
	defer rdr.Release()
	schema := rdr.Schema()
	if !schema.IsNativeEndian() {
		return nil, false // the checked path says why
	}
	meta, err := trace.ParseMeta(schema.Metadata().ToMap())
	if err != nil {
		return nil, false
	}
	b, err := bind(schema)
	if err != nil {
		return nil, false
	}
	ids, ok := schemaDictIDs(schemaFrame.meta, len(schema.Fields()))
	if !ok {
		return nil, false
	}
	p := &fastPlan{meta: meta, fields: make([]fastField, len(schema.Fields()))}
	for f := range p.fields {
		p.fields[f] = fastField{col: -1, dictID: ids[f]}
	}
	for c, f := range b.field {
		p.col[c] = f
		if f >= 0 {
			p.fields[f].col = c
		}
	}
	for f, fl := range schema.Fields() {
		ff := &p.fields[f]
		ff.buf = p.nbuf
		ff.nullble = fl.Nullable
		if ff.col < 0 {
			return nil, false // a column ppprof does not know: the checked path
		}
		switch c := ff.col; {
		case c == trace.ColKind:
			switch dt := fl.Type.(type) {
			case *arrow.DictionaryType:
				if dt.ValueType.ID() != arrow.STRING || ids[f] < 0 {
					return nil, false
				}
				switch dt.IndexType.ID() {
				case arrow.INT16:
					ff.indexW = 2
				case arrow.INT32:
					ff.indexW = 4
				default:
					return nil, false
				}
				p.kindDic = true
				p.nbuf += 2
			default:
				if fl.Type.ID() != arrow.STRING {
					return nil, false
				}
				p.nbuf += 3
			}
		case c == trace.ColShape || c == trace.ColDtype || c == trace.ColGroup:
			if fl.Type.ID() != arrow.STRING {
				return nil, false
			}
			p.nbuf += 3
		default:
			p.nbuf += 2 // validity, values: bind checked the exact type
		}
		if ids[f] >= 0 && ff.col != trace.ColKind {
			return nil, false
		}
	}
	return p, true
}

// schemaDictIDs returns the dictionary id of each of the n fields of the
// schema message meta, -1 for a field that is not dictionary-encoded.
func schemaDictIDs(meta []byte, n int) ([]int64, bool) {
	f := &fbuf{b: meta}
	m, err := f.root()
	if err != nil {
		return nil, false
	}
	s, ok, err := f.subTable(m, 2)
	if err != nil || !ok {
		return nil, false
	}
	var ids []int64
	err = f.tablesField(s, 1, func(fl fbTable) error {
		id := int64(-1)
		if de, ok, err := f.subTable(fl, 4); err != nil {
			return err
		} else if ok {
			if id, err = f.int64Field(de, 0, 0); err != nil {
				return err
			}
		}
		if _, cs, err := f.vector(fl, 5, 4); err != nil || cs != 0 {
			return errFlatbuf // nested fields are for the checked path
		}
		ids = append(ids, id)
		return nil
	})
	return ids, err == nil && len(ids) == n
}

// batchHeader returns the record batch table of a record batch or
// dictionary batch message, and for a dictionary batch its id and isDelta.
func batchHeader(fr *frame) (f *fbuf, rb fbTable, id int64, delta bool, ok bool) {
	f = &fbuf{b: fr.meta}
	m, err := f.root()
	if err != nil {
		return nil, rb, 0, false, false
	}
	hdr, ok, err := f.subTable(m, 2)
	if err != nil || !ok {
		return nil, rb, 0, false, false
	}
	if fr.info.header != headerDictionaryBatch {
		return f, hdr, 0, false, true
	}
	if id, err = f.int64Field(hdr, 0, 0); err != nil {
		return nil, rb, 0, false, false
	}
	d, err := f.byteField(hdr, 2, 0)
	if err != nil {
		return nil, rb, 0, false, false
	}
	rb, ok, err = f.subTable(hdr, 1)
	return f, rb, id, d != 0, ok && err == nil
}

// nodes returns the (length, null count) field nodes of a record batch
// table.
func nodes(f *fbuf, rb fbTable) ([][2]int64, bool) {
	return nodesInto(f, rb, nil)
}

// nodesInto is nodes, into dst's memory when it has the room (the result
// then aliases dst).
func nodesInto(f *fbuf, rb fbTable, dst [][2]int64) ([][2]int64, bool) {
	start, n, err := f.vector(rb, 1, 16)
	if err != nil {
		return nil, false
	}
	out := dst[:0]
	if cap(out) < n {
		out = make([][2]int64, n)
	}
	out = out[:n]
	for i := range out {
		p := start + 16*i
		out[i] = [2]int64{int64(binary.LittleEndian.Uint64(f.b[p:])), int64(binary.LittleEndian.Uint64(f.b[p+8:]))}
	}
	return out, true
}

// dictionary applies a dictionary batch to the kind table lut and returns
// the table the following record batches see.
func (p *fastPlan) dictionary(fr *frame, lut []trace.Kind, d *decoder) ([]trace.Kind, bool) {
	f, rb, id, delta, ok := batchHeader(fr)
	if !ok || !p.kindDic || id != p.fields[p.col[trace.ColKind]].dictID {
		return nil, false
	}
	ns, ok := nodes(f, rb)
	if !ok || len(ns) != 1 || len(fr.info.buffers) != 3 || ns[0][1] != 0 || ns[0][0] != fr.info.rows {
		return nil, false
	}
	sc := getScratch()
	defer sc.put()
	bb := batchBufs{fr: fr}
	n := int(ns[0][0])
	offs, data, ok := bb.utf8(0, n, sc)
	if !ok {
		return nil, false
	}
	if delta && lut == nil {
		return nil, false // a delta with no dictionary before it: the checked path's error
	}
	if !delta {
		lut = nil
	}
	out := make([]trace.Kind, len(lut), len(lut)+n)
	copy(out, lut)
	for i := range n {
		v := data[offs[i]:offs[i+1]]
		if !utf8.Valid(v) {
			return nil, false
		}
		k, err := d.kind(string(v))
		if err != nil {
			return nil, false
		}
		out = append(out, k)
	}
	return out, true
}

// fastScratch holds one goroutine's decompression buffers.
type fastScratch struct {
	bufs  [3][]byte
	offs  []int32
	nodes [][2]int64    // a record batch's field nodes (batchCols)
	zstd  *zstd.Decoder // from zstdDecoders; put back by release
}

// release returns what sc borrowed.
func (sc *fastScratch) release() {
	if sc.zstd != nil {
		zstdDecoders.Put(sc.zstd)
		sc.zstd = nil
	}
}

// scratchPool keeps decompression scratch from one read to the next. A
// streamed read of a fleet's 4096 rank files made its workers' buffers
// anew for every file: 5 bytes an event of garbage, which the runtime
// hands back to the system and then faults in again, at up to 14 µs a
// page on the virtual machines ppprof is measured on (docs/performance.md,
// "Memory is time here"; BenchmarkDecompressOnly/decode faulted 30K pages
// a pass over 24.7M events).
var scratchPool = sync.Pool{New: func() any { return new(fastScratch) }}

// maxPooledScratch is the largest buffer a pooled scratch keeps: an
// unusual file's large batch does not stay pinned in the pool.
const maxPooledScratch = 4 << 20

// getScratch returns a scratch from the pool; put it back with put.
func getScratch() *fastScratch { return scratchPool.Get().(*fastScratch) }

// put releases sc and hands it back to the pool, without its buffers
// over maxPooledScratch. sc must not be used afterwards, nor anything
// that aliases its buffers.
func (sc *fastScratch) put() {
	sc.release()
	for i := range sc.bufs {
		if cap(sc.bufs[i]) > maxPooledScratch {
			sc.bufs[i] = nil
		}
	}
	if 4*cap(sc.offs) > maxPooledScratch {
		sc.offs = nil
	}
	if 16*cap(sc.nodes) > maxPooledScratch {
		sc.nodes = nil
	}
	scratchPool.Put(sc)
}

// zstdDecoders holds single-goroutine zstd decoders (DecodeAll only), shared
// by reads: a reader of 4096 rank files makes a handful, not 4096.
var zstdDecoders = sync.Pool{New: func() any {
	// A frame that says it holds more than the buffer's size fails at
	// once (WithDecodeAllCapLimit, with dst's capacity the size), instead
	// of growing dst to what a corrupt header says (gigabytes, in a
	// 14-byte frame: TestFastZstdSizeLimit).
	z, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		return nil
	}
	return z
}}

// batchBufs reads the buffers of one message body.
type batchBufs struct {
	fr *frame
}

// read returns buffer i of the message. A compressed buffer is
// decompressed into dst when its uncompressed size is len(dst) (the result
// then aliases dst), else into the scratch slot s. ok is false for a
// buffer the fast path does not handle or that does not decompress.
func (bb batchBufs) read(i int, dst []byte, sc *fastScratch, s int) ([]byte, bool) {
	info := &bb.fr.info
	if i >= len(info.buffers) {
		return nil, false
	}
	off, n := info.buffers[i][0], info.buffers[i][1]
	raw := bb.fr.body[off : off+n] // checkBody checked the range
	if !info.compressed || n == 0 {
		return raw, true
	}
	size := int64(binary.LittleEndian.Uint64(raw))
	if size == -1 {
		return raw[8:], true
	}
	if size < 0 || size > int64(64*len(bb.fr.body))+1<<20 {
		return nil, false
	}
	out := dst
	if int64(len(dst)) != size {
		if int64(cap(sc.bufs[s])) < size {
			sc.bufs[s] = make([]byte, size)
		}
		out = sc.bufs[s][:size]
	}
	switch info.codec {
	case codecLZ4:
		if !lz4Frame(raw[8:], out) {
			return nil, false
		}
	case codecZSTD:
		if sc.zstd == nil {
			z, _ := zstdDecoders.Get().(*zstd.Decoder)
			if z == nil {
				return nil, false
			}
			sc.zstd = z
		}
		got, err := sc.zstd.DecodeAll(raw[8:], out[:0:len(out)])
		if err != nil || len(got) != len(out) || len(out) > 0 && &got[0] != &out[0] {
			return nil, false
		}
	default:
		return nil, false
	}
	return out, true
}

// utf8 returns the offsets (n+1, checked: non-negative, non-decreasing,
// inside the data) and data of the utf8 array whose validity buffer is
// buffer i.
func (bb batchBufs) utf8(i, n int, sc *fastScratch) ([]int32, []byte, bool) {
	offs, data, ok := bb.utf8Unordered(i, n, sc)
	if !ok {
		return nil, nil, false
	}
	for k := 1; k <= n; k++ {
		if offs[k] < offs[k-1] {
			return nil, nil, false
		}
	}
	return offs, data, true
}

// utf8Unordered is utf8 without checking that the offsets never decrease
// (the first and the last are checked: inside the data): for a caller
// that checks it on its own pass over them.
func (bb batchBufs) utf8Unordered(i, n int, sc *fastScratch) ([]int32, []byte, bool) {
	if n == 0 {
		return []int32{0}, nil, true
	}
	need := 4 * (n + 1)
	if cap(sc.offs) < n+1 {
		sc.offs = make([]int32, n+1)
	}
	offs := sc.offs[:n+1]
	raw, ok := bb.read(i+1, bytesOf(offs), sc, 1)
	if !ok || len(raw) < need {
		return nil, nil, false
	}
	if &raw[0] != &bytesOf(offs)[0] {
		copy(bytesOf(offs), raw[:need])
	}
	data, ok := bb.read(i+2, nil, sc, 2)
	if !ok || offs[0] < 0 || offs[n] < offs[0] || int(offs[n]) > len(data) {
		return nil, nil, false
	}
	return offs, data, true
}

// bytesOf returns the memory of s as bytes.
func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// batchCols decodes the fixed-width columns of one record batch.
type batchCols struct {
	p  *fastPlan
	bb batchBufs
	ns [][2]int64 // field nodes: (length, null count)
	n  int        // rows
	sc *fastScratch
}

// cols reads record batch fr's header for batchCols; ok is false when it
// does not match the plan.
func (p *fastPlan) cols(fr *frame, sc *fastScratch) (bc batchCols, ok bool) {
	f, rb, _, _, ok := batchHeader(fr)
	if !ok {
		return bc, false
	}
	ns, ok := nodesInto(f, rb, sc.nodes)
	if !ok || len(ns) != len(p.fields) || len(fr.info.buffers) != p.nbuf {
		return bc, false
	}
	sc.nodes = ns
	return batchCols{p: p, bb: batchBufs{fr: fr}, ns: ns, n: int(fr.info.rows), sc: sc}, true
}

// field checks field fi's node: n rows, a null count in range that
// matches its validity bitmap (ValidateFull).
func (bc batchCols) field(fi int) bool {
	n, ns := bc.n, bc.ns
	if ns[fi][0] != int64(n) || ns[fi][1] < 0 || ns[fi][1] > int64(n) {
		return false
	}
	if ns[fi][1] > 0 {
		bm, ok := bc.bb.read(bc.p.fields[fi].buf, nil, bc.sc, 0)
		if !ok || len(bm) < (n+7)/8 || int64(n-countSet(bm, n)) != ns[fi][1] {
			return false
		}
	}
	return true
}

// fixed fills dst (n values of width w) from column c, def where null or
// when the column is absent. The column's field must have passed field.
func (bc batchCols) fixed(c int, dst []byte, w int, def func(i int)) bool {
	p, n := bc.p, bc.n
	fi := p.col[c]
	if fi < 0 {
		for i := range n {
			def(i)
		}
		return true
	}
	raw, ok := bc.bb.read(p.fields[fi].buf+1, dst, bc.sc, 1)
	if !ok || len(raw) < n*w {
		return false
	}
	if n > 0 && &raw[0] != &dst[0] {
		copy(dst, raw[:n*w])
	}
	if bc.ns[fi][1] == 0 {
		return true
	}
	if c == trace.ColRank || c == trace.ColStage || c == trace.ColStep || c == trace.ColSeq {
		return false // a null in a required column: the checked path names the row
	}
	bm, ok := bc.bb.read(p.fields[fi].buf, nil, bc.sc, 0)
	if !ok || len(bm) < (n+7)/8 {
		return false
	}
	for i := range n {
		if bm[i>>3]>>(i&7)&1 == 0 {
			def(i)
		}
	}
	return true
}

// i32 is fixed for a 4-byte column.
func (bc batchCols) i32(c int, dst []int32, def int32) bool {
	return bc.fixed(c, bytesOf(dst), 4, func(i int) { dst[i] = def })
}

// i64 is fixed for an 8-byte column.
func (bc batchCols) i64(c int, dst []int64, def int64) bool {
	return bc.fixed(c, bytesOf(dst), 8, func(i int) { dst[i] = def })
}

// batch decodes the record batch fr into rows [base, base+rows) of t, with
// kind table lut.
func (p *fastPlan) batch(t *trace.Trace, base int, fr *frame, lut []trace.Kind, d *decoder, sc *fastScratch) bool {
	bc, ok := p.cols(fr, sc)
	if !ok {
		return false
	}
	for fi := range p.fields {
		if !bc.field(fi) {
			return false
		}
	}
	n, ns, bb, end := bc.n, bc.ns, bc.bb, base+bc.n
	i32, i64 := bc.i32, bc.i64
	ok = i32(trace.ColRank, asInt32(t.Rank[base:end]), 0) &&
		i32(trace.ColStage, asInt32(t.Stage[base:end]), 0) &&
		i64(trace.ColStep, t.Step[base:end], 0) &&
		i64(trace.ColSeq, t.Seq[base:end], 0) &&
		i32(trace.ColPipeline, t.Pipeline[base:end], 0) &&
		i32(trace.ColTPRank, t.TPRank[base:end], 0) &&
		i32(trace.ColChunk, t.Chunk[base:end], 0) &&
		i32(trace.ColMicroBatch, asInt32(t.MicroBatch[base:end]), int32(trace.NoMicroBatch)) &&
		i32(trace.ColPeer, asInt32(t.Peer[base:end]), int32(trace.NoRank)) &&
		i64(trace.ColBytes, t.Bytes[base:end], 0) &&
		i64(trace.ColTokens, t.Tokens[base:end], 0) &&
		i64(trace.ColMemBytes, t.MemBytes[base:end], 0) &&
		i64(trace.ColGroupSeq, t.GroupSeq[base:end], trace.NoGroupSeq) &&
		i64(trace.ColStartNs, t.StartNs[base:end], trace.NoTime) &&
		i64(trace.ColEndNs, t.EndNs[base:end], trace.NoTime) &&
		i64(trace.ColIssueNs, t.IssueNs[base:end], trace.NoTime)
	if !ok {
		return false
	}
	flops := t.Flops[base:end]
	if !bc.fixed(trace.ColFlops, bytesOf(flops), 8, func(i int) { flops[i] = 0 }) {
		return false
	}
	issue, start, stop := t.IssueNs[base:end], t.StartNs[base:end], t.EndNs[base:end]
	for i, v := range issue {
		if v != trace.NoTime {
			continue
		}
		switch {
		case start[i] != trace.NoTime:
			issue[i] = start[i]
		case stop[i] != trace.NoTime:
			issue[i] = stop[i]
		default:
			d.pending = true
		}
	}
	return p.strings(trace.ColShape, t.Shape[base:end], n, ns, bb, d, sc) &&
		p.strings(trace.ColDtype, t.Dtype[base:end], n, ns, bb, d, sc) &&
		p.strings(trace.ColGroup, t.Group[base:end], n, ns, bb, d, sc) &&
		p.kinds(t.Kind[base:end], n, ns, bb, lut, d, sc)
}

// countSet returns the number of set bits among the first n of bitmap bm
// (least significant bit first).
func countSet(bm []byte, n int) int {
	c := 0
	for _, b := range bm[:n/8] {
		c += bits.OnesCount8(b)
	}
	if r := n % 8; r != 0 {
		c += bits.OnesCount8(bm[n/8] & (1<<r - 1))
	}
	return c
}

// asInt32 views a slice of an int32-based type as []int32.
func asInt32[T ~int32](s []T) []int32 {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

// strings fills dst (n rows) from string column c, interned (trace.Str):
// "" for empty values, nulls and an absent column. A column of one value
// besides "" (a send's "4096x1x8192" beside the compute ops' empty shapes;
// "bf16"), with no nulls, is recognised in one pass over the offsets and
// one comparison of its bytes: they are that value repeated. Otherwise the
// two values met last are checked before the decoder's table; a value new
// to it is checked for UTF-8 and interned. A value that is not UTF-8 sends
// the input to the checked path.
func (p *fastPlan) strings(c int, dst []trace.Str, n int, ns [][2]int64, bb batchBufs, d *decoder, sc *fastScratch) bool {
	dst = dst[:n]
	fi := p.col[c]
	if fi < 0 {
		clear(dst)
		return true
	}
	offs, data, ok := bb.utf8Unordered(p.fields[fi].buf, n, sc)
	if !ok {
		return false
	}
	var bm []byte
	if ns[fi][1] != 0 {
		if bm, ok = bb.read(p.fields[fi].buf, nil, sc, 0); !ok || len(bm) < (n+7)/8 {
			return false
		}
	}
	// One pass: the offsets never decrease (a negative length sets the
	// sign of neg; in 64 bits, which the difference of two int32 offsets
	// cannot wrap); every non-empty value has the first one's length w
	// (same); dst marks the non-empty rows with 1.
	var neg, w int64
	same := true
	prev := int64(offs[0])
	for i, o := range offs[1 : n+1] {
		l := int64(o) - prev
		prev = int64(o)
		neg |= l
		if l != 0 {
			if w == 0 {
				w = l
			}
			same = same && l == w
		}
		dst[i] = trace.Str(b2u(l != 0))
	}
	if neg < 0 {
		return false
	}
	if offs[n] == offs[0] {
		clear(dst) // all empty
		return true
	}
	if v := data[offs[0]:offs[n]]; bm == nil && same && bytes.Equal(v[w:], v[:int64(len(v))-w]) {
		// v has period w, and every value is w bytes long at a multiple
		// of w into it: each is v[:w].
		s, ok := d.strs[string(v[:w])]
		if !ok {
			if !utf8.Valid(v[:w]) {
				return false
			}
			s = trace.InternBytes(v[:w])
			d.strs[s.String()] = s
		}
		for i := range dst {
			dst[i] *= s
		}
		return true
	}
	var mru [2]trace.Str
	mrus := [2]string{"", ""}
	for i := range n {
		v := data[offs[i]:offs[i+1]]
		var s trace.Str
		switch {
		case len(v) == 0:
		case string(v) == mrus[0]:
			s = mru[0]
		case string(v) == mrus[1]:
			s = mru[1]
			mru[0], mru[1], mrus[0], mrus[1] = mru[1], mru[0], mrus[1], mrus[0]
		default:
			var ok bool
			if s, ok = d.strs[string(v)]; !ok {
				if !utf8.Valid(v) {
					return false
				}
				s = trace.InternBytes(v)
				d.strs[s.String()] = s
			}
			mru[0], mru[1], mrus[0], mrus[1] = s, mru[0], s.String(), mrus[0]
		}
		if bm != nil && bm[i>>3]>>(i&7)&1 == 0 {
			s = 0
		}
		dst[i] = s
	}
	return true
}

// kinds fills dst from the kind column: dictionary indices into lut, or
// names. A null, an index out of range or a name trace.ParseKind refuses
// sends the input to the checked path.
func (p *fastPlan) kinds(dst []trace.Kind, n int, ns [][2]int64, bb batchBufs, lut []trace.Kind, d *decoder, sc *fastScratch) bool {
	fi := p.col[trace.ColKind]
	ff := p.fields[fi]
	if ns[fi][1] != 0 {
		return false
	}
	if ff.indexW == 0 {
		offs, data, ok := bb.utf8(ff.buf, n, sc)
		if !ok {
			return false
		}
		var last []byte
		var k trace.Kind
		for i := range n {
			v := data[offs[i]:offs[i+1]]
			if i == 0 || string(v) != string(last) {
				if !utf8.Valid(v) {
					return false
				}
				var err error
				if k, err = d.kind(string(v)); err != nil {
					return false
				}
				last = v
			}
			dst[i] = k
		}
		return true
	}
	raw, ok := bb.read(ff.buf+1, nil, sc, 1)
	if !ok || len(raw) < n*ff.indexW {
		return false
	}
	L := uint64(len(lut))
	if ff.indexW == 2 {
		for i := range n {
			x := uint64(int16(binary.LittleEndian.Uint16(raw[2*i : 2*i+2 : 2*i+2])))
			if x >= L {
				return false
			}
			dst[i] = lut[x]
		}
		return true
	}
	for i := range n {
		x := uint64(int32(binary.LittleEndian.Uint32(raw[4*i : 4*i+4 : 4*i+4])))
		if x >= L {
			return false
		}
		dst[i] = lut[x]
	}
	return true
}
