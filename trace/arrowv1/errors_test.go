package arrowv1

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/ppprof/ppprof/trace"
)

// TestNotArrow checks that input of other formats is ErrNotArrow.
func TestNotArrow(t *testing.T) {
	random := make([]byte, 4096)
	rand.New(rand.NewSource(1)).Read(random)
	inputs := map[string][]byte{
		"text":     []byte("hello, world: this is not an arrow file\n"),
		"csv":      []byte("rank,pipeline,stage,tp_rank,chunk,step,microbatch,kind,seq\n0,0,0,0,0,0,0,F,1\n"),
		"jsonl":    []byte(`{"rank":0,"stage":0,"kind":"F"}` + "\n"),
		"random":   random,
		"parquet":  []byte("PAR1\x15\x04\x15\x10\x15\x14L\x15\x02\x15\x00\x12\x00\x00PAR1"),
		"zeros":    make([]byte, 64),
		"arrow2":   []byte("ARROW2\x00\x00 something else entirely"),
		"bad len":  {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4},
		"tiny len": {0xff, 0xff, 0xff, 0xff, 4, 0, 0, 0, 1, 2, 3, 4},
	}
	for name, data := range inputs {
		_, err := Read(data)
		if !errors.Is(err, ErrNotArrow) {
			t.Errorf("%s: %v, want ErrNotArrow", name, err)
		}
		if f := Sniff(data); f != FormatUnknown {
			t.Errorf("%s: sniffed as %v", name, f)
		}
	}
}

// TestColumnErrors checks missing and mistyped columns.
func TestColumnErrors(t *testing.T) {
	tests := []struct {
		name string
		cols []col
		want ColumnError
		msg  string
	}{
		{
			name: "step int32",
			cols: withCol(minimalCols(), col{"step", arrow.PrimitiveTypes.Int32, ints(0, 0, 1)}),
			want: ColumnError{Column: "step", Want: "int64", Got: "int32"},
			msg:  `column "step": type int32, want int64`,
		},
		{
			name: "rank int64",
			cols: withCol(minimalCols(), col{"rank", arrow.PrimitiveTypes.Int64, ints(2, 2, 2)}),
			want: ColumnError{Column: "rank", Want: "int32", Got: "int64"},
			msg:  `column "rank": type int64, want int32`,
		},
		{
			name: "kind int32",
			cols: withCol(minimalCols(), col{"kind", arrow.PrimitiveTypes.Int32, ints(1, 2, 3)}),
			want: ColumnError{Column: "kind", Want: "dictionary<values=utf8, indices=int16> or utf8", Got: "int32"},
		},
		{
			name: "optional shape int64",
			cols: withCol(minimalCols(), col{"shape", arrow.PrimitiveTypes.Int64, ints(1, 2, 3)}),
			want: ColumnError{Column: "shape", Want: "utf8", Got: "int64"},
		},
		{
			name: "no stage",
			cols: withoutCol(minimalCols(), "stage"),
			want: ColumnError{Column: "stage", Want: "int32"},
			msg:  `column "stage": missing, want int32`,
		},
		{
			name: "no end_ns",
			cols: withoutCol(minimalCols(), "end_ns"),
			want: ColumnError{Column: "end_ns", Want: "int64"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := read(foreignStream(t, v1meta, oneBatch, tt.cols...), checked(t))
			var ce *ColumnError
			if !errors.As(err, &ce) {
				t.Fatalf("%v (%T), want a *ColumnError", err, err)
			}
			if *ce != tt.want {
				t.Errorf("%+v, want %+v", *ce, tt.want)
			}
			if tt.msg != "" && err.Error() != tt.msg {
				t.Errorf("message %q, want %q", err, tt.msg)
			}
		})
	}
}

// TestMetadataErrors checks the schema metadata gate.
func TestMetadataErrors(t *testing.T) {
	_, err := Read(foreignStream(t, map[string]string{"job": "x"}, oneBatch, minimalCols()...))
	if err == nil || !strings.Contains(err.Error(), "not a ppprof trace") {
		t.Errorf("no ppprof.schema: %v", err)
	}
	for _, v := range []string{"2", "2.0", "17"} {
		_, err = Read(foreignStream(t, map[string]string{"ppprof.schema": v}, oneBatch, minimalCols()...))
		var sv *trace.SchemaVersionError
		if !errors.As(err, &sv) {
			t.Errorf("schema %s: %v (%T), want a *trace.SchemaVersionError", v, err, err)
		}
	}
	if _, err := Read(foreignStream(t, map[string]string{"ppprof.schema": "1.3"}, oneBatch, minimalCols()...)); err != nil {
		t.Errorf("schema 1.3 (a newer minor version): %v", err)
	}
	_, err = Read(foreignStream(t, map[string]string{"ppprof.schema": "1", "world_size": "many"}, oneBatch, minimalCols()...))
	if err == nil || !strings.Contains(err.Error(), "world_size") {
		t.Errorf("bad world_size: %v", err)
	}
}

// TestRowErrors checks errors that name a row: nulls in required columns,
// bad kind names, and rows that fail trace.Validate.
func TestRowErrors(t *testing.T) {
	tests := []struct {
		name      string
		cols      []col
		row       int
		column    string
		reasonHas string
	}{
		{"null rank", withCol(minimalCols(), col{"rank", arrow.PrimitiveTypes.Int32, ints(2, nil, 2)}), 1, "rank", "null"},
		{"null seq", withCol(minimalCols(), col{"seq", arrow.PrimitiveTypes.Int64, ints(1, 2, nil)}), 2, "seq", "null"},
		{"null kind", withCol(minimalCols(), col{"kind", arrow.BinaryTypes.String, strs("F", nil, "B")}), 1, "kind", "null"},
		{"null dict kind", withCol(minimalCols(), col{"kind", kindType, strs("F", "B", nil)}), 2, "kind", "null"},
		{"bad kind", withCol(minimalCols(), col{"kind", arrow.BinaryTypes.String, strs("F", "B", "not a kind!")}), 2, "kind", "not allowed"},
		{"bad dict kind", withCol(minimalCols(), col{"kind", kindType, strs("F", "bad kind", "F")}), 1, "kind", "not allowed"},
		{"seq order", withCol(minimalCols(), col{"seq", arrow.PrimitiveTypes.Int64, ints(1, 3, 2)}), 2, "seq", "not after"},
		{"end before start", withCol(minimalCols(), col{"end_ns", arrow.PrimitiveTypes.Int64, ints(50, nil, nil)}), 0, "end_ns", "before start"},
		{"p2p without peer", withCol(minimalCols(), col{"kind", arrow.BinaryTypes.String, strs("F", "SEND_F", "B")}), 1, "peer", "without a peer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(foreignStream(t, v1meta, [][2]int{{0, 1}, {1, 3}}, tt.cols...))
			var re *trace.RowError
			if !errors.As(err, &re) {
				t.Fatalf("%v (%T), want a *trace.RowError", err, err)
			}
			if re.Row != tt.row || re.Column != tt.column || !strings.Contains(re.Reason, tt.reasonHas) {
				t.Errorf("%+v, want row %d column %s reason ~%q", *re, tt.row, tt.column, tt.reasonHas)
			}
		})
	}
}

// TestDuplicateColumn checks that a column named twice is an error.
func TestDuplicateColumn(t *testing.T) {
	cols := append(minimalCols(), col{"rank", arrow.PrimitiveTypes.Int32, ints(1, 1, 1)})
	if _, err := Read(foreignStream(t, v1meta, oneBatch, cols...)); err == nil || !strings.Contains(err.Error(), "appears 2 times") {
		t.Errorf("duplicate rank: %v", err)
	}
}

// TestCorruptMessage corrupts the metadata and the bodies of a valid
// stream and checks for an error naming the batch (never a panic, never a
// silent success with wrong data where the format can tell).
func TestCorruptMessage(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	tr := randomTrace(rng, 40, testKinds)
	for _, codec := range codecs {
		data := encode(t, writers[1], tr, Options{Compression: codec, BatchRows: 10})
		ends, types := messageEnds(t, data, 0)
		// The third message is batch 0, the fourth batch 1 (after the
		// schema and the dictionary).
		if types[3] != ipc.MessageRecordBatch {
			t.Fatalf("message types %v", types)
		}
		start := ends[2]
		metaLen := int(binary.LittleEndian.Uint32(data[start+4:]))
		bad := func(name string, mutate func(b []byte)) {
			t.Helper()
			b := bytes.Clone(data)
			mutate(b)
			_, err := read(b, checked(t))
			if err == nil || !strings.HasPrefix(err.Error(), "decoding batch 1: ") {
				t.Errorf("%s/%s: %v, want a decoding batch 1 error", codecName(codec), name, err)
			}
		}
		// The root table offset points outside the metadata.
		bad("root offset", func(b []byte) { binary.LittleEndian.PutUint32(b[start+8:], 1<<30) })
		// The metadata length claims the whole rest of the stream plus one:
		// the message is cut, so it is a truncation, not an error.
		b := bytes.Clone(data)
		binary.LittleEndian.PutUint32(b[start+4:], uint32(len(b)))
		if res, err := Read(b); err != nil || !res.Truncated || res.Batches != 1 {
			t.Errorf("%s/long metadata: %v %+v", codecName(codec), err, res)
		}
		// Garbage in place of the continuation marker.
		bad("marker", func(b []byte) { b[start] = 0x12 })
		// A negative metadata length.
		bad("negative length", func(b []byte) { binary.LittleEndian.PutUint32(b[start+4:], 0xfffffff0) })
		// Every body byte of batch 1 set to 0xff: buffers of garbage.
		bodyStart := start + 8 + metaLen
		bad("body", func(b []byte) {
			for i := bodyStart; i < ends[3]; i++ {
				b[i] = 0xff
			}
		})
	}
}

// TestCorruptCompressedLength gives a compressed buffer a huge
// uncompressed length: the read must fail on the allocation limit, not
// try to allocate it.
func TestCorruptCompressedLength(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	tr := randomTrace(rng, 40, testKinds)
	data := encode(t, writers[1], tr, Options{Compression: ZSTD, BatchRows: 10})
	ends, _ := messageEnds(t, data, 0)
	start := ends[2]
	metaLen := int(binary.LittleEndian.Uint32(data[start+4:]))
	fr, status, _, err := readFrame(data, start, framingContinuation)
	if err != nil || status != frameOK {
		t.Fatal(status, err)
	}
	for i, buf := range fr.info.buffers {
		if buf[1] < 8 {
			continue
		}
		b := bytes.Clone(data)
		at := start + 8 + metaLen + int(buf[0])
		binary.LittleEndian.PutUint64(b[at:], 1<<40)
		_, err := Read(b)
		if err == nil || !strings.HasPrefix(err.Error(), "decoding batch 1: ") {
			t.Errorf("buffer %d: %v", i, err)
		}
	}
}
