package trace

import "math"

// OneRankValid reports, quickly, whether t holds the rows of one rank
// (one pipeline, stage and TP rank throughout) and passes every check of
// Validate: when it says true, Validate returns nil; it may say false for
// a valid trace (a negative sequence number or time, a FLOPs count of
// -0). It is the fast path of reading a rank file (arrowv1): the
// columns' ranges come from the same AVX2 kernels as packing's (spans),
// a few column-wide passes instead of a pass a check; only the times'
// order and the kinds' peers are checked row by row.
func (t *Trace) OneRankValid() bool {
	n := t.Len()
	if n == 0 {
		return false
	}
	for _, c := range t.ColumnLens() {
		if c != n {
			return false
		}
	}
	// One rank, pipeline, stage and TP rank, none negative.
	r := t.Rank[0]
	if !constant(t.Rank) || !constant(t.Pipeline) || !constant(t.Stage) || !constant(t.TPRank) {
		return false
	}
	// Least values: chunk, step, bytes, tokens, mem_bytes at least 0;
	// micro-batch and group_seq at least -1 (none); an issue time on
	// every row.
	if least(t.Chunk) < 0 || least(t.Step) < 0 || least(t.Bytes) < 0 || least(t.Tokens) < 0 ||
		least(t.MemBytes) < 0 || least(t.MicroBatch) < int64(NoMicroBatch) || least(t.GroupSeq) < NoGroupSeq ||
		least(t.IssueNs) == NoTime {
		return false
	}
	// Sequence numbers strictly increasing: every difference at least 1,
	// none wrapped (all of them at least 0, so no difference overflows).
	if n > 1 {
		if lo, _, dlo, _ := spans(t.Seq[:n], true); lo < 0 || dlo < 1 {
			return false
		}
	} else if t.Seq[0] < 0 {
		return false
	}
	// FLOPs finite and not negative: as bits, from +0 to the largest
	// finite double (a sign bit makes the int64 negative; NaN and +Inf
	// lie above).
	if lo, hi, _, _ := spans(asInt64(t.Flops[:n]), false); lo < 0 || hi > int64(math.Float64bits(math.MaxFloat64)) {
		return false
	}
	// An end only after a start, not before it.
	start, end := t.StartNs[:n], t.EndNs[:n]
	var bad uint8
	for i, e := range end {
		s := start[i]
		bad |= b2u8(e != NoTime) & (b2u8(s == NoTime) | b2u8(e < s))
	}
	// Kinds valid (looked up once per kind below 64); a P2P op's peer
	// another rank, else -1 or a rank.
	kinds, peers := t.Kind[:n], t.Peer[:n]
	var valid uint64 // bit k: kind k is valid
	for i, k := range kinds {
		if k >= 64 || valid>>k&1 == 0 {
			if !k.Valid() {
				return false
			}
			if k < 64 {
				valid |= 1 << k
			}
		}
		p2p := b2u8(k.IsP2P())
		p := peers[i]
		bad |= p2p&(b2u8(p < 0)|b2u8(p == r)) | (p2p^1)&b2u8(p < NoRank)
	}
	return bad == 0
}

// constant reports whether v (not empty) holds one value, at least 0.
func constant[T ~int32](v []T) bool {
	lo, hi, _, _ := spans(v, false)
	return lo == hi && lo >= 0
}

// least returns the least value of v (not empty).
func least[T ~int32 | ~int64](v []T) int64 {
	lo, _, _, _ := spans(v, false)
	return lo
}

// b2u8 is 1 for true, 0 for false (a flag set without a branch).
func b2u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
