package arrowv1

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/ppprof/ppprof/trace"
)

// ColumnError says a column is missing or has a type this reader cannot
// decode. Got is "" for a missing column.
type ColumnError struct {
	Column string // the column's name
	Want   string // the type(s) accepted
	Got    string // the type found, "" when the column is missing
}

// Error says `column "step": type int32, want int64`, or
// `column "stage": missing, want int32`.
func (e *ColumnError) Error() string {
	if e.Got == "" {
		return fmt.Sprintf("column %q: missing, want %s", e.Column, e.Want)
	}
	return fmt.Sprintf("column %q: type %s, want %s", e.Column, e.Got, e.Want)
}

// requiredColumns must be present; the others default when absent (see
// binding.decode).
var requiredColumns = [trace.NumColumns]bool{
	trace.ColRank: true, trace.ColStage: true, trace.ColStep: true, trace.ColKind: true, trace.ColSeq: true,
	trace.ColStartNs: true, trace.ColEndNs: true,
}

// binding maps the v1 columns to field positions of one schema.
type binding struct {
	field [trace.NumColumns]int // field index, -1 when the column is absent
}

// bind finds the v1 columns of s by name and checks their types. Numeric
// columns must have exactly the v1 type. The string columns (kind, shape,
// dtype, group) may be utf8, large_utf8, utf8_view, or a dictionary with any
// integer index type over utf8 or large_utf8. Columns ppprof does not know
// are ignored.
func bind(s *arrow.Schema) (*binding, error) {
	b := &binding{}
	for c := range b.field {
		name := trace.Columns[c]
		b.field[c] = -1
		idx := s.FieldIndices(name)
		switch {
		case len(idx) > 1:
			return nil, fmt.Errorf("column %q: appears %d times", name, len(idx))
		case len(idx) == 0:
			if requiredColumns[c] {
				return nil, &ColumnError{Column: name, Want: wantType(c)}
			}
			continue
		}
		dt := s.Field(idx[0]).Type
		ok := arrow.TypeEqual(dt, columnTypes[c])
		if c == trace.ColKind || c == trace.ColShape || c == trace.ColDtype || c == trace.ColGroup {
			ok = isStringType(dt)
		}
		if !ok {
			return nil, &ColumnError{Column: name, Want: wantType(c), Got: dt.String()}
		}
		b.field[c] = idx[0]
	}
	return b, nil
}

// wantType describes the types accepted for column c.
func wantType(c int) string {
	switch c {
	case trace.ColKind:
		return "dictionary<values=utf8, indices=int16> or utf8"
	case trace.ColShape, trace.ColDtype, trace.ColGroup:
		return "utf8"
	}
	return columnTypes[c].String()
}

// isStringType reports whether dt is a string type the decoder reads.
func isStringType(dt arrow.DataType) bool {
	switch dt.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return true
	case arrow.DICTIONARY:
		d := dt.(*arrow.DictionaryType)
		v := d.ValueType.ID()
		return arrow.IsInteger(d.IndexType.ID()) && (v == arrow.STRING || v == arrow.LARGE_STRING)
	}
	return false
}
