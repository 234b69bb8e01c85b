package schedule

import "fmt"

// Interleaved is Megatron-LM's interleaved 1F1B schedule with v model chunks
// per stage (chunk c of stage s is virtual stage c*p + s).
//
// It follows forward_backward_pipelining_with_interleaving in
// megatron/core/pipeline_parallel/schedules.py:
//
//  1. A table lists the forward order of (micro-batch, chunk) pairs: groups
//     of N consecutive micro-batches run chunk 0, then chunk 1, ..., then
//     chunk v-1 before the next group starts (get_schedule_table). The k-th
//     forward of every stage is table[k]; its k-th backward is the pair
//     table[k] with the chunk reversed (v-1-chunk).
//  2. Stage r warms up with min(2*(p-r-1) + (v-1)*N, m*v) forwards, then
//     alternates one forward and one backward, then drains the backwards
//     (get_pp_rank_microbatches; Megatron before it ran every stage
//     all-forward-then-all-backward when m == p, here only the stages the
//     cap reaches do).
//
// N is Megatron's microbatch_group_size_per_vp_stage: p when m % p == 0
// (Megatron's default, and the only case older Megatron accepts). When
// m % p != 0, Interleaved uses the smallest N in [p, m] that current
// Megatron accepts (m % N == 0, or the last, smaller group holds at least p
// micro-batches), so every order built is one Megatron-LM would run. A
// larger N means a longer warm-up and more live activations (LiveBound);
// the bubble stays (p-1)/(v*m+p-1) (see TheoreticalBubble).
//
// Interleaved returns an error for v < 1; for v > 1 with p < 2 (chunks of
// one stage would send to themselves) or m < p (Megatron refuses it too);
// and for p == 2 with m odd: with two stages the forward and the backward
// traffic share each direction's channel, and with the group sizes Megatron
// accepts for odd m > 3 the receives placed by the P2P convention of
// Schedule no longer match the sends in order (Validate finds the
// mismatch; m = 3 happens to match but is refused too, for one rule).
// With v == 1 it is exactly OneFOneB(p, m)
// for any m, named "interleaved" with Virtual 1.
func Interleaved(p, m, v int) (*Schedule, error) {
	switch {
	case p < 1:
		return nil, fmt.Errorf("schedule %s: %d stages (want >= 1)", InterleavedName, p)
	case m < 1:
		return nil, fmt.Errorf("schedule %s: %d micro-batches (want >= 1)", InterleavedName, m)
	case v < 1:
		return nil, fmt.Errorf("schedule %s: %d chunks per stage (want >= 1)", InterleavedName, v)
	case v == 1:
		s := OneFOneB(p, m)
		s.Name = InterleavedName
		return s, nil
	case p < 2:
		return nil, fmt.Errorf("schedule %s: %d chunks per stage need >= 2 stages, got %d", InterleavedName, v, p)
	case m < p:
		return nil, fmt.Errorf("schedule %s: %d micro-batches for %d stages: interleaving needs micro-batches >= stages (as Megatron-LM)", InterleavedName, m, p)
	case p == 2 && m%2 != 0:
		return nil, fmt.Errorf("schedule %s: %d micro-batches for 2 stages: needs an even number (m %% p == 0), or else sends and receives between the two stages match out of order", InterleavedName, m)
	}
	n := interleavedGroup(p, m)
	table := interleavedTable(m, v, n)
	total := m * v
	s := &Schedule{Name: InterleavedName, Stages: p, MicroBatches: m, Virtual: v, Actions: make([][]Action, p)}
	for st := 0; st < p; st++ {
		b := &builder{p: p, v: v}
		warm := interleavedWarmup(p, m, v, n, st)
		for k := 0; k < warm; k++ {
			b.fwd(st, table[k].chunk, table[k].mb)
		}
		for k := 0; k < total-warm; k++ {
			f, g := table[warm+k], table[k]
			b.fwd(st, f.chunk, f.mb)
			b.bwd(st, v-1-g.chunk, g.mb)
		}
		for k := total - warm; k < total; k++ {
			g := table[k]
			b.bwd(st, v-1-g.chunk, g.mb)
		}
		s.Actions[st] = b.acts
	}
	return s, nil
}

// mbChunk is one entry of the interleaved forward order.
type mbChunk struct{ mb, chunk int }

// interleavedGroup is Megatron's microbatch_group_size_per_vp_stage N for p
// stages and m >= p micro-batches: the smallest N >= p such that m % N == 0
// or m % N >= p. N = m always qualifies.
func interleavedGroup(p, m int) int {
	for n := p; n < m; n++ {
		if r := m % n; r == 0 || r >= p {
			return n
		}
	}
	return m
}

// interleavedTable is Megatron's get_schedule_table: the forward order of
// (micro-batch, chunk) pairs in groups of n micro-batches; the last group
// holds what remains.
func interleavedTable(m, v, n int) []mbChunk {
	t := make([]mbChunk, 0, m*v)
	for lo := 0; lo < m; lo += n {
		hi := min(lo+n, m)
		for c := 0; c < v; c++ {
			for mb := lo; mb < hi; mb++ {
				t = append(t, mbChunk{mb, c})
			}
		}
	}
	return t
}

// interleavedWarmup is the number of warm-up forwards of stage st.
func interleavedWarmup(p, m, v, n, st int) int {
	return min(2*(p-st-1)+(v-1)*n, m*v)
}
