package trace

import (
	"fmt"
	"sort"
)

// Ranks returns the distinct ranks of t in increasing order.
func (t *Trace) Ranks() []Rank {
	seen := make(map[Rank]struct{})
	for i, r := range t.Rank {
		if i == 0 || r != t.Rank[i-1] { // rows come in runs of one rank
			seen[r] = struct{}{}
		}
	}
	out := make([]Rank, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// SortByRankSeq reorders the rows of t by (rank, seq), stably, in place.
func (t *Trace) SortByRankSeq() {
	n := t.Len()
	sorted := true
	for i := 1; i < n; i++ {
		if t.Rank[i] < t.Rank[i-1] || t.Rank[i] == t.Rank[i-1] && t.Seq[i] < t.Seq[i-1] {
			sorted = false
			break
		}
	}
	if sorted {
		return
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		i, j := idx[a], idx[b]
		if t.Rank[i] != t.Rank[j] {
			return t.Rank[i] < t.Rank[j]
		}
		return t.Seq[i] < t.Seq[j]
	})
	*t = *t.Permute(idx)
}

// Permute returns a new trace whose row k is row idx[k] of t.
func (t *Trace) Permute(idx []int) *Trace {
	out := &Trace{Meta: t.Meta}
	out.Rank = permute(t.Rank, idx)
	out.Pipeline = permute(t.Pipeline, idx)
	out.Stage = permute(t.Stage, idx)
	out.TPRank = permute(t.TPRank, idx)
	out.Chunk = permute(t.Chunk, idx)
	out.Step = permute(t.Step, idx)
	out.MicroBatch = permute(t.MicroBatch, idx)
	out.Kind = permute(t.Kind, idx)
	out.Seq = permute(t.Seq, idx)
	out.IssueNs = permute(t.IssueNs, idx)
	out.StartNs = permute(t.StartNs, idx)
	out.EndNs = permute(t.EndNs, idx)
	out.Peer = permute(t.Peer, idx)
	out.Bytes = permute(t.Bytes, idx)
	out.Shape = permute(t.Shape, idx)
	out.Dtype = permute(t.Dtype, idx)
	out.Tokens = permute(t.Tokens, idx)
	out.Flops = permute(t.Flops, idx)
	out.MemBytes = permute(t.MemBytes, idx)
	out.Group = permute(t.Group, idx)
	out.GroupSeq = permute(t.GroupSeq, idx)
	return out
}

// DropRows removes, in place, the rows i of t with drop[i] (len(drop) is
// t.Len()), keeping the others in order, and shortens the columns: no
// second copy of the columns, which Permute makes. Slices of t's columns
// taken before see the rows moved.
func (t *Trace) DropRows(drop []bool) {
	// Column by column, on every core for a large trace (each column is
	// one pass over drop and its own memory).
	cols := [...]func(){
		func() { t.Rank = dropRows(t.Rank, drop) },
		func() { t.Pipeline = dropRows(t.Pipeline, drop) },
		func() { t.Stage = dropRows(t.Stage, drop) },
		func() { t.TPRank = dropRows(t.TPRank, drop) },
		func() { t.Chunk = dropRows(t.Chunk, drop) },
		func() { t.Step = dropRows(t.Step, drop) },
		func() { t.MicroBatch = dropRows(t.MicroBatch, drop) },
		func() { t.Kind = dropRows(t.Kind, drop) },
		func() { t.Seq = dropRows(t.Seq, drop) },
		func() { t.IssueNs = dropRows(t.IssueNs, drop) },
		func() { t.StartNs = dropRows(t.StartNs, drop) },
		func() { t.EndNs = dropRows(t.EndNs, drop) },
		func() { t.Peer = dropRows(t.Peer, drop) },
		func() { t.Bytes = dropRows(t.Bytes, drop) },
		func() { t.Shape = dropRows(t.Shape, drop) },
		func() { t.Dtype = dropRows(t.Dtype, drop) },
		func() { t.Tokens = dropRows(t.Tokens, drop) },
		func() { t.Flops = dropRows(t.Flops, drop) },
		func() { t.MemBytes = dropRows(t.MemBytes, drop) },
		func() { t.Group = dropRows(t.Group, drop) },
		func() { t.GroupSeq = dropRows(t.GroupSeq, drop) },
	}
	if len(drop) < 1<<16 {
		for _, f := range cols {
			f()
		}
		return
	}
	parallelBlocks(len(cols), func(c int) { cols[c]() })
}

// dropRows moves s[i] for !drop[i] to the front of s, in order, a run of
// kept rows at a time, and returns that prefix.
func dropRows[T any](s []T, drop []bool) []T {
	drop = drop[:len(s)]
	n := 0
	for i := 0; i < len(s); {
		if drop[i] {
			i++
			continue
		}
		j := i + 1
		for j < len(s) && !drop[j] {
			j++
		}
		if n != i {
			copy(s[n:], s[i:j])
		}
		n += j - i
		i = j
	}
	return s[:n]
}

func permute[T any](s []T, idx []int) []T {
	out := make([]T, len(idx))
	for k, i := range idx {
		out[k] = s[i]
	}
	return out
}

// MetaConflictError says two parts of a trace disagree on a job-level key.
type MetaConflictError struct {
	Key   string
	A, B  string // the two values
	APart int    // index of the part holding A
	BPart int    // index of the part holding B
}

func (e *MetaConflictError) Error() string {
	return fmt.Sprintf("metadata %s differs: %q in part %d, %q in part %d", e.Key, e.A, e.APart, e.B, e.BPart)
}

// perRankKeys are metadata keys that legitimately differ between ranks'
// files and are combined instead of compared.
var perRankKeys = map[string]bool{KeyClockOffsetNs: true, KeyDroppedEvents: true}

// Merge concatenates parts (typically one per rank file) into one trace
// sorted by (rank, seq). Job-level metadata must agree where two parts both
// set a key; dropped_events is summed; clock_offset_ns is kept only when all
// parts agree. Merge does not check that parts hold disjoint ranks: callers
// that know file names (ingest) do, to name the files.
func Merge(parts ...*Trace) (*Trace, error) {
	out := &Trace{}
	n := 0
	for _, p := range parts {
		n += p.Len()
	}
	out.Grow(n)
	merged := map[string]string{}
	from := map[string]int{}
	var dropped int64
	offsets := map[int64]bool{}
	for pi, p := range parts {
		kv := p.Meta.Map()
		dropped += p.Meta.DroppedEvents
		offsets[p.Meta.ClockOffsetNs] = true
		for _, k := range Keys(kv) {
			if perRankKeys[k] {
				continue
			}
			v := kv[k]
			if old, ok := merged[k]; ok && old != v {
				return nil, &MetaConflictError{Key: k, A: old, APart: from[k], B: v, BPart: pi}
			}
			merged[k] = v
			from[k] = pi
		}
		out.AppendRows(p, 0, p.Len())
	}
	meta, err := ParseMeta(merged)
	if err != nil && len(parts) > 0 {
		return nil, err
	}
	meta.DroppedEvents = dropped
	if len(offsets) == 1 {
		for off := range offsets {
			meta.ClockOffsetNs = off
		}
	}
	out.Meta = meta
	out.SortByRankSeq()
	return out, nil
}
