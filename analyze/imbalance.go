package analyze

import (
	"fmt"
	"math"

	"github.com/ppprof/ppprof/trace"
)

// Imbalance names the slowest stage and what balancing the stages would
// buy. Means are over the analysed complete windows (step, pipeline).
type Imbalance struct {
	SlowestStage int     // stage with the highest mean busy per window (ties: the lowest); -1 when no window is complete
	BusyMs       float64 // the slowest stage's mean busy per window, ms
	MeanBusyMs   float64 // mean over stages of the mean busy per window, ms
	ExcessMs     float64 // BusyMs - MeanBusyMs
	ExcessFrac   float64 // ExcessMs / MeanBusyMs; 0 when MeanBusyMs is 0

	// SlowestStageByFB is the stage with the highest compute per
	// micro-batch, FBMs: the sum of its F, B and W durations over its
	// ranks divided by the number of (rank, micro-batch) pairs it ran (its
	// F ops over its chunks). It differs from SlowestStage when a stage
	// runs a different number of micro-batches or its busy intervals
	// overlap. -1 when no window is complete.
	SlowestStageByFB int
	FBMs             float64 // the slowest-by-FB stage's compute per micro-batch, ms
	MeanFBMs         float64 // mean over stages of the compute per micro-batch, ms

	// BalancedStepMs is the predicted step time had every stage cost the
	// mean stage: each complete window is replayed with every F, B and W
	// duration d of stage s scaled to d * mean_s'(mean(s', kind)) /
	// mean(s, kind) (means of a kind's durations over the complete windows;
	// P2P and other ops as measured), and a step's predicted time is the
	// longest replayed window of its pipelines plus the step's measured
	// overhead outside the window (its time from first start to last end,
	// OPT included, minus its longest measured window). It is the median
	// over the steps all of whose windows replay; 0 when there is none.
	BalancedStepMs float64
	// MeasuredStepMs is the median measured step time (as Report.StepMs)
	// over the same steps, the baseline of BalancedStepMs.
	MeasuredStepMs float64
}

// ImbalanceFindingFrac is the ExcessFrac above which a STAGE_IMBALANCE
// finding is raised.
const ImbalanceFindingFrac = 0.05

// analyzeImbalance fills Report.Imbalance.
func analyzeImbalance(ix *index, rep *Report) {
	runReplayPasses(ix, imbalancePass(ix, rep))
}

// imbalancePass does the part of analyzeImbalance that needs no replay and
// returns the rest: a replay per window, then the balanced step time.
func imbalancePass(ix *index, rep *Report) replayPass {
	accs, v := imbalanceSums(ix)
	ix.visit(v)
	return imbalanceReplay(ix, rep, accs)
}

// imbalanceAcc is one worker's compute durations, counts and chunks per
// stage over the replayable windows.
type imbalanceAcc struct {
	sum    [][3]sum128
	cnt    [][3]int
	chunks []int32
}

// imbalanceSums returns the workers' accumulators and the visit that fills
// them (step 1 of imbalancePass).
func imbalanceSums(ix *index) ([]imbalanceAcc, visit) {
	p := ix.p
	accs := make([]imbalanceAcc, workers(len(ix.windows)))
	for w := range accs {
		accs[w] = imbalanceAcc{sum: make([][3]sum128, p), cnt: make([][3]int, p), chunks: make([]int32, p)}
	}
	return accs, visit{want: ix.isReplayable, window: func(wk, k int) {
		w, a := ix.windows[k], &accs[wk]
		t := w.t
		for _, i := range ix.computeRows(wk, k) {
			k := computeIndex(t.Kind[i])
			st := int(t.Stage[i])
			if k < 0 || st < 0 || st >= p {
				continue
			}
			a.sum[st][k].add(opDur(t, i))
			a.cnt[st][k]++
			a.chunks[st] = max(a.chunks[st], t.Chunk[i]+1)
		}
	}}
}

// imbalanceReplay is the rest of imbalancePass, from the sums.
func imbalanceReplay(ix *index, rep *Report, accs []imbalanceAcc) replayPass {
	p := ix.p
	im := &Imbalance{SlowestStage: -1, SlowestStageByFB: -1}
	done := replayPass{finish: func() { rep.Imbalance = *im }}
	if p == 0 {
		return done
	}

	// 1. Busy per stage, compute durations per (stage, kind), F ops and
	// chunks per stage, over the replayable windows.
	busy := make([]float64, p)
	sum := make([][3]float64, p)
	cnt := make([][3]int, p)
	chunks := make([]int32, p)
	nWin := 0
	for _, w := range ix.windows {
		if !replayable(w) {
			continue
		}
		nWin++
		for st, b := range w.measured.BusyNs {
			busy[st] += float64(b)
		}
	}
	// Durations are integer ns, summed exactly (sum128): however the
	// windows fell to the workers, the total is the same.
	for st := range p {
		for k := range 3 {
			var tot sum128
			for w := range accs {
				tot.addSum(accs[w].sum[st][k])
				cnt[st][k] += accs[w].cnt[st][k]
			}
			sum[st][k] = tot.float()
		}
		for w := range accs {
			chunks[st] = max(chunks[st], accs[w].chunks[st])
		}
	}
	if nWin == 0 {
		return done
	}

	// 2. Slowest stage by busy and by compute per micro-batch.
	var meanBusy, meanFB float64
	fb := make([]float64, p)
	for st := range p {
		busy[st] /= float64(nWin) * 1e6
		meanBusy += busy[st] / float64(p)
		n := cnt[st][0]
		if n == 0 {
			n = cnt[st][1]
		}
		if n > 0 {
			fb[st] = (sum[st][0] + sum[st][1] + sum[st][2]) / (float64(n) / float64(max(chunks[st], 1))) / 1e6
		}
		meanFB += fb[st] / float64(p)
		if im.SlowestStage < 0 || busy[st] > busy[im.SlowestStage] {
			im.SlowestStage = st
		}
		if im.SlowestStageByFB < 0 || fb[st] > fb[im.SlowestStageByFB] {
			im.SlowestStageByFB = st
		}
	}
	im.BusyMs, im.MeanBusyMs = busy[im.SlowestStage], meanBusy
	im.ExcessMs = im.BusyMs - im.MeanBusyMs
	if im.MeanBusyMs > 0 {
		im.ExcessFrac = im.ExcessMs / im.MeanBusyMs
	}
	im.FBMs, im.MeanFBMs = fb[im.SlowestStageByFB], meanFB

	// 3. Scale factors: each (stage, kind) to the cross-stage mean.
	scale := make([][3]float64, p)
	for k := range 3 {
		var target float64
		n := 0
		for st := range p {
			if cnt[st][k] > 0 {
				target += sum[st][k] / float64(cnt[st][k])
				n++
			}
		}
		if n > 0 {
			target /= float64(n)
		}
		for st := range p {
			scale[st][k] = 1
			if cnt[st][k] > 0 && sum[st][k] > 0 {
				scale[st][k] = target / (sum[st][k] / float64(cnt[st][k]))
			}
		}
	}

	// 4. Replay every window balanced; predict each step.
	balanced := make([]int64, len(ix.windows))
	ok := make([]bool, len(ix.windows))
	durs := make([][]int64, workers(len(ix.windows)))
	done.each = func(w, k int, r *replay, err error) {
		if err != nil {
			return
		}
		t := r.t
		dur := r.measuredDurIn(durs[w])
		durs[w] = dur
		kinds, stages := t.Kind, t.Stage
		changed := false
		for _, op := range r.comp { // the F, B and W ops
			row := r.rows[op]
			if kk := computeIndex(kinds[row]); kk >= 0 {
				if d := int64(math.Round(float64(dur[op]) * scale[stages[row]][kk])); d != dur[op] {
					dur[op], changed = d, true
				}
			}
		}
		if !changed { // the run with the measured durations
			balanced[k], ok[k] = r.baseWindowNs, true
			return
		}
		balanced[k], ok[k] = r.run(dur).WindowNs(), true
	}
	done.finish = func() {
		var meas, pred []float64
		forSteps(ix, func(ws []int, spanNs int64) {
			var maxT, maxB int64
			for _, k := range ws {
				if !ok[k] {
					return
				}
				w := ix.windows[k].measured
				maxT = max(maxT, w.EndNs-w.StartNs)
				maxB = max(maxB, balanced[k])
			}
			meas = append(meas, float64(spanNs)/1e6)
			pred = append(pred, float64(maxB+spanNs-maxT)/1e6)
		})
		im.MeasuredStepMs, im.BalancedStepMs = median(meas), median(pred)
		rep.Imbalance = *im
	}
	return done
}

// replayPass is the part of a pass that re-times windows: each is called
// once per replayable window (possibly concurrently, see replayVisit), then
// finish once. Passes that replay share one replay per window
// (runReplayPasses).
type replayPass struct {
	each   func(w, k int, r *replay, err error) // nil: no replay needed; w names the worker (see forEach)
	finish func()
}

// runReplayPasses builds each replayable window's replay once and hands it
// to every pass, then finishes the passes in order.
func runReplayPasses(ix *index, passes ...replayPass) { ix.visit(replayVisit(ix, passes...)) }

// replayVisit is runReplayPasses as a visit.
func replayVisit(ix *index, passes ...replayPass) visit {
	var each []func(int, int, *replay, error)
	for _, p := range passes {
		if p.each != nil {
			each = append(each, p.each)
		}
	}
	v := visit{finish: func() {
		for _, p := range passes {
			if p.finish != nil {
				p.finish()
			}
		}
	}}
	if len(each) > 0 {
		// Each worker reuses one replay's memory from window to window.
		reuse := make([]*replay, workers(len(ix.windows)))
		v.want = ix.isReplayable
		v.window = func(w, k int) {
			if reuse[w] == nil {
				reuse[w] = &replay{} // reused even after a window that cannot be replayed
			}
			r, err := newReplayIn(reuse[w], ix.windows[k].t, ix.windows[k], ix.p)
			for _, f := range each {
				f(w, k, r, err)
			}
		}
	}
	return v
}

// computeIndex is 0, 1, 2 for F, B, W and -1 for other kinds.
func computeIndex(k trace.Kind) int {
	switch k {
	case trace.F:
		return 0
	case trace.B:
		return 1
	case trace.W:
		return 2
	}
	return -1
}

// forSteps calls fn for each analysed step, in order, with the indices in
// ix.windows of its (step, pipeline) windows and its measured time in ns,
// as Report.StepMs measures it: first start to last end of every row of the
// step, OPT included. Steps with no start or end are skipped.
func forSteps(ix *index, fn func(windows []int, spanNs int64)) {
	for k := 0; k < len(ix.windows); {
		j := k
		s, e := int64(math.MaxInt64), int64(math.MinInt64)
		for ; j < len(ix.windows) && ix.windows[j].step == ix.windows[k].step; j++ {
			s, e = min(s, ix.windows[j].spanS), max(e, ix.windows[j].spanE)
		}
		if e >= s {
			ws := make([]int, j-k)
			for x := range ws {
				ws[x] = k + x
			}
			fn(ws, e-s)
		}
		k = j
	}
}

// imbalanceFindings raises STAGE_IMBALANCE, a warning, when the slowest
// stage is more than ImbalanceFindingFrac busier than the mean stage.
// ImpactMs is MeasuredStepMs - BalancedStepMs (at least 0), or ExcessMs
// when no window could be replayed.
func imbalanceFindings(_ *index, rep *Report) []Finding {
	im := rep.Imbalance
	if im.SlowestStage < 0 || !(im.ExcessFrac > ImbalanceFindingFrac) {
		return nil
	}
	msg := fmt.Sprintf("stage %d is %.0f%% busier than the mean stage (%.3g vs %.3g ms per step)",
		im.SlowestStage, 100*im.ExcessFrac, im.BusyMs, im.MeanBusyMs)
	impact := im.ExcessMs
	if im.BalancedStepMs > 0 {
		impact = max(im.MeasuredStepMs-im.BalancedStepMs, 0)
		if im.BalancedStepMs < im.MeasuredStepMs {
			msg += fmt.Sprintf("; balancing would cut the step from %.3g to %.3g ms", im.MeasuredStepMs, im.BalancedStepMs)
		} else {
			msg += fmt.Sprintf("; balancing alone would not shorten the step (%.3g ms predicted vs %.3g measured): something else bounds it",
				im.BalancedStepMs, im.MeasuredStepMs)
		}
	}
	return []Finding{{Severity: "warning", Code: CodeStageImbalance, Message: msg, ImpactMs: impact}}
}
