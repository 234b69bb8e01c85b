// Package analyze turns a trace into numbers: step windows, per-stage busy
// and idle time, and the utilisation factors of DESIGN.md.
package analyze

import (
	"fmt"
	"math"
	"sort"

	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/trace"
)

// SchemaID is the value of the "schema" key of the JSON analysis.
const SchemaID = "ppprof.analysis/v1"

// Options selects what to analyse.
type Options struct {
	// Step is the one step to analyse; AllSteps (the default when Step < 0)
	// analyses every step.
	Step int64
}

// AllSteps is the Options.Step value that selects every step.
const AllSteps int64 = -1

// Report is the result of Run. Times are milliseconds, fractions in [0, 1].
type Report struct {
	Job         Job
	StepMs      float64 // median over analysed steps of the step time (first start to last end of every event of the step, OPT included)
	Utilization Utilization
	Bubble      Bubble
	Stages      []StageSummary
	Steps       []StepWindow // one per (step, pipeline), in step then pipeline order
	Findings    []Finding
}

// Job is the shape of the job as the trace describes it.
type Job struct {
	WorldSize    int
	PP           int
	TP           int
	DP           int
	Virtual      int
	MicroBatches int
	Steps        int // steps analysed
	Schedule     string
	Events       int // events in the trace
}

// Utilization holds the factors of DESIGN.md over all analysed (step,
// pipeline) windows: Pipeline = (1 - Bubble) * Balance exactly. Compute and
// MFU are nil when the trace lacks FLOPs or peak FLOP/s.
type Utilization struct {
	Pipeline float64
	Bubble   float64
	Balance  float64
	Compute  *float64
	MFU      *float64
}

// Bubble is the measured bubble beside the schedule's theory. Warmup,
// Cooldown and Steady split all stages' idle time by where it falls, as
// fractions of total stage time (p x T summed over windows), so
// Warmup + Cooldown + Steady = 1 - Utilization.Pipeline.
type Bubble struct {
	Measured    float64
	Theoretical *float64 // nil when the schedule is unknown
	Warmup      float64
	Cooldown    float64
	Steady      float64
}

// StageSummary is one stage over every analysed window.
type StageSummary struct {
	Stage                trace.Stage
	Rank                 trace.Rank // lowest rank holding the stage
	FwdMs                float64    // mean duration of one F op
	BwdMs                float64    // mean duration of one B op
	BusyMs               float64    // mean busy time per window
	IdleMs               float64    // mean idle time per window (window - busy)
	Bubble               float64    // idle / window, over all windows
	PeakLiveMicroBatches int        // most micro-batches (x chunks) whose F ended and last B/W had not, on any rank of the stage
}

// StepWindow is one step of one pipeline replica.
type StepWindow struct {
	Step      int64
	Pipeline  int32
	StartNs   int64
	EndNs     int64
	Complete  bool    // every event of the window ended
	BusyNs    []int64 // per stage: union of F/B/W over the stage's ranks
	Bubble    float64 // 1 - max(busy)/T
	Balance   float64 // mean(busy)/max(busy)
	UPipeline float64 // sum(busy)/(p T)
}

// WindowMs returns the window length in milliseconds.
func (w StepWindow) WindowMs() float64 { return float64(w.EndNs-w.StartNs) / 1e6 }

// Finding is one observation worth a human's attention.
type Finding struct {
	Severity string // "info", "warning", "error"
	Code     string // stable identifier, e.g. "incomplete_step"
	Message  string
}

// Run analyses t. It never modifies t.
func Run(t *trace.Trace, opt Options) (*Report, error) {
	if t.Len() == 0 {
		return nil, fmt.Errorf("trace has no events")
	}
	p := stageCount(t)
	rep := &Report{Job: jobOf(t, p)}

	// 1. Group rows by (step, pipeline) and find each window.
	groups := groupWindows(t, opt)
	if len(groups) == 0 {
		return nil, fmt.Errorf("no events for step %d", opt.Step)
	}
	// 2. Per window: busy per stage, idle split, factors.
	var sumBusy, sumMax, sumT, sumMean float64
	var warm, cool, steady float64
	complete := 0
	stageBusy := make([]float64, p)
	stageWin := make([]float64, p)
	for _, g := range groups {
		w, parts := measureWindow(t, g, p)
		rep.Steps = append(rep.Steps, w)
		if !w.Complete {
			rep.Findings = append(rep.Findings, Finding{"warning", "incomplete_step",
				fmt.Sprintf("step %d, pipeline %d: some events never ended (a hung or killed job); left out of the factors", w.Step, w.Pipeline)})
			continue
		}
		T := float64(w.EndNs - w.StartNs)
		if T <= 0 {
			continue
		}
		var max, sum float64
		for i, b := range w.BusyNs {
			fb := float64(b)
			sum += fb
			max = math.Max(max, fb)
			stageBusy[i] += fb
			stageWin[i] += T
		}
		sumBusy += sum
		sumMax += max
		sumMean += sum / float64(p)
		sumT += T
		complete++
		warm += parts.warmup
		cool += parts.cooldown
		steady += parts.steady
	}
	if sumT > 0 {
		u := &rep.Utilization
		u.Pipeline = sumBusy / (float64(p) * sumT)
		u.Bubble = 1 - sumMax/sumT
		if sumMax > 0 {
			u.Balance = sumMean / sumMax
		}
		rep.Bubble.Measured = u.Bubble
		total := float64(p) * sumT
		rep.Bubble.Warmup, rep.Bubble.Cooldown, rep.Bubble.Steady = warm/total, cool/total, steady/total
		computeFactors(t, rep, sumBusy)
	}
	rep.Bubble.Theoretical = theoretical(t.Meta)
	rep.StepMs = medianStepMs(t, groups)
	rep.Job.Steps = countSteps(groups)
	rep.Stages = stageSummaries(t, p, stageBusy, stageWin, complete, groups)
	return rep, nil
}

func jobOf(t *trace.Trace, p int) Job {
	m := t.Meta
	j := Job{WorldSize: m.WorldSize, PP: m.PP, TP: m.TP, DP: m.DP, Virtual: m.Virtual,
		MicroBatches: m.MicroBatches, Schedule: m.Schedule, Events: t.Len()}
	if j.WorldSize == 0 {
		j.WorldSize = len(t.Ranks())
	}
	if j.PP == 0 {
		j.PP = p
	}
	if j.Virtual == 0 {
		j.Virtual = 1
	}
	if j.MicroBatches == 0 {
		j.MicroBatches = countMicroBatches(t)
	}
	return j
}

func stageCount(t *trace.Trace) int {
	max := trace.Stage(-1)
	for _, s := range t.Stage {
		if s > max {
			max = s
		}
	}
	return int(max) + 1
}

func countMicroBatches(t *trace.Trace) int {
	seen := map[trace.MicroBatch]bool{}
	for i, mb := range t.MicroBatch {
		if mb >= 0 && t.Kind[i] == trace.F {
			seen[mb] = true
		}
	}
	return len(seen)
}

func theoretical(m trace.Meta) *float64 {
	if m.Schedule == "" || m.PP == 0 || m.MicroBatches == 0 {
		return nil
	}
	s, err := schedule.New(m.Schedule, m.PP, m.MicroBatches, max(m.Virtual, 1))
	if err != nil {
		return nil
	}
	b := s.TheoreticalBubble()
	return &b
}

// window is the rows of one (step, pipeline).
type window struct {
	step     int64
	pipeline int32
	rows     []int
}

func groupWindows(t *trace.Trace, opt Options) []*window {
	type key struct {
		step int64
		pipe int32
	}
	byKey := map[key]*window{}
	for i := 0; i < t.Len(); i++ {
		if opt.Step >= 0 && t.Step[i] != opt.Step {
			continue
		}
		k := key{t.Step[i], t.Pipeline[i]}
		g := byKey[k]
		if g == nil {
			g = &window{step: k.step, pipeline: k.pipe}
			byKey[k] = g
		}
		g.rows = append(g.rows, i)
	}
	out := make([]*window, 0, len(byKey))
	for _, g := range byKey {
		out = append(out, g)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].step != out[b].step {
			return out[a].step < out[b].step
		}
		return out[a].pipeline < out[b].pipeline
	})
	return out
}

func countSteps(groups []*window) int {
	n := 0
	for i, g := range groups {
		if i == 0 || g.step != groups[i-1].step {
			n++
		}
	}
	return n
}

// inPipeline reports whether kind k counts toward the step window: F, B, W
// and P2P. OPT, DATA and the like are step overhead, reported beside it.
func inPipeline(k trace.Kind) bool { return k.IsCompute() || k.IsP2P() }

type idleParts struct{ warmup, cooldown, steady float64 }

// measureWindow computes the window, per-stage busy time and the idle split
// of one (step, pipeline).
func measureWindow(t *trace.Trace, g *window, p int) (StepWindow, idleParts) {
	w := StepWindow{Step: g.step, Pipeline: g.pipeline, StartNs: math.MaxInt64, EndNs: math.MinInt64, Complete: true, BusyNs: make([]int64, p)}
	compute := make([][]interval, p)
	for _, i := range g.rows {
		if !inPipeline(t.Kind[i]) {
			if t.EndNs[i] == trace.NoTime {
				w.Complete = false
			}
			continue
		}
		s, e := t.StartNs[i], t.EndNs[i]
		if e == trace.NoTime {
			w.Complete = false
			continue
		}
		w.StartNs = min(w.StartNs, s)
		w.EndNs = max(w.EndNs, e)
		if t.Kind[i].IsCompute() {
			st := t.Stage[i]
			compute[st] = append(compute[st], interval{s, e})
		}
	}
	var parts idleParts
	if w.StartNs > w.EndNs {
		w.StartNs, w.EndNs, w.Complete = 0, 0, false
		return w, parts
	}
	T := float64(w.EndNs - w.StartNs)
	var max, sum float64
	for st := 0; st < p; st++ {
		u := union(compute[st])
		var busy int64
		for _, iv := range u {
			busy += iv.e - iv.s
		}
		w.BusyNs[st] = busy
		fb := float64(busy)
		sum += fb
		max = math.Max(max, fb)
		if len(u) == 0 {
			parts.steady += T
			continue
		}
		parts.warmup += float64(u[0].s - w.StartNs)
		parts.cooldown += float64(w.EndNs - u[len(u)-1].e)
		parts.steady += T - fb - float64(u[0].s-w.StartNs) - float64(w.EndNs-u[len(u)-1].e)
	}
	if T > 0 {
		w.Bubble = 1 - max/T
		w.UPipeline = sum / (float64(p) * T)
	}
	if max > 0 {
		w.Balance = sum / float64(p) / max
	}
	return w, parts
}

// medianStepMs is the median over steps of the time from the step's first
// start to its last end, every kind and pipeline included.
func medianStepMs(t *trace.Trace, groups []*window) float64 {
	type span struct{ s, e int64 }
	bySteps := map[int64]*span{}
	var order []int64
	for _, g := range groups {
		sp := bySteps[g.step]
		if sp == nil {
			sp = &span{math.MaxInt64, math.MinInt64}
			bySteps[g.step] = sp
			order = append(order, g.step)
		}
		for _, i := range g.rows {
			if t.StartNs[i] != trace.NoTime {
				sp.s = min(sp.s, t.StartNs[i])
			}
			if t.EndNs[i] != trace.NoTime {
				sp.e = max(sp.e, t.EndNs[i])
			}
		}
	}
	var ms []float64
	for _, st := range order {
		sp := bySteps[st]
		if sp.e >= sp.s {
			ms = append(ms, float64(sp.e-sp.s)/1e6)
		}
	}
	return median(ms)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
