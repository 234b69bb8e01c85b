// Package seqindex maps (group, sequence number) pairs, the identity of a
// collective operation in a trace, to small integers. A group whose
// sequence numbers are dense (their range at most four times their count,
// plus a little) is an array indexed by sequence number; any other pair
// is in a map. Collective matching looked up a map once per collective
// row: on the 8.2M rows of a 4096-rank job's Flight Recorder dumps, a
// third of the time `ppprof hang` spent matching collectives and of the
// clock alignment of the dumps.
package seqindex

import "math"

// Ranges gathers, group by group, the sequence numbers that will be
// indexed: Note each of them, then Build. Groups are small non-negative
// integers (ids the caller interns).
type Ranges struct {
	lo, hi, n []int64
}

// Note records sequence number seq of group g (g >= 0).
func (r *Ranges) Note(g int32, seq int64) {
	for len(r.lo) <= int(g) {
		r.lo, r.hi, r.n = append(r.lo, math.MaxInt64), append(r.hi, math.MinInt64), append(r.n, 0)
	}
	r.lo[g], r.hi[g], r.n[g] = min(r.lo[g], seq), max(r.hi[g], seq), r.n[g]+1
}

// Most is the most distinct pairs the noted numbers can make: room for
// what the index will number.
func (r *Ranges) Most() int64 {
	var most int64
	for g := range r.n {
		if w := uint64(r.hi[g]) - uint64(r.lo[g]); r.n[g] > 0 && w < uint64(r.n[g]) {
			most += int64(w) + 1 // the range is narrower than the count
		} else {
			most += r.n[g]
		}
	}
	return most
}

// Build makes an empty index for the noted numbers; with dense false,
// every pair goes in the map (tests compare the two).
func (r *Ranges) Build(dense bool) *Index {
	x := &Index{lo: r.lo, dense: make([][]int32, len(r.lo))}
	for g := range r.lo {
		// The range's width less one, without overflow (any int64 may be
		// noted).
		if w := uint64(r.hi[g]) - uint64(r.lo[g]); dense && r.n[g] > 0 && w < uint64(4*r.n[g]+64) {
			x.dense[g] = make([]int32, w+1)
		}
	}
	return x
}

// Index maps (group, seq) to values >= 0.
type Index struct {
	lo    []int64
	dense [][]int32 // per group: 1 + the value at seq - lo; 0 none; nil: the group is in m
	m     map[key]int32
}

type key struct {
	g   int32
	seq int64
}

// slot is the array entry of (g, seq), nil when the pair is in the map
// (a group or number not noted lands there too).
func (x *Index) slot(g int32, seq int64) *int32 {
	if g < 0 || int(g) >= len(x.dense) || x.dense[g] == nil {
		return nil
	}
	off := uint64(seq) - uint64(x.lo[g]) // seq < lo wraps past the array
	if off >= uint64(len(x.dense[g])) {
		return nil
	}
	return &x.dense[g][off]
}

// Get returns the value of (g, seq), ok false when none was put.
func (x *Index) Get(g int32, seq int64) (v int32, ok bool) {
	if p := x.slot(g, seq); p != nil {
		return *p - 1, *p > 0
	}
	v, ok = x.m[key{g, seq}]
	return v, ok
}

// Put sets the value of (g, seq) to v >= 0.
func (x *Index) Put(g int32, seq int64, v int32) {
	if p := x.slot(g, seq); p != nil {
		*p = v + 1
		return
	}
	if x.m == nil {
		x.m = map[key]int32{}
	}
	x.m[key{g, seq}] = v
}
