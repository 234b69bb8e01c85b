package arrowv1

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/ppprof/ppprof/trace"
)

var codecs = []Compression{None, LZ4, ZSTD}

// TestRoundTrip encodes random traces every way, with every codec, and
// checks that Read gives back the same trace and accounts for every byte.
func TestRoundTrip(t *testing.T) {
	sizes := []struct {
		rows, batchRows int
	}{
		{0, 0}, {1, 0}, {17, 0}, {17, 5}, {1000, 64}, {3000, 0},
	}
	seed := int64(0)
	for _, size := range sizes {
		for _, w := range writers {
			for _, codec := range codecs {
				seed++
				name := fmt.Sprintf("%s/%s/rows=%d/batch=%d", w.name, codecName(codec), size.rows, size.batchRows)
				t.Run(name, func(t *testing.T) {
					rng := rand.New(rand.NewSource(seed))
					want := randomTrace(rng, size.rows, testKinds)
					opt := Options{Compression: codec, BatchRows: size.batchRows}
					data := encode(t, w, want, opt)
					res, err := read(data, checked(t))
					if err != nil {
						t.Fatalf("read: %v", err)
					}
					if d := trace.Diff(want, res.Trace); d != "" {
						t.Fatalf("round trip differs: %s", d)
					}
					batchRows := size.batchRows
					if batchRows == 0 {
						batchRows = DefaultBatchRows
					}
					wantRes := Result{
						Format:     w.format,
						Batches:    batchesFor(w, size.rows, batchRows),
						BytesTotal: int64(len(data)),
						BytesUsed:  int64(len(data)),
					}
					res.Trace = nil
					if *res != wantRes {
						t.Errorf("result %+v, want %+v", *res, wantRes)
					}
				})
			}
		}
	}
}

func codecName(c Compression) string {
	if c == None {
		return "none"
	}
	return string(c)
}

// TestStreamWriterLaterKinds checks that kinds first seen in later Writes
// travel as dictionary deltas and read back.
func TestStreamWriterLaterKinds(t *testing.T) {
	for _, codec := range codecs {
		t.Run(codecName(codec), func(t *testing.T) {
			rng := rand.New(rand.NewSource(7))
			mem := checked(t)
			var buf bytes.Buffer
			meta := randomMeta(rng)
			sw, err := newStreamWriter(&buf, meta, Options{Compression: codec, BatchRows: 4}, mem)
			if err != nil {
				t.Fatal(err)
			}
			want := &trace.Trace{Meta: meta}
			kindSets := [][]trace.Kind{
				{trace.F, trace.B},
				{trace.F},
				{trace.MustKind("DATA"), trace.B},
				{trace.Opt, trace.MustKind("LATE_KIND")},
			}
			seq := int64(0)
			for _, kinds := range kindSets {
				part := randomTrace(rng, 10, kinds)
				for i := range part.Seq { // one rank history across parts
					seq++
					part.Seq[i] = seq
					part.Rank[i], part.Stage[i], part.Pipeline[i], part.TPRank[i] = 0, 0, 0, 0
				}
				if err := sw.Write(part); err != nil {
					t.Fatal(err)
				}
				want.AppendRows(part, 0, part.Len())
			}
			if err := sw.Close(); err != nil {
				t.Fatal(err)
			}
			data := buf.Bytes()
			res, err := read(data, mem)
			if err != nil {
				t.Fatal(err)
			}
			if d := trace.Diff(want, res.Trace); d != "" {
				t.Fatal(d)
			}
			if res.Batches != 12 || res.Truncated {
				t.Errorf("batches %d truncated %v, want 12, false", res.Batches, res.Truncated)
			}
			_, types := messageEnds(t, data, 0)
			dicts := 0
			for _, ty := range types {
				if ty == ipc.MessageDictionaryBatch {
					dicts++
				}
			}
			// The first dictionary, then a delta for DATA and one for OPT and LATE_KIND.
			if dicts != 3 {
				t.Errorf("%d dictionary messages, want 3", dicts)
			}
			// arrow-go's own reader agrees.
			rdr, err := ipc.NewReader(bytes.NewReader(data), ipc.WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			defer rdr.Release()
			rows := 0
			for rdr.Next() {
				rows += int(rdr.RecordBatch().NumRows())
			}
			if rdr.Err() != nil || rows != want.Len() {
				t.Errorf("arrow-go read %d rows, err %v; want %d", rows, rdr.Err(), want.Len())
			}
		})
	}
}

// TestStreamWriterNoBuffering checks what a killed collector leaves: the
// schema right after NewStreamWriter, and each batch right after Write.
func TestStreamWriterNoBuffering(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	mem := checked(t)
	var buf bytes.Buffer
	all := randomTrace(rng, 30, testKinds)
	sw, err := newStreamWriter(&buf, all.Meta, Options{Compression: LZ4}, mem)
	if err != nil {
		t.Fatal(err)
	}
	res, err := read(buf.Bytes(), mem)
	if err != nil {
		t.Fatalf("schema only: %v", err)
	}
	if res.Trace.Len() != 0 || !res.Truncated || res.BytesUsed != res.BytesTotal || res.Batches != 0 {
		t.Errorf("schema only: %+v", *res)
	}
	for i, p := range [][2]int{{0, 10}, {10, 25}, {25, 30}} {
		if err := sw.Write(all.Slice(p[0], p[1])); err != nil {
			t.Fatal(err)
		}
		res, err := read(buf.Bytes(), mem)
		if err != nil {
			t.Fatalf("after write %d: %v", i, err)
		}
		want := all.Slice(0, p[1])
		if d := trace.Diff(want, res.Trace); d != "" {
			t.Fatalf("after write %d: %s", i, d)
		}
		if !res.Truncated || res.BytesUsed != res.BytesTotal || res.Batches != i+1 {
			t.Errorf("after write %d: %+v", i, *res)
		}
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sw.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if err := sw.Write(all); err == nil {
		t.Errorf("write after close: no error")
	}
	res, err = read(buf.Bytes(), mem)
	if err != nil || res.Truncated {
		t.Fatalf("closed: %v, %+v", err, res)
	}
}

// TestSchemaOnce checks that a stream holds exactly one schema message
// however it was written (the StreamWriter writes its own and drops
// arrow-go's).
func TestSchemaOnce(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	tr := randomTrace(rng, 50, testKinds)
	for _, w := range writers[1:] {
		for _, n := range []int{0, 50} {
			data := encode(t, w, tr.Slice(0, n), Options{BatchRows: 8})
			_, types := messageEnds(t, data, 0)
			schemas := 0
			for _, ty := range types {
				if ty == ipc.MessageSchema {
					schemas++
				}
			}
			if schemas != 1 || types[0] != ipc.MessageSchema {
				t.Errorf("%s rows=%d: message types %v, want one schema first", w.name, n, types)
			}
		}
	}
}

// TestDeterministic checks that equal traces encode to equal bytes.
func TestDeterministic(t *testing.T) {
	for _, w := range writers {
		a := encode(t, w, randomTrace(rand.New(rand.NewSource(9)), 200, testKinds), Options{BatchRows: 50})
		b := encode(t, w, randomTrace(rand.New(rand.NewSource(9)), 200, testKinds), Options{BatchRows: 50})
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two encodings of one trace differ", w.name)
		}
	}
}

// TestRows: Rows counts what Read returns, for files, streams, every codec
// and streams cut part way; and fails as Read does on what is not Arrow.
func TestRows(t *testing.T) {
	tr := randomTrace(rand.New(rand.NewSource(7)), 1000, testKinds)
	for _, c := range []Compression{None, LZ4, ZSTD} {
		for _, stream := range []bool{false, true} {
			var b bytes.Buffer
			var err error
			if stream {
				err = WriteStream(&b, tr, Options{Compression: c, BatchRows: 96})
			} else {
				err = WriteFile(&b, tr, Options{Compression: c, BatchRows: 96})
			}
			if err != nil {
				t.Fatal(err)
			}
			data := b.Bytes()
			for _, cut := range []int{len(data), len(data) * 2 / 3, len(data) / 3} {
				res, rerr := Read(data[:cut])
				n, err := Rows(data[:cut])
				if (rerr == nil) != (err == nil) {
					t.Fatalf("%s stream=%v cut %d: Read error %v, Rows error %v", c, stream, cut, rerr, err)
				}
				if rerr == nil && n != int64(res.Trace.Len()) {
					t.Errorf("%s stream=%v cut %d: Rows %d, Read %d events", c, stream, cut, n, res.Trace.Len())
				}
			}
		}
	}
	if _, err := Rows([]byte("rank,stage\n1,2\n")); !errors.Is(err, ErrNotArrow) {
		t.Errorf("CSV: %v", err)
	}
}

// TestReadHead: ReadHead gives the rows of the first and last record
// batches of what Read gives, and Read's batch count, truncation and byte
// counts, for every codec, files and streams, whole and cut.
func TestReadHead(t *testing.T) {
	tr := randomTrace(rand.New(rand.NewSource(9)), 700, testKinds)
	const batch = 96
	for _, c := range []Compression{None, LZ4, ZSTD} {
		for _, stream := range []bool{false, true} {
			var b bytes.Buffer
			var err error
			if stream {
				err = WriteStream(&b, tr, Options{Compression: c, BatchRows: batch})
			} else {
				err = WriteFile(&b, tr, Options{Compression: c, BatchRows: batch})
			}
			if err != nil {
				t.Fatal(err)
			}
			data := b.Bytes()
			for _, cut := range []int{len(data), len(data) * 2 / 3} {
				full, ferr := Read(data[:cut])
				head, rows, herr := ReadHead(data[:cut])
				if ferr != nil || herr != nil {
					t.Fatalf("%s stream=%v cut %d: Read %v, ReadHead %v", c, stream, cut, ferr, herr)
				}
				n := full.Trace.Len()
				want := full.Trace
				if n > 2*batch {
					want = &trace.Trace{Meta: full.Trace.Meta}
					want.AppendRows(full.Trace, 0, batch)
					want.AppendRows(full.Trace, (n-1)/batch*batch, n)
				}
				if d := trace.Diff(head.Trace, want); d != "" {
					t.Errorf("%s stream=%v cut %d: head differs from the first batch: %s", c, stream, cut, d)
				}
				if rows != int64(full.Trace.Len()) || head.Batches != full.Batches || head.Truncated != full.Truncated ||
					head.BytesUsed != full.BytesUsed || head.BytesTotal != full.BytesTotal {
					t.Errorf("%s stream=%v cut %d: head %d rows %+v, full %d rows %+v", c, stream, cut, rows, *head, full.Trace.Len(), *full)
				}
			}
		}
	}
}

// TestWriteFileProgress: WriteFile reports the rows written after each
// batch, up to the trace's rows, and the file is the one written without.
func TestWriteFileProgress(t *testing.T) {
	tr := randomTrace(rand.New(rand.NewSource(5)), 17, testKinds)
	var got [][2]int
	var with, without bytes.Buffer
	if err := WriteFile(&with, tr, Options{BatchRows: 3, Progress: func(done, total int) { got = append(got, [2]int{done, total}) }}); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(&without, tr, Options{BatchRows: 3}); err != nil {
		t.Fatal(err)
	}
	n := tr.Len()
	if want := (n + 2) / 3; len(got) != want {
		t.Fatalf("%d calls for %d rows in batches of 3, want %d: %v", len(got), n, want, got)
	}
	for i, g := range got {
		if want := min(3*(i+1), n); g != [2]int{want, n} {
			t.Fatalf("call %d: %v, want [%d %d]", i, g, want, n)
		}
	}
	if !bytes.Equal(with.Bytes(), without.Bytes()) {
		t.Fatal("the file written with Progress differs")
	}
}
