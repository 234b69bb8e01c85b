package arrowv1

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/ppprof/ppprof/trace"
)

// truncationCase is an encoding whose every prefix is read back.
type truncationCase struct {
	name   string
	data   []byte
	start  int // where the IPC stream starts (8 in a file)
	trace  *trace.Trace
	rows   []int // rows in the trace after each record batch
	format Format
}

// truncationCases builds small multi-batch encodings: a stream written in
// five Writes (new kinds arriving late, so dictionary deltas are cut too)
// and a file, uncompressed and LZ4 (the file uncompressed only).
func truncationCases(t *testing.T) []truncationCase {
	var cases []truncationCase
	for _, codec := range []Compression{None, LZ4} {
		rng := rand.New(rand.NewSource(11))
		all := &trace.Trace{Meta: randomMeta(rng)}
		var rows []int
		for i := 0; i < 5; i++ {
			part := randomTrace(rng, 3, testKinds[:2+2*i]) // new kinds in each part
			for j := range part.Seq {
				part.Seq[j] = int64(all.Len() + j)
				part.Rank[j], part.Stage[j], part.Pipeline[j], part.TPRank[j] = 2, 1, 0, 0
				if part.Kind[j].IsP2P() {
					part.Peer[j] = 3
				}
			}
			all.AppendRows(part, 0, part.Len())
			rows = append(rows, all.Len())
		}
		opt := Options{Compression: codec, BatchRows: 3}
		stream := encode(t, writer{"streamwriter", FormatStream, func(w io.Writer, tr *trace.Trace, opt Options, mem memory.Allocator) error {
			sw, err := newStreamWriter(w, tr.Meta, opt, mem)
			if err != nil {
				return err
			}
			for i := 0; i < tr.Len(); i += 3 {
				if err := sw.Write(tr.Slice(i, i+3)); err != nil {
					return err
				}
			}
			return sw.Close()
		}}, all, opt)
		cases = append(cases, truncationCase{"stream/" + codecName(codec), stream, 0, all, rows, FormatStream})
		if codec == None { // the file fallback reads the same stream code
			file := encode(t, writers[0], all, opt)
			cases = append(cases, truncationCase{"file/" + codecName(codec), file, fileStreamStart, all, rows, FormatFile})
		}
	}
	return cases
}

// TestTruncation cuts each encoding at every byte offset and checks that
// Read keeps exactly the batches complete before the cut, reports the end
// of the last complete message, and never fails once the schema is in.
func TestTruncation(t *testing.T) {
	for _, tc := range truncationCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			ends, types := messageEnds(t, tc.data, tc.start)
			if types[0] != ipc.MessageSchema {
				t.Fatalf("first message %v", types[0])
			}
			// The checked allocator records a stack per allocation: use it on
			// every 16th cut only, to keep the test fast.
			mem := checked(t)
			step := 1
			if testing.Short() {
				step = 7
			}
			for cut := 0; cut <= len(tc.data); cut += step {
				alloc := memory.DefaultAllocator
				if cut%16 == 0 || cut == len(tc.data) {
					alloc = mem
				}
				res, err := read(tc.data[:cut], alloc)
				if cut < ends[0] {
					if !errors.Is(err, ErrNoSchema) {
						t.Fatalf("cut %d (schema ends at %d): err %v, want ErrNoSchema", cut, ends[0], err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("cut %d: %v", cut, err)
				}
				used, batches := 0, 0
				for i, e := range ends {
					if e <= cut {
						used = e
						if types[i] == ipc.MessageRecordBatch {
							batches++
						}
					}
				}
				complete := cut == len(tc.data)
				if complete && tc.format == FormatFile {
					used = cut // read through the footer
				}
				want := Result{
					Format:     tc.format,
					Batches:    batches,
					Truncated:  !complete,
					BytesTotal: int64(cut),
					BytesUsed:  int64(used),
				}
				wantRows := 0
				if batches > 0 {
					wantRows = tc.rows[batches-1]
				}
				if d := trace.Diff(tc.trace.Slice(0, wantRows), res.Trace); d != "" {
					t.Fatalf("cut %d: %s", cut, d)
				}
				got := *res
				got.Trace = nil
				if got != want {
					t.Fatalf("cut %d: %+v, want %+v", cut, got, want)
				}
			}
		})
	}
}

// TestZeroTail checks that a zero-filled end of file (a node crash) after
// complete messages reads as a truncation, not as corruption. (A whole
// continuation marker followed by zeros is an end-of-stream marker: that
// case cannot be told from a closed stream.)
func TestZeroTail(t *testing.T) {
	tc := truncationCases(t)[0]
	ends, types := messageEnds(t, tc.data, 0)
	// The last two ends are the last batch and the end-of-stream marker.
	for i, e := range ends[:len(ends)-2] {
		for _, extra := range []int{1, 3, 4, 8, 100} {
			for _, partial := range []int{0, 2, 4, 6} {
				if partial == 4 && extra >= 4 {
					continue // marker + zero length: a valid end-of-stream
				}
				data := append(append([]byte(nil), tc.data[:e+partial]...), make([]byte, extra)...)
				res, err := Read(data)
				if err != nil {
					t.Fatalf("message %d (%v) + %d bytes + %d zeros: %v", i, types[i], partial, extra, err)
				}
				if !res.Truncated || res.BytesUsed != int64(e) {
					t.Errorf("message %d + %d bytes + %d zeros: %+v", i, partial, extra, *res)
				}
			}
		}
	}
}

// TestLegacyFraming rewrites a stream without continuation markers (the
// framing of Arrow < 0.15), which also leaves bodies 4-byte aligned, and
// reads it back, whole and cut.
func TestLegacyFraming(t *testing.T) {
	for _, tc := range truncationCases(t) {
		if tc.format != FormatStream {
			continue
		}
		ends, _ := messageEnds(t, tc.data, 0)
		var legacy []byte
		var legacyEnds []int
		pos := 0
		for _, e := range ends {
			legacy = append(legacy, tc.data[pos+4:e]...) // drop the marker
			legacyEnds = append(legacyEnds, len(legacy))
			pos = e
		}
		if got := Sniff(legacy); got != FormatStream {
			t.Fatalf("%s: legacy stream sniffed as %v", tc.name, got)
		}
		res, err := read(legacy, checked(t))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if d := trace.Diff(tc.trace, res.Trace); d != "" || res.Truncated || res.BytesUsed != int64(len(legacy)) {
			t.Fatalf("%s: %s %+v", tc.name, d, *res)
		}
		for _, cut := range legacyEnds[:len(legacyEnds)-1] {
			res, err := Read(legacy[:cut+3])
			if err != nil || !res.Truncated || res.BytesUsed != int64(cut) {
				t.Fatalf("%s cut at %d: %v %+v", tc.name, cut+3, err, res)
			}
		}
	}
}

// TestCutMessages checks the error for cuts before the schema on inputs
// shorter than a message header.
func TestCutMessages(t *testing.T) {
	for _, data := range [][]byte{nil, {}, []byte("A"), []byte("ARROW"), []byte("ARROW1"), []byte("ARROW1\x00"), {0xff}, {0xff, 0xff, 0xff, 0xff, 0x10}} {
		if _, err := Read(data); !errors.Is(err, ErrNoSchema) {
			t.Errorf("%q: %v, want ErrNoSchema", data, err)
		}
	}
	if got := fmt.Sprint(ErrNoSchema); got != "truncated before the schema: no events" {
		t.Errorf("ErrNoSchema says %q", got)
	}
}

// TestFileFooterFallback damages the footer of a complete file: the file
// is then read as its embedded stream, whole but marked truncated.
func TestFileFooterFallback(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	tr := randomTrace(rng, 30, testKinds)
	data := encode(t, writers[0], tr, Options{BatchRows: 10})
	ends, _ := messageEnds(t, data, fileStreamStart)
	eosEnd := ends[len(ends)-1]
	n := len(data)
	footerLen := int(binary.LittleEndian.Uint32(data[n-10:]))
	footer, err := verifyFooter(data[n-10-footerLen : n-10])
	if err != nil || len(footer.records) != 3 {
		t.Fatalf("footer %+v: %v", footer, err)
	}
	// Where the second record block's offset is stored in the footer.
	blockAt := func(i int) int {
		want := binary.LittleEndian.AppendUint64(nil, uint64(footer.records[i].offset))
		at := bytes.Index(data[n-10-footerLen:], want)
		if at < 0 {
			t.Fatal("block not found")
		}
		return n - 10 - footerLen + at
	}
	damage := map[string]func(b []byte){
		"footer length": func(b []byte) { binary.LittleEndian.PutUint32(b[n-10:], uint32(n)) },
		"footer root":   func(b []byte) { binary.LittleEndian.PutUint32(b[n-10-footerLen:], 1<<20) },
		"block offset":  func(b []byte) { binary.LittleEndian.PutUint64(b[blockAt(1):], uint64(footer.records[1].offset+8)) },
		"repeated block": func(b []byte) {
			binary.LittleEndian.PutUint64(b[blockAt(2):], uint64(footer.records[1].offset))
		},
	}
	for name, f := range damage {
		b := bytes.Clone(data)
		f(b)
		res, err := read(b, checked(t))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := trace.Diff(tr, res.Trace); d != "" {
			t.Fatalf("%s: %s", name, d)
		}
		if !res.Truncated || res.BytesUsed != int64(eosEnd) || res.Batches != 3 {
			t.Errorf("%s: %+v, want truncated, %d bytes used", name, *res, eosEnd)
		}
	}
}
