package report

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/ppprof/ppprof/internal/cleanup"
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

// ParquetLayout is how an export's files are partitioned.
type ParquetLayout int

const (
	// ByStepRank: DIR/step=S/rank=R/part-0.parquet, a file per (step,
	// rank), step and rank partition columns (the default).
	ByStepRank ParquetLayout = iota
	// ByStep: DIR/step=S/part-0.parquet, a file per step (per step and
	// part of the trace written), rank a column of the files (INT32,
	// after job): a fleet job's export in hundreds of files of millions
	// of rows instead of hundreds of thousands of hundreds.
	ByStep
)

// ParseParquetLayout reads a layout as the CLI names it: "step,rank" or
// "step".
func ParseParquetLayout(s string) (ParquetLayout, error) {
	switch s {
	case "step,rank", "":
		return ByStepRank, nil
	case "step":
		return ByStep, nil
	}
	return 0, fmt.Errorf("parquet partitioning %q: want step,rank or step", s)
}

// rankColumn is the rank column of the ByStep layout's files.
var rankColumn = pqCol{name: "rank", typ: parquet.Types.Int32, i32: func(t *trace.Trace, i int) int32 { return int32(t.Rank[i]) }}

// columns are the columns of a layout's files, in order.
func (l ParquetLayout) columns() []pqCol {
	if l == ByStep {
		return slices.Insert(slices.Clone(pqColumns), 1, rankColumn)
	}
	return pqColumns
}

// parquetSchema builds the schema of files of cols.
func parquetSchema(cols []pqCol) (*schema.GroupNode, error) {
	var fields schema.FieldList
	for _, c := range cols {
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
	w, err := NewParquetWriter(dir, ByStepRank)
	if err != nil {
		return err
	}
	return w.Write(t)
}

// ParquetWriter writes a trace's events as WriteParquet does, one part of
// the trace at a time: a streamed export hands it the chunks (pipeline
// replicas) of a trace too large to hold whole, and the files are those
// WriteParquet writes of the whole trace when no (step, rank) spans two
// parts. A (step, rank) met again in a later part gets a file of its own
// beside the first (part-1.parquet, ...): readers of hive partitions take
// every file of a partition's directory. A part's files are written on
// every core. With the ByStep layout the same holds of steps: a step met
// again in a later part gets a file of its own. Write is not safe for
// concurrent use.
type ParquetWriter struct {
	dir    string
	layout ParquetLayout
	cols   []pqCol
	sc     *schema.GroupNode
	props  *parquet.WriterProperties
	parts  map[[2]int64]int // files written per (step, rank), or per (step, 0) by step
	files  int
}

// NewParquetWriter prepares dir (created when missing, else it must be an
// empty directory) for a ParquetWriter of files partitioned as layout says.
func NewParquetWriter(dir string, layout ParquetLayout) (*ParquetWriter, error) {
	if err := prepareDir(dir); err != nil {
		return nil, err
	}
	cols := layout.columns()
	sc, err := parquetSchema(cols)
	if err != nil {
		return nil, fmt.Errorf("parquet schema: %w", err)
	}
	return &ParquetWriter{dir: dir, layout: layout, cols: cols, sc: sc, props: parquetProps(), parts: map[[2]int64]int{}}, nil
}

// Files is the number of files written so far.
func (w *ParquetWriter) Files() int { return w.files }

// parquetProps are the files' writer properties: dictionaries for the
// columns whose values repeat, not for the sequence numbers and times,
// which never do (their dictionary would be the column again, built at
// the cost of a hash table).
func parquetProps() *parquet.WriterProperties {
	opts := []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDictionaryDefault(true),
		parquet.WithStats(true), parquet.WithCreatedBy("ppprof")}
	for _, c := range []string{"seq", "issue_ns", "start_ns", "end_ns", "duration_ns"} {
		opts = append(opts, parquet.WithDictionaryFor(c, false))
	}
	return parquet.NewWriterProperties(opts...)
}

// Write writes t's events, a file per (step, rank).
func (w *ParquetWriter) Write(t *trace.Trace) error {
	if t.Len() == 0 {
		return nil
	}
	kv := metadata.NewKeyValueMetadata()
	meta := t.Meta.Map()
	for _, k := range trace.Keys(meta) {
		if err := kv.Append(k, validUTF8(meta[k])); err != nil {
			return fmt.Errorf("parquet metadata: %w", err)
		}
	}
	if err := kv.Append("ppprof.parquet", ParquetSchemaVersion); err != nil {
		return fmt.Errorf("parquet metadata: %w", err)
	}
	idx, bounds := partitionRows(t, w.layout == ByStep)
	paths := make([]string, len(bounds)-1)
	for p := range paths {
		r := idx[bounds[p]]
		key := [2]int64{t.Step[r], int64(t.Rank[r])}
		if w.layout == ByStep {
			key[1] = 0
		}
		n := w.parts[key]
		w.parts[key] = n + 1
		dir := filepath.Join(w.dir, fmt.Sprintf("step=%d", key[0]))
		if w.layout == ByStepRank {
			dir = filepath.Join(dir, fmt.Sprintf("rank=%d", key[1]))
		}
		paths[p] = filepath.Join(dir, fmt.Sprintf("part-%d.parquet", n))
	}
	// Every core writes files, in turn; the first error (by file order)
	// is returned, and stops the others at their next file.
	errs := make([]error, len(paths))
	var next, failed atomic.Int64
	failed.Store(int64(len(paths)))
	nw := max(1, min(runtime.GOMAXPROCS(0), len(paths)))
	var wg sync.WaitGroup
	for range nw {
		wg.Go(func() {
			sw := &pqScratch{}
			for {
				p := int(next.Add(1) - 1)
				if p >= len(paths) || int64(p) > failed.Load() {
					return
				}
				if err := writeParquetFile(paths[p], w.cols, w.sc, w.props, kv, t, idx[bounds[p]:bounds[p+1]], sw); err != nil {
					errs[p] = err
					for {
						f := failed.Load()
						if int64(p) >= f || failed.CompareAndSwap(f, int64(p)) {
							break
						}
					}
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	w.files += len(paths)
	return nil
}

// partitionRows returns t's rows grouped by (step, rank), each group in
// seq order: rows idx[bounds[p]:bounds[p+1]] are group p; byStep groups
// them by step, each group in (rank, seq) order. A trace in (rank, seq)
// order whose ranks' steps never go back (what ppprof reads and writes)
// is grouped in one scan (by step, in a pass more); any other is sorted.
func partitionRows(t *trace.Trace, byStep bool) (idx []int, bounds []int) {
	n := t.Len()
	idx = make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	grouped := true
	for i := 1; i < n && grouped; i++ {
		if t.Rank[i] < t.Rank[i-1] || t.Rank[i] == t.Rank[i-1] && (t.Seq[i] < t.Seq[i-1] || t.Step[i] < t.Step[i-1]) {
			grouped = false
		}
	}
	if grouped && byStep {
		// A stable bucket sort by step: each step's rows keep their
		// (rank, seq) order.
		count := map[int64]int{}
		for i := 0; i < n; {
			j := i + 1
			for j < n && t.Step[j] == t.Step[i] {
				j++
			}
			count[t.Step[i]] += j - i
			i = j
		}
		steps := slices.Sorted(maps.Keys(count))
		at := make(map[int64]int, len(steps))
		off := 0
		for _, s := range steps {
			at[s] = off
			off += count[s]
		}
		for i := 0; i < n; {
			j := i + 1
			for j < n && t.Step[j] == t.Step[i] {
				j++
			}
			o := at[t.Step[i]]
			for k := i; k < j; k++ {
				idx[o] = k
				o++
			}
			at[t.Step[i]] = o
			i = j
		}
	} else if !grouped {
		slices.SortStableFunc(idx, func(a, b int) int {
			return cmp.Or(cmp.Compare(t.Step[a], t.Step[b]), cmp.Compare(t.Rank[a], t.Rank[b]), cmp.Compare(t.Seq[a], t.Seq[b]))
		})
	}
	bounds = append(bounds, 0)
	for k := 1; k < n; k++ {
		if t.Step[idx[k]] != t.Step[idx[k-1]] || !byStep && t.Rank[idx[k]] != t.Rank[idx[k-1]] {
			bounds = append(bounds, k)
		}
	}
	return idx, append(bounds, n)
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

// pqScratch is one writer goroutine's buffers, reused from file to file.
type pqScratch struct {
	bw  *bufio.Writer
	i32 []int32
	i64 []int64
	f64 []float64
	ba  []parquet.ByteArray
	def []int16
}

// partialName is the name a Parquet file is written under until it is
// complete: hidden, and not ending in .parquet, so that no query of the
// directory reads it (an export cut short leaves complete files only: a
// signal removes those being written, internal/cleanup).
func partialName(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".partial")
}

// writeParquetFile writes rows of t to path as one row group: to a hidden
// file beside it (partialName), renamed to path once complete.
func writeParquetFile(path string, cols []pqCol, sc *schema.GroupNode, props *parquet.WriterProperties, kv metadata.KeyValueMetadata, t *trace.Trace, rows []int, sw *pqScratch) (err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	tmp := partialName(path)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	cleanup.Track(tmp) // removed by a signal that ends the process, too
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("writing %s: %w", path, cerr)
		}
		if err == nil {
			if rerr := os.Rename(tmp, path); rerr != nil {
				err = fmt.Errorf("writing %s: %w", path, rerr)
			}
		}
		if err != nil {
			cleanup.Remove(tmp)
		} else {
			cleanup.Forget(tmp)
		}
	}()
	if sw.bw == nil {
		sw.bw = bufio.NewWriterSize(f, 256<<10)
	} else {
		sw.bw.Reset(f)
	}
	// The writer closes a sink that is an io.Closer; hide the file's Close
	// so the deferred one reports the close error.
	fw, err := file.NewParquetWriterWithError(struct{ io.Writer }{sw.bw}, sc, file.WithWriterProps(props), file.WithWriteMetadata(kv))
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	rg, err := fw.AppendRowGroupChecked()
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	for _, c := range cols {
		cw, err := rg.NextColumn()
		if err != nil {
			return fmt.Errorf("writing %s: column %s: %w", path, c.name, err)
		}
		if err := writePQColumn(cw, c, t, rows, sw); err != nil {
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
	if err := sw.bw.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// validUTF8 is s, or s with U+FFFD in place of each run of bytes that
// are not UTF-8: Parquet's strings (and its key-value metadata, in
// arrow-go) must be UTF-8, and a trace's names need not be (a collector
// is handed bytes).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// grow returns s with length n, reusing its array when large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// writePQColumn writes column c of rows.
func writePQColumn(cw file.ColumnChunkWriter, c pqCol, t *trace.Trace, rows []int, sw *pqScratch) error {
	n := len(rows)
	var def []int16
	if c.optional {
		sw.def = grow(sw.def, n)
		def = sw.def
	}
	var err error
	switch w := cw.(type) {
	case *file.Int32ColumnChunkWriter:
		vals := grow(sw.i32, n)
		sw.i32 = vals
		for k, i := range rows {
			vals[k] = c.i32(t, i)
		}
		_, err = w.WriteBatch(vals, nil, nil)
	case *file.Int64ColumnChunkWriter:
		vals := grow(sw.i64, n)[:0]
		for k, i := range rows {
			v, ok := c.i64(t, i)
			if ok {
				vals = append(vals, v)
			}
			if def != nil {
				def[k] = 0
				if ok {
					def[k] = 1
				}
			}
		}
		sw.i64 = vals
		_, err = w.WriteBatch(vals, def, nil)
	case *file.Float64ColumnChunkWriter:
		vals := grow(sw.f64, n)
		sw.f64 = vals
		for k, i := range rows {
			vals[k] = c.f64(t, i)
		}
		_, err = w.WriteBatch(vals, nil, nil)
	case *file.ByteArrayColumnChunkWriter:
		vals := grow(sw.ba, n)
		sw.ba = vals
		for k, i := range rows {
			// The writer only reads the bytes (it copies what it keeps):
			// the string's own bytes, not a copy of them.
			s := validUTF8(c.str(t, i))
			vals[k] = parquet.ByteArray(unsafe.Slice(unsafe.StringData(s), len(s)))
		}
		_, err = w.WriteBatch(vals, nil, nil)
	default:
		err = fmt.Errorf("unexpected column writer %T", cw)
	}
	return err
}
