package arrowv1

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/ppprof/ppprof/trace"
)

// decodeFrames decodes verified frames (a schema message, then dictionary
// and record batches) into a trace, returning it and the number of record
// batches read. The trace is not validated yet.
func decodeFrames(frames []frame, mem *limitAllocator) (*trace.Trace, int, error) {
	fr := &frameReader{frames: frames, mem: mem}
	// Not WithEnsureNativeEndian(true), arrow-go's default: it byte-swaps
	// a big-endian input's buffers in place, which would change the
	// caller's bytes (a read-only mapping: a crash) and make a second read
	// of the same bytes differ from the first. ppprof writes little-endian;
	// big-endian input is refused.
	rdr, err := ipc.NewReaderFromMessageReader(fr, ipc.WithAllocator(mem), ipc.WithEnsureNativeEndian(false))
	if err != nil {
		return nil, 0, fmt.Errorf("reading schema: %w", err)
	}
	defer rdr.Release()
	schema := rdr.Schema()
	if !schema.IsNativeEndian() {
		return nil, 0, fmt.Errorf("reading schema: big-endian data is not supported (ppprof reads and writes little-endian Arrow)")
	}
	meta, err := trace.ParseMeta(schema.Metadata().ToMap())
	if err != nil {
		return nil, 0, fmt.Errorf("schema metadata: %w", err)
	}
	b, err := bind(schema)
	if err != nil {
		return nil, 0, err
	}
	if err := checkViews(schema, frames); err != nil {
		return nil, 0, err
	}
	t := &trace.Trace{Meta: meta}
	var rows, bodies int64
	for _, f := range frames {
		if f.info.header == headerRecordBatch {
			rows += f.info.rows
			bodies += int64(len(f.body))
		}
	}
	// Batch lengths come from the input: make room ahead only for as many
	// rows as its bytes could plausibly hold.
	t.Grow(int(min(rows, 4*bodies+1024)))
	d := newDecoder()
	batches := 0
	for rdr.Next() {
		if err := d.decodeBatch(t, rdr.RecordBatch(), b); err != nil {
			return nil, 0, fmt.Errorf("decoding batch %d: %w", batches, err)
		}
		batches++
	}
	if err := rdr.Err(); err != nil {
		return nil, 0, fmt.Errorf("decoding batch %d: %w", batches, err)
	}
	d.finish(t)
	return t, batches, nil
}

// checkViews guards arrow-go against variadic buffer counts that a record
// batch does not hold: it reads one per string or binary view array, past
// the end of the vector if the vector is short, and sizes an allocation by
// what it finds. Views inside dictionaries are refused outright.
func checkViews(schema *arrow.Schema, frames []frame) error {
	need := 0
	for _, f := range schema.Fields() {
		n, err := countViews(f.Type)
		if err != nil {
			return &ColumnError{Column: f.Name, Want: "a type without views inside dictionaries", Got: f.Type.String()}
		}
		need += n
	}
	if need == 0 {
		return nil
	}
	records := 0
	for _, f := range frames {
		if f.info.header != headerRecordBatch {
			continue
		}
		if len(f.info.variadic) < need {
			return fmt.Errorf("decoding batch %d: %d variadic buffer counts, schema needs %d", records, len(f.info.variadic), need)
		}
		records++
	}
	return nil
}

// countViews counts the binary and string view arrays one record batch of
// type dt holds.
func countViews(dt arrow.DataType) (int, error) {
	switch t := dt.(type) {
	case arrow.BinaryViewDataType:
		return 1, nil
	case *arrow.DictionaryType:
		if n, err := countViews(t.ValueType); err != nil || n > 0 {
			return 0, fmt.Errorf("views inside a dictionary")
		}
		return 0, nil
	case arrow.ExtensionType:
		return countViews(t.StorageType())
	case arrow.NestedType:
		total := 0
		for _, f := range t.Fields() {
			n, err := countViews(f.Type)
			if err != nil {
				return 0, err
			}
			total += n
		}
		return total, nil
	}
	return 0, nil
}

// decoder holds what one Read shares across batches: the ids of the
// strings it met (trace.Str) and kinds, so the process-wide table is
// consulted once per distinct value and read.
type decoder struct {
	strs    map[string]trace.Str
	kinds   map[string]trace.Kind
	pending bool // some rows have no issue, start or end time: see finish
}

func newDecoder() *decoder {
	return &decoder{strs: map[string]trace.Str{}, kinds: map[string]trace.Kind{}}
}

// intern returns s's id; s may point into an Arrow buffer.
func (d *decoder) intern(s string) trace.Str {
	if v, ok := d.strs[s]; ok {
		return v
	}
	v := trace.Intern(s)
	d.strs[v.String()] = v
	return v
}

// kind returns the Kind named s, interning new names with trace.ParseKind.
func (d *decoder) kind(s string) (trace.Kind, error) {
	if k, ok := d.kinds[s]; ok {
		return k, nil
	}
	k, err := trace.ParseKind(s)
	if err != nil {
		return trace.KindInvalid, err
	}
	d.kinds[strings.Clone(s)] = k
	return k, nil
}

// finish fills issue times the input did not have: a row with no issue,
// start or end time (a pending op from a writer without issue_ns) gets the
// issue time of the previous row of its rank, or 0 for the rank's first.
func (d *decoder) finish(t *trace.Trace) {
	if !d.pending {
		return
	}
	last := map[trace.Rank]int64{}
	for i, v := range t.IssueNs {
		if v == trace.NoTime {
			t.IssueNs[i] = last[t.Rank[i]]
		} else {
			last[t.Rank[i]] = v
		}
	}
}

// decodeBatch appends the rows of rec to t. Columns are bound once by b;
// absent optional columns and nulls in them take their defaults:
// pipeline, tp_rank, chunk, bytes, tokens, flops, mem_bytes 0; microbatch
// -1; peer -1; group_seq -1; shape, dtype, group ""; issue_ns the row's start_ns, else its
// end_ns, else (see finish) the previous issue time of its rank. Null
// start_ns and end_ns are trace.NoTime. A null in rank, stage, step, kind
// or seq is an error naming the row.
func (d *decoder) decodeBatch(t *trace.Trace, rec arrow.RecordBatch, b *binding) (err error) {
	defer func() {
		// Every array is validated first; this is the last line of defence.
		if p := recover(); p != nil {
			err = fmt.Errorf("corrupt batch: %v", p)
		}
	}()
	n := int(rec.NumRows())
	var cols [trace.NumColumns]arrow.Array
	for c, f := range b.field {
		if f < 0 {
			continue
		}
		a := rec.Column(f)
		if a.Len() != n {
			return fmt.Errorf("column %s: %d rows, batch has %d", trace.Columns[c], a.Len(), n)
		}
		if err := array.ValidateFull(a); err != nil {
			return fmt.Errorf("column %s: %w", trace.Columns[c], err)
		}
		cols[c] = a
	}
	base := t.Len()
	if cap(t.Rank)-base < n {
		t.Grow(max(n, base)) // trace.Grow is exact: double to amortize
	}
	// The rank comes first: row errors name it.
	rank, err := required(cols[trace.ColRank], base, t, "rank")
	if err != nil {
		return err
	}
	t.Rank = appendInt32s(t.Rank, rank, n, 0)
	for _, c := range []int{trace.ColStage, trace.ColStep, trace.ColSeq} {
		if _, err := required(cols[c], base, t, trace.Columns[c]); err != nil {
			return err
		}
	}
	t.Stage = appendInt32s(t.Stage, cols[trace.ColStage], n, 0)
	t.Step = appendInt64s(t.Step, cols[trace.ColStep], n, 0)
	t.Seq = appendInt64s(t.Seq, cols[trace.ColSeq], n, 0)
	t.Pipeline = appendInt32s(t.Pipeline, cols[trace.ColPipeline], n, 0)
	t.TPRank = appendInt32s(t.TPRank, cols[trace.ColTPRank], n, 0)
	t.Chunk = appendInt32s(t.Chunk, cols[trace.ColChunk], n, 0)
	t.MicroBatch = appendInt32s(t.MicroBatch, cols[trace.ColMicroBatch], n, trace.NoMicroBatch)
	t.Peer = appendInt32s(t.Peer, cols[trace.ColPeer], n, trace.NoRank)
	t.Bytes = appendInt64s(t.Bytes, cols[trace.ColBytes], n, 0)
	t.Tokens = appendInt64s(t.Tokens, cols[trace.ColTokens], n, 0)
	t.MemBytes = appendInt64s(t.MemBytes, cols[trace.ColMemBytes], n, 0)
	t.GroupSeq = appendInt64s(t.GroupSeq, cols[trace.ColGroupSeq], n, trace.NoGroupSeq)
	t.StartNs = appendInt64s(t.StartNs, cols[trace.ColStartNs], n, trace.NoTime)
	t.EndNs = appendInt64s(t.EndNs, cols[trace.ColEndNs], n, trace.NoTime)
	t.IssueNs = appendInt64s(t.IssueNs, cols[trace.ColIssueNs], n, trace.NoTime)
	for i := base; i < base+n; i++ {
		if t.IssueNs[i] != trace.NoTime {
			continue
		}
		switch {
		case t.StartNs[i] != trace.NoTime:
			t.IssueNs[i] = t.StartNs[i]
		case t.EndNs[i] != trace.NoTime:
			t.IssueNs[i] = t.EndNs[i]
		default:
			d.pending = true
		}
	}
	t.Flops = appendFloat64s(t.Flops, cols[trace.ColFlops], n)
	t.Shape = d.appendStrings(t.Shape, cols[trace.ColShape], n)
	t.Dtype = d.appendStrings(t.Dtype, cols[trace.ColDtype], n)
	t.Group = d.appendStrings(t.Group, cols[trace.ColGroup], n)
	return d.appendKinds(t, cols[trace.ColKind], base)
}

// required checks that a required column a has no nulls.
func required(a arrow.Array, base int, t *trace.Trace, name string) (arrow.Array, error) {
	if a.NullN() == 0 {
		return a, nil
	}
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) {
			return nil, rowError(t, base, i, name, "null in a required column")
		}
	}
	return a, nil
}

// rowError builds a trace.RowError for row i of the batch starting at row
// base of t, naming the row's rank when it is decoded already.
func rowError(t *trace.Trace, base, i int, col, reason string) error {
	rank := trace.NoRank
	if base+i < len(t.Rank) {
		rank = t.Rank[base+i]
	}
	return &trace.RowError{Row: base + i, Rank: rank, Column: col, Reason: reason}
}

// appendN appends n copies of v.
func appendN[T any](dst []T, v T, n int) []T {
	for range n {
		dst = append(dst, v)
	}
	return dst
}

// appendInt32s appends the n values of an int32 column, def for nulls, or
// n copies of def when the column is absent (a nil).
func appendInt32s[T ~int32](dst []T, a arrow.Array, n int, def T) []T {
	if a == nil {
		return appendN(dst, def, n)
	}
	col := a.(*array.Int32)
	vals := col.Int32Values()
	if col.NullN() == 0 {
		for _, v := range vals {
			dst = append(dst, T(v))
		}
		return dst
	}
	for i, v := range vals {
		if col.IsNull(i) {
			v = int32(def)
		}
		dst = append(dst, T(v))
	}
	return dst
}

// appendInt64s appends the n values of an int64 column, def for nulls, or
// n copies of def when the column is absent (a nil).
func appendInt64s(dst []int64, a arrow.Array, n int, def int64) []int64 {
	if a == nil {
		return appendN(dst, def, n)
	}
	col := a.(*array.Int64)
	vals := col.Int64Values()
	if col.NullN() == 0 {
		return append(dst, vals...)
	}
	for i, v := range vals {
		if col.IsNull(i) {
			v = def
		}
		dst = append(dst, v)
	}
	return dst
}

// appendFloat64s appends the n values of a float64 column, 0 for nulls or
// when the column is absent (a nil).
func appendFloat64s(dst []float64, a arrow.Array, n int) []float64 {
	if a == nil {
		return appendN(dst, 0, n)
	}
	col := a.(*array.Float64)
	vals := col.Float64Values()
	if col.NullN() == 0 {
		return append(dst, vals...)
	}
	for i, v := range vals {
		if col.IsNull(i) {
			v = 0
		}
		dst = append(dst, v)
	}
	return dst
}

// stringArray is what utf8, large_utf8 and utf8_view arrays have in common.
type stringArray interface {
	arrow.Array
	Value(i int) string
}

// appendStrings appends the n values of a string column, interned
// (trace.Str), "" for nulls or when the column is absent (a nil).
func (d *decoder) appendStrings(dst []trace.Str, a arrow.Array, n int) []trace.Str {
	switch col := a.(type) {
	case nil:
		return appendN(dst, 0, n)
	case *array.Dictionary:
		vals := col.Dictionary().(stringArray)
		lut := make([]trace.Str, vals.Len())
		for i := range lut {
			lut[i] = d.intern(vals.Value(i))
		}
		// ValidateFull checked the indices against the dictionary.
		dst, _ = lookupDict(dst, col, lut, 0)
		return dst
	case stringArray:
		lastIn, last := "", trace.Str(0)
		for i := 0; i < n; i++ {
			if col.IsNull(i) {
				dst = append(dst, 0)
				continue
			}
			// Runs of one value are common: skip the map for them.
			if s := col.Value(i); s != lastIn || i == 0 {
				lastIn, last = s, d.intern(s)
			}
			dst = append(dst, last)
		}
		return dst
	}
	return appendN(dst, 0, n) // unreachable: bind admits only the types above
}

// appendKinds appends the kind column of a batch whose first row is row
// base of t. A null or a name trace.ParseKind refuses is an error naming
// the row.
func (d *decoder) appendKinds(t *trace.Trace, a arrow.Array, base int) error {
	n := a.Len()
	switch col := a.(type) {
	case *array.Dictionary:
		vals := col.Dictionary().(stringArray)
		lut := make([]trace.Kind, vals.Len())
		bad := make(map[int]error)
		for i := range lut {
			if vals.IsNull(i) {
				bad[i] = fmt.Errorf("null kind")
				continue
			}
			k, err := d.kind(vals.Value(i))
			if err != nil {
				bad[i] = err
			}
			lut[i] = k
		}
		var stop int
		t.Kind, stop = lookupDict(t.Kind, col, lut, trace.KindInvalid)
		if stop >= 0 {
			return rowError(t, base, stop, "kind", "dictionary index out of range")
		}
		for i, k := range t.Kind[base:] {
			if k != trace.KindInvalid {
				continue
			}
			if col.IsNull(i) {
				return rowError(t, base, i, "kind", "null in a required column")
			}
			return rowError(t, base, i, "kind", bad[col.GetValueIndex(i)].Error())
		}
		return nil
	case stringArray:
		var last trace.Kind
		lastIn := ""
		for i := 0; i < n; i++ {
			if col.IsNull(i) {
				return rowError(t, base, i, "kind", "null in a required column")
			}
			if s := col.Value(i); s != lastIn || i == 0 {
				k, err := d.kind(s)
				if err != nil {
					return rowError(t, base, i, "kind", err.Error())
				}
				lastIn, last = s, k
			}
			t.Kind = append(t.Kind, last)
		}
		return nil
	}
	return fmt.Errorf("column kind: unexpected %s", a.DataType()) // unreachable: see bind
}

// integer is the dictionary index types.
type integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// lookupDict appends lut[index] for each row of dictionary array a, null
// for null rows. It stops at the first index outside lut and returns that
// row, or -1.
func lookupDict[T any](dst []T, a *array.Dictionary, lut []T, null T) ([]T, int) {
	switch ix := a.Indices().(type) {
	case *array.Int8:
		return lookup(dst, ix.Int8Values(), a, lut, null)
	case *array.Int16:
		return lookup(dst, ix.Int16Values(), a, lut, null)
	case *array.Int32:
		return lookup(dst, ix.Int32Values(), a, lut, null)
	case *array.Int64:
		return lookup(dst, ix.Int64Values(), a, lut, null)
	case *array.Uint8:
		return lookup(dst, ix.Uint8Values(), a, lut, null)
	case *array.Uint16:
		return lookup(dst, ix.Uint16Values(), a, lut, null)
	case *array.Uint32:
		return lookup(dst, ix.Uint32Values(), a, lut, null)
	case *array.Uint64:
		return lookup(dst, ix.Uint64Values(), a, lut, null)
	}
	return dst, 0 // unreachable: bind admits integer indices only
}

func lookup[I integer, T any](dst []T, idx []I, a arrow.Array, lut []T, null T) ([]T, int) {
	nulls := a.NullN() > 0
	for i, x := range idx {
		if nulls && a.IsNull(i) {
			dst = append(dst, null)
			continue
		}
		// A negative index converts to a huge uint64: out of range too.
		if uint64(x) >= uint64(len(lut)) {
			return dst, i
		}
		dst = append(dst, lut[x])
	}
	return dst, -1
}
