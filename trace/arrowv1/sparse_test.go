package arrowv1

import (
	"bytes"
	"io"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// countingAt is an io.ReaderAt over data that counts what is read.
type countingAt struct {
	data         []byte
	bytes, calls int
}

func (c *countingAt) ReadAt(p []byte, off int64) (int, error) {
	c.calls++
	if off < 0 || off > int64(len(c.data)) {
		return 0, io.EOF
	}
	n := copy(p, c.data[off:])
	c.bytes += n
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// sparseCfgs are checkSparse's ways of reading: the buffer filled first
// with each of three bytes, so that a byte looked at but never read gives
// another answer under one of them than the whole file does (zeros
// matter: a stream's end is found from its trailing zero bytes), and
// windows of the real size and of 16 bytes (the real window reads whole
// the messages of a small stream).
var sparseCfgs = []sparseCfg{{0, 16}, {0xa5, 16}, {0xff, 16}, {0xa5, sparseWindow}}

// checkSparse checks RowsAt and ReadHeadAt of data against Rows and
// ReadHead of the whole: where they answer, the answer is the whole
// file's, whatever the bytes they did not read hold. It returns whether
// both answered with the real window (a 16-byte one does not where a run
// of zeros ends the file).
func checkSparse(t *testing.T, data []byte) (answered bool) {
	t.Helper()
	rows, rerr := Rows(data)
	head, hrows, herr := ReadHead(data)
	answered = true
	for _, cfg := range sparseCfgs {
		real := cfg.window == sparseWindow
		poison := cfg.poison
		n, ok := rowsAt(&countingAt{data: data}, int64(len(data)), cfg)
		answered = answered && (ok || !real)
		if ok && (rerr != nil || n != rows) {
			t.Fatalf("poison %#x: RowsAt %d rows; Rows %d, %v", poison, n, rows, rerr)
		}
		h, hn, ok := readHeadAt(&countingAt{data: data}, int64(len(data)), cfg)
		answered = answered && (ok || !real)
		if !ok {
			continue
		}
		if herr != nil {
			t.Fatalf("poison %#x: ReadHeadAt answered (%d rows); ReadHead failed: %v", poison, hn, herr)
		}
		if hn != hrows || h.Batches != head.Batches || h.Truncated != head.Truncated || h.BytesUsed != head.BytesUsed ||
			h.BytesTotal != head.BytesTotal || h.Format != head.Format {
			t.Fatalf("poison %#x: ReadHeadAt %d rows %+v; ReadHead %d rows %+v", poison, hn, *h, hrows, *head)
		}
		if d := trace.Diff(head.Trace, h.Trace); d != "" {
			t.Fatalf("poison %#x: ReadHeadAt's trace differs from ReadHead's: %s", poison, d)
		}
	}
	return answered
}

// TestSparseMatchesWhole cuts streams (dictionary deltas arriving late,
// uncompressed and LZ4) at every byte near a message's start or end and
// every seventh elsewhere, adds zero tails to them, and
// checks the sparse readers against the whole-file ones on each: same
// answers, and an answer for every cut from the first record batch on
// (the cases they are for; only a tail of zeros longer than their window
// sends a file back to the whole read).
func TestSparseMatchesWhole(t *testing.T) {
	for _, tc := range truncationCases(t) {
		if tc.format != FormatStream {
			if checkSparse(t, tc.data) {
				t.Errorf("%s: answered sparsely, want the whole read (streams only)", tc.name)
			}
			continue
		}
		ends, _ := messageEnds(t, tc.data, 0)
		near := func(cut int) bool {
			for _, e := range ends {
				if cut >= e-16 && cut <= e+16 {
					return true
				}
			}
			return cut < 16
		}
		for cut := 0; cut <= len(tc.data); cut++ {
			if cut%7 != 0 && !near(cut) {
				continue
			}
			data := tc.data[:cut]
			answered := checkSparse(t, data)
			if cut >= ends[1] && !answered {
				t.Errorf("%s cut at %d of %d bytes: not answered sparsely", tc.name, cut, len(tc.data))
			}
		}
		for _, zeros := range []int{1, 4, 10, 100, sparseWindow - 8, sparseWindow + 100} {
			for _, e := range []int{ends[len(ends)/2], len(tc.data)} {
				data := append(append([]byte(nil), tc.data[:e]...), make([]byte, zeros)...)
				answered := checkSparse(t, data)
				if zeros < sparseWindow/2 && !answered {
					t.Errorf("%s to byte %d + %d zeros: not answered sparsely", tc.name, e, zeros)
				}
			}
		}
		// Legacy framing (no continuation markers), whole and cut.
		legacy := legacyFraming(t, tc.data)
		for _, cut := range []int{len(legacy), len(legacy) - 4, len(legacy) - 30} {
			if !checkSparse(t, legacy[:cut]) {
				t.Errorf("%s in legacy framing, cut at %d of %d bytes: not answered sparsely", tc.name, cut, len(legacy))
			}
		}
	}
}

// TestSparseReadsHeaders checks that the sparse readers read little of a
// stream of many batches: its headers (one window each) for RowsAt, and
// the first and last batches' bodies too for ReadHeadAt.
func TestSparseReadsHeaders(t *testing.T) {
	tr := randomTrace(newRand(5), 40000, testKinds)
	var buf bytes.Buffer
	if err := WriteStream(&buf, tr, Options{Compression: None, BatchRows: 1000}); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	r := &countingAt{data: data}
	rows, ok := RowsAt(r, int64(len(data)))
	if !ok || rows != int64(tr.Len()) {
		t.Fatalf("RowsAt: %d rows, %v; want %d", rows, ok, tr.Len())
	}
	// 40 batches and the schema, a window each, and the file's end.
	if r.calls > 41+2 || r.bytes > 45*sparseWindow || r.bytes > len(data)/4 {
		t.Errorf("RowsAt read %d bytes in %d calls of a %d-byte stream", r.bytes, r.calls, len(data))
	}
	r = &countingAt{data: data}
	head, hrows, ok := ReadHeadAt(r, int64(len(data)))
	if !ok || hrows != int64(tr.Len()) || head.Batches != 40 {
		t.Fatalf("ReadHeadAt: %d rows, %v", hrows, ok)
	}
	if r.bytes > len(data)/4 {
		t.Errorf("ReadHeadAt read %d bytes of a %d-byte stream", r.bytes, len(data))
	}
	whole, _, err := ReadHead(data)
	if err != nil {
		t.Fatal(err)
	}
	if d := trace.Diff(whole.Trace, head.Trace); d != "" {
		t.Fatal(d)
	}
}

// TestReadRowsAtReadsItsSpan: of a stream of many record batches written
// as ppprof writes them, ReadRowsAt answers for spans anywhere, with any
// poison, as ReadRows does, reading the schema and the batches holding the
// rows in a pread or two (little of the file); of a file, or through the
// index of other bytes, it does not answer.
func TestReadRowsAtReadsItsSpan(t *testing.T) {
	tr := randomTrace(newRand(5), 400, testKinds)
	for i := range tr.Len() {
		if tr.StartNs[i] == trace.NoTime && tr.EndNs[i] == trace.NoTime { // a row that never started reads earlier batches
			tr.StartNs[i], tr.EndNs[i] = max(tr.IssueNs[i], 0), max(tr.IssueNs[i], 0)+10
		}
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, w := range writers {
		data := encode(t, w, tr, Options{Compression: LZ4, BatchRows: 20})
		_, ix, ok := StepRuns(data)
		if !ok {
			t.Fatalf("%s: StepRuns refused what ppprof wrote", w.name)
		}
		for _, sp := range [][2]int64{{0, 20}, {190, 230}, {199, 200}, {380, 400}, {0, 400}} {
			answered := checkReadRowsAt(t, data, ix, sp[0], sp[1])
			if w.format == FormatFile {
				if answered {
					t.Errorf("%s: rows %v answered by ReadRowsAt (streams only)", w.name, sp)
				}
				continue
			}
			if !answered {
				t.Errorf("%s: rows %v not answered by ReadRowsAt", w.name, sp)
			}
			// A read for the schema, one for the batches, one for each
			// dictionary apart (the stream writer's deltas come with the
			// batches that bring new strings).
			dicts := 0
			for _, m := range ix.msgs {
				dicts += b2i(m.dict)
			}
			c := &countingAt{data: data}
			if _, ok := ReadRowsAt(c, int64(len(data)), ix, sp[0], sp[1]); ok && sp[1]-sp[0] <= 40 && (c.calls > 2+dicts || c.bytes > len(data)/5) {
				t.Errorf("%s: rows %v: %d reads (%d dictionaries), %d of %d bytes", w.name, sp, c.calls, dicts, c.bytes, len(data))
			}
		}
		// The index of other bytes (the same size, other batches).
		other := encode(t, w, tr.Slice(0, 350), Options{Compression: LZ4, BatchRows: 7})
		checkReadRowsAt(t, other, &Index{size: len(other), schema: ix.schema, msgs: ix.msgs}, 10, 60)
	}
}
