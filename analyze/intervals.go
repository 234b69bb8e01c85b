package analyze

import "sort"

// interval is a half-open time range [s, e) in ns.
type interval struct{ s, e int64 }

// union sorts ivs in place and returns the merged, disjoint intervals.
func union(ivs []interval) []interval {
	if len(ivs) == 0 {
		return nil
	}
	sort.Slice(ivs, func(a, b int) bool { return ivs[a].s < ivs[b].s })
	out := []interval{ivs[0]}
	for _, iv := range ivs[1:] {
		last := &out[len(out)-1]
		if iv.s <= last.e {
			last.e = max(last.e, iv.e)
			continue
		}
		out = append(out, iv)
	}
	return out
}
