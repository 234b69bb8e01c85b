package schedule

import "fmt"

// ZBH1 is the ZB-H1 schedule of "Zero Bubble Pipeline Parallelism" (Qi et
// al., ICLR 2024, section 2.1, Figure 3 top): 1F1B with the backward split
// into B (input gradient, on the critical path) and W (weight gradient, no
// communication), and stage r's W passes started r backwards late so they
// fill the tail bubble. SplitBackward is true.
//
// The order is that of torch.distributed.pipelining's
// ScheduleInterleavedZeroBubble (the paper's ZB1P) with one stage per rank,
// _get_1f1b_rank_ops with enable_zero_bubble:
//
//  1. stage r runs min(p-r-1, m) warm-up forwards, as 1F1B;
//  2. then for each further micro-batch one F and one B, and in cool-down
//     one B each, in 1F1B order;
//  3. after its k-th B (k from 0) it runs W of micro-batch k-r when k >= r,
//     so W lags B by r micro-batches; the r remaining W run at the end.
//
// With T_F = T_B = T_W and m >= p its bubble is (p-1)/(3m+p-1), a third of
// 1F1B's idle time. B-pending micro-batches peak at p - r, as 1F1B; counting
// a micro-batch live until its W (DESIGN.md), every stage peaks at min(p, m)
// (see LiveBound): the paper's equal-memory claim rests on W holding less
// activation memory than B.
func ZBH1(p, m int) (*Schedule, error) {
	if p < 1 {
		return nil, fmt.Errorf("schedule %s: %d stages (want >= 1)", ZBH1Name, p)
	}
	if m < 1 {
		return nil, fmt.Errorf("schedule %s: %d micro-batches (want >= 1)", ZBH1Name, m)
	}
	s := &Schedule{Name: ZBH1Name, Stages: p, MicroBatches: m, Virtual: 1, SplitBackward: true, Actions: make([][]Action, p)}
	for st := 0; st < p; st++ {
		b := &builder{p: p, v: 1}
		warm := min(p-st-1, m)
		nw := 0 // W passes issued; W runs in micro-batch order
		bwd := func(k int) {
			b.bwd(st, 0, k)
			if k >= st {
				b.wgt(0, nw)
				nw++
			}
		}
		for mb := 0; mb < warm; mb++ {
			b.fwd(st, 0, mb)
		}
		for k := 0; k < m-warm; k++ {
			b.fwd(st, 0, warm+k)
			bwd(k)
		}
		for k := m - warm; k < m; k++ {
			bwd(k)
		}
		for ; nw < m; nw++ {
			b.wgt(0, nw)
		}
		s.Actions[st] = b.acts
	}
	return s, nil
}
