package analyze

import (
	"sort"

	"github.com/ppprof/ppprof/trace"
)

// computeFactors fills Utilization.Compute and MFU when every compute op of
// the complete windows carries FLOPs and the trace states the peak.
func computeFactors(t *trace.Trace, rep *Report, sumBusyNs float64) {
	peak := t.Meta.PeakFlops
	if peak <= 0 || sumBusyNs <= 0 {
		return
	}
	complete := map[[2]int64]bool{}
	for _, w := range rep.Steps {
		if w.Complete {
			complete[[2]int64{w.Step, int64(w.Pipeline)}] = true
		}
	}
	var flops float64
	for i := 0; i < t.Len(); i++ {
		if !t.Kind[i].IsCompute() || !complete[[2]int64{t.Step[i], int64(t.Pipeline[i])}] {
			continue
		}
		if t.Flops[i] == 0 {
			return // unknown for some op: the factor would be a guess
		}
		// TP ranks of a stage each do their share; busy counts the stage once.
		flops += t.Flops[i]
	}
	tp := max(rep.Job.TP, 1)
	c := flops / (sumBusyNs / 1e9 * peak * float64(tp))
	m := rep.Utilization.Pipeline * c
	rep.Utilization.Compute, rep.Utilization.MFU = &c, &m
}

// stageSummaries aggregates per stage over the analysed windows.
func stageSummaries(ix *index, _ *Report) []StageSummary {
	t, p, groups, windows := ix.t, ix.p, ix.windows, ix.complete
	busy, win := make([]float64, p), make([]float64, p)
	for _, g := range groups {
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
	var fSum, bSum = make([]float64, p), make([]float64, p)
	var fN, bN = make([]int, p), make([]int, p)
	lowest := make([]trace.Rank, p)
	for i := range lowest {
		lowest[i] = -1
	}
	for _, g := range groups {
		for _, i := range g.rows {
			st := t.Stage[i]
			if lowest[st] < 0 || t.Rank[i] < lowest[st] {
				lowest[st] = t.Rank[i]
			}
			if t.EndNs[i] == trace.NoTime || t.StartNs[i] == trace.NoTime {
				continue
			}
			d := float64(t.EndNs[i] - t.StartNs[i])
			switch t.Kind[i] {
			case trace.F:
				fSum[st] += d
				fN[st]++
			case trace.B:
				bSum[st] += d
				bN[st]++
			}
		}
	}
	live := peakLive(t, groups, p)
	for st := 0; st < p; st++ {
		s := &out[st]
		s.Stage = trace.Stage(st)
		s.Rank = lowest[st]
		if fN[st] > 0 {
			s.FwdMs = fSum[st] / float64(fN[st]) / 1e6
		}
		if bN[st] > 0 {
			s.BwdMs = bSum[st] / float64(bN[st]) / 1e6
		}
		if windows > 0 && win[st] > 0 {
			s.BusyMs = busy[st] / float64(windows) / 1e6
			s.IdleMs = (win[st] - busy[st]) / float64(windows) / 1e6
			s.Bubble = 1 - busy[st]/win[st]
		}
		s.PeakLiveMicroBatches = live[st]
	}
	return out
}

// peakLive returns, per stage, the most (micro-batch, chunk) pairs live at
// once on any one rank of the stage: F ended, last B/W not yet ended.
func peakLive(t *trace.Trace, groups []*window, p int) []int {
	out := make([]int, p)
	type key struct {
		rank  trace.Rank
		mb    trace.MicroBatch
		chunk int32
	}
	type edge struct {
		at    int64
		delta int
	}
	for _, g := range groups {
		fEnd := map[key]int64{}
		bEnd := map[key]int64{}
		for _, i := range g.rows {
			if t.EndNs[i] == trace.NoTime || t.MicroBatch[i] < 0 {
				continue
			}
			k := key{t.Rank[i], t.MicroBatch[i], t.Chunk[i]}
			switch t.Kind[i] {
			case trace.F:
				fEnd[k] = t.EndNs[i]
			case trace.B, trace.W:
				bEnd[k] = max(bEnd[k], t.EndNs[i])
			}
		}
		byRank := map[trace.Rank][]edge{}
		stageOf := map[trace.Rank]trace.Stage{}
		for _, i := range g.rows {
			stageOf[t.Rank[i]] = t.Stage[i]
		}
		for k, fe := range fEnd {
			byRank[k.rank] = append(byRank[k.rank], edge{fe, +1})
			if be, ok := bEnd[k]; ok {
				byRank[k.rank] = append(byRank[k.rank], edge{be, -1})
			}
		}
		for r, es := range byRank {
			// Frees before allocations at the same instant.
			sort.Slice(es, func(a, b int) bool {
				if es[a].at != es[b].at {
					return es[a].at < es[b].at
				}
				return es[a].delta < es[b].delta
			})
			cur := 0
			st := stageOf[r]
			for _, e := range es {
				cur += e.delta
				out[st] = max(out[st], cur)
			}
		}
	}
	return out
}
