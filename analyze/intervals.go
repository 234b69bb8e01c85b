package analyze

import (
	"cmp"
	"slices"
)

// interval is a half-open time range [s, e) in ns.
type interval struct{ s, e int64 }

// union merges ivs in place into disjoint intervals sorted by start and
// returns them. It sorts only when ivs is not already in order, which rows
// of one rank in seq order usually are.
func union(ivs []interval) []interval {
	byStart := func(a, b interval) int { return cmp.Compare(a.s, b.s) }
	if !slices.IsSortedFunc(ivs, byStart) {
		slices.SortFunc(ivs, byStart)
	}
	return unionSorted(ivs)
}
