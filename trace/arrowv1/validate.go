package arrowv1

import (
	"math"

	"github.com/ppprof/ppprof/trace"
)

// validate is t.Validate(), answered without it for the common trace of
// one rank that breaks no rule (quickValid): a rank file as a collector
// writes it. Anything else, and every error, is t.Validate's.
func validate(t *trace.Trace) error {
	if quickValid(t) {
		return nil
	}
	return t.Validate()
}

// quickValid reports whether t is a trace of one rank that passes every
// check of trace.Validate: when it says true, Validate would return nil
// (it may say false for a valid trace). The checks run with few branches,
// their failures or-ed together, over rows in runs of columns that the
// decoder just wrote.
func quickValid(t *trace.Trace) bool {
	n := t.Len()
	if n == 0 {
		return false
	}
	cols := []int{len(t.Pipeline), len(t.Stage), len(t.TPRank), len(t.Chunk), len(t.Step),
		len(t.MicroBatch), len(t.Kind), len(t.Seq), len(t.IssueNs), len(t.StartNs), len(t.EndNs),
		len(t.Peer), len(t.Bytes), len(t.Shape), len(t.Dtype), len(t.Tokens), len(t.Flops), len(t.MemBytes),
		len(t.Group), len(t.GroupSeq)}
	for _, c := range cols {
		if c != n {
			return false
		}
	}
	r, pipe, stage, tp := t.Rank[0], t.Pipeline[0], t.Stage[0], t.TPRank[0]
	if r < 0 || pipe < 0 || stage < 0 || tp < 0 {
		return false
	}
	// One rank, one pipeline, stage and TP rank throughout.
	var diff int32
	for i := range n {
		diff |= int32(t.Rank[i]-r) | (t.Pipeline[i] - pipe) | int32(t.Stage[i]-stage) | (t.TPRank[i] - tp)
	}
	if diff != 0 {
		return false
	}
	// Sign bits of what must not be negative: chunk, step, micro-batch + 1,
	// bytes, tokens, mem_bytes, group_seq + 1 (an overflow only fails the
	// quick check).
	var neg int64
	for i := range n {
		neg |= int64(t.Chunk[i]) | t.Step[i] | (int64(t.MicroBatch[i]) + 1) | t.Bytes[i] | t.Tokens[i] | t.MemBytes[i] | (t.GroupSeq[i] + 1)
	}
	if neg < 0 {
		return false
	}
	// Times: an issue time; an end only after a start, not before it.
	// Seq strictly increasing.
	bad := false
	seq, issue, start, end := t.Seq, t.IssueNs, t.StartNs, t.EndNs
	for i := range n {
		e := end[i]
		bad = bad || issue[i] == trace.NoTime || e != trace.NoTime && (start[i] == trace.NoTime || e < start[i])
	}
	for i := 1; i < n; i++ {
		bad = bad || seq[i] <= seq[i-1]
	}
	if bad {
		return false
	}
	for _, f := range t.Flops {
		if !(f >= 0 && f <= math.MaxFloat64) { // NaN, negative, +Inf
			return false
		}
	}
	// Kinds: valid (looked up once per kind below 64); a P2P op's peer
	// another rank, else -1 or a rank.
	var valid uint64 // bit k: kind k is valid
	for i, k := range t.Kind {
		if k >= 64 || valid>>k&1 == 0 {
			if !k.Valid() {
				return false
			}
			if k < 64 {
				valid |= 1 << k
			}
		}
		p := t.Peer[i]
		if k.IsP2P() {
			if p < 0 || p == r {
				return false
			}
		} else if p < trace.NoRank {
			return false
		}
	}
	return true
}
