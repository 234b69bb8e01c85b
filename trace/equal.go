package trace

import (
	"fmt"
	"math"
	"reflect"
)

// Diff returns "" when a and b hold the same metadata and the same rows in
// the same order (NoTime equal to NoTime, float columns compared bit for
// bit), or a description of the first difference. It is meant for codec
// round-trip tests.
func Diff(a, b *Trace) string {
	if !reflect.DeepEqual(a.Meta.Map(), b.Meta.Map()) {
		return fmt.Sprintf("metadata differs: %v vs %v", a.Meta.Map(), b.Meta.Map())
	}
	if a.Len() != b.Len() {
		return fmt.Sprintf("length %d vs %d", a.Len(), b.Len())
	}
	for i := 0; i < a.Len(); i++ {
		ea, eb := a.At(i), b.At(i)
		if math.Float64bits(ea.Flops) != math.Float64bits(eb.Flops) {
			return fmt.Sprintf("row %d: flops %v vs %v", i, ea.Flops, eb.Flops)
		}
		ea.Flops, eb.Flops = 0, 0
		if ea != eb {
			return fmt.Sprintf("row %d:\n  %+v\nvs\n  %+v", i, ea, eb)
		}
	}
	return ""
}
