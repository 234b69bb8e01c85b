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

// Column positions in the v1 schema, in trace.Columns order.
const (
	colRank = iota
	colPipeline
	colStage
	colTPRank
	colChunk
	colStep
	colMicroBatch
	colKind
	colSeq
	colIssueNs
	colStartNs
	colEndNs
	colPeer
	colBytes
	colShape
	colDtype
	colTokens
	colFlops
	colMemBytes
	colGroup
	colGroupSeq
	numColumns
)

// columnTypes are the Arrow types of the v1 columns as written, indexed by
// column position.
var columnTypes = [numColumns]arrow.DataType{
	colRank:       arrow.PrimitiveTypes.Int32,
	colPipeline:   arrow.PrimitiveTypes.Int32,
	colStage:      arrow.PrimitiveTypes.Int32,
	colTPRank:     arrow.PrimitiveTypes.Int32,
	colChunk:      arrow.PrimitiveTypes.Int32,
	colStep:       arrow.PrimitiveTypes.Int64,
	colMicroBatch: arrow.PrimitiveTypes.Int32,
	colKind:       kindType,
	colSeq:        arrow.PrimitiveTypes.Int64,
	colIssueNs:    arrow.PrimitiveTypes.Int64,
	colStartNs:    arrow.PrimitiveTypes.Int64,
	colEndNs:      arrow.PrimitiveTypes.Int64,
	colPeer:       arrow.PrimitiveTypes.Int32,
	colBytes:      arrow.PrimitiveTypes.Int64,
	colShape:      arrow.BinaryTypes.String,
	colDtype:      arrow.BinaryTypes.String,
	colTokens:     arrow.PrimitiveTypes.Int64,
	colFlops:      arrow.PrimitiveTypes.Float64,
	colMemBytes:   arrow.PrimitiveTypes.Int64,
	colGroup:      arrow.BinaryTypes.String,
	colGroupSeq:   arrow.PrimitiveTypes.Int64,
}

// Schema returns the Arrow schema v1 for a trace with metadata meta: the
// columns of trace.Columns in that order, start_ns and end_ns nullable (null
// is trace.NoTime), every other column non-nullable, kind a dictionary of
// utf8 with int16 indices, and meta.Map() as the schema metadata
// (keys sorted, so equal metadata gives byte-identical schemas).
func Schema(meta trace.Meta) *arrow.Schema {
	fields := make([]arrow.Field, numColumns)
	for i := range fields {
		fields[i] = arrow.Field{
			Name:     trace.Columns[i],
			Type:     columnTypes[i],
			Nullable: i == colStartNs || i == colEndNs,
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
var _ [numColumns]string = trace.Columns
