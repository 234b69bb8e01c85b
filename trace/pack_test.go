package trace

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"slices"
	"testing"
	"unsafe"
)

// randomTrace makes n rows whose columns mix the shapes Pack has
// encodings for (constants, runs, counters, times close to each other,
// nulls) with values that fit none (random 64-bit words, extremes).
func randomTrace(rng *rand.Rand, n int) *Trace {
	t := &Trace{Meta: Meta{Job: "pack", PP: 4}}
	pick := func(vals ...int64) int64 { return vals[rng.Intn(len(vals))] }
	wild := func() int64 {
		switch rng.Intn(6) {
		case 0:
			return math.MinInt64
		case 1:
			return math.MaxInt64
		case 2:
			return int64(rng.Uint64())
		case 3:
			return -int64(rng.Intn(1000))
		}
		return int64(rng.Intn(1 << uint(rng.Intn(40))))
	}
	mode := rng.Intn(4) // how wild this trace is: 0 tame, 3 anything
	strs := []string{"", "bf16", "fp32", "4096x1x8192", "dp0", "pp1"}
	for k := range 300 {
		strs = append(strs, fmt.Sprintf("s%d", k))
	}
	nstr := 1 + rng.Intn(len(strs))
	rank := Rank(rng.Intn(4096))
	now := int64(rng.Uint64() >> 2)
	seq := int64(0)
	for i := range n {
		if rng.Intn(500) == 0 {
			rank = Rank(rng.Intn(4096))
			seq = 0
		}
		seq++
		now += int64(rng.Intn(1 << uint(8+rng.Intn(20))))
		start := now
		end := start + int64(rng.Intn(1<<uint(4+rng.Intn(28))))
		issue := start - int64(rng.Intn(1000))
		if rng.Intn(50) == 0 {
			end = NoTime
		}
		if rng.Intn(200) == 0 {
			start, end = NoTime, NoTime
		}
		e := Event{
			Rank: rank, Pipeline: int32(rank) % 7, Stage: Stage(rank % 16), TPRank: int32(rank % 8),
			Chunk: int32(rng.Intn(2)), Step: int64(i / 3000), MicroBatch: MicroBatch(rng.Intn(64)) - 1,
			Kind: Kind(1 + rng.Intn(int(numWellKnown)-1)), Seq: seq,
			IssueNs: issue, StartNs: start, EndNs: end,
			Peer:  Rank(pick(-1, int64(rank)+8, int64(rank)-8, int64(rng.Intn(4096)))),
			Bytes: pick(0, 64<<20, 32<<20), Tokens: pick(0, 4096), Flops: float64(pick(0, 1e12, 2e12)),
			MemBytes: int64(i) << 10, GroupSeq: pick(NoGroupSeq, int64(i)),
			Shape: strs[rng.Intn(nstr)], Dtype: strs[rng.Intn(min(nstr, 3))], Group: strs[rng.Intn(nstr)],
		}
		if mode >= 2 && rng.Intn(4) == 0 {
			e.Step, e.Seq, e.Bytes, e.MemBytes, e.Tokens = wild(), wild(), wild(), wild(), wild()
			e.IssueNs, e.StartNs, e.EndNs, e.GroupSeq = wild(), wild(), wild(), wild()
			e.Rank, e.Peer = Rank(int32(wild())), Rank(int32(wild()))
			e.Pipeline, e.Stage, e.TPRank = int32(wild()), Stage(int32(wild())), int32(wild())
			e.Chunk, e.MicroBatch, e.Kind = int32(wild()), MicroBatch(int32(wild())), Kind(uint16(wild()))
			e.Flops = math.Float64frombits(uint64(wild()))
		}
		if mode == 3 && rng.Intn(3) == 0 {
			e.Flops = math.Float64frombits(0x7ff8000000000001 + uint64(rng.Intn(9))) // NaNs with payloads
		}
		t.Append(e)
	}
	return t
}

func TestPackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	sizes := []int{0, 1, 2, 3, PackBlockRows - 1, PackBlockRows, PackBlockRows + 1, 3*PackBlockRows + 17}
	for trial := range 40 {
		n := sizes[trial%len(sizes)]
		if trial >= len(sizes) {
			n = rng.Intn(5 * PackBlockRows)
		}
		src := randomTrace(rng, n)
		p := Pack(src)
		if p.Len() != n {
			t.Fatalf("trial %d: Len %d, want %d", trial, p.Len(), n)
		}
		if d := Diff(src, p.Unpack(nil)); d != "" {
			t.Fatalf("trial %d (%d rows): unpacked differs: %s", trial, n, d)
		}
		// Into columns that held another, longer trace: every row is
		// overwritten, and the length is the packed one's.
		dst := randomTrace(rng, n+rng.Intn(100))
		if d := Diff(src, p.Unpack(dst)); d != "" {
			t.Fatalf("trial %d (%d rows): unpacked into used columns differs: %s", trial, n, d)
		}
	}
}

// TestPackEncodings checks that each column shape gets the encoding meant
// for it, by the bytes a block takes per row: the sizes are worked out
// from the encodings' definitions, not from the code.
func TestPackEncodings(t *testing.T) {
	const n = PackBlockRows
	tr := &Trace{}
	for i := range n {
		start := int64(1e15) + int64(i)*2_000_003 + int64(i%7) // 8.2 s: more than 32 bits
		tr.Append(Event{
			Rank: 42, Pipeline: 1, Stage: 3, TPRank: 2, Chunk: 0, Step: 9,
			MicroBatch: MicroBatch(i % 64), Kind: F + Kind(i%2), Seq: int64(i) + 100,
			StartNs: start, IssueNs: start - 700, EndNs: start + 50_000 + int64(i%3)*100,
			Peer: 42 + 8, Bytes: 64 << 20, Shape: "4096x1x8192", Dtype: "bf16",
			Tokens: 4096, Flops: 3.5e12, MemBytes: int64(i%5) << 30, Group: "pp", GroupSeq: int64(i),
		})
	}
	p := Pack(tr)
	b := &p.blocks[0]
	want := map[int]struct {
		enc   uint8
		width uint8
	}{
		ColRank: {encFOR, 0}, ColPipeline: {encFOR, 0}, ColStage: {encFOR, 0}, ColTPRank: {encFOR, 0},
		ColStep:       {encFOR, 0},
		ColMicroBatch: {encFOR, 8},   // 0..63: 6 bits, stored in 8
		ColKind:       {encFOR, 1},   // F or B
		ColSeq:        {encDelta, 0}, // +1 every row
		ColStartNs:    {encDelta, 4}, // steps of 2_000_003 + (-6..1): a span of 7
		ColIssueNs:    {encRef, 0},   // start - 700
		ColEndNs:      {encRef, 8},   // start + 50_000..50_200
		ColPeer:       {encFOR, 0},
		ColBytes:      {encFOR, 0},
		ColMemBytes:   {encDict, 4}, // five values 1 GiB apart: codes 0..4
		ColGroupSeq:   {encDelta, 0},
		ColShape:      {encFOR, 0}, ColDtype: {encFOR, 0}, ColGroup: {encFOR, 0},
	}
	for c, w := range want {
		h := b.hdr[c]
		if h.enc != w.enc || h.width != w.width {
			t.Errorf("%s: encoding %d width %d, want %d width %d", Columns[c], h.enc, h.width, w.enc, w.width)
		}
	}
	// Payload in bits per row: microbatch 8 + kind 1 + start 4 + end 8 +
	// mem_bytes 4, and mem_bytes' dictionary of 5 values (40 bytes).
	if got, wantBytes := len(b.data), n*(8+1+4+8+4)/8+5*8; got != wantBytes {
		t.Errorf("payload %d bytes, want %d", got, wantBytes)
	}
	if d := Diff(tr, p.Unpack(nil)); d != "" {
		t.Fatal(d)
	}
}

// TestPackPatched checks the patched encodings on a block whose columns
// fit a narrow width but for a few rows (or a third of them), by the
// bytes each takes, worked out from the definitions (a patch list: 11
// bytes, 2 a row number, its values in their own width).
func TestPackPatched(t *testing.T) {
	const n = PackBlockRows
	tr := &Trace{}
	for i := range n {
		rank, seq := Rank(1), int64(i)
		if i >= 1000 { // another rank's rows: its sequence starts again
			rank, seq = 2, int64(i-1000)
		}
		start := int64(1e15) + int64(i)*1_000 + int64(i%7) // deltas 1001, or 994 every seventh row
		issue := start
		if i%3 == 0 { // a third of the ops issued 5000-5099 ns early, the rest as they start
			issue -= 5000 + int64(i%100)
		}
		end := start + 50_000
		if i == 2000 { // never started: null start and end
			start, end, issue = NoTime, NoTime, NoTime
		}
		tr.Append(Event{Rank: rank, Kind: F, Seq: seq, IssueNs: issue, StartNs: start, EndNs: end,
			Peer: NoRank, GroupSeq: NoGroupSeq})
	}
	p := Pack(tr)
	b := &p.blocks[0]
	want := map[int]struct {
		enc   uint8
		width uint8
		bytes int
	}{
		ColRank: {encFOR, 1, n / 8},
		// +1 a row but at row 1000: one exception, its value alone (width 0).
		ColSeq: {encDelta | encPatched, 0, 11 + 2},
		// Deltas 994..1001 in 4 bits around 1001; rows 2000 and 2001
		// (to and from null) are 64-bit exceptions.
		ColStartNs: {encDelta | encPatched, 4, n/2 + 11 + 2*2 + 2*8},
		// 0 for two rows in three; the 1366 others (rows 0, 3, ..., 4095)
		// in 8 bits from -5099.
		ColIssueNs: {encRef | encPatched, 0, 11 + 1366*2 + 1366},
		// 50 000 but at row 2000 (null - null = 0).
		ColEndNs: {encRef | encPatched, 0, 11 + 2},
	}
	total := 0
	for c, w := range want {
		h := b.hdr[c]
		if h.enc != w.enc || h.width != w.width {
			t.Errorf("%s: encoding %#x width %d, want %#x width %d", Columns[c], h.enc, h.width, w.enc, w.width)
		}
		total += w.bytes
	}
	if len(b.data) != total {
		t.Errorf("payload %d bytes, want %d", len(b.data), total)
	}
	if d := Diff(tr, p.Unpack(nil)); d != "" {
		t.Fatal(d)
	}
	// Each column alone too (the columns stored against come along).
	for c := range NumColumns {
		got := p.UnpackColumns(nil, ColumnsOf(c))
		for _, k := range []int{ColSeq, ColStartNs, ColIssueNs, ColEndNs} {
			if k == c && !reflect.DeepEqual(columnInts(got, k), columnInts(tr, k)) {
				t.Errorf("%s unpacked alone differs", Columns[k])
			}
		}
	}
}

// columnInts returns column c (an integer column) of t.
func columnInts(t *Trace, c int) []int64 {
	switch c {
	case ColSeq:
		return t.Seq
	case ColStartNs:
		return t.StartNs
	case ColIssueNs:
		return t.IssueNs
	case ColEndNs:
		return t.EndNs
	}
	return nil
}

// TestPackBitWidths checks the widths under a byte, for frames of
// reference and dictionary codes, on blocks whose rows do not fill their
// last byte: each column's values are drawn from a known number of
// values, which sets its width.
func TestPackBitWidths(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for _, w := range []uint8{1, 2, 4} {
		for _, n := range []int{1, 2, 3, 5, 7, 8, 9, 15, 17, 4093, PackBlockRows} {
			span := int64(1)<<w - 1
			tr := &Trace{}
			far := []int64{-5 << 40, 3, 1 << 50, 77, -1, 1 << 33, 9, 1 << 62, 12, 1 << 40, -7 << 20, 5, 6, 1 << 45, 2, 8}
			for i := range n {
				// Microbatch: 0..span, all of them present when n allows.
				mb := int64(i) % (span + 1)
				if i > int(span) {
					mb = rng.Int63n(span + 1)
				}
				tr.Append(Event{Rank: 1, MicroBatch: MicroBatch(100 + mb), Kind: F,
					Bytes:   far[mb], // as many values, far apart: a dictionary
					StartNs: NoTime, EndNs: NoTime, Peer: NoRank, GroupSeq: NoGroupSeq})
			}
			p := Pack(tr)
			h := p.blocks[0].hdr
			wantW := w
			if n <= int(span) { // fewer values than the width holds
				wantW = width(uint64(n - 1))
			}
			if h[ColMicroBatch].enc != encFOR || h[ColMicroBatch].width != wantW {
				t.Errorf("w %d, %d rows: microbatch encoding %d width %d, want FOR width %d", w, n, h[ColMicroBatch].enc, h[ColMicroBatch].width, wantW)
			}
			if n > 256 && (h[ColBytes].enc != encDict || h[ColBytes].width != wantW) {
				t.Errorf("w %d, %d rows: bytes encoding %d width %d, want a dictionary, width %d", w, n, h[ColBytes].enc, h[ColBytes].width, wantW)
			}
			if d := Diff(tr, p.Unpack(nil)); d != "" {
				t.Fatalf("w %d, %d rows: %s", w, n, d)
			}
		}
	}
}

func FuzzPack(f *testing.F) {
	f.Add([]byte{0}, int64(1), uint16(10))
	f.Add([]byte("\x00\x01\x02\xff\xfe\x80\x7f"), int64(-1), uint16(5000))
	f.Fuzz(func(t *testing.T, data []byte, seed int64, n uint16) {
		// Columns filled from data, byte by byte, cycling: every value,
		// run and repetition a block can meet, driven by the fuzzer.
		tr := &Trace{}
		if len(data) == 0 {
			data = []byte{0}
		}
		k := 0
		next := func() int64 {
			b := data[k%len(data)]
			k++
			switch b % 5 {
			case 0:
				return int64(b)
			case 1:
				return seed + int64(b)
			case 2:
				return math.MinInt64 + int64(b)
			case 3:
				return int64(k) * seed
			}
			return -int64(b) << (b % 64)
		}
		rows := int(n % (3 * PackBlockRows))
		for range rows {
			tr.Append(Event{
				Rank: Rank(next()), Pipeline: int32(next()), Stage: Stage(next()), TPRank: int32(next()),
				Chunk: int32(next()), Step: next(), MicroBatch: MicroBatch(next()), Kind: Kind(next()),
				Seq: next(), IssueNs: next(), StartNs: next(), EndNs: next(), Peer: Rank(next()),
				Bytes: next(), Shape: fmt.Sprint(next() % 300), Dtype: fmt.Sprint(next() % 3), Tokens: next(),
				Flops: math.Float64frombits(uint64(next())), MemBytes: next(), Group: fmt.Sprint(next() % 2),
				GroupSeq: next(),
			})
		}
		if d := Diff(tr, Pack(tr).Unpack(nil)); d != "" {
			t.Fatal(d)
		}
	})
}

func BenchmarkPack(b *testing.B) {
	tr := randomTrace(rand.New(rand.NewSource(2)), 1<<20)
	b.SetBytes(int64(tr.Len()))
	for b.Loop() {
		Pack(tr)
	}
}

func BenchmarkUnpack(b *testing.B) {
	tr := randomTrace(rand.New(rand.NewSource(2)), 1<<20)
	p := Pack(tr)
	dst := p.Unpack(nil)
	b.ReportMetric(float64(p.Bytes())/float64(tr.Len()), "B/event")
	b.SetBytes(int64(tr.Len()))
	for b.Loop() {
		p.Unpack(dst)
	}
}

// BenchmarkSpans times spans on one block, by the Go loops and (where
// the machine has AVX2) the kernels: "loops" against "kernels" in the same
// run is the kernels' gain.
func BenchmarkSpans(b *testing.B) {
	rng := rand.New(rand.NewSource(3))
	times, ref, ranks := make([]int64, PackBlockRows), make([]int64, PackBlockRows), make([]Rank, PackBlockRows)
	x := int64(1 << 40)
	for i := range times {
		x += rng.Int63n(1 << 20)
		times[i], ref[i], ranks[i] = x, x-rng.Int63n(1<<16), Rank(rng.Intn(4096))
	}
	was := haveAVX2
	defer func() { haveAVX2 = was }()
	for _, kernels := range []bool{false, true} {
		name := "loops"
		if kernels {
			if !was {
				continue
			}
			name = "kernels"
		}
		haveAVX2 = kernels
		b.Run(name+"/int64", func(b *testing.B) {
			for b.Loop() {
				spans(times, false)
			}
		})
		b.Run(name+"/int64-delta", func(b *testing.B) {
			for b.Loop() {
				spans(times, true)
			}
		})
		b.Run(name+"/int64-ref", func(b *testing.B) {
			for b.Loop() {
				refSpan(times, ref)
			}
		})
		b.Run(name+"/int32", func(b *testing.B) {
			for b.Loop() {
				spans(ranks, false)
			}
		})
	}
}

// BenchmarkForInto times unpacking one block's column of each width into
// 64-bit rows.
func BenchmarkForInto(b *testing.B) {
	dst := make([]int64, PackBlockRows)
	p := make([]byte, 8*PackBlockRows)
	for _, w := range []uint8{0, 1, 2, 4, 8, 16, 24, 32, 64} {
		b.Run(fmt.Sprintf("w%d", w), func(b *testing.B) {
			for b.Loop() {
				forInto(dst, p, w, 12345)
			}
		})
	}
}

// TestUnpackColumns unpacks random sets of columns into columns that held
// another trace: those asked for (and those they are stored against) are
// the trace's, the others are empty.
//
// Odd trials pack only some columns (PackColumns): a column not held is
// left empty whether asked for or not, and the rank and start time (what
// others are stored against) are held whatever the set.
func TestUnpackColumns(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for trial := range 60 {
		n := rng.Intn(3 * PackBlockRows)
		src := randomTrace(rng, n)
		p, held := Pack(src), AllColumns
		if trial%2 == 1 {
			packCols := ColumnSet(rng.Uint32()) & AllColumns
			p = NewPacker(n).PackColumns(src, packCols)
			held = packCols | ColumnsOf(ColRank)
			if held.Has(ColIssueNs) || held.Has(ColEndNs) {
				held |= ColumnsOf(ColStartNs)
			}
		}
		if p.Columns() != held {
			t.Fatalf("trial %d: holds columns %b, want %b", trial, p.Columns(), held)
		}
		cols := ColumnSet(rng.Uint32()) & AllColumns
		if trial == 0 {
			cols = 0
		}
		dst := p.UnpackColumns(randomTrace(rng, n+rng.Intn(100)), cols)
		want := cols | ColumnsOf(ColRank)
		if want.Has(ColIssueNs) || want.Has(ColEndNs) {
			want |= ColumnsOf(ColStartNs)
		}
		want &= held
		sv, dv := reflect.ValueOf(src).Elem(), reflect.ValueOf(dst).Elem()
		for c := range NumColumns {
			s, d := sv.Field(c+1), dv.Field(c+1) // the columns follow Meta, in column order
			if !want.Has(c) {
				if d.Len() != 0 {
					t.Fatalf("trial %d: column %s not asked for has %d rows", trial, Columns[c], d.Len())
				}
				continue
			}
			if d.Len() != n {
				t.Fatalf("trial %d: column %s has %d rows, want %d", trial, Columns[c], d.Len(), n)
			}
			for i := range n {
				a, b := s.Index(i), d.Index(i)
				if c == ColFlops {
					if math.Float64bits(a.Float()) != math.Float64bits(b.Float()) {
						t.Fatalf("trial %d: flops row %d: %v vs %v", trial, i, a, b)
					}
				} else if a.Interface() != b.Interface() {
					t.Fatalf("trial %d: column %s row %d: %v vs %v", trial, Columns[c], i, a, b)
				}
			}
		}
	}
}

// TestPackWideRows checks deltas and references in 16-, 24- and 32-bit
// rows against the columns they came from, with the end times the last
// payload of their block (every later column constant: nothing follows
// their last row) and in the middle.
func TestPackWideRows(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for _, w := range []uint8{16, 24, 32} {
		for _, n := range []int{3, 5, 8, 4095, PackBlockRows} {
			for _, last := range []bool{true, false} {
				top := int64(1)<<w - 1
				tr := &Trace{}
				start := int64(1) << 50
				for i := range n {
					// Steps and durations up to top, top itself in row 1.
					step, dur := rng.Int63n(top+1), rng.Int63n(top+1)
					if i == 1 {
						step, dur = top, top
					}
					start += step
					e := Event{Rank: 3, Kind: F, Seq: int64(i), StartNs: start, IssueNs: start - dur/2, EndNs: start + dur,
						Peer: NoRank, GroupSeq: NoGroupSeq}
					if !last {
						e.Tokens = int64(i) // a column after the end times that is not constant
					}
					tr.Append(e)
				}
				p := Pack(tr)
				h := p.blocks[0].hdr
				if h[ColStartNs].enc != encDelta || h[ColStartNs].width != w {
					t.Errorf("w %d, %d rows: start encoding %d width %d, want delta width %d", w, n, h[ColStartNs].enc, h[ColStartNs].width, w)
				}
				if h[ColEndNs].enc != encRef || h[ColEndNs].width != w {
					t.Errorf("w %d, %d rows: end encoding %d width %d, want ref width %d", w, n, h[ColEndNs].enc, h[ColEndNs].width, w)
				}
				if end := int(h[ColEndNs].off) + payload(n, w); last && end != len(p.blocks[0].data) {
					t.Errorf("w %d, %d rows: end times end at %d of %d bytes, want last", w, n, end, len(p.blocks[0].data))
				}
				if d := Diff(tr, p.Unpack(nil)); d != "" {
					t.Fatalf("w %d, %d rows, last %v: %s", w, n, last, d)
				}
			}
		}
	}
}

// TestSmallDictReuse: smallDict with one scratch used call after call
// (as packing does) gives what it gives with fresh scratch each time, and
// leaves the scratch's table empty, whether the dictionary fits its limit
// or not.
func TestSmallDictReuse(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	var shared dictScratch
	shared.dict = make([]int64, 0, 256)
	for trial := range 2000 {
		n := 1 + rng.Intn(PackBlockRows)
		distinct := 1 + rng.Intn(400)
		limit := 1 << (1 + rng.Intn(8))
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(rng.Intn(distinct))*0x10001 - int64(distinct)
			if rng.Intn(3) == 0 && i > 0 {
				v[i] = v[i-1] // runs, as columns have
			}
		}
		codesA, codesB := make([]uint64, n), make([]uint64, n)
		var fresh dictScratch
		dictA, okA := smallDict(v, codesA, limit, &fresh)
		dictB, okB := smallDict(v, codesB, limit, &shared)
		if okA != okB || !slices.Equal(dictA, dictB) || okA && !slices.Equal(codesA, codesB) {
			t.Fatalf("trial %d (%d rows, %d values, limit %d): fresh %v %v, reused %v %v", trial, n, distinct, limit, okA, dictA, okB, dictB)
		}
		if okA {
			for i, c := range codesA {
				if dictA[c] != v[i] {
					t.Fatalf("trial %d: row %d coded %d = %d, holds %d", trial, i, c, dictA[c], v[i])
				}
			}
		}
		for s, c := range shared.code {
			if c != 0 {
				t.Fatalf("trial %d: slot %d left set", trial, s)
			}
		}
	}
}

// TestPackSlabs packs random traces with the blocks' data cut from small
// slabs (1 MB, so that blocks share them, some do not fit what is left
// of one and the widest, random 64-bit columns, get their own) and checks the round trip, that blocks do share slabs, that
// no two blocks' data overlap, and that Bytes counts every slab whole.
func TestPackSlabs(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	const size = 1 << 20
	shared, slabbed, owned := 0, 0, int64(0)
	for trial := range 8 {
		src := randomTrace(rng, 3*PackBlockRows+rng.Intn(6*PackBlockRows))
		sl := &slabs{size: size}
		p := packInto(src, sl, AllColumns)
		if d := Diff(src, p.Unpack(nil)); d != "" {
			t.Fatalf("trial %d: %s", trial, d)
		}
		// Blocks in slabs: their data's capacity is their length, and
		// consecutive ones in one slab are adjacent.
		type span struct{ lo, hi uintptr }
		var spans []span
		var own int64
		for i := range p.blocks {
			d := p.blocks[i].data
			if len(d) > size/8 {
				own += int64(cap(d)) // a block of its own
			} else if cap(d) != len(d) {
				t.Fatalf("trial %d: block %d: capacity %d, length %d", trial, i, cap(d), len(d))
			}
			if len(d) > 0 {
				a := uintptr(unsafe.Pointer(&d[0]))
				spans = append(spans, span{a, a + uintptr(len(d))})
			}
		}
		slices.SortFunc(spans, func(a, b span) int { return int(a.lo - b.lo) })
		adjacent := 0
		for i := 1; i < len(spans); i++ {
			if spans[i].lo < spans[i-1].hi {
				t.Fatalf("trial %d: blocks' data overlap", trial)
			}
			if spans[i].lo == spans[i-1].hi {
				adjacent++
			}
		}
		shared += adjacent
		// Held: whole slabs plus the blocks too large for one.
		if (p.held-own)%size != 0 {
			t.Errorf("trial %d: held %d bytes, %d of them in blocks of their own: not whole %d-byte slabs", trial, p.held, own, size)
		}
		slabbed += int((p.held - own) / size)
		owned += own
		if p.Bytes() < p.held {
			t.Errorf("trial %d: Bytes %d, under the %d held", trial, p.Bytes(), p.held)
		}
	}
	// The trials cover both kinds of block (randomTrace's wilder traces
	// pack to 290 KB a block, the tamer to 89 KB).
	if shared == 0 || slabbed == 0 || owned == 0 {
		t.Errorf("%d blocks next to another in a slab, %d slabs, %d bytes in blocks of their own: want all three", shared, slabbed, owned)
	}
	// Small traces: no slab.
	if sl := newSlabs(1000); sl.size != 0 {
		t.Errorf("a 1000-row trace gets %d-byte slabs", sl.size)
	}
	if sl := newSlabs(100 << 20); sl.size != slabMax {
		t.Errorf("a 100M-row trace gets %d-byte slabs, want %d", sl.size, slabMax)
	}
}

// TestPacker packs several small traces with one Packer and checks that
// each still round-trips once all are packed (no trace's blocks written
// over another's), that their blocks share slabs across traces (a block
// of one next to a block of the one before: each packed alone, no block
// would be in a slab), and that the Packeds' held bytes add up to the
// slabs' without counting one twice.
func TestPacker(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	pk := NewPacker(8 << 20)
	if pk.sl.size == 0 {
		t.Fatal("a Packer for 8M rows has no slabs")
	}
	var srcs []*Trace
	var ps []*Packed
	for range 12 {
		src := randomTrace(rng, PackBlockRows+rng.Intn(3*PackBlockRows))
		if sl := newSlabs(src.Len()); sl.size != 0 {
			t.Fatalf("a %d-row trace alone gets slabs: the test needs traces that do not", src.Len())
		}
		srcs = append(srcs, src)
		ps = append(ps, pk.Pack(src))
	}
	held := int64(0)
	across := 0
	for i, p := range ps {
		if d := Diff(srcs[i], p.Unpack(nil)); d != "" {
			t.Fatalf("trace %d: %s", i, d)
		}
		held += p.held
		if i == 0 {
			continue
		}
		ends := map[uintptr]bool{}
		for _, b := range ps[i-1].blocks {
			if len(b.data) > 0 {
				ends[uintptr(unsafe.Pointer(&b.data[0]))+uintptr(len(b.data))] = true
			}
		}
		for _, b := range p.blocks {
			if len(b.data) > 0 && ends[uintptr(unsafe.Pointer(&b.data[0]))] {
				across++
			}
		}
	}
	if held != pk.sl.held {
		t.Errorf("the Packeds hold %d bytes in all, the slabs %d", held, pk.sl.held)
	}
	if held%int64(pk.sl.size) != 0 {
		t.Errorf("%d bytes held: not whole %d-byte slabs", held, pk.sl.size)
	}
	if across == 0 {
		t.Error("no trace's block follows the block of the trace packed before it in a slab")
	}
}

// TestSpans checks spans against the least and greatest values and
// deltas found one row at a time: on columns of one value throughout
// (its shortcut), counters by d (wrapping past the ends or not, d up to
// the extremes), the same with a change in the last row, random words.
func TestSpans(t *testing.T) {
	slow := func(v []int64, delta bool) (lo, hi, dlo, dhi int64) {
		lo, hi = v[0], v[0]
		for _, x := range v {
			lo, hi = min(lo, x), max(hi, x)
		}
		if !delta || len(v) < 2 {
			return lo, hi, 0, 0
		}
		dlo, dhi = v[1]-v[0], v[1]-v[0]
		for i := 1; i < len(v); i++ {
			d := v[i] - v[i-1] // wraps, as spans' do
			dlo, dhi = min(dlo, d), max(dhi, d)
		}
		return lo, hi, dlo, dhi
	}
	rng := rand.New(rand.NewSource(7))
	starts := []int64{0, -5, 1 << 40, math.MaxInt64 - 3, math.MinInt64 + 3, math.MaxInt64, math.MinInt64}
	steps := []int64{0, 1, -1, 7, 1 << 20, math.MaxInt64 / 3, math.MaxInt64 / 2, math.MaxInt64, math.MinInt64, -(math.MaxInt64 / 4), 1 << 62}
	check := func(v []int64, what string) {
		t.Helper()
		for _, delta := range []bool{false, true} {
			lo, hi, dlo, dhi := spans(v, delta)
			wlo, whi, wdlo, wdhi := slow(v, delta)
			if lo != wlo || hi != whi || dlo != wdlo || dhi != wdhi {
				t.Fatalf("%s, %d rows, delta %v: spans %d %d %d %d, want %d %d %d %d", what, len(v), delta, lo, hi, dlo, dhi, wlo, whi, wdlo, wdhi)
			}
		}
	}
	// From vectorRows on, with haveAVX2, the kernels run: lengths around
	// their strides (8 and 4 rows) and tails.
	for _, n := range []int{1, 2, 3, 5, 8, 9, 63, 64, 65, 67, 71, 100, 127, PackBlockRows - 1, PackBlockRows} {
		for _, s := range starts {
			for _, d := range steps {
				v := make([]int64, n)
				for i := range v {
					v[i] = s + int64(i)*d // wraps past the ends for some
				}
				check(v, fmt.Sprintf("start %d step %d", s, d))
				if n > 2 {
					v[n-1] += 1 + int64(rng.Intn(3))
					check(v, fmt.Sprintf("start %d step %d, last row off", s, d))
				}
			}
		}
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(rng.Uint64())
		}
		check(v, "random words")
	}
	// 32-bit and 16-bit columns, signed and not, by the kernels (from
	// vectorRows rows) and the loops; the least or greatest value in each
	// place of a vector and of the tail.
	for _, n := range []int{3, 64, 65, 79, 80, 81, 1000, PackBlockRows} {
		for trial := range 40 {
			i32, u32, u16 := make([]Rank, n), make([]Str, n), make([]Kind, n)
			for i := range n {
				i32[i], u32[i], u16[i] = Rank(rng.Uint32()>>2)-1<<28, Str(rng.Uint32()>>1), Kind(rng.Intn(1000))
			}
			if trial < 20 {
				// An extreme at each place in turn.
				at := (trial * 7) % n
				i32[at], u32[at], u16[at] = math.MinInt32, math.MaxUint32, math.MaxUint16
				i32[(at+5)%n], u32[(at+5)%n] = math.MaxInt32, 0
			}
			w32, w64, w16 := make([]int64, n), make([]int64, n), make([]int64, n)
			for i := range n {
				w32[i], w64[i], w16[i] = int64(i32[i]), int64(u32[i]), int64(u16[i])
			}
			same := func(name string, lo, hi int64, want []int64) {
				t.Helper()
				if wlo, whi, _, _ := slow(want, false); lo != wlo || hi != whi {
					t.Fatalf("%s, %d rows, trial %d: spans %d %d, want %d %d", name, n, trial, lo, hi, wlo, whi)
				}
			}
			lo, hi, _, _ := spans(i32, false)
			same("int32", lo, hi, w32)
			lo, hi, _, _ = spans(u32, false)
			same("uint32", lo, hi, w64)
			lo, hi, _, _ = spans(u16, false)
			same("uint16", lo, hi, w16)
		}
	}
	// refSpan: differences from another column (end - start, peer -
	// rank), wrapping like the rows' own.
	for _, n := range []int{1, 5, 64, 66, 127, PackBlockRows} {
		for trial := range 30 {
			v, ref, d := make([]int64, n), make([]int64, n), make([]int64, n)
			v32, ref32, d32 := make([]Rank, n), make([]Rank, n), make([]int64, n)
			for i := range n {
				ref[i] = int64(rng.Uint64() >> uint(rng.Intn(64)))
				v[i] = ref[i] + int64(rng.Intn(1<<20)) - 1<<19
				if trial%3 == 0 {
					v[i] = int64(rng.Uint64()) // wrapping differences
				}
				d[i] = v[i] - ref[i]
				ref32[i], v32[i] = Rank(rng.Int31()), Rank(rng.Int31())
				d32[i] = int64(v32[i]) - int64(ref32[i])
			}
			if lo, hi := refSpan(v, ref); true {
				if wlo, whi, _, _ := slow(d, false); lo != wlo || hi != whi {
					t.Fatalf("refSpan, %d rows, trial %d: %d %d, want %d %d", n, trial, lo, hi, wlo, whi)
				}
			}
			if lo, hi := refSpan(v32, ref32); true {
				if wlo, whi, _, _ := slow(d32, false); lo != wlo || hi != whi {
					t.Fatalf("refSpan int32, %d rows, trial %d: %d %d, want %d %d", n, trial, lo, hi, wlo, whi)
				}
			}
		}
	}
	// The narrower types convert without wrapping.
	v32 := []int32{math.MaxInt32 - 2, math.MaxInt32 - 1, math.MaxInt32}
	if lo, hi, dlo, dhi := spans(v32, true); lo != math.MaxInt32-2 || hi != math.MaxInt32 || dlo != 1 || dhi != 1 {
		t.Fatalf("int32 counter: %d %d %d %d", lo, hi, dlo, dhi)
	}
}
