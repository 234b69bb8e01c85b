package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/trace"
)

// timeline is one (step, pipeline) window of a trace laid out for drawing:
// the PNG timeline panel and the HTML's interactive timeline both draw it.
// Building it is presentation only: rows, boxes and phase markers come
// straight from the trace's columns and the analysis.
type timeline struct {
	Step     int64
	Pipeline int32
	StartNs  int64 // left edge: the window's first start (or post, for an op that never started)
	EndNs    int64 // right edge: its last end; pending ops run to the dump time
	Complete bool  // every op of the window ended
	Rows     []tlRow
	Boxes    []tlBox // compute and other ops, by row then start
	Waits    []tlBox // receives (the rank blocked on them), by row then start
	// WarmupEndNs is the latest first-compute start over stages (every
	// stage busy from here on) and CooldownStartNs the earliest
	// last-compute end; both 0 when the window is too short to have a
	// steady phase (WarmupEndNs >= CooldownStartNs).
	WarmupEndNs, CooldownStartNs int64
	Slowest                      int  // the slowest stage (analysis), -1 when unknown
	Folded                       bool // chunks folded into one row per stage (too many rows)
	TPFolded                     bool // some stage has more than one rank: only its lowest is drawn
}

// tlRow is one row of a timeline: a stage, or one chunk of an interleaved
// stage.
type tlRow struct {
	Stage   int
	Chunk   int // -1 when the row holds every chunk
	Rank    trace.Rank
	Label   string
	Slowest bool
}

// tlBox is one op drawn on a timeline.
type tlBox struct {
	Row            int
	Kind           trace.Kind
	StartNs, EndNs int64
	MicroBatch     trace.MicroBatch
	Pending        bool // never ended: drawn to the dump time
	TraceRow       int  // the row of the trace the box shows
}

// slowestMinExcess is the excess busy time (over the mean stage's) above
// which the slowest stage is highlighted.
const slowestMinExcess = 0.01

// maxTimelineRows bounds the rows of a timeline; beyond it chunks fold.
const maxTimelineRows = 96

// chooseWindow picks the window a timeline shows: step (when >= 0, that
// step; an error when absent) or else the first window with a pending op
// (a hung step is what the reader needs to see), else the complete window
// whose length is nearest the median (a typical step, not a warm-up).
// Among a step's pipelines it takes the lowest.
func chooseWindow(rep *analyze.Report, step int64) (analyze.StepWindow, error) {
	if len(rep.Steps) == 0 {
		return analyze.StepWindow{}, fmt.Errorf("no step to draw")
	}
	if step >= 0 {
		for _, w := range rep.Steps {
			if w.Step == step {
				return w, nil
			}
		}
		return analyze.StepWindow{}, fmt.Errorf("step %d is not in the analysis", step)
	}
	for _, w := range rep.Steps {
		if !w.Complete {
			return w, nil
		}
	}
	return typicalWindow(rep.Steps), nil
}

// typicalWindow is the window of ws (not empty) whose length is nearest
// the median, the first of those as near.
func typicalWindow(ws []analyze.StepWindow) analyze.StepWindow {
	var ls []float64
	for _, w := range ws {
		ls = append(ls, w.WindowMs())
	}
	slices.Sort(ls)
	med := ls[(len(ls)-1)/2] // the lower median: of two steps, the typical one
	best := ws[0]
	for _, w := range ws[1:] {
		if math.Abs(w.WindowMs()-med) < math.Abs(best.WindowMs()-med) {
			best = w
		}
	}
	return best
}

// DrawnStep is the step the timeline of rep shows when no step is asked
// for (chooseWindow): the first with a pending op, else the complete step
// of median length. A report of a trace too large to read whole reads
// only that step's events for its drawings.
func DrawnStep(rep *analyze.Report) (int64, error) {
	w, err := chooseWindow(rep, analyze.AllSteps)
	return w.Step, err
}

// TypicalStep is the complete step of median length (what the timeline
// shows when no op is pending); false when no step of rep completed. A
// report of a trace too large to read whole re-times it in its what-if
// when the step drawn is a hung one.
func TypicalStep(rep *analyze.Report) (int64, bool) {
	var ws []analyze.StepWindow
	for _, w := range rep.Steps {
		if w.Complete {
			ws = append(ws, w)
		}
	}
	if len(ws) == 0 {
		return 0, false
	}
	return typicalWindow(ws).Step, true
}

// buildTimeline lays out window w of t. Each stage's lowest rank in the
// window is drawn (TP ranks run the same ops in lockstep; the analysis
// counts the union).
func buildTimeline(t *trace.Trace, rep *analyze.Report, w analyze.StepWindow) *timeline {
	tl := &timeline{Step: w.Step, Pipeline: w.Pipeline, Complete: w.Complete, Slowest: rep.Imbalance.SlowestStage}
	if len(rep.Stages) < 2 || rep.Imbalance.ExcessFrac < slowestMinExcess {
		tl.Slowest = -1 // all stages alike: no stage to single out
	}
	var rows []int
	lowest := map[trace.Stage]trace.Rank{}
	ranks := map[trace.Stage]map[trace.Rank]bool{}
	maxStage, maxChunk := -1, 0
	var dump int64 = math.MinInt64
	for i := 0; i < t.Len(); i++ {
		for _, x := range [...]int64{t.IssueNs[i], t.StartNs[i], t.EndNs[i]} {
			if x != trace.NoTime {
				dump = max(dump, x)
			}
		}
		if t.Step[i] != w.Step || t.Pipeline[i] != w.Pipeline || t.Stage[i] < 0 {
			continue
		}
		rows = append(rows, i)
		st := t.Stage[i]
		if r, ok := lowest[st]; !ok || t.Rank[i] < r {
			lowest[st] = t.Rank[i]
		}
		if ranks[st] == nil {
			ranks[st] = map[trace.Rank]bool{}
		}
		ranks[st][t.Rank[i]] = true
		maxStage = max(maxStage, int(st))
		maxChunk = max(maxChunk, int(t.Chunk[i]))
	}
	for _, rs := range ranks {
		if len(rs) > 1 {
			tl.TPFolded = true
		}
	}
	chunks := maxChunk + 1
	if (maxStage+1)*chunks > maxTimelineRows {
		chunks, tl.Folded = 1, maxChunk > 0
	}
	rowOf := func(st trace.Stage, chunk int32) int {
		if chunks == 1 {
			return int(st)
		}
		return int(st)*chunks + int(min(max(chunk, 0), int32(chunks-1)))
	}
	for st := 0; st <= maxStage; st++ {
		r, ok := lowest[trace.Stage(st)]
		if !ok {
			r = trace.NoRank
		}
		for c := 0; c < chunks; c++ {
			row := tlRow{Stage: st, Chunk: c, Rank: r, Slowest: st == tl.Slowest}
			row.Label = fmt.Sprintf("stage %d", st)
			if chunks > 1 {
				row.Label = fmt.Sprintf("stage %d c%d", st, c)
			} else {
				row.Chunk = -1
			}
			tl.Rows = append(tl.Rows, row)
		}
	}
	tl.StartNs, tl.EndNs = math.MaxInt64, math.MinInt64
	firstBusy := map[trace.Stage]int64{}
	lastBusy := map[trace.Stage]int64{}
	for _, i := range rows {
		st := t.Stage[i]
		if t.Rank[i] != lowest[st] {
			continue
		}
		s, e := t.StartNs[i], t.EndNs[i]
		if s == trace.NoTime {
			s = t.IssueNs[i]
		}
		if s == trace.NoTime {
			continue
		}
		b := tlBox{Row: rowOf(st, t.Chunk[i]), Kind: t.Kind[i], StartNs: s, EndNs: e, MicroBatch: t.MicroBatch[i], TraceRow: i}
		if e == trace.NoTime {
			b.EndNs, b.Pending = max(dump, s), true
		}
		tl.StartNs = min(tl.StartNs, b.StartNs)
		tl.EndNs = max(tl.EndNs, b.EndNs)
		switch k := t.Kind[i]; {
		case k.IsSend():
			// Sends never block their rank: the receive shows the wait.
		case k.IsRecv():
			tl.Waits = append(tl.Waits, b)
		default:
			tl.Boxes = append(tl.Boxes, b)
			if k.IsCompute() && !b.Pending {
				if f, ok := firstBusy[st]; !ok || s < f {
					firstBusy[st] = s
				}
				lastBusy[st] = max(lastBusy[st], b.EndNs)
			}
		}
	}
	if tl.StartNs > tl.EndNs {
		tl.StartNs, tl.EndNs = w.StartNs, w.EndNs
	}
	if len(firstBusy) == maxStage+1 && maxStage >= 0 {
		warm, cool := int64(math.MinInt64), int64(math.MaxInt64)
		for st, f := range firstBusy {
			warm = max(warm, f)
			cool = min(cool, lastBusy[st])
		}
		if warm < cool {
			tl.WarmupEndNs, tl.CooldownStartNs = warm, cool
		}
	}
	byRowStart := func(a, b tlBox) int {
		return cmp.Or(cmp.Compare(a.Row, b.Row), cmp.Compare(a.StartNs, b.StartNs), cmp.Compare(a.TraceRow, b.TraceRow))
	}
	slices.SortFunc(tl.Boxes, byRowStart)
	slices.SortFunc(tl.Waits, byRowStart)
	return tl
}
