package arrowv1

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/ppprof/ppprof/trace"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the committed seed corpus in testdata/fuzz/FuzzRead")

// fuzzSeeds are small inputs of every shape Read handles, by descriptive
// name: the committed seed corpus is written from them (see
// TestFuzzSeedCorpus) and FuzzRead adds them too.
func fuzzSeeds(tb testing.TB) map[string][]byte {
	// Small seeds keep the fuzzer fast: it minimizes every new input it
	// finds, running Read over and over, so bytes cost time.
	rng := rand.New(rand.NewSource(1))
	small := randomTrace(rng, 4, testKinds)
	small.Meta = trace.Meta{Job: "fuzz", Extra: map[string]string{"k": "v"}}
	seeds := map[string][]byte{}
	for _, w := range writers {
		for _, codec := range codecs {
			data := encode(tb, w, small, Options{Compression: codec, BatchRows: 2})
			name := fmt.Sprintf("%s-%s-2-batches", w.name, codecName(codec))
			seeds[name] = data
			ends, _ := messageEnds(tb, data, map[Format]int{FormatFile: fileStreamStart, FormatStream: 0}[w.format])
			cut := (ends[len(ends)-3] + ends[len(ends)-2]) / 2
			seeds[name+"-cut-in-last-batch"] = data[:cut]
			seeds[name+"-cut-after-schema"] = data[:ends[0]]
		}
	}
	seeds["file-none-empty"] = encode(tb, writers[0], small.Slice(0, 0), Options{})
	seeds["file-none-no-footer"] = seeds["file-none-2-batches"][:len(seeds["file-none-2-batches"])-20]
	seeds["stream-legacy-framing"] = legacyFraming(tb, seeds["stream-none-2-batches"])
	seeds["stream-foreign-views-dicts"] = foreignStream(tb, v1meta, [][2]int{{0, 3}},
		withCol(withCol(minimalCols(),
			col{"kind", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint8, ValueType: arrow.BinaryTypes.String}, strs("F", "B", "DATA")}),
			col{"shape", arrow.BinaryTypes.StringView, strs("4096x2x8192", nil, "a long shape string, not inlined")})...)
	return seeds
}

// legacyFraming drops the continuation markers of a stream.
func legacyFraming(tb testing.TB, data []byte) []byte {
	ends, _ := messageEnds(tb, data, 0)
	var out []byte
	pos := 0
	for _, e := range ends {
		out = append(out, data[pos+4:e]...)
		pos = e
	}
	return out
}

// FuzzRead checks that Read never panics, that what it returns passes
// Validate and accounts for its bytes, and that a trace it returns can be
// written and read back unchanged. Its input is a fuzz selector and edit
// script (see fuzzInputs).
func FuzzRead(f *testing.F) {
	in := newFuzzInputs(f)
	in.add(f)
	f.Fuzz(func(t *testing.T, sel uint64, edits []byte) {
		data, _ := in.input(t, sel, edits)
		checkRead(t, data)
	})
}

// checkRead is FuzzRead's check of one input.
func checkRead(t *testing.T, data []byte) {
	t.Helper()
	checkSparse(t, data) // the sparse readers answer as the whole ones, or not at all
	res, err := Read(data)
	rows, rerr := Rows(data) // never panics; counts what Read reads
	if err != nil {
		if res != nil {
			t.Fatalf("error %v with a result", err)
		}
		// What Read refuses, the partial readers must not panic on (nor
		// ReadHead give a result with an error).
		ReadShape(data, nil) // must not panic
		if h, _, err := ReadHead(data); (h == nil) == (err == nil) {
			t.Fatalf("ReadHead: result %v with error %v", h != nil, err)
		}
		xs := []*Index{nil}
		if _, ix, ok := StepRuns(data); ok {
			xs = append(xs, ix)
		}
		for _, x := range xs {
			if r, _, err := ReadRows(data, x, 0, 1); (r == nil) == (err == nil) {
				t.Fatalf("ReadRows: result %v with error %v", r != nil, err)
			}
		}
		return
	}
	if rerr != nil || rows != int64(res.Trace.Len()) {
		t.Fatalf("Read gave %d events, Rows %d (%v)", res.Trace.Len(), rows, rerr)
	}
	head, hrows, herr := ReadHead(data)
	if herr != nil || hrows != rows || head.Batches != res.Batches || head.Trace.Len() > res.Trace.Len() {
		t.Fatalf("ReadHead: %v, %d rows; Read: %d rows", herr, hrows, rows)
	}
	if res.Trace == nil {
		t.Fatal("nil trace without an error")
	}
	checkStepRuns(t, data, res.Trace)
	checkReadRows(t, data, res.Trace)
	checkShape(t, data, res.Trace)
	if err := res.Trace.Validate(); err != nil {
		t.Fatalf("result fails Validate: %v", err)
	}
	if res.BytesTotal != int64(len(data)) || res.BytesUsed < 0 || res.BytesUsed > res.BytesTotal || res.Batches < 0 {
		t.Fatalf("bad accounting: %+v for %d bytes", *res, len(data))
	}
	if res.Format == FormatUnknown {
		t.Fatal("success with an unknown format")
	}
	var buf bytes.Buffer
	if err := WriteStream(&buf, res.Trace, Options{}); err != nil {
		t.Fatalf("writing back: %v", err)
	}
	again, err := Read(buf.Bytes())
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if d := trace.Diff(res.Trace, again.Trace); d != "" {
		t.Fatalf("round trip of a read trace differs: %s", d)
	}
}

// Fuzz inputs are small: a selector naming the encoding to start from and
// a short edit script applied to a copy of it, not the encoding's bytes.
// Go's fuzzer minimizes every input that finds new coverage, trying
// O(n²) deletions of its bytes for up to -fuzzminimizetime (60s) each; with
// encodings (KBs of Arrow metadata) as inputs, nearly every mutation was
// new coverage and the workers spent all their time minimizing: a few
// dozen inputs a minute. An edit script of a few bytes minimizes in well
// under a second.
//
// The selector's low byte picks the base: below len(names), one of
// fuzzSeeds (every writer and codec, cut copies, legacy framing, foreign
// views and dictionaries, an empty file, a file without its footer);
// otherwise a random trace of sel>>8&15 rows, drawn from seed sel>>12,
// encoded in one of fuzzLayouts ways. The edit script corrupts and cuts
// it (see applyEdits).
type fuzzInputs struct {
	names []string // fuzzSeeds' names, sorted
	named [][]byte

	mu  sync.Mutex
	gen map[uint64][]byte // generated bases by selector
}

// fuzzLayouts is the number of ways a generated base is encoded: writer,
// codec, rows per batch and, for streams, legacy framing.
const fuzzLayouts = 3 * 3 * 4 * 2

var fuzzBatchRows = [4]int{1, 2, 5, 0}

func newFuzzInputs(tb testing.TB) *fuzzInputs {
	seeds := fuzzSeeds(tb)
	in := &fuzzInputs{gen: map[uint64][]byte{}}
	for name := range seeds {
		in.names = append(in.names, name)
	}
	sort.Strings(in.names)
	for _, name := range in.names {
		in.named = append(in.named, seeds[name])
	}
	return in
}

// seed returns the selector of the fuzz seed of that name.
func (in *fuzzInputs) seed(name string) (uint64, bool) {
	i := sort.SearchStrings(in.names, name)
	return uint64(i), i < len(in.names) && in.names[i] == name
}

// generated returns the selector of a random trace of rows rows (0 to 15)
// from seed, encoded in layout (0 to fuzzLayouts-1).
func (in *fuzzInputs) generated(layout, rows int, seed uint64) uint64 {
	return seed<<12 | uint64(rows)<<8 | uint64(len(in.names)+layout)
}

// add adds the seed corpus: every fuzz seed, every layout of generated
// traces, and corrupted and cut copies.
func (in *fuzzInputs) add(f *testing.F) {
	for i := range in.names {
		f.Add(uint64(i), []byte(nil))
	}
	for layout := 0; layout < fuzzLayouts; layout++ {
		f.Add(in.generated(layout, []int{0, 1, 3, 7}[layout%4], uint64(layout)), []byte(nil))
	}
	for i, edits := range [][]byte{
		{editXor, 0x01, 0x00, 0x5a},                            // a flipped byte
		{editXor, 0x00, 0x40, 0x01, editXor, 0x02, 0x10, 0x80}, // two
		{editCut, 0x03, 0x00, 0},                               // cut
		{editAdd32, 0x00, 0x08, 0xff},                          // a length one less
		{editSet32, 0x00, 0x0c, 7},                             // a huge one
		{editSet64, 0x05, 0x00, 3},
		{editSplice, 0x02, 0x00, 0x21}, // 16 bytes repeated
		{editSplice, 0x02, 0x00, 0x20}, // 16 bytes dropped
	} {
		f.Add(in.generated(i*7%fuzzLayouts, 5, uint64(i)), edits)
		f.Add(uint64(i*5%len(in.names)), edits)
	}
}

// input returns the input sel and edits describe, and whether it is an
// unedited ppprof encoding of at least one row with continuation markers
// (which the fast decoder must take).
func (in *fuzzInputs) input(tb testing.TB, sel uint64, edits []byte) (data []byte, pristine bool) {
	layout := int(sel & 0xff)
	if layout < len(in.names) {
		return applyEdits(in.named[layout], edits), false
	}
	layout = (layout - len(in.names)) % fuzzLayouts
	rows := int(sel >> 8 & 15)
	w := writers[layout%3]
	legacy := layout/36 == 1 && w.format == FormatStream
	key := sel>>12<<12 | uint64(rows)<<8 | uint64(layout)
	in.mu.Lock()
	base, ok := in.gen[key]
	in.mu.Unlock()
	if !ok {
		tr := randomTrace(newRand(int64(sel>>12)), rows, testKinds)
		opt := Options{Compression: codecs[layout/3%3], BatchRows: fuzzBatchRows[layout/9%4]}
		base = encode(tb, w, tr, opt)
		if legacy {
			base = legacyFraming(tb, base)
		}
		in.mu.Lock()
		if len(in.gen) >= 1024 {
			clear(in.gen)
		}
		in.gen[key] = base
		in.mu.Unlock()
	}
	return applyEdits(base, edits), len(edits) == 0 && rows > 0 && !legacy
}

// Edit script operations: each takes four bytes, op, a 16-bit big-endian
// offset (modulo the length plus one) and an argument.
const (
	editXor    = iota // xor the byte at the offset with the argument
	editSet32         // set the little-endian uint32 there to interesting[arg]
	editAdd32         // add int8(arg) to the little-endian uint32 there
	editSet64         // set the little-endian uint64 there to interesting[arg]
	editCut           // cut the input at the offset
	editSplice        // arg odd: repeat arg>>1 bytes from there; even: drop them
	editOps
)

// interesting are values edits write over lengths, offsets and counts.
var interesting = []uint64{0, 1, 2, 7, 8, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff, 1 << 20,
	1<<31 - 1, 1 << 31, 1<<32 - 1, 1<<32 - 8, 1 << 40, 1<<63 - 1, 1 << 63, 1<<64 - 1}

// maxEdits bounds the edit script's work.
const maxEdits = 64

// applyEdits returns a copy of base with edits applied.
func applyEdits(base, edits []byte) []byte {
	data := append([]byte(nil), base...)
	for i := 0; i+4 <= len(edits) && i < 4*maxEdits; i += 4 {
		op, arg := edits[i]%editOps, edits[i+3]
		pos := (int(edits[i+1])<<8 | int(edits[i+2])) % (len(data) + 1)
		switch op {
		case editXor:
			if pos < len(data) {
				data[pos] ^= arg
			}
		case editSet32:
			if pos+4 <= len(data) {
				binary.LittleEndian.PutUint32(data[pos:], uint32(interesting[int(arg)%len(interesting)]))
			}
		case editAdd32:
			if pos+4 <= len(data) {
				v := binary.LittleEndian.Uint32(data[pos:])
				binary.LittleEndian.PutUint32(data[pos:], v+uint32(int32(int8(arg))))
			}
		case editSet64:
			if pos+8 <= len(data) {
				binary.LittleEndian.PutUint64(data[pos:], interesting[int(arg)%len(interesting)])
			}
		case editCut:
			data = data[:pos]
		case editSplice:
			n := min(int(arg>>1), len(data)-pos)
			if arg&1 == 1 {
				data = slices.Insert(data, pos+n, slices.Clone(data[pos:pos+n])...)
			} else {
				data = slices.Delete(data, pos, pos+n)
			}
		}
	}
	return data
}

// committedSeeds are the seeds written to testdata/fuzz/FuzzRead: one of
// each kind of input, unedited.
var committedSeeds = []string{
	"stream-none-2-batches",
	"stream-none-2-batches-cut-after-schema",
	"file-lz4-2-batches",
	"file-none-empty",
	"file-none-no-footer",
	"streamwriter-zstd-2-batches",
	"streamwriter-none-2-batches-cut-in-last-batch",
	"stream-legacy-framing",
	"stream-foreign-views-dicts",
}

// TestFuzzSeedCorpus checks that the committed seed corpus is what
// fuzzInputs would write (selectors shift when fuzzSeeds changes) and
// rewrites it with -update-corpus.
func TestFuzzSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzRead")
	in := newFuzzInputs(t)
	if *updateCorpus {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range committedSeeds {
		sel, ok := in.seed(name)
		if !ok {
			t.Fatalf("no seed %s", name)
		}
		want := fmt.Sprintf("go test fuzz v1\nuint64(%d)\n[]byte(\"\")\n", sel)
		path := filepath.Join(dir, name)
		if *updateCorpus {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Errorf("seed corpus: %s is not %q (%v): run go test -run TestFuzzSeedCorpus -update-corpus", path, want, err)
		}
	}
}

// checkStepRuns checks StepRuns against the trace Read gave for data: when
// it answers, its runs are the step column's, run by run.
func checkStepRuns(t *testing.T, data []byte, read *trace.Trace) {
	t.Helper()
	runs, _, ok := StepRuns(data)
	if !ok {
		return
	}
	var want []StepRun
	for i, s := range read.Step {
		if i > 0 && s == read.Step[i-1] {
			want[len(want)-1].Rows++
			continue
		}
		want = append(want, StepRun{Step: s, Rows: 1})
	}
	if !slices.Equal(runs, want) {
		t.Fatalf("StepRuns: %v, want %v", runs, want)
	}
}

// checkReadRows checks ReadRows against the trace Read gave for data, with
// and without StepRuns' index: rows from a third of the way for half of
// them (at least one) are those rows; an empty range and one past the
// end are errors.
func checkReadRows(t *testing.T, data []byte, read *trace.Trace) {
	t.Helper()
	n := int64(read.Len())
	if n == 0 {
		return
	}
	ixs := []*Index{nil}
	if _, ix, ok := StepRuns(data); ok {
		ixs = append(ixs, ix)
	}
	lo := n / 3
	hi := min(n, lo+max(1, n/2))
	for _, ix := range ixs {
		res, rows, err := ReadRows(data, ix, lo, hi)
		if err != nil || rows < hi || rows > n {
			t.Fatalf("ReadRows(%d, %d) of %d rows, index %v: %v, %d rows framed", lo, hi, n, ix != nil, err, rows)
		}
		if d := trace.Diff(read.Slice(int(lo), int(hi)), res.Trace); d != "" {
			t.Fatalf("ReadRows(%d, %d), index %v, differs from Read's rows: %s", lo, hi, ix != nil, d)
		}
		for _, bad := range [][2]int64{{lo, lo}, {0, n + 1}, {-1, 1}} {
			if _, _, err := ReadRows(data, ix, bad[0], bad[1]); err == nil {
				t.Fatalf("ReadRows(%d, %d) of %d rows, index %v: no error", bad[0], bad[1], n, ix != nil)
			}
			if ix != nil {
				if _, ok := ReadRowsAt(&countingAt{data: data}, int64(len(data)), ix, bad[0], bad[1]); ok {
					t.Fatalf("ReadRowsAt(%d, %d) of %d rows: answered", bad[0], bad[1], n)
				}
			}
		}
		if ix != nil {
			for _, sp := range [][2]int64{{lo, hi}, {0, n}, {n - 1, n}, {0, 1}} {
				checkReadRowsAt(t, data, ix, sp[0], sp[1])
			}
		}
	}
}

// checkReadRowsAt checks ReadRowsAt of rows [lo, hi) of data against
// ReadRows of the whole input: where it answers, whatever the bytes it did
// not read hold (sparseCfgs' poisons), the answer is ReadRows'. It
// reports whether it answered with every poison.
func checkReadRowsAt(t *testing.T, data []byte, ix *Index, lo, hi int64) (answered bool) {
	t.Helper()
	want, _, werr := ReadRows(data, ix, lo, hi)
	answered = true
	for _, cfg := range sparseCfgs {
		res, ok := readRowsAt(&countingAt{data: data}, int64(len(data)), ix, lo, hi, cfg, nil)
		answered = answered && ok
		if !ok {
			continue
		}
		if werr != nil {
			t.Fatalf("poison %#x: ReadRowsAt(%d, %d) answered; ReadRows failed: %v", cfg.poison, lo, hi, werr)
		}
		if res.Batches != want.Batches || res.Truncated != want.Truncated || res.BytesUsed != want.BytesUsed ||
			res.BytesTotal != want.BytesTotal || res.Format != want.Format {
			t.Fatalf("poison %#x: ReadRowsAt(%d, %d) %+v; ReadRows %+v", cfg.poison, lo, hi, *res, *want)
		}
		if d := trace.Diff(want.Trace, res.Trace); d != "" || !reflect.DeepEqual(want.Trace.Meta, res.Trace.Meta) {
			t.Fatalf("poison %#x: ReadRowsAt(%d, %d)'s rows differ from ReadRows': %s", cfg.poison, lo, hi, d)
		}
	}
	// Into rows [3, 3+hi-lo) of a larger trace (ReadRowsAtInto): the same
	// rows, there, and the rows around them as they were.
	if werr == nil && hi > lo && hi-lo < 1<<20 {
		n := int(hi - lo)
		dst := MakeRows(n + 5)
		for i := range dst.Len() {
			dst.Seq[i], dst.StartNs[i] = -7, -7
		}
		res, ok := readRowsAt(&countingAt{data: data}, int64(len(data)), ix, lo, hi, sparseCfgs[0], &rowRange{t: dst, off: 3, n: n})
		if ok {
			if !IsRows(res.Trace, dst, 3, n) {
				t.Fatalf("ReadRowsAtInto(%d, %d): not read into rows [3, %d) of the trace given", lo, hi, 3+n)
			}
			if d := trace.Diff(want.Trace, res.Trace); d != "" || !reflect.DeepEqual(want.Trace.Meta, res.Trace.Meta) {
				t.Fatalf("ReadRowsAtInto(%d, %d)'s rows differ from ReadRows': %s", lo, hi, d)
			}
			for _, i := range []int{0, 1, 2, 3 + n, 4 + n} {
				if dst.Seq[i] != -7 || dst.StartNs[i] != -7 {
					t.Fatalf("ReadRowsAtInto(%d, %d) wrote row %d, outside [3, %d)", lo, hi, i, 3+n)
				}
			}
		}
		// And the mapped read's (ReadRowsInto): always answers.
		dst = MakeRows(n + 5)
		for i := range dst.Len() {
			dst.Seq[i], dst.StartNs[i] = -7, -7
		}
		res, placed, err := ReadRowsInto(data, ix, lo, hi, dst, 3)
		if err != nil || !placed || !IsRows(res.Trace, dst, 3, n) {
			t.Fatalf("ReadRowsInto(%d, %d): placed %v, err %v; ReadRows read them", lo, hi, placed, err)
		}
		if d := trace.Diff(want.Trace, res.Trace); d != "" || !reflect.DeepEqual(want.Trace.Meta, res.Trace.Meta) {
			t.Fatalf("ReadRowsInto(%d, %d)'s rows differ from ReadRows': %s", lo, hi, d)
		}
		for _, i := range []int{0, 1, 2, 3 + n, 4 + n} {
			if dst.Seq[i] != -7 || dst.StartNs[i] != -7 {
				t.Fatalf("ReadRowsInto(%d, %d) wrote row %d, outside [3, %d)", lo, hi, i, 3+n)
			}
		}
	}
	return answered
}

// checkShape checks ReadShape against the trace Read gave for data: when
// it answers, its columns are Read's, the others empty.
func checkShape(t *testing.T, data []byte, read *trace.Trace) {
	t.Helper()
	sh, ok := ReadShape(data, nil)
	if !ok {
		return
	}
	// Into the columns of a larger shape read before: the same.
	big := &trace.Trace{Rank: make([]trace.Rank, 0, sh.Len()+9), Pipeline: make([]int32, 0, sh.Len()+9),
		Stage: make([]trace.Stage, 0, sh.Len()+9), Step: make([]int64, 0, sh.Len()+9), Kind: make([]trace.Kind, 0, sh.Len()+9),
		MicroBatch: make([]trace.MicroBatch, 0, sh.Len()+9), Chunk: make([]int32, 0, sh.Len()+9)}
	if again, ok := ReadShape(data, big); !ok || !slices.Equal(again.Step, sh.Step) || !slices.Equal(again.Kind, sh.Kind) ||
		!slices.Equal(again.Rank, sh.Rank) || &again.Step[:1][0] != &big.Step[:1][0] {
		t.Fatalf("ReadShape into a larger shape's columns: ok %v, not the same", ok)
	}
	if !slices.Equal(sh.Rank, read.Rank) || !slices.Equal(sh.Pipeline, read.Pipeline) || !slices.Equal(sh.Stage, read.Stage) ||
		!slices.Equal(sh.Step, read.Step) || !slices.Equal(sh.Kind, read.Kind) || !slices.Equal(sh.MicroBatch, read.MicroBatch) ||
		!slices.Equal(sh.Chunk, read.Chunk) {
		t.Fatalf("ReadShape's columns differ from Read's")
	}
	if sh.Seq != nil || sh.StartNs != nil || sh.Shape != nil || sh.Flops != nil {
		t.Fatalf("ReadShape decoded columns beyond the shape")
	}
	if !reflect.DeepEqual(sh.Meta, read.Meta) {
		t.Fatalf("ReadShape's metadata %+v, Read's %+v", sh.Meta, read.Meta)
	}
	// Some rows, through the index: Read's rows of those columns.
	n := int64(read.Len())
	if _, ix, ok := StepRuns(data); ok && n > 0 {
		lo := n / 3
		hi := min(n, lo+max(1, n/2))
		part, ok := ReadShapeRows(data, ix, lo, hi, nil)
		if !ok || !slices.Equal(part.Step, read.Step[lo:hi]) || !slices.Equal(part.Rank, read.Rank[lo:hi]) ||
			!slices.Equal(part.Kind, read.Kind[lo:hi]) || !slices.Equal(part.MicroBatch, read.MicroBatch[lo:hi]) ||
			!slices.Equal(part.Chunk, read.Chunk[lo:hi]) || !slices.Equal(part.Pipeline, read.Pipeline[lo:hi]) ||
			!slices.Equal(part.Stage, read.Stage[lo:hi]) {
			t.Fatalf("ReadShapeRows(%d, %d) of %d rows: ok %v, not Read's columns", lo, hi, n, ok)
		}
		if _, ok := ReadShapeRows(data, ix, 0, n+1, nil); ok {
			t.Fatalf("ReadShapeRows(0, %d) of %d rows: ok", n+1, n)
		}
	}
}
