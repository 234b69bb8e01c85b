package arrowv1

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"
)

// schemaMessage builds a Schema message whose single field is the root of
// a tree of depth levels in which every field has width children, all the
// same table: a DAG that is tiny in bytes but width^depth fields when
// walked.
func schemaMessage(depth, width int) []byte {
	b := flatbuffers.NewBuilder(0)
	field := func(children flatbuffers.UOffsetT) flatbuffers.UOffsetT {
		b.StartObject(7)
		if children != 0 {
			b.PrependUOffsetTSlot(5, children, 0)
		}
		return b.EndObject()
	}
	node := field(0)
	for i := 0; i < depth; i++ {
		b.StartVector(4, width, 4)
		for j := 0; j < width; j++ {
			b.PrependUOffsetT(node)
		}
		node = field(b.EndVector(width))
	}
	b.StartVector(4, 1, 4)
	b.PrependUOffsetT(node)
	fields := b.EndVector(1)
	b.StartObject(4)
	b.PrependUOffsetTSlot(1, fields, 0)
	schema := b.EndObject()
	b.StartObject(5)
	b.PrependInt16Slot(0, metadataV5, 0)
	b.PrependByteSlot(1, headerSchema, 0)
	b.PrependUOffsetTSlot(2, schema, 0)
	msg := b.EndObject()
	b.Finish(msg)
	return b.FinishedBytes()
}

// frameMessage wraps flatbuffer metadata as one stream message plus the
// end-of-stream marker.
func frameMessage(meta []byte) []byte {
	pad := (8 - len(meta)%8) % 8
	out := binary.LittleEndian.AppendUint32(nil, continuation)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(meta)+pad))
	out = append(out, meta...)
	out = append(out, make([]byte, pad)...)
	return append(out, eos[:]...)
}

func TestVerifierLimits(t *testing.T) {
	if _, err := verifyMessage(schemaMessage(3, 2)); err != nil {
		t.Fatalf("small tree: %v", err)
	}
	for _, tc := range []struct {
		name         string
		depth, width int
		want         string
	}{
		{"dag", 24, 2, "tables"},
		{"deep", maxFieldDepth + 1, 1, "deeper"},
	} {
		meta := schemaMessage(tc.depth, tc.width)
		_, err := verifyMessage(meta)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %s", tc.name, err, tc.want)
		}
		// Read refuses it too, quickly, instead of letting arrow-go walk it.
		if _, err := Read(frameMessage(meta)); err == nil || errors.Is(err, ErrNoSchema) {
			t.Errorf("%s: Read: %v", tc.name, err)
		}
	}
}

// TestVerifierBounds truncates and corrupts a valid schema message's
// flatbuffer byte by byte: the verifier must answer (error or not) without
// panicking.
func TestVerifierBounds(t *testing.T) {
	meta := schemaMessage(2, 2)
	for cut := 0; cut < len(meta); cut++ {
		verifyMessage(meta[:cut])
	}
	for i := range meta {
		for _, v := range []byte{0, 0x7f, 0x80, 0xff} {
			b := append([]byte(nil), meta...)
			b[i] = v
			verifyMessage(b)
		}
	}
}

// TestRecordBatchBuffersAnyAlignment checks that a record batch's buffer
// list reads the same wherever its message lies: in place (a view of the
// message, when the list is 8-byte aligned) or copied (when it is not).
func TestRecordBatchBuffersAnyAlignment(t *testing.T) {
	tr := randomTrace(newRand(5), 300, testKinds)
	var buf bytes.Buffer
	if err := writeStream(&buf, tr, Options{Compression: LZ4, BatchRows: 100}, memory.DefaultAllocator); err != nil {
		t.Fatal(err)
	}
	frames, err := framesOf(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	batches, views, copies := 0, 0, 0
	for _, fr := range frames {
		if fr.info.header != headerRecordBatch {
			continue
		}
		batches++
		// The list as written, read without this package's decoder.
		f := &fbuf{b: fr.meta}
		m, _ := f.root()
		hdr, _, _ := f.subTable(m, 2)
		start, n, err := f.vector(hdr, 2, 16)
		if err != nil || n == 0 {
			t.Fatalf("batch %d: buffer list: %v (%d buffers)", batches, err, n)
		}
		want := make([][2]int64, n)
		for i := range want {
			_ = binary.Read(bytes.NewReader(fr.meta[start+16*i:start+16*i+16]), binary.LittleEndian, &want[i])
		}
		for shift := range 8 {
			mem := make([]byte, len(fr.meta)+8) // 8-byte aligned, as Go allocates
			meta := mem[shift : shift+len(fr.meta)]
			copy(meta, fr.meta)
			info, err := verifyMessage(meta)
			if err != nil {
				t.Fatalf("batch %d shifted by %d: %v", batches, shift, err)
			}
			if !slices.Equal(info.buffers, want) {
				t.Fatalf("batch %d shifted by %d: buffers %v, want %v", batches, shift, info.buffers, want)
			}
			if !info.compressed || info.codec != codecLZ4 || info.rows <= 0 {
				t.Fatalf("batch %d shifted by %d: compressed %v codec %d rows %d", batches, shift, info.compressed, info.codec, info.rows)
			}
			at := uintptr(unsafe.Pointer(&info.buffers[0]))
			inMeta := at >= uintptr(unsafe.Pointer(&meta[0])) && at < uintptr(unsafe.Pointer(&meta[0]))+uintptr(len(meta))
			if aligned := uintptr(unsafe.Pointer(&meta[start]))%8 == 0; inMeta != aligned {
				t.Fatalf("batch %d shifted by %d: list in the message %v, aligned %v", batches, shift, inMeta, aligned)
			}
			if inMeta {
				views++
			} else {
				copies++
			}
		}
	}
	if batches < 3 || views == 0 || copies == 0 {
		t.Fatalf("%d batches, %d lists read in place and %d copied: want both", batches, views, copies)
	}
}
