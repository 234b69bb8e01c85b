package arrowv1

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

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
