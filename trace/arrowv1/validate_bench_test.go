package arrowv1

import (
	"fmt"
	"math"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// BenchmarkQuickValid measures the validation of a decoded rank file, in
// ns per row: a rank file of the fleet trace's size (6K rows, in the
// caches) and a large one (128K rows). "kernels" is what reads use
// (trace.OneRankValid); "loops" the same checks as one Go loop a check,
// as reads did before the twenty-sixth session: the baseline, in the same
// run.
func BenchmarkQuickValid(b *testing.B) {
	full := benchTrace()
	for _, n := range []int{6 << 10, full.Len() / 8} {
		t := full.Slice(0, n) // one rank's rows
		for _, f := range []struct {
			name string
			fn   func(*trace.Trace) bool
		}{{"kernels", (*trace.Trace).OneRankValid}, {"loops", quickValidLoops}} {
			b.Run(fmt.Sprintf("rows=%d/%s", n, f.name), func(b *testing.B) {
				for b.Loop() {
					if !f.fn(t) {
						b.Fatal("the benchmark trace does not pass the check")
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/row")
			})
		}
	}
}

// quickValidLoops reports whether t is a trace of one rank that passes every
// check of trace.Validate: when it says true, Validate would return nil
// (it may say false for a valid trace). The checks run with few branches,
// their failures or-ed together, over rows in runs of columns that the
// decoder just wrote.
func quickValidLoops(t *trace.Trace) bool {
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
	// Every column resliced to n rows: the loops below index them without
	// bounds checks.
	ranks, pipes, stages, tps := t.Rank[:n], t.Pipeline[:n], t.Stage[:n], t.TPRank[:n]
	chunks, steps, mbs, kinds, peers := t.Chunk[:n], t.Step[:n], t.MicroBatch[:n], t.Kind[:n], t.Peer[:n]
	seq, issue, start, end := t.Seq[:n], t.IssueNs[:n], t.StartNs[:n], t.EndNs[:n]
	nbytes, tokens, mem, gseq, flops := t.Bytes[:n], t.Tokens[:n], t.MemBytes[:n], t.GroupSeq[:n], t.Flops[:n]
	// One rank, one pipeline, stage and TP rank throughout.
	var diff int32
	for i := range n {
		diff |= int32(ranks[i]-r) | (pipes[i] - pipe) | int32(stages[i]-stage) | (tps[i] - tp)
	}
	if diff != 0 {
		return false
	}
	// Sign bits of what must not be negative: chunk, step, micro-batch + 1,
	// bytes, tokens, mem_bytes, group_seq + 1 (an overflow only fails the
	// quick check).
	var neg int64
	for i := range n {
		neg |= int64(chunks[i]) | steps[i] | (int64(mbs[i]) + 1) | nbytes[i] | tokens[i] | mem[i] | (gseq[i] + 1)
	}
	if neg < 0 {
		return false
	}
	// Times: an issue time; an end only after a start, not before it.
	// Seq strictly increasing. Each failure sets a bit, no branches.
	var bad uint8
	for i := range n {
		e, s := end[i], start[i]
		bad |= b2u(issue[i] == trace.NoTime) | b2u(e != trace.NoTime)&(b2u(s == trace.NoTime)|b2u(e < s))
	}
	prev := seq[0]
	for _, q := range seq[1:] {
		bad |= b2u(q <= prev)
		prev = q
	}
	// FLOPs finite and not negative: NaN, negatives and +Inf fail.
	for _, f := range flops {
		bad |= b2u(!(f >= 0 && f <= math.MaxFloat64))
	}
	if bad != 0 {
		return false
	}
	// Kinds: valid (looked up once per kind below 64); a P2P op's peer
	// another rank, else -1 or a rank.
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
		p2p := b2u(k.IsP2P())
		p := peers[i]
		bad |= p2p&(b2u(p < 0)|b2u(p == r)) | (p2p^1)&b2u(p < trace.NoRank)
	}
	return bad == 0
}
