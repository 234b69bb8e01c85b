package analyze

import (
	"github.com/ppprof/ppprof/trace"
)

// computeFactors fills Utilization.Compute and MFU when every compute op of
// the complete windows carries FLOPs and the trace states the peak.
func computeFactors(ix *index, rep *Report, sumBusyNs float64) {
	peak := ix.tot.meta.PeakFlops
	if peak <= 0 || sumBusyNs <= 0 {
		return
	}
	// FLOPs are summed per window (measure), then over the complete
	// windows in window order.
	var flops float64
	for _, g := range ix.windows {
		if !g.measured.Complete {
			continue
		}
		f := g.flops
		if f.missing {
			return // unknown for some op: the factor would be a guess
		}
		// TP ranks of a stage each do their share; busy counts the stage once.
		flops += f.sum
	}
	tp := max(rep.Job.TP, 1)
	c := flops / (sumBusyNs / 1e9 * peak * float64(tp))
	m := rep.Utilization.Pipeline * c
	rep.Utilization.Compute, rep.Utilization.MFU = &c, &m
}

// stageSummaries fills, per stage, the lowest rank and the busy and idle
// means over complete windows. Later passes fill the rest: durations and the
// idle split (stats.go), live micro-batches (memory.go).
func stageSummaries(ix *index, _ *Report) []StageSummary {
	p := ix.p
	busy, win := make([]float64, p), make([]float64, p)
	for _, g := range ix.windows {
		w := g.measured
		if !w.Complete || w.EndNs <= w.StartNs {
			continue
		}
		for st, b := range w.BusyNs {
			busy[st] += float64(b)
			win[st] += float64(w.EndNs - w.StartNs)
		}
	}
	out := make([]StageSummary, p)
	for st := range out {
		out[st].Stage = trace.Stage(st)
		out[st].Rank = -1
	}
	for st, r := range ix.tot.stageRank {
		if st >= 0 && int(st) < p {
			out[st].Rank = r
		}
	}
	for st := range out {
		s := &out[st]
		if ix.complete > 0 && win[st] > 0 {
			s.BusyMs = busy[st] / float64(ix.complete) / 1e6
			s.IdleMs = (win[st] - busy[st]) / float64(ix.complete) / 1e6
			s.Bubble = 1 - busy[st]/win[st]
		}
	}
	return out
}
