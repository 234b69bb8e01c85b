package arrowv1

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// This file builds Arrow streams the way other writers might (pyarrow,
// polars, a C++ collector): any schema, any column types, rows given as
// values, nil for null.

// col is one column of a foreign stream.
type col struct {
	name string
	typ  arrow.DataType
	vals []any // one per row; nil is null
}

// foreignStream writes cols as one record batch per batches entry (row
// ranges), in the stream format, with schema metadata md.
func foreignStream(tb testing.TB, md map[string]string, batches [][2]int, cols ...col) []byte {
	tb.Helper()
	mem := memory.NewGoAllocator()
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.typ, Nullable: true}
	}
	meta := arrow.MetadataFrom(md)
	schema := arrow.NewSchema(fields, &meta)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	for _, br := range batches {
		rb := array.NewRecordBuilder(mem, schema)
		for i, c := range cols {
			for _, v := range c.vals[br[0]:br[1]] {
				appendValue(tb, rb.Field(i), v)
			}
		}
		rec := rb.NewRecordBatch()
		if err := w.Write(rec); err != nil {
			tb.Fatal(err)
		}
		rec.Release()
		rb.Release()
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// appendValue appends v (nil for null) to a builder of any type the tests
// use; nested builders only take nulls.
func appendValue(tb testing.TB, b array.Builder, v any) {
	tb.Helper()
	if v == nil {
		b.AppendNull()
		return
	}
	switch b := b.(type) {
	case *array.Int8Builder:
		b.Append(int8(v.(int)))
	case *array.Int32Builder:
		b.Append(int32(v.(int)))
	case *array.Int64Builder:
		b.Append(int64(v.(int)))
	case *array.Float64Builder:
		b.Append(v.(float64))
	case *array.StringBuilder:
		b.Append(v.(string))
	case *array.LargeStringBuilder:
		b.Append(v.(string))
	case *array.StringViewBuilder:
		b.Append(v.(string))
	case array.DictionaryBuilder:
		if err := b.(*array.BinaryDictionaryBuilder).AppendString(v.(string)); err != nil {
			tb.Fatal(err)
		}
	default:
		tb.Fatalf("builder %T: only nulls", b)
	}
}

// ints and strs make column values.
func ints(v ...any) []any { return v }
func strs(v ...any) []any { return v }

// v1meta is minimal valid metadata.
var v1meta = map[string]string{"ppprof.schema": "1"}

// minimalCols are the required columns for three rows of one rank.
func minimalCols() []col {
	return []col{
		{"rank", arrow.PrimitiveTypes.Int32, ints(2, 2, 2)},
		{"stage", arrow.PrimitiveTypes.Int32, ints(1, 1, 1)},
		{"step", arrow.PrimitiveTypes.Int64, ints(0, 0, 1)},
		{"kind", arrow.BinaryTypes.String, strs("F", "B", "DATA")},
		{"seq", arrow.PrimitiveTypes.Int64, ints(1, 2, 5)},
		{"start_ns", arrow.PrimitiveTypes.Int64, ints(100, 200, nil)},
		{"end_ns", arrow.PrimitiveTypes.Int64, ints(150, nil, nil)},
	}
}

// withCol returns cols with c replacing the column of the same name, or
// appended.
func withCol(cols []col, c col) []col {
	out := append([]col(nil), cols...)
	for i := range out {
		if out[i].name == c.name {
			out[i] = c
			return out
		}
	}
	return append(out, c)
}

// withoutCol returns cols without the column named name.
func withoutCol(cols []col, name string) []col {
	var out []col
	for _, c := range cols {
		if c.name != name {
			out = append(out, c)
		}
	}
	return out
}

var oneBatch = [][2]int{{0, 3}}
