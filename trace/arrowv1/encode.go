package arrowv1

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/ppprof/ppprof/trace"
)

// kindDict is the dictionary of the kind column one writer has emitted so
// far: names in first-seen order. It only grows, so each new dictionary
// extends the previous one and a stream writer can send it as a delta.
type kindDict struct {
	names []string
	index []int16 // by trace.Kind: position in names, or -1

	values    arrow.Array // utf8 array of names, built lazily; nil when stale
	valuesLen int
}

// add returns k's position in the dictionary, adding k if it is new. An
// invalid kind is an error (it has no name a reader could parse).
func (d *kindDict) add(k trace.Kind) (int16, error) {
	if int(k) < len(d.index) {
		if i := d.index[k]; i >= 0 {
			return i, nil
		}
	}
	if !k.Valid() {
		return 0, fmt.Errorf("invalid kind %d", uint16(k))
	}
	if len(d.names) >= math.MaxInt16 {
		return 0, fmt.Errorf("kind %s: more than %d distinct kinds", k, math.MaxInt16)
	}
	for int(k) >= len(d.index) {
		d.index = append(d.index, -1)
	}
	i := int16(len(d.names))
	d.index[k] = i
	d.names = append(d.names, k.String())
	return i, nil
}

// addAll adds every kind in kinds, so that one dictionary serves a whole
// trace (the file format allows no replacement).
func (d *kindDict) addAll(kinds []trace.Kind) error {
	for row, k := range kinds {
		if _, err := d.add(k); err != nil {
			return fmt.Errorf("row %d: %w", row, err)
		}
	}
	return nil
}

// dictionary returns the names so far as a utf8 array, owned by d: callers
// that keep it must Retain it.
func (d *kindDict) dictionary(mem memory.Allocator) arrow.Array {
	if d.values != nil && d.valuesLen == len(d.names) {
		return d.values
	}
	d.release()
	b := array.NewStringBuilder(mem)
	defer b.Release()
	b.AppendValues(d.names, nil)
	d.values = b.NewArray()
	d.valuesLen = len(d.names)
	return d.values
}

// release frees the cached dictionary array.
func (d *kindDict) release() {
	if d.values != nil {
		d.values.Release()
		d.values = nil
	}
}

// buildRecord encodes rows [from, to) of t as one record batch of schema,
// adding their kinds to dict. The caller releases the record.
func buildRecord(mem memory.Allocator, schema *arrow.Schema, t *trace.Trace, from, to int, dict *kindDict) (arrow.RecordBatch, error) {
	var cols [trace.NumColumns]arrow.Array
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	var err error
	if cols[trace.ColKind], err = kindColumn(mem, t.Kind[from:to], dict, from); err != nil {
		return nil, err
	}
	if cols[trace.ColShape], err = stringColumn(mem, t.Shape[from:to]); err != nil {
		return nil, fmt.Errorf("column shape: %w", err)
	}
	if cols[trace.ColDtype], err = stringColumn(mem, t.Dtype[from:to]); err != nil {
		return nil, fmt.Errorf("column dtype: %w", err)
	}
	if cols[trace.ColGroup], err = stringColumn(mem, t.Group[from:to]); err != nil {
		return nil, fmt.Errorf("column group: %w", err)
	}
	cols[trace.ColRank] = int32Column(t.Rank[from:to])
	cols[trace.ColPipeline] = int32Column(t.Pipeline[from:to])
	cols[trace.ColStage] = int32Column(t.Stage[from:to])
	cols[trace.ColTPRank] = int32Column(t.TPRank[from:to])
	cols[trace.ColChunk] = int32Column(t.Chunk[from:to])
	cols[trace.ColStep] = int64Column(t.Step[from:to])
	cols[trace.ColMicroBatch] = int32Column(t.MicroBatch[from:to])
	cols[trace.ColSeq] = int64Column(t.Seq[from:to])
	cols[trace.ColIssueNs] = int64Column(t.IssueNs[from:to])
	cols[trace.ColStartNs] = timeColumn(mem, t.StartNs[from:to])
	cols[trace.ColEndNs] = timeColumn(mem, t.EndNs[from:to])
	cols[trace.ColPeer] = int32Column(t.Peer[from:to])
	cols[trace.ColBytes] = int64Column(t.Bytes[from:to])
	cols[trace.ColTokens] = int64Column(t.Tokens[from:to])
	cols[trace.ColFlops] = float64Column(t.Flops[from:to])
	cols[trace.ColMemBytes] = int64Column(t.MemBytes[from:to])
	cols[trace.ColGroupSeq] = int64Column(t.GroupSeq[from:to])
	return array.NewRecordBatch(schema, cols[:], int64(to-from)), nil
}

// newArray wraps buffers in an array of type dt and releases the caller's
// references to the buffers.
func newArray(dt arrow.DataType, n int, nulls int, bufs ...*memory.Buffer) arrow.Array {
	data := array.NewData(dt, n, bufs, nil, nulls, 0)
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	defer data.Release()
	return array.MakeFromData(data)
}

// newBuffer allocates a buffer of size bytes from mem.
func newBuffer(mem memory.Allocator, size int) *memory.Buffer {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(size)
	return buf
}

// borrowed is src's memory as a buffer, not copied: a column of the trace
// being written, whose values Arrow stores as they are (the fixed-width
// columns without nulls). The IPC writers read (or compress) the buffers
// of a record within the Write that takes it, and nothing keeps the
// record after it (writeBatch releases it), so the trace's columns are
// read in place instead of copied into fresh buffers a batch at a time
// (a third of the time of writing a large trace, most of it faulting in
// the copies' memory).
func borrowed[T any](src []T) *memory.Buffer {
	if len(src) == 0 {
		return memory.NewBufferBytes(nil)
	}
	return memory.NewBufferBytes(unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), len(src)*int(unsafe.Sizeof(src[0]))))
}

// int32Column encodes an int32-based column with no nulls.
func int32Column[T ~int32](src []T) arrow.Array {
	return newArray(arrow.PrimitiveTypes.Int32, len(src), 0, nil, borrowed(src))
}

// int64Column encodes an int64 column with no nulls.
func int64Column(src []int64) arrow.Array {
	return newArray(arrow.PrimitiveTypes.Int64, len(src), 0, nil, borrowed(src))
}

// float64Column encodes a float64 column with no nulls.
func float64Column(src []float64) arrow.Array {
	return newArray(arrow.PrimitiveTypes.Float64, len(src), 0, nil, borrowed(src))
}

// timeColumn encodes a time column: trace.NoTime becomes null (value 0).
// Without nulls it is src itself (borrowed).
func timeColumn(mem memory.Allocator, src []int64) arrow.Array {
	if !slices.Contains(src, trace.NoTime) {
		return newArray(arrow.PrimitiveTypes.Int64, len(src), 0, nil, borrowed(src))
	}
	buf := newBuffer(mem, len(src)*arrow.Int64SizeBytes)
	dst := arrow.Int64Traits.CastFromBytes(buf.Bytes())
	nulls := 0
	for i, v := range src {
		if v == trace.NoTime {
			nulls++
			v = 0
		}
		dst[i] = v
	}
	if nulls == 0 {
		return newArray(arrow.PrimitiveTypes.Int64, len(src), 0, nil, buf)
	}
	valid := newBuffer(mem, int(bitutil.BytesForBits(int64(len(src)))))
	bits := valid.Bytes()
	clear(bits)
	for i, v := range src {
		if v != trace.NoTime {
			bitutil.SetBit(bits, i)
		}
	}
	return newArray(arrow.PrimitiveTypes.Int64, len(src), nulls, valid, buf)
}

// stringColumn encodes a utf8 column with no nulls from interned strings.
func stringColumn(mem memory.Allocator, src []trace.Str) (arrow.Array, error) {
	total := 0
	last, lastLen := trace.Str(0), 0
	for _, s := range src {
		if s != last {
			last, lastLen = s, len(s.String())
		}
		total += lastLen
	}
	if total > math.MaxInt32 {
		return nil, fmt.Errorf("%d bytes of strings in one batch: more than utf8 offsets hold; lower the batch rows", total)
	}
	offBuf := newBuffer(mem, (len(src)+1)*arrow.Int32SizeBytes)
	dataBuf := newBuffer(mem, total)
	offsets := arrow.Int32Traits.CastFromBytes(offBuf.Bytes())
	data := dataBuf.Bytes()
	pos := 0
	last, lastStr := trace.Str(0), ""
	for i, s := range src {
		if s != last {
			last, lastStr = s, s.String()
		}
		offsets[i] = int32(pos)
		pos += copy(data[pos:], lastStr)
	}
	offsets[len(src)] = int32(pos)
	return newArray(arrow.BinaryTypes.String, len(src), 0, nil, offBuf, dataBuf), nil
}

// kindColumn encodes kinds as int16 indices into dict; from is the row
// number of kinds[0] in the trace, for errors.
func kindColumn(mem memory.Allocator, kinds []trace.Kind, dict *kindDict, from int) (arrow.Array, error) {
	buf := newBuffer(mem, len(kinds)*arrow.Int16SizeBytes)
	dst := arrow.Int16Traits.CastFromBytes(buf.Bytes())
	for i, k := range kinds {
		v, err := dict.add(k)
		if err != nil {
			buf.Release()
			return nil, fmt.Errorf("row %d: column kind: %w", from+i, err)
		}
		dst[i] = v
	}
	indices := newArray(arrow.PrimitiveTypes.Int16, len(kinds), 0, nil, buf)
	defer indices.Release()
	return array.NewDictionaryArray(kindType, indices, dict.dictionary(mem)), nil
}
