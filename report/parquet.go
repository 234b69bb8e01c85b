package report

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/ppprof/ppprof/trace"
)

// The Parquet export writes each (step, rank) of a trace to its own file,
// partitioned hive-style:
//
//	DIR/step=S/rank=R/part-0.parquet
//
// step and rank are partition columns: they live in the directory names,
// not in the files (Spark, Trino, DuckDB and pyarrow add them back). The
// files hold the other columns of the event model under the same names
// (DESIGN.md "The event model"), plus job (the job name, so a fleet of
// jobs' directories can be read as one table) and duration_ns. It uses
// arrow-go's Parquet writer at the column level, so report never sees
// Arrow types (DESIGN.md "Layout").

// ParquetSchemaVersion is written to each file's key-value metadata under
// "ppprof.parquet"; it changes when columns change meaning.
const ParquetSchemaVersion = "1"

// pqCol is one column of the Parquet files: its name, physical type and
// whether it is nullable, and how to read row i of the trace.
type pqCol struct {
	name     string
	typ      parquet.Type
	optional bool
	i32      func(t *trace.Trace, i int) int32
	i64      func(t *trace.Trace, i int) (int64, bool) // false: null
	f64      func(t *trace.Trace, i int) float64
	str      func(t *trace.Trace, i int) string
}

func i64(f func(t *trace.Trace, i int) int64) func(*trace.Trace, int) (int64, bool) {
	return func(t *trace.Trace, i int) (int64, bool) { return f(t, i), true }
}

func nullableNs(f func(t *trace.Trace, i int) int64) func(*trace.Trace, int) (int64, bool) {
	return func(t *trace.Trace, i int) (int64, bool) {
		v := f(t, i)
		return v, v != trace.NoTime
	}
}

// pqColumns are the columns of every file, in order.
var pqColumns = []pqCol{
	{name: "job", typ: parquet.Types.ByteArray, str: func(t *trace.Trace, i int) string { return t.Meta.Job }},
	{name: "pipeline", typ: parquet.Types.Int32, i32: func(t *trace.Trace, i int) int32 { return t.Pipeline[i] }},
	{name: "stage", typ: parquet.Types.Int32, i32: func(t *trace.Trace, i int) int32 { return int32(t.Stage[i]) }},
	{name: "tp_rank", typ: parquet.Types.Int32, i32: func(t *trace.Trace, i int) int32 { return t.TPRank[i] }},
	{name: "chunk", typ: parquet.Types.Int32, i32: func(t *trace.Trace, i int) int32 { return t.Chunk[i] }},
	{name: "microbatch", typ: parquet.Types.Int32, i32: func(t *trace.Trace, i int) int32 { return int32(t.MicroBatch[i]) }},
	{name: "kind", typ: parquet.Types.ByteArray, str: func(t *trace.Trace, i int) string { return t.Kind[i].String() }},
	{name: "seq", typ: parquet.Types.Int64, i64: i64(func(t *trace.Trace, i int) int64 { return t.Seq[i] })},
	{name: "issue_ns", typ: parquet.Types.Int64, optional: true, i64: nullableNs(func(t *trace.Trace, i int) int64 { return t.IssueNs[i] })},
	{name: "start_ns", typ: parquet.Types.Int64, optional: true, i64: nullableNs(func(t *trace.Trace, i int) int64 { return t.StartNs[i] })},
	{name: "end_ns", typ: parquet.Types.Int64, optional: true, i64: nullableNs(func(t *trace.Trace, i int) int64 { return t.EndNs[i] })},
	{name: "duration_ns", typ: parquet.Types.Int64, optional: true, i64: func(t *trace.Trace, i int) (int64, bool) {
		s, e := t.StartNs[i], t.EndNs[i]
		return e - s, s != trace.NoTime && e != trace.NoTime
	}},
	{name: "peer", typ: parquet.Types.Int32, i32: func(t *trace.Trace, i int) int32 { return int32(t.Peer[i]) }},
	{name: "bytes", typ: parquet.Types.Int64, i64: i64(func(t *trace.Trace, i int) int64 { return t.Bytes[i] })},
	{name: "shape", typ: parquet.Types.ByteArray, str: func(t *trace.Trace, i int) string { return t.Shape[i].String() }},
	{name: "dtype", typ: parquet.Types.ByteArray, str: func(t *trace.Trace, i int) string { return t.Dtype[i].String() }},
	{name: "tokens", typ: parquet.Types.Int64, i64: i64(func(t *trace.Trace, i int) int64 { return t.Tokens[i] })},
	{name: "flops", typ: parquet.Types.Double, f64: func(t *trace.Trace, i int) float64 { return t.Flops[i] }},
	{name: "mem_bytes", typ: parquet.Types.Int64, i64: i64(func(t *trace.Trace, i int) int64 { return t.MemBytes[i] })},
}

// parquetSchema builds the files' schema.
func parquetSchema() (*schema.GroupNode, error) {
	var fields schema.FieldList
	for _, c := range pqColumns {
		rep := parquet.Repetitions.Required
		if c.optional {
			rep = parquet.Repetitions.Optional
		}
		var n schema.Node
		var err error
		switch c.typ {
		case parquet.Types.ByteArray:
			n, err = schema.NewPrimitiveNodeLogical(c.name, rep, schema.StringLogicalType{}, parquet.Types.ByteArray, -1, -1)
		default:
			n, err = schema.NewPrimitiveNode(c.name, rep, c.typ, -1, -1)
		}
		if err != nil {
			return nil, err
		}
		fields = append(fields, n)
	}
	return schema.NewGroupNode("ppprof_event", parquet.Repetitions.Required, fields, -1)
}

// WriteParquet writes t's events under dir as Parquet, one file per (step,
// rank) (see above). dir is created when missing and must be empty when it
// exists, so no stale partition of an earlier export is left beside the
// new ones. Files are snappy-compressed, strings dictionary-encoded, with
// column statistics; each file's key-value metadata holds the trace's
// metadata and ppprof.parquet.
func WriteParquet(dir string, t *trace.Trace) error {
	if err := prepareDir(dir); err != nil {
		return err
	}
	sc, err := parquetSchema()
	if err != nil {
		return fmt.Errorf("parquet schema: %w", err)
	}
	// Rows grouped by (step, rank), each group in seq order.
	idx := make([]int, t.Len())
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Or(cmp.Compare(t.Step[a], t.Step[b]), cmp.Compare(t.Rank[a], t.Rank[b]), cmp.Compare(t.Seq[a], t.Seq[b]))
	})
	kv := metadata.NewKeyValueMetadata()
	meta := t.Meta.Map()
	for _, k := range trace.Keys(meta) {
		if err := kv.Append(k, meta[k]); err != nil {
			return fmt.Errorf("parquet metadata: %w", err)
		}
	}
	if err := kv.Append("ppprof.parquet", ParquetSchemaVersion); err != nil {
		return fmt.Errorf("parquet metadata: %w", err)
	}
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDictionaryDefault(true),
		parquet.WithStats(true), parquet.WithCreatedBy("ppprof"))
	for lo := 0; lo < len(idx); {
		hi := lo + 1
		for hi < len(idx) && t.Step[idx[hi]] == t.Step[idx[lo]] && t.Rank[idx[hi]] == t.Rank[idx[lo]] {
			hi++
		}
		rows := idx[lo:hi]
		part := filepath.Join(dir, fmt.Sprintf("step=%d", t.Step[rows[0]]), fmt.Sprintf("rank=%d", t.Rank[rows[0]]), "part-0.parquet")
		if err := writeParquetFile(part, sc, props, kv, t, rows); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// prepareDir creates dir, or checks that it is an empty directory.
func prepareDir(dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("parquet: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("parquet: %s: %w", dir, err)
	case len(ents) > 0:
		return fmt.Errorf("parquet: %s is not empty: export into a new or empty directory, so no old partition is mixed in", dir)
	}
	return nil
}

// writeParquetFile writes rows of t to path as one row group.
func writeParquetFile(path string, sc *schema.GroupNode, props *parquet.WriterProperties, kv metadata.KeyValueMetadata, t *trace.Trace, rows []int) (err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("writing %s: %w", path, cerr)
		}
	}()
	// The writer closes a sink that is an io.Closer; hide f's Close so the
	// deferred one reports the close error.
	fw, err := file.NewParquetWriterWithError(struct{ io.Writer }{f}, sc, file.WithWriterProps(props), file.WithWriteMetadata(kv))
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	rg, err := fw.AppendRowGroupChecked()
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	for _, c := range pqColumns {
		cw, err := rg.NextColumn()
		if err != nil {
			return fmt.Errorf("writing %s: column %s: %w", path, c.name, err)
		}
		if err := writePQColumn(cw, c, t, rows); err != nil {
			return fmt.Errorf("writing %s: column %s: %w", path, c.name, err)
		}
		if err := cw.Close(); err != nil {
			return fmt.Errorf("writing %s: column %s: %w", path, c.name, err)
		}
	}
	if err := rg.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	// Close writes the footer.
	if err := fw.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// writePQColumn writes column c of rows.
func writePQColumn(cw file.ColumnChunkWriter, c pqCol, t *trace.Trace, rows []int) error {
	n := len(rows)
	var def []int16
	if c.optional {
		def = make([]int16, n)
	}
	var err error
	switch w := cw.(type) {
	case *file.Int32ColumnChunkWriter:
		vals := make([]int32, n)
		for k, i := range rows {
			vals[k] = c.i32(t, i)
		}
		_, err = w.WriteBatch(vals, nil, nil)
	case *file.Int64ColumnChunkWriter:
		vals := make([]int64, 0, n)
		for k, i := range rows {
			v, ok := c.i64(t, i)
			if ok {
				vals = append(vals, v)
			}
			if def != nil && ok {
				def[k] = 1
			}
		}
		_, err = w.WriteBatch(vals, def, nil)
	case *file.Float64ColumnChunkWriter:
		vals := make([]float64, n)
		for k, i := range rows {
			vals[k] = c.f64(t, i)
		}
		_, err = w.WriteBatch(vals, nil, nil)
	case *file.ByteArrayColumnChunkWriter:
		vals := make([]parquet.ByteArray, n)
		for k, i := range rows {
			vals[k] = parquet.ByteArray(c.str(t, i))
		}
		_, err = w.WriteBatch(vals, nil, nil)
	default:
		err = fmt.Errorf("unexpected column writer %T", cw)
	}
	return err
}
