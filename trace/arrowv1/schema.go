package arrowv1

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/ppprof/ppprof/trace"
)

// kindType is the Arrow type of the kind column as written: a dictionary of
// utf8 names with int16 indices, which hold every kind a process can intern
// (trace.MaxCustomKinds plus the well-known ones) at half the size of int32.
// Readers accept any integer index type, and plain strings.
var kindType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}

// columnTypes are the Arrow types of the v1 columns as written, indexed by
// column position.
var columnTypes = [trace.NumColumns]arrow.DataType{
	trace.ColRank:       arrow.PrimitiveTypes.Int32,
	trace.ColPipeline:   arrow.PrimitiveTypes.Int32,
	trace.ColStage:      arrow.PrimitiveTypes.Int32,
	trace.ColTPRank:     arrow.PrimitiveTypes.Int32,
	trace.ColChunk:      arrow.PrimitiveTypes.Int32,
	trace.ColStep:       arrow.PrimitiveTypes.Int64,
	trace.ColMicroBatch: arrow.PrimitiveTypes.Int32,
	trace.ColKind:       kindType,
	trace.ColSeq:        arrow.PrimitiveTypes.Int64,
	trace.ColIssueNs:    arrow.PrimitiveTypes.Int64,
	trace.ColStartNs:    arrow.PrimitiveTypes.Int64,
	trace.ColEndNs:      arrow.PrimitiveTypes.Int64,
	trace.ColPeer:       arrow.PrimitiveTypes.Int32,
	trace.ColBytes:      arrow.PrimitiveTypes.Int64,
	trace.ColShape:      arrow.BinaryTypes.String,
	trace.ColDtype:      arrow.BinaryTypes.String,
	trace.ColTokens:     arrow.PrimitiveTypes.Int64,
	trace.ColFlops:      arrow.PrimitiveTypes.Float64,
	trace.ColMemBytes:   arrow.PrimitiveTypes.Int64,
	trace.ColGroup:      arrow.BinaryTypes.String,
	trace.ColGroupSeq:   arrow.PrimitiveTypes.Int64,
}

// Schema returns the Arrow schema v1 for a trace with metadata meta: the
// columns of trace.Columns in that order, start_ns and end_ns nullable (null
// is trace.NoTime), every other column non-nullable, kind a dictionary of
// utf8 with int16 indices, and meta.Map() as the schema metadata
// (keys sorted, so equal metadata gives byte-identical schemas).
func Schema(meta trace.Meta) *arrow.Schema {
	fields := make([]arrow.Field, trace.NumColumns)
	for i := range fields {
		fields[i] = arrow.Field{
			Name:     trace.Columns[i],
			Type:     columnTypes[i],
			Nullable: i == trace.ColStartNs || i == trace.ColEndNs,
		}
	}
	kv := meta.Map()
	keys := trace.Keys(kv)
	vals := make([]string, len(keys))
	for i, k := range keys {
		vals[i] = kv[k]
	}
	md := arrow.NewMetadata(keys, vals)
	return arrow.NewSchema(fields, &md)
}

// The v1 columns are trace.Columns, one for one: this fails to compile if
// the model gains a column the schema does not name.
var _ [trace.NumColumns]string = trace.Columns
