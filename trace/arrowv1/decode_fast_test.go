package arrowv1

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/ppprof/ppprof/trace"
)

// sameRead checks that the fast decoder and the checked path alone give
// the same result for data: the same error, or equal results. The fast
// read's columns are then recycled (Recycle), so that later reads decode
// into columns that hold another trace's rows.
func sameRead(t *testing.T, name string, data []byte) {
	t.Helper()
	fast, ferr := readWith(data, memory.DefaultAllocator, true)
	slow, serr := readWith(data, memory.DefaultAllocator, false)
	if (ferr == nil) != (serr == nil) || ferr != nil && ferr.Error() != serr.Error() {
		t.Fatalf("%s: fast error %v, checked error %v", name, ferr, serr)
	}
	if ferr != nil {
		return
	}
	if d := trace.Diff(slow.Trace, fast.Trace); d != "" {
		t.Fatalf("%s: traces differ: %s", name, d)
	}
	// Later reads get its columns, as the chunks of a streamed job do.
	Recycle(fast.Trace)
	fast.Trace, slow.Trace = nil, nil
	if *fast != *slow {
		t.Fatalf("%s: fast %+v, checked %+v", name, *fast, *slow)
	}
}

// TestFastMatchesChecked encodes random traces every way and checks that
// the fast decoder takes them and agrees with the checked path, on the
// encodings and on corrupted and truncated copies of them.
func TestFastMatchesChecked(t *testing.T) {
	everyEncoding(t, 7, 6, func(name string, rows int, data []byte, pristine bool) {
		if pristine && rows > 0 {
			frames, ok := testFrames(data)
			if !ok {
				t.Fatalf("%s: no frames", name)
			}
			if _, _, ok := fastRead(frames, len(data)); !ok {
				t.Errorf("%s: the fast decoder refused what ppprof wrote", name)
			}
		}
		sameRead(t, name, data)
	})
}

// everyEncoding encodes random traces (0, 1, 7 and 150 rows) every way
// ppprof writes them (each writer, codec and batching) and calls check on
// each encoding (pristine), then on damaged copies of it, each corrupted
// in a few bytes and each cut short.
func everyEncoding(t *testing.T, seed int64, damaged int, check func(name string, rows int, data []byte, pristine bool)) {
	t.Helper()
	rng := newRand(seed)
	for _, rows := range []int{0, 1, 7, 150} {
		for _, w := range writers {
			for _, codec := range codecs {
				for _, batch := range []int{1, 64, 0} {
					tr := randomTrace(rng, rows, testKinds)
					data := encode(t, w, tr, Options{Compression: codec, BatchRows: batch})
					name := fmt.Sprintf("%d rows %s %s batch %d", rows, w.name, codecName(codec), batch)
					check(name, rows, data, true)
					for k := 0; k < damaged; k++ {
						bad := append([]byte(nil), data...)
						for j := 0; j <= k%3; j++ {
							bad[rng.Intn(len(bad))] ^= byte(1 + rng.Intn(255))
						}
						check(fmt.Sprintf("%s, corrupted %d", name, k), rows, bad, false)
						check(fmt.Sprintf("%s, cut %d", name, k), rows, data[:rng.Intn(len(data)+1)], false)
					}
				}
			}
		}
	}
}

// testFrames frames data as read does, for a complete file or stream.
func testFrames(data []byte) ([]frame, bool) {
	if Sniff(data) == FormatFile {
		return fileFrames(data)
	}
	s, err := scanStream(data, 0)
	return s.frames, err == nil
}

// FuzzFastMatchesChecked checks on fuzzed input that the fast decoder and
// the checked path agree, and that the fast decoder takes what ppprof
// writes. Its input is a fuzz selector and edit script (see fuzzInputs):
// random traces encoded every way, the fuzz seeds, corrupted and cut.
func FuzzFastMatchesChecked(f *testing.F) {
	in := newFuzzInputs(f)
	in.add(f)
	f.Fuzz(func(t *testing.T, sel uint64, edits []byte) {
		data, pristine := in.input(t, sel, edits)
		if pristine {
			frames, ok := testFrames(data)
			if !ok {
				t.Fatal("no frames in what ppprof wrote")
			}
			if _, _, ok := fastRead(frames, len(data)); !ok {
				t.Fatal("the fast decoder refused what ppprof wrote")
			}
		}
		sameRead(t, "fuzz input", data)
	})
}

// TestStepRunsAndReadRows: on everything ppprof writes (every writer,
// codec and batching), StepRuns answers and gives the step column's runs,
// ReadRows gives Read's rows and ReadShape answers with Read's columns; on
// damaged copies, whatever Read still reads, they agree with it.
func TestStepRunsAndReadRows(t *testing.T) {
	everyEncoding(t, 11, 4, func(name string, rows int, data []byte, pristine bool) {
		if pristine && rows > 0 {
			if _, _, ok := StepRuns(data); !ok {
				t.Errorf("%s: StepRuns refused what ppprof wrote", name)
			}
			if _, ok := ReadShape(data, nil); !ok {
				t.Errorf("%s: ReadShape refused what ppprof wrote", name)
			}
		}
		res, err := Read(data)
		if err != nil {
			StepRuns(data) // must not panic
			return
		}
		checkStepRuns(t, data, res.Trace)
		checkReadRows(t, data, res.Trace)
		checkShape(t, data, res.Trace)
	})
}

// TestReadRowsFramesOnlyItsSpan: ReadRows checks the bodies of the batches
// it decodes only: a corrupt buffer length in the last batch fails Read,
// and ReadRows of that batch, but not ReadRows of the rows before it, with
// or without an index of the input. An index of other bytes is an error.
func TestReadRowsFramesOnlyItsSpan(t *testing.T) {
	tr := randomTrace(newRand(3), 40, testKinds)
	for _, w := range writers {
		data := encode(t, w, tr, Options{Compression: LZ4, BatchRows: 10})
		frames, err := framesOf(data)
		if err != nil {
			t.Fatal(err)
		}
		_, ix, ok := StepRuns(data)
		if !ok {
			t.Fatalf("%s: StepRuns refused what ppprof wrote", w.name)
		}
		last := frames[len(frames)-1]
		if last.info.header != headerRecordBatch || !last.info.compressed {
			t.Fatalf("%s: the last message is not a compressed record batch", w.name)
		}
		// The first non-empty buffer's uncompressed length: -5.
		bad := append([]byte(nil), data...)
		for _, b := range last.info.buffers {
			if b[1] > 0 {
				at := last.end - len(last.body) + int(b[0])
				binary.LittleEndian.PutUint64(bad[at:], ^uint64(4)) // -5
				break
			}
		}
		if _, err := Read(bad); err == nil {
			t.Fatalf("%s: Read of a corrupt last batch: no error", w.name)
		}
		for _, x := range []*Index{nil, ix} {
			if _, _, err := ReadRows(bad, x, 30, 40); err == nil {
				t.Errorf("%s, index %v: ReadRows of the corrupt batch: no error", w.name, x != nil)
			}
			res, _, err := ReadRows(bad, x, 5, 25)
			if err != nil {
				t.Fatalf("%s, index %v: ReadRows of the rows before the corrupt batch: %v", w.name, x != nil, err)
			}
			if res.Truncated {
				t.Errorf("%s, index %v: ReadRows of a whole input that stopped after its rows says truncated", w.name, x != nil)
			}
			if d := trace.Diff(tr.Slice(5, 25), res.Trace); d != "" {
				t.Errorf("%s, index %v: rows 5 to 25 differ: %s", w.name, x != nil, d)
			}
		}
		// The index of other bytes: cut short, or with a batch more.
		if _, _, err := ReadRows(data[:len(data)-1], ix, 0, 10); err == nil || !errors.Is(err, errChanged) {
			t.Errorf("%s: ReadRows of a shorter input with its index: %v", w.name, err)
		}
		other := encode(t, w, tr.Slice(0, 35), Options{Compression: LZ4, BatchRows: 5})
		if _, _, err := ReadRows(other, &Index{size: len(other), schema: ix.schema, msgs: ix.msgs}, 10, 20); err == nil {
			t.Errorf("%s: ReadRows of other batches through an index: no error", w.name)
		}
	}
}

// TestLightFraming: Rows, ReadHead and ReadShape frame the input without
// reading the bodies of the record batches they do not decode (a mapped
// file's pages stay untouched): a corrupt compressed-length prefix in a
// middle batch's token column fails Read but not them, and they return
// what they return for the intact input. One in a batch they decode fails
// them, ReadHead with Read's error.
func TestLightFraming(t *testing.T) {
	tr := randomTrace(newRand(4), 40, testKinds)
	for _, w := range writers {
		data := encode(t, w, tr, Options{Compression: LZ4, BatchRows: 10})
		frames, err := framesOf(data)
		if err != nil {
			t.Fatal(err)
		}
		plan, ok := planFor(frames[0])
		if !ok {
			t.Fatalf("%s: no plan for what ppprof wrote", w.name)
		}
		var batches []frame
		for _, fr := range frames {
			if fr.info.header == headerRecordBatch {
				batches = append(batches, fr)
			}
		}
		if len(batches) < 3 {
			t.Fatalf("%s: %d record batches, want 3 or more", w.name, len(batches))
		}
		// corrupt sets the uncompressed length of column c's data buffer
		// in batch b to -5.
		corrupt := func(b, c int) []byte {
			fr := batches[b]
			buf := fr.info.buffers[plan.fields[plan.col[c]].buf+1]
			if buf[1] < 8 || !fr.info.compressed {
				t.Fatalf("%s: batch %d, column %s: buffer of %d bytes", w.name, b, trace.Columns[c], buf[1])
			}
			bad := append([]byte(nil), data...)
			binary.LittleEndian.PutUint64(bad[fr.end-len(fr.body)+int(buf[0]):], ^uint64(4))
			if _, err := Read(bad); err == nil {
				t.Fatalf("%s: Read with batch %d's %s corrupt: no error", w.name, b, trace.Columns[c])
			}
			return bad
		}
		wantHead, wantRows, err := ReadHead(data)
		if err != nil || wantRows != 40 {
			t.Fatalf("%s: ReadHead: %d rows, %v", w.name, wantRows, err)
		}
		wantShape, ok := ReadShape(data, nil)
		if !ok {
			t.Fatalf("%s: ReadShape refused what ppprof wrote", w.name)
		}

		bad := corrupt(1, trace.ColTokens)
		if n, err := Rows(bad); err != nil || n != 40 {
			t.Errorf("%s, a middle batch corrupt: Rows %d, %v; want 40", w.name, n, err)
		}
		head, rows, err := ReadHead(bad)
		if err != nil || rows != 40 || head.Batches != wantHead.Batches {
			t.Fatalf("%s, a middle batch corrupt: ReadHead: %v, %d rows", w.name, err, rows)
		}
		if d := trace.Diff(wantHead.Trace, head.Trace); d != "" {
			t.Errorf("%s, a middle batch corrupt: ReadHead's rows differ: %s", w.name, d)
		}
		if sh, ok := ReadShape(bad, nil); !ok || !slices.Equal(sh.Step, wantShape.Step) || !slices.Equal(sh.Kind, wantShape.Kind) {
			t.Errorf("%s, a middle batch's tokens corrupt: ReadShape ok %v, or other columns", w.name, ok)
		}
		// A shape column: ReadShape decodes it.
		if _, ok := ReadShape(corrupt(1, trace.ColStep), nil); ok {
			t.Errorf("%s, a middle batch's steps corrupt: ReadShape ok", w.name)
		}
		// The first batch, which ReadHead decodes: Read's error.
		bad = corrupt(0, trace.ColTokens)
		_, rerr := Read(bad)
		if _, _, err := ReadHead(bad); err == nil || err.Error() != rerr.Error() {
			t.Errorf("%s, the first batch corrupt: ReadHead error %v, want Read's %v", w.name, err, rerr)
		}
	}
}

// TestStringsOneValue: string columns of one value besides "" (decoded
// from their offsets and one comparison of their bytes), and near misses
// that are not (two values of one length, of lengths that divide each
// other, swapped halves), read back as written, through the fast decoder
// and the checked path alike.
func TestStringsOneValue(t *testing.T) {
	patterns := [][]string{
		{"", "4096x1x8192", "", "4096x1x8192", "", "", "4096x1x8192", ""},
		{"bf16", "bf16", "bf16", "bf16", "bf16", "bf16", "bf16", "bf16"},
		{"", "", "", "", "", "", "", ""},
		{"ab", "ab", "", "ab", "ab", "", "", "ab"},
		{"bf16", "fp16", "bf16", "fp16", "", "bf16", "", "fp16"},
		{"ab", "abab", "ab", "", "ab", "abab", "ab", "ab"},
		{"aa", "aa", "a", "aa", "", "aa", "aa", "a"},
		{"xy", "yx", "xy", "yx", "xy", "", "", "xy"},
		{"", "", "", "", "", "", "", "ünï"},
	}
	for pi, pat := range patterns {
		tr := randomTrace(newRand(int64(pi)), len(pat), testKinds)
		for i, v := range pat {
			tr.Shape[i] = trace.Intern(v)
			tr.Dtype[i] = trace.Intern(pat[len(pat)-1-i])
		}
		for _, codec := range []Compression{None, LZ4} {
			for _, batch := range []int{len(pat), 3} {
				name := fmt.Sprintf("pattern %d, %s, batches of %d", pi, codecName(codec), batch)
				data := encode(t, writers[0], tr, Options{Compression: codec, BatchRows: batch})
				res, err := Read(data)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if d := trace.Diff(tr, res.Trace); d != "" {
					t.Errorf("%s: read back: %s", name, d)
				}
				sameRead(t, name, data)
			}
		}
	}
}

// TestStringOffsetsWrapping: string offsets that decrease, but whose
// differences wrap around in 32 bits to one positive length and end where
// they began (0, 2^29, ..., then negative: 2^32 in all), are refused by
// the fast decoder as by the checked path: not read as empty strings.
func TestStringOffsetsWrapping(t *testing.T) {
	tr := randomTrace(newRand(6), 8, testKinds)
	data := encode(t, writers[0], tr, Options{Compression: None, BatchRows: 8})
	frames, err := framesOf(data)
	if err != nil {
		t.Fatal(err)
	}
	plan, ok := planFor(frames[0])
	if !ok {
		t.Fatal("no plan for what ppprof wrote")
	}
	var fr frame
	for _, f := range frames {
		if f.info.header == headerRecordBatch {
			fr = f
		}
	}
	buf := fr.info.buffers[plan.fields[plan.col[trace.ColShape]].buf+1]
	if buf[1] < 9*4 {
		t.Fatalf("offsets buffer of %d bytes", buf[1])
	}
	bad := append([]byte(nil), data...)
	at := fr.end - len(fr.body) + int(buf[0])
	for k := range 9 {
		binary.LittleEndian.PutUint32(bad[at+4*k:], uint32(k)<<29) // 0, 2^29, ..., 2^31 (negative), ..., 2^32 = 0
	}
	if _, err := Read(bad); err == nil {
		t.Error("Read of decreasing offsets: no error")
	}
	sameRead(t, "wrapping offsets", bad)
}
