package trace

import (
	"encoding/binary"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ppprof/ppprof/internal/hugepage"
)

// Packed is a Trace held compactly: its rows in blocks of PackBlockRows,
// each column of a block stored in the narrowest of a few encodings (the
// string columns' ids, Str, like the integers). A fleet job's rows take
// about a fifth of the columns' 122 bytes (docs/performance.md,
// "Memory"). Packed keeps a
// trace that is read again and again (analyze's visits of a streamed
// trace) without decoding its files each time: Unpack gives the columns
// back, bit for bit, several times faster than decoding Arrow.
//
// Encodings, per column per block, the narrowest that holds the block:
//   - frame of reference: v = base + u, u unsigned in 0, 1, 2, 4, 8, 16,
//     24, 32 or 64 bits (0: every row holds base);
//   - delta: v[i] = v[i-1] + base + u[i] (sequence numbers, start times);
//   - reference: v = w + base + u, w another column of the row (issue and
//     end times against the start, the peer against the rank);
//   - dictionary: v = dict[u], u in 1, 2, 4 or 8 bits, for up to 256
//     distinct values.
//
// A frame of reference, delta or reference column may be patched: the
// rows that do not fit its width (a rank's first sequence number after
// another rank's last, a row never finished) are exceptions, stored after
// the others as a list of row numbers and values, in a width of their
// own (patchedEncoding).
//
// Rows narrower than a byte are packed low bits first (row 2i of a 4-bit
// column in the low half of byte i). Arithmetic wraps, so any value
// (NoTime included) round-trips; a column that no encoding holds in 32
// bits a row (a span over 2^32 in each) takes 64 bits a row in that block.
// A Packed does not change once built and may be unpacked concurrently.
type Packed struct {
	Meta   Meta
	n      int
	blocks []packedBlock
	held   int64     // bytes allocated for the blocks' data (slabs included)
	cols   ColumnSet // the columns held (PackColumns)
}

// PackBlockRows is the number of rows of a block of a Packed.
const PackBlockRows = 4096

type packedBlock struct {
	data []byte
	hdr  [NumColumns]colHdr
}

// colHdr says how one column of one block is stored in packedBlock.data.
type colHdr struct {
	off   int32 // payload offset in data: the dictionary (8 bytes per entry), then u
	enc   uint8
	width uint8  // bits per row of u: 0, 1, 2, 4, 8, 16, 24, 32 or 64
	ndict uint16 // dictionary entries (encDict)
	base  int64
	first int64 // encDelta: v[0]
}

const (
	encFOR = iota
	encDelta
	encRef
	encDict

	// encPatched flags an encFOR, encDelta or encRef column with
	// exceptions: after the payload of its n rows, a uint16 count k, the
	// exceptions' width (a byte) and base (int64), k uint16 row numbers,
	// then k values (the rows' deltas, differences or values, as the
	// encoding stores them before its base) in that width.
	encPatched = 0x10
)

// patchHdrLen is the bytes of a patch list before its row numbers: count,
// width and base.
const patchHdrLen = 2 + 1 + 8

// refCol[c] is the column c is stored against under encRef (-1: none). It
// is unpacked before c.
var refCol = func() (r [NumColumns]int8) {
	for i := range r {
		r[i] = -1
	}
	r[ColIssueNs] = ColStartNs
	r[ColEndNs] = ColStartNs
	r[ColPeer] = ColRank
	return r
}()

// unpackOrder lists the integer columns in an order where a reference
// comes before the columns stored against it.
var unpackOrder = [...]int{
	ColRank, ColPipeline, ColStage, ColTPRank, ColChunk, ColStep, ColMicroBatch,
	ColKind, ColSeq, ColStartNs, ColIssueNs, ColEndNs, ColPeer, ColBytes,
	ColTokens, ColFlops, ColMemBytes, ColGroupSeq, ColShape, ColDtype, ColGroup,
}

// Len returns the number of events.
func (p *Packed) Len() int { return p.n }

// Bytes returns the memory p holds, in bytes: payloads and headers.
func (p *Packed) Bytes() int64 {
	n := int64(unsafe.Sizeof(*p)) + int64(cap(p.blocks))*int64(unsafe.Sizeof(packedBlock{}))
	return n + p.held
}

// Pack returns t packed. t is not changed.
// Blocks are packed on every core.
func Pack(t *Trace) *Packed {
	n := t.Len()
	return packInto(t, newSlabs(n), AllColumns)
}

// A Packer packs traces one after another into slabs they share: the
// chunks of a streamed analysis, each too small for slabs of its own
// (a 24.7M-event trace's chunks hold 0.8M events: 9 MB packed, in blocks
// of their own), are packed into huge-page-backed memory like one large
// trace. Bytes of each Packed counts the slabs its packing started
// (the ends of slabs left unused count once, in the Packed that started
// them). A Packer packs one trace at a time.
type Packer struct{ sl *slabs }

// NewPacker returns a Packer for traces of about rows events in all.
func NewPacker(rows int) *Packer { return &Packer{sl: newSlabs(rows)} }

// Pack returns t packed. t is not changed.
func (pk *Packer) Pack(t *Trace) *Packed { return packInto(t, pk.sl, AllColumns) }

// PackColumns is Pack of the columns in cols only, for a reader that will
// never unpack the others (analyze's visits read no FLOPs and no process
// groups): Unpack and UnpackColumns leave the columns not held empty, as
// UnpackColumns does those not asked for. Rank is always held, and so is
// the column another one is stored against (the start time for the
// issue and end times).
func (pk *Packer) PackColumns(t *Trace, cols ColumnSet) *Packed {
	return packInto(t, pk.sl, cols)
}

// packInto packs the columns cols of t with the blocks' data in sl; the
// Packed holds what sl allocated for it.
func packInto(t *Trace, sl *slabs, cols ColumnSet) *Packed {
	n := t.Len()
	cols = withRefs(cols)
	p := &Packed{Meta: t.Meta, n: n, blocks: make([]packedBlock, (n+PackBlockRows-1)/PackBlockRows), cols: cols}
	before := sl.held
	parallelBlocks(len(p.blocks), func(b int) {
		lo := b * PackBlockRows
		hi := min(lo+PackBlockRows, n)
		p.blocks[b] = packBlock(t, lo, hi, sl, cols)
	})
	p.held = sl.held - before
	return p
}

// Unpack returns p's trace, in dst's columns when they have the capacity
// (dst may be nil: new columns are made). dst's previous rows are
// overwritten; its metadata becomes p's. Blocks are unpacked on every core.
func (p *Packed) Unpack(dst *Trace) *Trace { return p.UnpackColumns(dst, AllColumns) }

// ColumnSet is a set of the event model's columns: bit c for column c
// (ColRank, ColPipeline...).
type ColumnSet uint32

// AllColumns is every column.
const AllColumns ColumnSet = 1<<NumColumns - 1

// ColumnsOf is the set of the columns cols.
func ColumnsOf(cols ...int) ColumnSet {
	var s ColumnSet
	for _, c := range cols {
		s |= 1 << c
	}
	return s
}

// Has reports whether column c is in s.
func (s ColumnSet) Has(c int) bool { return s&(1<<c) != 0 }

// UnpackColumns is Unpack of only the columns in cols, for a reader that
// needs a few: unpacking is memory-bound, and a column left out is not
// written at all. Rank is always unpacked (a trace's length is its rank
// column's), and so is the column another one is stored against (the
// start time for the issue and end times). The columns left out are left
// empty (length 0; their capacity is kept for a later unpack), so that
// code reading one fails at once instead of reading stale rows.
func (p *Packed) UnpackColumns(dst *Trace, cols ColumnSet) *Trace {
	if dst == nil {
		dst = &Trace{}
	}
	cols = withRefs(cols) & p.cols
	n := p.n
	dst.Meta = p.Meta
	dst.Rank = resizeIf(dst.Rank, n, true)
	dst.Pipeline = resizeIf(dst.Pipeline, n, cols.Has(ColPipeline))
	dst.Stage = resizeIf(dst.Stage, n, cols.Has(ColStage))
	dst.TPRank = resizeIf(dst.TPRank, n, cols.Has(ColTPRank))
	dst.Chunk = resizeIf(dst.Chunk, n, cols.Has(ColChunk))
	dst.Step = resizeIf(dst.Step, n, cols.Has(ColStep))
	dst.MicroBatch = resizeIf(dst.MicroBatch, n, cols.Has(ColMicroBatch))
	dst.Kind = resizeIf(dst.Kind, n, cols.Has(ColKind))
	dst.Seq = resizeIf(dst.Seq, n, cols.Has(ColSeq))
	dst.IssueNs = resizeIf(dst.IssueNs, n, cols.Has(ColIssueNs))
	dst.StartNs = resizeIf(dst.StartNs, n, cols.Has(ColStartNs))
	dst.EndNs = resizeIf(dst.EndNs, n, cols.Has(ColEndNs))
	dst.Peer = resizeIf(dst.Peer, n, cols.Has(ColPeer))
	dst.Bytes = resizeIf(dst.Bytes, n, cols.Has(ColBytes))
	dst.Shape = resizeIf(dst.Shape, n, cols.Has(ColShape))
	dst.Dtype = resizeIf(dst.Dtype, n, cols.Has(ColDtype))
	dst.Tokens = resizeIf(dst.Tokens, n, cols.Has(ColTokens))
	dst.Flops = resizeIf(dst.Flops, n, cols.Has(ColFlops))
	dst.MemBytes = resizeIf(dst.MemBytes, n, cols.Has(ColMemBytes))
	dst.Group = resizeIf(dst.Group, n, cols.Has(ColGroup))
	dst.GroupSeq = resizeIf(dst.GroupSeq, n, cols.Has(ColGroupSeq))
	parallelBlocks(len(p.blocks), func(b int) {
		lo := b * PackBlockRows
		hi := min(lo+PackBlockRows, n)
		p.blocks[b].unpack(dst, lo, hi, cols)
	})
	return dst
}

// Columns returns the columns p holds (every column unless packed by
// PackColumns).
func (p *Packed) Columns() ColumnSet { return p.cols }

// withRefs is cols with the rank column and the columns those in cols are
// stored against.
func withRefs(cols ColumnSet) ColumnSet {
	cols |= ColumnsOf(ColRank)
	if cols.Has(ColIssueNs) || cols.Has(ColEndNs) {
		cols |= ColumnsOf(ColStartNs)
	}
	return cols
}

// resizeIf is resize(s, n) when want, else s emptied (its capacity kept).
func resizeIf[T any](s []T, n int, want bool) []T {
	if !want {
		return s[:0]
	}
	return resize(s, n)
}

func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// parallelBlocks calls fn(b) for every b in [0, n), on every core.
func parallelBlocks(n int, fn func(b int)) {
	w := min(runtime.GOMAXPROCS(0), n)
	if w <= 1 {
		for b := range n {
			fn(b)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range w {
		wg.Go(func() {
			for b := int(next.Add(1) - 1); b < n; b = int(next.Add(1) - 1) {
				fn(b)
			}
		})
	}
	wg.Wait()
}

// widen returns s as int64 values, in scratch.
func widen[T ~int32 | ~uint16](s []T, scratch []int64) []int64 {
	out := scratch[:len(s)]
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

// asInt64 returns f's IEEE bits, in place.
func asInt64(f []float64) []int64 {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(&f[0])), len(f))
}

// packScratch is one worker's room to pack a block in.
type packScratch struct {
	tmp  [PackBlockRows]uint64
	x    [PackBlockRows]int64  // a column's values as an encoding stores them (patchedEncoding)
	exc  [PackBlockRows]uint64 // a patch list's values
	idx  [PackBlockRows]uint16 // and row numbers
	buf  []byte
	dict dictScratch
}

var packScratchPool = sync.Pool{New: func() any {
	// Room for the worst block: every column 8 bytes per row, plus
	// dictionaries (never chosen when larger than 8 bytes per row).
	return &packScratch{buf: make([]byte, 0, NumColumns*8*PackBlockRows), dict: dictScratch{dict: make([]int64, 0, 256)}}
}}

// packBlock packs rows [lo, hi) of t's columns cols (the others' headers
// are left zero).
func packBlock(t *Trace, lo, hi int, sl *slabs, cols ColumnSet) packedBlock {
	var blk packedBlock
	ps := packScratchPool.Get().(*packScratch)
	defer packScratchPool.Put(ps)
	buf := ps.buf[:0]
	h := &blk.hdr
	if cols.Has(ColRank) {
		h[ColRank], buf = encodeInts(t.Rank[lo:hi], nil, false, ps, buf)
	}
	if cols.Has(ColPipeline) {
		h[ColPipeline], buf = encodeInts(t.Pipeline[lo:hi], nil, false, ps, buf)
	}
	if cols.Has(ColStage) {
		h[ColStage], buf = encodeInts(t.Stage[lo:hi], nil, false, ps, buf)
	}
	if cols.Has(ColTPRank) {
		h[ColTPRank], buf = encodeInts(t.TPRank[lo:hi], nil, false, ps, buf)
	}
	if cols.Has(ColChunk) {
		h[ColChunk], buf = encodeInts(t.Chunk[lo:hi], nil, false, ps, buf)
	}
	if cols.Has(ColStep) {
		h[ColStep], buf = encodeInts(t.Step[lo:hi], nil, true, ps, buf)
	}
	if cols.Has(ColMicroBatch) {
		h[ColMicroBatch], buf = encodeInts(t.MicroBatch[lo:hi], nil, false, ps, buf)
	}
	if cols.Has(ColKind) {
		h[ColKind], buf = encodeInts(t.Kind[lo:hi], nil, false, ps, buf)
	}
	if cols.Has(ColSeq) {
		h[ColSeq], buf = encodeInts(t.Seq[lo:hi], nil, true, ps, buf)
	}
	if cols.Has(ColStartNs) {
		h[ColStartNs], buf = encodeInts(t.StartNs[lo:hi], nil, true, ps, buf)
	}
	if cols.Has(ColIssueNs) {
		h[ColIssueNs], buf = encodeInts(t.IssueNs[lo:hi], t.StartNs[lo:hi], false, ps, buf)
	}
	if cols.Has(ColEndNs) {
		h[ColEndNs], buf = encodeInts(t.EndNs[lo:hi], t.StartNs[lo:hi], false, ps, buf)
	}
	if cols.Has(ColPeer) {
		h[ColPeer], buf = encodeInts(t.Peer[lo:hi], t.Rank[lo:hi], false, ps, buf)
	}
	if cols.Has(ColBytes) {
		h[ColBytes], buf = encodeInts(t.Bytes[lo:hi], nil, false, ps, buf)
	}
	if cols.Has(ColTokens) {
		h[ColTokens], buf = encodeInts(t.Tokens[lo:hi], nil, false, ps, buf)
	}
	if cols.Has(ColFlops) {
		h[ColFlops], buf = encodeInts(asInt64(t.Flops[lo:hi]), nil, false, ps, buf)
	}
	if cols.Has(ColMemBytes) {
		h[ColMemBytes], buf = encodeInts(t.MemBytes[lo:hi], nil, true, ps, buf)
	}
	if cols.Has(ColGroupSeq) {
		h[ColGroupSeq], buf = encodeInts(t.GroupSeq[lo:hi], nil, true, ps, buf)
	}
	if cols.Has(ColShape) {
		h[ColShape], buf = encodeInts(t.Shape[lo:hi], nil, false, ps, buf)
	}
	if cols.Has(ColDtype) {
		h[ColDtype], buf = encodeInts(t.Dtype[lo:hi], nil, false, ps, buf)
	}
	if cols.Has(ColGroup) {
		h[ColGroup], buf = encodeInts(t.Group[lo:hi], nil, false, ps, buf)
	}
	blk.data = sl.copy(buf)
	return blk
}

// slabs hold the blocks' data of a large Packed: a block's bytes are cut
// from a slab of several MB, not allocated each on its own (48 KB each,
// for a fleet job), so that the slab can be backed by huge pages
// (internal/hugepage: the packed trace is the largest fresh memory a
// streamed analysis touches). A slab is a sixteenth of the expected
// packed size (16 bytes a row), from 4 to 16 MB: what a Packed leaves
// unused is the end of each slab that the next block did not fit (under
// a block) and the end of the last one (under a slab; Bytes counts it). A
// small trace's blocks are allocated each on its own.
type slabs struct {
	mu   sync.Mutex
	size int
	cur  []byte // what is left of the current slab
	held int64  // bytes allocated: slabs and blocks of their own
}

const (
	slabMin = hugepage.MinBytes
	slabMax = 16 << 20
)

func newSlabs(rows int) *slabs {
	size := min(rows, slabMax) // a sixteenth of 16 bytes a row
	if size < slabMin {
		size = 0
	}
	// Whole huge pages (hugepage.Make starts a slab on one).
	size = (size + hugepage.Size - 1) &^ (hugepage.Size - 1)
	return &slabs{size: size}
}

// copy returns a copy of b, in a slab when b is small beside one.
func (s *slabs) copy(b []byte) []byte {
	n := len(b)
	s.mu.Lock()
	if s.size == 0 || n > s.size/8 {
		s.mu.Unlock()
		out := append([]byte(nil), b...)
		s.mu.Lock()
		s.held += int64(cap(out))
		s.mu.Unlock()
		return out
	}
	if len(s.cur) < n {
		s.cur = hugepage.Make[byte](s.size)
		s.held += int64(s.size)
	}
	out := s.cur[:n:n]
	s.cur = s.cur[n:]
	s.mu.Unlock()
	copy(out, b)
	return out
}

// width returns the bits per row that hold spans up to span: 0, 1, 2, 4,
// 8, 16, 24, 32 or 64.
func width(span uint64) uint8 {
	switch {
	case span == 0:
		return 0
	case span <= 1:
		return 1
	case span <= 3:
		return 2
	case span <= 0xf:
		return 4
	case span <= 0xff:
		return 8
	case span <= 0xffff:
		return 16
	case span <= 0xffffff:
		return 24
	case span <= 0xffffffff:
		return 32
	}
	return 64
}

// payload is the bytes n rows of w bits take.
func payload(n int, w uint8) int { return (n*int(w) + 7) / 8 }

// encodeInts chooses the narrowest encoding of v (ref: the column v may be
// stored against, or nil; delta: whether to try deltas, for the columns
// that count up), appends its payload to buf and returns its header. ps
// is scratch.
func encodeInts[T ~int32 | ~int64 | ~uint16 | ~uint32](v, ref []T, delta bool, ps *packScratch, buf []byte) (colHdr, []byte) {
	h := colHdr{off: int32(len(buf)), enc: encFOR}
	n := len(v)
	if n == 0 {
		return h, buf
	}
	lo, hi, dlo, dhi := spans(v, delta)
	h.base, h.width = lo, width(uint64(hi)-uint64(lo))
	if h.width == 0 {
		return h, buf
	}
	// Deltas (v[0] is the header's first; its u is 0 and unused).
	if delta && n > 1 {
		if w := width(uint64(dhi) - uint64(dlo)); w < h.width {
			h = colHdr{off: h.off, enc: encDelta, width: w, base: dlo, first: int64(v[0])}
		}
	}
	var rlo, rhi int64
	if ref != nil && h.width > 0 {
		ref = ref[:n]
		rlo, rhi = refSpan(v, ref)
		if w := width(uint64(rhi) - uint64(rlo)); w < h.width {
			h = colHdr{off: h.off, enc: encRef, width: w, base: rlo}
		}
	}
	u := ps.tmp[:n]
	if h.width >= 8 {
		// A dictionary of up to 256 values, when its codes and entries
		// take fewer bytes than the rows.
		// Codes of at most half the width: 16 values for 8-bit rows.
		if dict, ok := smallDict(v, u, 1<<min(h.width/2, 8), &ps.dict); ok {
			if cw := width(uint64(len(dict) - 1)); len(dict)*8+payload(n, cw) < payload(n, h.width) {
				h = colHdr{off: h.off, enc: encDict, width: cw, ndict: uint16(len(dict))}
				for _, d := range dict {
					buf = binary.LittleEndian.AppendUint64(buf, uint64(d))
				}
				return h, putUints(buf, cw, u)
			}
		}
	}
	// Exceptions, for the wide columns (an 8-bit one gains at most 4 bits
	// a row, and costs a pass).
	if h.width >= 16 {
		plo, phi := lo, hi
		switch {
		case delta && n > 1:
			plo, phi = dlo, dhi
		case ref != nil:
			plo, phi = rlo, rhi
		}
		if p, ok := patchedEncoding(v, ref, delta, plo, phi, h); ok {
			return putPatched(p, v, ref, h.off, ps, buf)
		}
	}
	switch h.enc {
	case encFOR:
		if h.width >= 8 {
			return h, putFOR(buf, h.width, v, uint64(h.base))
		}
		for i, x := range v {
			u[i] = uint64(int64(x)) - uint64(h.base)
		}
	case encDelta:
		u[0] = 0
		for i := 1; i < n; i++ {
			u[i] = uint64(int64(v[i])-int64(v[i-1])) - uint64(h.base)
		}
	case encRef:
		for i, x := range v {
			u[i] = uint64(int64(x)-int64(ref[i])) - uint64(h.base)
		}
	}
	return h, putUints(buf, h.width, u)
}

// patchWidths are the widths patchedEncoding tries for the rows that are
// not exceptions.
var patchWidths = [...]uint8{0, 1, 2, 4, 8, 16, 24, 32}

// patching is a patched encoding of a column: enc (encFOR, encDelta or
// encRef) with the rows that fit width bits from its base stored in it,
// the others as exceptions. The base is the least value (around false)
// or a typical value less half the width's span (around true).
type patching struct {
	enc    uint8
	width  uint8
	around bool
	lo     int64 // the least of the values stored (rows 1.. for encDelta)
	mid    int64 // the typical value: the median of a sample of them
}

// patchedEncoding returns the patched encoding of v that takes the fewest
// bytes, when it takes fewer than best, v's narrowest encoding without
// exceptions. It tries the encoding v's kind of column takes: deltas for
// the columns that count up (delta), differences for those stored
// against another (ref), else a frame of reference; lo and hi are the
// least and greatest of those values (encodeInts found them). In one
// pass it counts how many rows fit each width above lo and around a
// typical value (exceptions on one side: a row never finished far above
// the others; on both: a rank's first row after another's last far below
// the others' deltas, long gaps far above them), and prices the
// exceptions at the width of the whole span: the cost found is an upper
// bound of what putPatched writes.
func patchedEncoding[T ~int32 | ~int64 | ~uint16 | ~uint32](v, ref []T, delta bool, lo, hi int64, best colHdr) (patching, bool) {
	n := len(v)
	enc, first := uint8(encFOR), 0
	switch {
	case delta && n > 1:
		enc, first = encDelta, 1
	case ref != nil:
		enc = encRef
		ref = ref[:n]
	}
	span := width(uint64(hi) - uint64(lo))
	mid := sampleMedian(v, ref, enc, first)
	// Rows by bit length of a - lo and of |a - mid|: a row fits w bits
	// above lo when its bit length is w or less, around mid when w-1 or
	// less.
	// Four histograms of each, row i in histogram i%4: neighbouring rows
	// most often have the same bit length, and counting them all in one
	// counter would chain every increment to the one before (a load
	// waiting on the store before it).
	var ab, ar [4][65]int32
	i := first
	switch enc {
	case encDelta:
		for ; i+4 <= n; i += 4 {
			w := v[i-1 : i+4 : i+4]
			tally(int64(w[1])-int64(w[0]), lo, mid, &ab[0], &ar[0])
			tally(int64(w[2])-int64(w[1]), lo, mid, &ab[1], &ar[1])
			tally(int64(w[3])-int64(w[2]), lo, mid, &ab[2], &ar[2])
			tally(int64(w[4])-int64(w[3]), lo, mid, &ab[3], &ar[3])
		}
		for ; i < n; i++ {
			tally(int64(v[i])-int64(v[i-1]), lo, mid, &ab[0], &ar[0])
		}
	case encRef:
		for ; i+4 <= n; i += 4 {
			w, r := v[i:i+4:i+4], ref[i:i+4:i+4]
			tally(int64(w[0])-int64(r[0]), lo, mid, &ab[0], &ar[0])
			tally(int64(w[1])-int64(r[1]), lo, mid, &ab[1], &ar[1])
			tally(int64(w[2])-int64(r[2]), lo, mid, &ab[2], &ar[2])
			tally(int64(w[3])-int64(r[3]), lo, mid, &ab[3], &ar[3])
		}
		for ; i < n; i++ {
			tally(int64(v[i])-int64(ref[i]), lo, mid, &ab[0], &ar[0])
		}
	default:
		for ; i+4 <= n; i += 4 {
			w := v[i : i+4 : i+4]
			tally(int64(w[0]), lo, mid, &ab[0], &ar[0])
			tally(int64(w[1]), lo, mid, &ab[1], &ar[1])
			tally(int64(w[2]), lo, mid, &ab[2], &ar[2])
			tally(int64(w[3]), lo, mid, &ab[3], &ar[3])
		}
		for ; i < n; i++ {
			tally(int64(v[i]), lo, mid, &ab[0], &ar[0])
		}
	}
	var above, around [65]int32
	for b := range above { // then rows of bit length b or less
		above[b] = ab[0][b] + ab[1][b] + ab[2][b] + ab[3][b]
		around[b] = ar[0][b] + ar[1][b] + ar[2][b] + ar[3][b]
		if b > 0 {
			above[b] += above[b-1]
			around[b] += around[b-1]
		}
	}
	m := n - first
	bestCost := payload(n, best.width)
	var win patching
	found := false
	for _, w := range patchWidths {
		if w >= best.width || w >= span {
			break
		}
		fitAround := around[0]
		if w > 0 {
			fitAround = around[w-1]
		}
		for side, f := range [2]int32{above[w], fitAround} {
			k := m - int(f)
			if cost := payload(n, w) + patchHdrLen + 2*k + payload(k, span); cost < bestCost {
				bestCost, found = cost, true
				win = patching{enc: enc, width: w, around: side == 1, lo: lo, mid: mid}
			}
		}
	}
	return win, found
}

// tally counts a in above by the bit length of a - lo and in around by
// that of |a - mid|.
func tally(a, lo, mid int64, above, around *[65]int32) {
	above[bits.Len64(uint64(a)-uint64(lo))]++
	d := uint64(a) - uint64(mid)
	if a < mid {
		d = -d
	}
	around[bits.Len64(d)]++
}

// sampleMedian returns the median of up to 31 of the values enc stores
// of v (rows first..), spread over them: a typical value, found without
// sorting the column.
func sampleMedian[T ~int32 | ~int64 | ~uint16 | ~uint32](v, ref []T, enc uint8, first int) int64 {
	var s [31]int64
	m := len(v) - first
	k := min(m, len(s))
	for j := range k {
		i := first + j*m/k
		switch enc {
		case encDelta:
			s[j] = int64(v[i]) - int64(v[i-1])
		case encRef:
			s[j] = int64(v[i]) - int64(ref[i])
		default:
			s[j] = int64(v[i])
		}
	}
	t := s[:k]
	for i := 1; i < k; i++ { // insertion sort: 31 values at most
		for j := i; j > 0 && t[j] < t[j-1]; j-- {
			t[j], t[j-1] = t[j-1], t[j]
		}
	}
	return t[k/2]
}

// patchValues writes into ps.x the values enc stores of v (ref: the
// column stored against): v, its deltas (row 0's unused) or its
// differences from ref. first is the first row that counts.
func patchValues[T ~int32 | ~int64 | ~uint16 | ~uint32](v, ref []T, enc uint8, ps *packScratch) (x []int64, first int) {
	x = ps.x[:len(v)]
	switch enc {
	case encDelta:
		x[0] = 0
		for i := 1; i < len(v); i++ {
			x[i] = int64(v[i]) - int64(v[i-1])
		}
		return x, 1
	case encRef:
		ref = ref[:len(v)]
		for i, a := range v {
			x[i] = int64(a) - int64(ref[i])
		}
	default:
		for i, a := range v {
			x[i] = int64(a)
		}
	}
	return x, 0
}

// base is the frame of reference of the rows p stores in its width.
func (p patching) base() int64 {
	switch {
	case p.around && p.width > 0:
		return p.mid - int64(uint64(1)<<(p.width-1))
	case p.around:
		return p.mid
	}
	return p.lo
}

// putPatched appends p's payload of v (ref as for patchedEncoding) to buf
// and returns its header, the payload at offset off: the rows in p's
// width (an exception's as 0), then the patch list.
func putPatched[T ~int32 | ~int64 | ~uint16 | ~uint32](p patching, v, ref []T, off int32, ps *packScratch, buf []byte) (colHdr, []byte) {
	h := colHdr{off: off, enc: p.enc | encPatched, width: p.width, base: p.base()}
	if p.enc == encDelta {
		h.first = int64(v[0])
	}
	x, first := patchValues(v, ref, p.enc, ps)
	u := ps.tmp[:len(v)]
	u[0] = 0
	base := uint64(h.base)
	// The exceptions' row numbers go to the patch list as found; their
	// values to ps.exc, then in their own frame of reference.
	idx := &ps.idx
	k := 0
	elo, ehi := int64(0), int64(0)
	lim := uint64(1) << p.width
	for i := first; i < len(x); i++ {
		a := x[i]
		if d := uint64(a) - base; d < lim {
			u[i] = d
			continue
		}
		u[i] = 0
		if k == 0 {
			elo, ehi = a, a
		}
		elo, ehi = min(elo, a), max(ehi, a)
		idx[k] = uint16(i)
		ps.exc[k] = uint64(a)
		k++
	}
	buf = putUints(buf, p.width, u)
	ew := width(uint64(ehi) - uint64(elo))
	buf = binary.LittleEndian.AppendUint16(buf, uint16(k))
	buf = append(buf, ew)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(elo))
	for _, i := range idx[:k] {
		buf = binary.LittleEndian.AppendUint16(buf, i)
	}
	e := ps.exc[:k]
	for j := range e {
		e[j] -= uint64(elo)
	}
	return h, putUints(buf, ew, e)
}

// spans returns the least and greatest values of v (not empty) and, when
// delta is set and v has two values or more, of its deltas v[i] - v[i-1]
// (as int64, wrapping). This is the first read of each column of a
// block, which the rest of encodeInts then finds in the cache. With AVX2,
// 64-bit columns and 32-bit ones without deltas of vectorRows rows or
// more go to the kernels (spansVector); the rest four rows a step, in
// independent chains.
func spans[T ~int32 | ~int64 | ~uint16 | ~uint32](v []T, delta bool) (lo, hi, dlo, dhi int64) {
	n := len(v)
	if haveAVX2 && n >= vectorRows {
		if lo, hi, dlo, dhi, ok := spansVector(v, delta); ok {
			return lo, hi, dlo, dhi
		}
	}
	lo, hi = int64(v[0]), int64(v[0])
	if !delta || n < 2 {
		// A column that holds one value throughout the block (a rank
		// file's rank, pipeline, stage and TP rank) is told by a compare
		// a row; any other stops this at its first change.
		i := 1
		for i < n && v[i] == v[0] {
			i++
		}
		if i == n {
			return lo, hi, 0, 0
		}
		lo1, hi1, lo2, hi2, lo3, hi3 := lo, hi, lo, hi, lo, hi
		for ; i+4 <= n; i += 4 {
			w := v[i : i+4 : i+4]
			a, b, c, d := int64(w[0]), int64(w[1]), int64(w[2]), int64(w[3])
			lo, hi = min(lo, a), max(hi, a)
			lo1, hi1 = min(lo1, b), max(hi1, b)
			lo2, hi2 = min(lo2, c), max(hi2, c)
			lo3, hi3 = min(lo3, d), max(hi3, d)
		}
		for ; i < n; i++ {
			lo, hi = min(lo, int64(v[i])), max(hi, int64(v[i]))
		}
		return min(lo, lo1, lo2, lo3), max(hi, hi1, hi2, hi3), 0, 0
	}
	dlo = int64(v[1]) - int64(v[0])
	dhi = dlo
	lo1, hi1, dlo1, dhi1 := lo, hi, dlo, dhi
	i := 1
	for ; i+2 <= n; i += 2 {
		w := v[i-1 : i+2 : i+2]
		p, a, b := int64(w[0]), int64(w[1]), int64(w[2])
		da, db := a-p, b-a
		lo, hi = min(lo, a), max(hi, a)
		lo1, hi1 = min(lo1, b), max(hi1, b)
		dlo, dhi = min(dlo, da), max(dhi, da)
		dlo1, dhi1 = min(dlo1, db), max(dhi1, db)
	}
	for ; i < n; i++ {
		a, d := int64(v[i]), int64(v[i])-int64(v[i-1])
		lo, hi = min(lo, a), max(hi, a)
		dlo, dhi = min(dlo, d), max(dhi, d)
	}
	return min(lo, lo1), max(hi, hi1), min(dlo, dlo1), max(dhi, dhi1)
}

// putFOR appends v[i] - base, each in w bits (8 or more), little-endian.
func putFOR[T ~int32 | ~int64 | ~uint16 | ~uint32](buf []byte, w uint8, v []T, base uint64) []byte {
	off := len(buf)
	buf = append(buf, make([]byte, payload(len(v), w))...)
	p := buf[off:]
	switch w {
	case 8:
		p = p[:len(v)]
		for i, x := range v {
			p[i] = uint8(uint64(int64(x)) - base)
		}
	case 16:
		for i, x := range v {
			binary.LittleEndian.PutUint16(p[2*i:2*i+2:2*i+2], uint16(uint64(int64(x))-base))
		}
	case 24:
		for i, x := range v {
			u := uint64(int64(x)) - base
			q := p[3*i : 3*i+3 : 3*i+3]
			q[0], q[1], q[2] = uint8(u), uint8(u>>8), uint8(u>>16)
		}
	case 32:
		for i, x := range v {
			binary.LittleEndian.PutUint32(p[4*i:4*i+4:4*i+4], uint32(uint64(int64(x))-base))
		}
	default:
		for i, x := range v {
			binary.LittleEndian.PutUint64(p[8*i:8*i+8:8*i+8], uint64(int64(x))-base)
		}
	}
	return buf
}

// smallDict returns the distinct values of v, in order of first
// appearance, and sets codes[i] to v[i]'s index among them, when there are
// at most limit (256 or fewer) distinct values. The dictionary is ds's,
// valid until ds is used again.
//
// Its table and dictionary are ds's, left empty for the next call: most
// calls are for columns of more distinct values than the limit (times),
// and each made a table of 10 KB zeroed and a dictionary grown to the
// limit before it gave up (1.5 s of the 32 s of CPU packing the
// 302M-event fleet trace's chunks took).
func smallDict[T ~int32 | ~int64 | ~uint16 | ~uint32](v []T, codes []uint64, limit int, ds *dictScratch) ([]int64, bool) {
	keys, code, used := &ds.keys, &ds.code, &ds.used
	dict := ds.dict[:0]
	defer func() {
		// Only the slots set are cleared: at most limit of them.
		for _, s := range used[:len(dict)] {
			code[s] = 0
		}
		ds.dict = dict[:0]
	}()
	last, lastCode := int64(v[0]), uint64(0)
	for i, x := range v {
		x := int64(x)
		if i > 0 && x == last {
			codes[i] = lastCode
			continue
		}
		s := dictSlot(x)
		for code[s] != 0 && keys[s] != x {
			s = (s + 1) & (dictSlots - 1)
		}
		if code[s] == 0 {
			if len(dict) == limit {
				return nil, false
			}
			used[len(dict)] = uint16(s)
			dict = append(dict, x)
			keys[s], code[s] = x, int16(len(dict))
		}
		last, lastCode = x, uint64(code[s]-1)
		codes[i] = lastCode
	}
	return dict, true
}

// dictSlots is the size of smallDict's open-addressing table: at most a
// quarter full.
const dictSlots = 1024

// dictSlot is x's first slot in smallDict's table.
func dictSlot(x int64) uint64 { return uint64(x) * 0x9e3779b97f4a7c15 >> (64 - 10) }

// dictScratch is smallDict's memory, reused from call to call: the table
// (empty between calls) and room for the dictionary.
type dictScratch struct {
	keys [dictSlots]int64
	code [dictSlots]int16 // 1 + index in the dictionary; 0: empty
	used [256]uint16      // the slot of each dictionary entry
	dict []int64
}

// putUints appends u, each value in w bits, little-endian; rows narrower
// than a byte are packed low bits first.
func putUints(buf []byte, w uint8, u []uint64) []byte {
	if w == 0 {
		return buf
	}
	off := len(buf)
	buf = append(buf, make([]byte, payload(len(u), w))...)
	p := buf[off:]
	switch w {
	case 1, 2, 4:
		per := 8 / int(w)
		j := 0
		switch w {
		case 1:
			for ; j < len(u)/8; j++ {
				x := u[8*j : 8*j+8 : 8*j+8]
				p[j] = uint8(x[0] | x[1]<<1 | x[2]<<2 | x[3]<<3 | x[4]<<4 | x[5]<<5 | x[6]<<6 | x[7]<<7)
			}
		case 2:
			for ; j < len(u)/4; j++ {
				x := u[4*j : 4*j+4 : 4*j+4]
				p[j] = uint8(x[0] | x[1]<<2 | x[2]<<4 | x[3]<<6)
			}
		case 4:
			for ; j < len(u)/2; j++ {
				x := u[2*j : 2*j+2 : 2*j+2]
				p[j] = uint8(x[0] | x[1]<<4)
			}
		}
		for i := per * j; i < len(u); i++ {
			p[i/per] |= uint8(u[i]) << (uint(i%per) * uint(w))
		}
	case 8:
		p = p[:len(u)]
		for i, x := range u {
			p[i] = uint8(x)
		}
	case 16:
		for i, x := range u {
			binary.LittleEndian.PutUint16(p[2*i:2*i+2:2*i+2], uint16(x))
		}
	case 24:
		for i, x := range u {
			p[3*i], p[3*i+1], p[3*i+2] = uint8(x), uint8(x>>8), uint8(x>>16)
		}
	case 32:
		for i, x := range u {
			binary.LittleEndian.PutUint32(p[4*i:4*i+4:4*i+4], uint32(x))
		}
	default:
		for i, x := range u {
			binary.LittleEndian.PutUint64(p[8*i:8*i+8:8*i+8], x)
		}
	}
	return buf
}

// unpack writes the block's rows into rows [lo, hi) of dst's columns cols
// (which holds the columns those are stored against).
func (b *packedBlock) unpack(dst *Trace, lo, hi int, cols ColumnSet) {
	var tmp [PackBlockRows]int64
	m := hi - lo
	for _, c := range unpackOrder {
		if !cols.Has(c) {
			continue
		}
		h := &b.hdr[c]
		var ref []int64
		switch refCol[c] {
		case ColStartNs:
			ref = dst.StartNs[lo:hi]
		case ColRank:
			if h.enc&^encPatched == encRef {
				ref = widen(dst.Rank[lo:hi], tmp[:m])
			}
		}
		switch c {
		case ColRank:
			decodeInto(dst.Rank[lo:hi], h, b.data, nil)
		case ColPipeline:
			decodeInto(dst.Pipeline[lo:hi], h, b.data, nil)
		case ColStage:
			decodeInto(dst.Stage[lo:hi], h, b.data, nil)
		case ColTPRank:
			decodeInto(dst.TPRank[lo:hi], h, b.data, nil)
		case ColChunk:
			decodeInto(dst.Chunk[lo:hi], h, b.data, nil)
		case ColStep:
			decodeInto(dst.Step[lo:hi], h, b.data, nil)
		case ColMicroBatch:
			decodeInto(dst.MicroBatch[lo:hi], h, b.data, nil)
		case ColKind:
			decodeInto(dst.Kind[lo:hi], h, b.data, nil)
		case ColSeq:
			decodeInto(dst.Seq[lo:hi], h, b.data, nil)
		case ColIssueNs:
			decodeInto(dst.IssueNs[lo:hi], h, b.data, ref)
		case ColStartNs:
			decodeInto(dst.StartNs[lo:hi], h, b.data, nil)
		case ColEndNs:
			decodeInto(dst.EndNs[lo:hi], h, b.data, ref)
		case ColPeer:
			decodeInto(dst.Peer[lo:hi], h, b.data, ref)
		case ColBytes:
			decodeInto(dst.Bytes[lo:hi], h, b.data, nil)
		case ColTokens:
			decodeInto(dst.Tokens[lo:hi], h, b.data, nil)
		case ColFlops:
			f := dst.Flops[lo:hi]
			decodeInto(unsafe.Slice((*int64)(unsafe.Pointer(&f[0])), len(f)), h, b.data, nil)
		case ColMemBytes:
			decodeInto(dst.MemBytes[lo:hi], h, b.data, nil)
		case ColGroupSeq:
			decodeInto(dst.GroupSeq[lo:hi], h, b.data, nil)
		case ColShape:
			decodeInto(dst.Shape[lo:hi], h, b.data, nil)
		case ColDtype:
			decodeInto(dst.Dtype[lo:hi], h, b.data, nil)
		case ColGroup:
			decodeInto(dst.Group[lo:hi], h, b.data, nil)
		}
	}
}

// decodeInto writes the values h stores in data into dst (ref: the
// column's reference for encRef, as int64).
func decodeInto[T ~int32 | ~int64 | ~uint16 | ~uint32](dst []T, h *colHdr, data []byte, ref []int64) {
	p := data[h.off:]
	base := uint64(h.base)
	switch h.enc &^ encPatched {
	case encDict:
		var dict [256]T
		for k := range int(h.ndict) {
			dict[k] = T(binary.LittleEndian.Uint64(p[8*k:]))
		}
		p = p[8*int(h.ndict):]
		if h.width == 8 {
			for i, k := range p[:len(dst)] {
				dst[i] = dict[k]
			}
			return
		}
		dictInto(dst, p, h.width, &dict)
	case encDelta:
		forInto(dst, p, h.width, base)
		patch(dst, h, p)
		acc := uint64(h.first)
		dst[0] = T(acc)
		for i := 1; i < len(dst); i++ {
			acc += uint64(int64(dst[i]))
			dst[i] = T(acc)
		}
	case encRef:
		forInto(dst, p, h.width, base)
		patch(dst, h, p)
		for i, r := range ref[:len(dst)] {
			dst[i] = T(uint64(int64(dst[i])) + uint64(r))
		}
	default:
		forInto(dst, p, h.width, base)
		patch(dst, h, p)
	}
}

// patch writes the exceptions of a patched column (h, its payload p) over
// the rows forInto wrote.
func patch[T ~int32 | ~int64 | ~uint16 | ~uint32](dst []T, h *colHdr, p []byte) {
	if h.enc&encPatched == 0 {
		return
	}
	q := p[payload(len(dst), h.width):]
	k := int(binary.LittleEndian.Uint16(q))
	w := q[2]
	base := binary.LittleEndian.Uint64(q[3:])
	idx := q[patchHdrLen : patchHdrLen+2*k]
	vals := q[patchHdrLen+2*k:]
	for j := range k {
		dst[binary.LittleEndian.Uint16(idx[2*j:2*j+2:2*j+2])] = T(base + uintAt(vals, w, j))
	}
}

// uintAt returns row j of p, rows of w bits (as putUints writes them).
func uintAt(p []byte, w uint8, j int) uint64 {
	switch w {
	case 0:
		return 0
	case 1, 2, 4:
		per := 8 / int(w)
		return uint64(p[j/per]>>(uint(j%per)*uint(w))) & (1<<w - 1)
	case 8:
		return uint64(p[j])
	case 16:
		return uint64(binary.LittleEndian.Uint16(p[2*j : 2*j+2 : 2*j+2]))
	case 24:
		q := p[3*j : 3*j+3 : 3*j+3]
		return uint64(q[0]) | uint64(q[1])<<8 | uint64(q[2])<<16
	case 32:
		return uint64(binary.LittleEndian.Uint32(p[4*j : 4*j+4 : 4*j+4]))
	}
	return binary.LittleEndian.Uint64(p[8*j : 8*j+8 : 8*j+8])
}

// dictInto sets dst[i] = dict[u[i]], u read from p in w bits per row (1, 2
// or 4).
func dictInto[T ~int32 | ~int64 | ~uint16 | ~uint32](dst []T, p []byte, w uint8, dict *[256]T) {
	n := len(dst)
	j := 0
	switch w {
	case 1:
		for ; j < n/8; j++ {
			b, d := p[j], dst[8*j:8*j+8:8*j+8]
			d[0], d[1], d[2], d[3] = dict[b&1], dict[b>>1&1], dict[b>>2&1], dict[b>>3&1]
			d[4], d[5], d[6], d[7] = dict[b>>4&1], dict[b>>5&1], dict[b>>6&1], dict[b>>7]
		}
	case 2:
		for ; j+2 <= n/4; j += 2 {
			x, d := binary.LittleEndian.Uint16(p[j:j+2:j+2]), dst[4*j:4*j+8:4*j+8]
			d[0], d[1], d[2], d[3] = dict[x&3], dict[x>>2&3], dict[x>>4&3], dict[x>>6&3]
			d[4], d[5], d[6], d[7] = dict[x>>8&3], dict[x>>10&3], dict[x>>12&3], dict[x>>14]
		}
		for ; j < n/4; j++ {
			b, d := p[j], dst[4*j:4*j+4:4*j+4]
			d[0], d[1], d[2], d[3] = dict[b&3], dict[b>>2&3], dict[b>>4&3], dict[b>>6]
		}
	case 4:
		for ; j+4 <= n/2; j += 4 {
			x, d := binary.LittleEndian.Uint32(p[j:j+4:j+4]), dst[2*j:2*j+8:2*j+8]
			d[0], d[1], d[2], d[3] = dict[x&15], dict[x>>4&15], dict[x>>8&15], dict[x>>12&15]
			d[4], d[5], d[6], d[7] = dict[x>>16&15], dict[x>>20&15], dict[x>>24&15], dict[x>>28]
		}
		for ; j < n/2; j++ {
			b, d := p[j], dst[2*j:2*j+2:2*j+2]
			d[0], d[1] = dict[b&15], dict[b>>4]
		}
	}
	per := 8 / int(w)
	mask := uint8(1)<<w - 1
	for i := per * j; i < n; i++ {
		dst[i] = dict[p[i/per]>>(uint(i%per)*uint(w))&mask]
	}
}

// fill sets every element of dst to v: the first few one by one, then by
// doubling copies (memmove, which moves a vector register at a time: a
// block's constant column fills 4.5x (64-bit) to 8x (32-bit) as fast as
// by a loop of stores, BenchmarkForInto/w0).
func fill[T any](dst []T, v T) {
	n := min(len(dst), 8)
	for i := range n {
		dst[i] = v
	}
	for n < len(dst) {
		n += copy(dst[n:], dst[:n])
	}
}

// forInto sets dst[i] = base + u[i], u read from p in w bits per row.
// For T narrower than 64 bits the sums wrap at T's size, which is right:
// the values were T's to begin with. (encDelta and encRef add on top of
// the wrapped sums, which wrap the same way.)
func forInto[T ~uint8 | ~int32 | ~int64 | ~uint16 | ~uint32](dst []T, p []byte, w uint8, base uint64) {
	n := len(dst)
	switch w {
	case 0:
		fill(dst, T(base))
	case 1:
		p = p[:payload(n, 1)]
		j := 0
		for ; j < n/8; j++ {
			b, d := uint64(p[j]), dst[8*j:8*j+8:8*j+8]
			d[0], d[1], d[2], d[3] = T(base+b&1), T(base+b>>1&1), T(base+b>>2&1), T(base+b>>3&1)
			d[4], d[5], d[6], d[7] = T(base+b>>4&1), T(base+b>>5&1), T(base+b>>6&1), T(base+b>>7)
		}
		for i := 8 * j; i < n; i++ {
			dst[i] = T(base + uint64(p[i/8])>>(i%8)&1)
		}
	case 2:
		p = p[:payload(n, 2)]
		j := 0
		// Eight rows from a 16-bit word.
		for ; j+2 <= n/4; j += 2 {
			x, d := uint64(binary.LittleEndian.Uint16(p[j:j+2:j+2])), dst[4*j:4*j+8:4*j+8]
			d[0], d[1], d[2], d[3] = T(base+x&3), T(base+x>>2&3), T(base+x>>4&3), T(base+x>>6&3)
			d[4], d[5], d[6], d[7] = T(base+x>>8&3), T(base+x>>10&3), T(base+x>>12&3), T(base+x>>14)
		}
		for ; j < n/4; j++ {
			b, d := uint64(p[j]), dst[4*j:4*j+4:4*j+4]
			d[0], d[1], d[2], d[3] = T(base+b&3), T(base+b>>2&3), T(base+b>>4&3), T(base+b>>6)
		}
		for i := 4 * j; i < n; i++ {
			dst[i] = T(base + uint64(p[i/4])>>(2*(i%4))&3)
		}
	case 4:
		p = p[:payload(n, 4)]
		j := 0
		// Eight rows from a 32-bit word.
		for ; j+4 <= n/2; j += 4 {
			x, d := binary.LittleEndian.Uint32(p[j:j+4:j+4]), dst[2*j:2*j+8:2*j+8]
			d[0], d[1], d[2], d[3] = T(base+uint64(x&15)), T(base+uint64(x>>4&15)), T(base+uint64(x>>8&15)), T(base+uint64(x>>12&15))
			d[4], d[5], d[6], d[7] = T(base+uint64(x>>16&15)), T(base+uint64(x>>20&15)), T(base+uint64(x>>24&15)), T(base+uint64(x>>28))
		}
		for ; j < n/2; j++ {
			b, d := uint64(p[j]), dst[2*j:2*j+2:2*j+2]
			d[0], d[1] = T(base+b&15), T(base+b>>4)
		}
		for i := 2 * j; i < n; i++ {
			dst[i] = T(base + uint64(p[i/2])>>(4*(i%2))&15)
		}
	case 8:
		p = p[:n]
		for i, u := range p {
			dst[i] = T(base + uint64(u))
		}
	// The rows are cut with full slice expressions (p[k*i : k*i+k :
	// k*i+k]): against p[k*i:], which leaves the compiler a bounds check
	// and a cap to compute a row, a 32-bit column unpacks 3.8x as fast.
	case 16:
		p = p[:2*n]
		for i := range dst {
			dst[i] = T(base + uint64(binary.LittleEndian.Uint16(p[2*i:2*i+2:2*i+2])))
		}
	case 24:
		p = p[:3*n]
		// Eight rows from three 64-bit words.
		const m = 1<<24 - 1
		i := 0
		for ; i+8 <= n; i += 8 {
			q, d := p[3*i:3*i+24:3*i+24], dst[i:i+8:i+8]
			a, b, c := binary.LittleEndian.Uint64(q), binary.LittleEndian.Uint64(q[8:]), binary.LittleEndian.Uint64(q[16:])
			d[0], d[1], d[2], d[3] = T(base+a&m), T(base+a>>24&m), T(base+(a>>48|b<<16)&m), T(base+b>>8&m)
			d[4], d[5], d[6], d[7] = T(base+b>>32&m), T(base+(b>>56|c<<8)&m), T(base+c>>16&m), T(base+c>>40)
		}
		for ; i < n; i++ {
			q := p[3*i : 3*i+3 : 3*i+3]
			dst[i] = T(base + (uint64(q[0]) | uint64(q[1])<<8 | uint64(q[2])<<16))
		}
	case 32:
		p = p[:4*n]
		for i := range dst {
			dst[i] = T(base + uint64(binary.LittleEndian.Uint32(p[4*i:4*i+4:4*i+4])))
		}
	default:
		p = p[:8*n]
		for i := range dst {
			dst[i] = T(base + binary.LittleEndian.Uint64(p[8*i:8*i+8:8*i+8]))
		}
	}
}
