package analyze

import (
	"fmt"
	"math"
)

// GapAttribution splits the gap between the measured and the theoretical
// bubble into causes, by replaying every complete window (see replay) with
// one cause removed after another and measuring the bubble of each replay
// the way the measured one is measured: 1 - sum(max busy) / sum(window)
// over the complete windows. In order:
//
//  0. the windows replayed with their measured durations;
//  1. P2P free: every transfer takes 0 ns            -> P2P      = b0 - b1
//  2. no overhead: every op that is not F, B, W or
//     P2P (DATA, LOSS, OPT...) takes 0 ns            -> Overhead = b1 - b2
//  3. no jitter: every F, B, W at the median of its
//     (stage, chunk, kind)                           -> Jitter   = b2 - b3
//  4. balanced: every F, B, W at the mean over
//     (stage, chunk) of those medians, per kind      -> Imbalance = b3 - b4
//
// Other is the rest, so that the parts add up to Gap exactly: the replay's
// departure from the measurement (measured - b0, 0 for a trace the replay
// reproduces) plus b4 - Theoretical (b4 is the schedule run with uniform
// costs and free communication, which is the theory when the trace
// follows the identified schedule and, for zb-h1, F, B and W cost the
// same). A window that cannot be replayed keeps its measured busy and
// window in every replay, so it adds nothing but to Other.
//
// The bubble is the slowest stage's idle share (DESIGN.md), so a part can
// be negative: a stage slower than the others idles less than the
// schedule's bubble (the others wait on it, a loss that shows in balance,
// not in the bubble), and the Imbalance part of a job with one slow stage
// is negative.
//
// Attribution is order-dependent: a cause removed earlier is charged its
// effect with every later cause still present (P2P latency costs more
// where jitter already stalls the pipeline, and so on). The order above
// removes what the schedule cannot hide first.
type GapAttribution struct {
	Gap           float64 // Measured - Theoretical
	P2P           float64 // transfer time
	Overhead      float64 // step overhead inside the window (non-pipeline ops)
	Jitter        float64 // jitter and stragglers: compute varying around its (stage, chunk, kind) median
	Imbalance     float64 // stages (and chunks) costing different amounts
	Other         float64 // Gap minus the parts above
	UniformBubble float64 // b4: the bubble of the trace's own programs with uniform costs, free P2P and no overhead
}

// BubbleGapThreshold is how far above the theory the measured bubble must
// be for a BUBBLE_HIGH warning; BubbleHighAbs is the bubble above which an
// unexplained bubble (no theory) is a warning and the schedule's own
// theory, when that high, is noted (info).
const (
	BubbleGapThreshold = 0.05
	BubbleHighAbs      = 0.3
)

// attributeGap fills Bubble.Gap: nil when there is no theory or no
// complete window.
func attributeGap(ix *index, rep *Report) {
	runReplayPasses(ix, gapPass(ix, rep))
}

// gapPass does the part of attributeGap that needs no replay and returns
// the rest: the replays of every level per window, then the attribution.
func gapPass(ix *index, rep *Report) replayPass {
	th := rep.Bubble.Theoretical
	if th == nil || math.IsNaN(*th) || ix.complete == 0 {
		return replayPass{}
	}
	const levels = 5
	g := newOpGroups(ix)
	// Per kind, the mean over (stage, chunk) groups of their medians.
	var kindMean [3]float64
	var kindN [3]int
	for x, n := range g.n {
		if n > 0 {
			kindMean[kindOfGroup(x)] += g.median[x]
			kindN[kindOfGroup(x)]++
		}
	}
	for k := range kindMean {
		if kindN[k] > 0 {
			kindMean[k] /= float64(kindN[k])
		}
	}

	// The durations levels 3 and 4 give a group's ops, rounded once.
	medianNs := make([]int64, len(g.n))
	meanNs := make([]int64, len(g.n))
	for x := range g.n {
		medianNs[x] = int64(math.Round(g.median[x]))
		meanNs[x] = int64(math.Round(kindMean[kindOfGroup(x)]))
	}

	type sums struct{ maxBusy, window [levels]float64 }
	type scratch struct {
		dur []int64
		grp []int32 // group of each compute op (r.comp), -1 for none
	}
	per := make([]sums, len(ix.windows))
	scs := make([]scratch, workers(len(ix.windows)))
	each := func(w, k int, r *replay, err error) {
		s := &per[k]
		if err != nil {
			w := ix.windows[k].measured
			var mb int64
			for _, b := range w.BusyNs {
				mb = max(mb, b)
			}
			for l := range levels {
				s.maxBusy[l], s.window[l] = float64(mb), float64(w.EndNs-w.StartNs)
			}
			return
		}
		t := r.t
		sc := &scs[w]
		// Level 0 is the run with the measured durations, which building
		// the replay did.
		s.maxBusy[0], s.window[0] = float64(r.baseMaxBusyNs), float64(r.baseWindowNs)
		dur := r.measuredDurIn(sc.dur)
		sc.dur = dur
		sc.grp = sc.grp[:0]
		for _, op := range r.comp {
			sc.grp = append(sc.grp, int32(g.group(t, r.rows[op])))
		}
		// A level that changes no duration that can matter replays like
		// the one before it: its run is skipped.
		for l := 1; l < levels; l++ {
			changed := false
			set := func(op int, d int64) {
				if dur[op] != d {
					dur[op], changed = d, true
				}
			}
			switch l {
			case 1:
				for op, kd := range r.kind {
					if kd == opRecv {
						set(op, 0)
					}
				}
			case 2:
				// An op after a rank's last F, B, W or P2P op delays
				// nothing that is measured: only the others are zeroed.
				for lr := range len(r.first) - 1 {
					last := r.first[lr+1] - 1
					for last >= r.first[lr] && r.kind[last] == opOther {
						last--
					}
					for op := r.first[lr]; op < last; op++ {
						if r.kind[op] == opOther {
							set(int(op), 0)
						}
					}
				}
			case 3:
				for j, op := range r.comp {
					if x := sc.grp[j]; x >= 0 {
						set(int(op), medianNs[x])
					}
				}
			case 4:
				for j, op := range r.comp {
					if x := sc.grp[j]; x >= 0 {
						set(int(op), meanNs[x])
					}
				}
			}
			if !changed {
				s.maxBusy[l], s.window[l] = s.maxBusy[l-1], s.window[l-1]
				continue
			}
			res := r.run(dur)
			s.maxBusy[l], s.window[l] = float64(res.MaxBusyNs()), float64(res.WindowNs())
		}
	}
	finish := func() {
		var b [levels]float64
		for l := range levels {
			var mb, win float64
			for k := range per {
				mb += per[k].maxBusy[l]
				win += per[k].window[l]
			}
			if win > 0 {
				b[l] = 1 - mb/win
			}
		}
		ga := &GapAttribution{Gap: rep.Bubble.Measured - *th, P2P: b[0] - b[1], Overhead: b[1] - b[2],
			Jitter: b[2] - b[3], Imbalance: b[3] - b[4], UniformBubble: b[4]}
		ga.Other = ga.Gap - (ga.P2P + ga.Overhead + ga.Jitter + ga.Imbalance)
		rep.Bubble.Gap = ga
	}
	return replayPass{each: each, finish: finish}
}

// largestPart returns the name and value of the largest part of a.
func (a *GapAttribution) largestPart() (string, float64) {
	parts := []struct {
		name string
		v    float64
	}{{"P2P", a.P2P}, {"overhead", a.Overhead}, {"jitter and stragglers", a.Jitter}, {"stage imbalance", a.Imbalance}, {"other", a.Other}}
	best := parts[0]
	for _, p := range parts[1:] {
		if p.v > best.v {
			best = p
		}
	}
	return best.name, best.v
}

// gapFindings raises BUBBLE_HIGH:
//
//   - a warning when the measured bubble exceeds the theory by more than
//     BubbleGapThreshold; ImpactMs is the window time lost to the gap per
//     step, T * gap / (1 - theory) with T the mean complete window (the
//     window the slowest stage's busy time would need at the theory's
//     bubble is busy / (1 - theory));
//   - info when it does not but the theory itself exceeds BubbleHighAbs
//     (the schedule's own bubble: more micro-batches or interleaving lower
//     it); ImpactMs 0;
//   - a warning when there is no theory and the measured bubble exceeds
//     BubbleHighAbs; ImpactMs 0 (no baseline to measure it against).
func gapFindings(ix *index, rep *Report) []Finding {
	b := rep.Bubble
	if ix.complete == 0 {
		return nil
	}
	th := b.Theoretical
	if th == nil || math.IsNaN(*th) {
		if b.Measured > BubbleHighAbs {
			return []Finding{{Severity: "warning", Code: CodeBubbleHigh,
				Message: fmt.Sprintf("bubble %.2f: the slowest stage idles %.0f%% of the step window (no schedule theory to compare with)", b.Measured, 100*b.Measured)}}
		}
		return nil
	}
	gap := b.Measured - *th
	if gap > BubbleGapThreshold {
		var sumT float64
		n := 0
		for _, w := range ix.windows {
			if replayable(w) {
				sumT += w.measured.WindowMs()
				n++
			}
		}
		impact := 0.0
		if n > 0 && *th < 1 {
			impact = sumT / float64(n) * gap / (1 - *th)
		}
		msg := fmt.Sprintf("bubble %.2f is %.2f above the schedule's %.2f", b.Measured, gap, *th)
		if b.Gap != nil {
			name, v := b.Gap.largestPart()
			msg += fmt.Sprintf("; the largest part of the gap is %s (%.2f)", name, v)
		}
		return []Finding{{Severity: "warning", Code: CodeBubbleHigh, Message: msg, ImpactMs: impact}}
	}
	if *th > BubbleHighAbs {
		return []Finding{{Severity: "info", Code: CodeBubbleHigh,
			Message: fmt.Sprintf("bubble %.2f is the schedule's own (theory %.2f with p=%d, m=%d): more micro-batches or an interleaved schedule would lower it",
				b.Measured, *th, rep.Job.PP, rep.Job.MicroBatches)}}
	}
	return nil
}
