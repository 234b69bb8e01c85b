package report

import (
	"fmt"
	"image/color"
	"math"

	"github.com/ppprof/ppprof/analyze"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The utilisation waterfall, the per-stage busy/idle bars and the live
// micro-batch ridgeline: charts of the analysis alone, drawn the same way
// into the PNG (vgimg) and the HTML (vgsvg).

// Waterfall bar colours: totals, and one per loss.
var (
	colTotal    = rgb(0x3C3C3C)
	colLossBub  = colCooldown
	colLossImb  = colWaitOth
	colLossComp = colOther
)

// bar is one bar of a bar chart: stacked segments from Base upward.
type bar struct {
	Label   string
	Base    float64
	Segs    []barSeg
	Text    string // printed above the bar; "" for none
	Outline bool   // drawn with a heavy outline (the slowest stage)
}

type barSeg struct {
	Value float64
	Fill  color.Color
}

func (b bar) top() float64 {
	t := b.Base
	for _, s := range b.Segs {
		t += s.Value
	}
	return t
}

// barsPlotter draws bars at X = 0, 1, ...; Connect joins each bar's top
// to the next bar with a dashed line (a waterfall).
type barsPlotter struct {
	Bars    []bar
	Width   float64 // of a bar, in X units
	Connect bool
	// Marks are dashed horizontal marks across one bar, with a label: the
	// schedule's theoretical bubble on the waterfall.
	Marks []barMark
}

type barMark struct {
	Bar   int
	Y     float64
	Label string
}

func (bp *barsPlotter) DataRange() (xmin, xmax, ymin, ymax float64) {
	ymax = 0
	for _, b := range bp.Bars {
		ymax = math.Max(ymax, b.top())
	}
	return -0.5, float64(len(bp.Bars)) - 0.5, 0, ymax * 1.12
}

func (bp *barsPlotter) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	ts := textStyle(8, false)
	ts.XAlign, ts.YAlign = draw.XCenter, draw.YBottom
	for i, b := range bp.Bars {
		x0, x1 := trX(float64(i)-bp.Width/2), trX(float64(i)+bp.Width/2)
		y := b.Base
		for _, s := range b.Segs {
			if s.Value <= 0 {
				continue
			}
			c.FillPolygon(s.Fill, rect(x0, trY(y), x1, trY(y+s.Value)))
			y += s.Value
		}
		if b.Outline {
			c.StrokeLines(draw.LineStyle{Color: colText, Width: px(2)},
				append(rect(x0, trY(b.Base), x1, trY(y)), vg.Point{X: x0, Y: trY(b.Base)}))
		}
		if b.Text != "" {
			c.FillText(ts, vg.Point{X: (x0 + x1) / 2, Y: trY(y) + px(3)}, b.Text)
		}
		if bp.Connect && i+1 < len(bp.Bars) {
			// A loss bar floats: the running level after it is its base.
			level := y
			if b.Base > 0 {
				level = b.Base
			}
			c.StrokeLine2(draw.LineStyle{Color: colMuted, Width: px(1), Dashes: []vg.Length{px(3), px(3)}},
				x1, trY(level), trX(float64(i+1)-bp.Width/2), trY(level))
		}
	}
	ms := textStyle(8, false)
	ms.XAlign, ms.YAlign = draw.XLeft, draw.YCenter
	ms.Color = colMuted
	for _, m := range bp.Marks {
		x0, x1 := trX(float64(m.Bar)-bp.Width/2-0.08), trX(float64(m.Bar)+bp.Width/2+0.08)
		c.StrokeLine2(draw.LineStyle{Color: colText, Width: px(1.5), Dashes: []vg.Length{px(4), px(2)}}, x0, trY(m.Y), x1, trY(m.Y))
		c.FillText(ms, vg.Point{X: x1 + px(3), Y: trY(m.Y)}, m.Label)
	}
}

// waterfall returns the utilisation waterfall: 100% -> bubble ->
// imbalance -> pipeline utilisation -> compute efficiency -> MFU, in
// percent of the ideal.
func waterfall(rep *analyze.Report) (*plot.Plot, string) {
	if !hasComplete(rep) {
		return messagePlot(noCompleteMsg), ""
	}
	u := rep.Utilization
	one := 100.0
	afterBubble := one * (1 - u.Bubble)
	pipe := one * u.Pipeline
	bars := []bar{
		{Label: "ideal", Segs: []barSeg{{one, colTotal}}, Text: "100%"},
		{Label: "bubble", Base: afterBubble, Segs: []barSeg{{one - afterBubble, colLossBub}}, Text: fmt.Sprintf("-%.1f", one-afterBubble)},
		{Label: "imbalance", Base: pipe, Segs: []barSeg{{afterBubble - pipe, colLossImb}}, Text: fmt.Sprintf("-%.1f", afterBubble-pipe)},
		{Label: "pipeline util.", Segs: []barSeg{{pipe, colTotal}}, Text: fmt.Sprintf("%.1f%%", pipe)},
	}
	sub := "percent of ideal; the bubble is the slowest stage's idle share"
	if u.Compute != nil && u.MFU != nil {
		mfu := one * *u.MFU
		bars = append(bars,
			bar{Label: "compute eff.", Base: mfu, Segs: []barSeg{{pipe - mfu, colLossComp}}, Text: fmt.Sprintf("-%.1f", pipe-mfu)},
			bar{Label: "MFU", Segs: []barSeg{{mfu, colTotal}}, Text: fmt.Sprintf("%.1f%%", mfu)})
	} else {
		sub = "compute efficiency and MFU unknown: the trace lacks FLOPs or peak_flops"
	}
	bp := &barsPlotter{Bars: bars, Width: 0.62, Connect: true}
	if th := rep.Bubble.Theoretical; th != nil && !math.IsNaN(*th) {
		bp.Marks = append(bp.Marks, barMark{Bar: 1, Y: one * (1 - *th), Label: fmt.Sprintf("theory %.1f", one**th)})
	}
	p := newPlot()
	p.Add(bp)
	names := make([]string, len(bars))
	for i, b := range bars {
		names[i] = b.Label
	}
	p.NominalX(names...)
	p.X.Tick.Label.YAlign = draw.YTop
	p.Y.Min, p.Y.Max = 0, 112
	p.Y.Label.Text = "% of ideal"
	p.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 25, Label: "25"}, {Value: 50, Label: "50"},
		{Value: 75, Label: "75"}, {Value: 100, Label: "100"}}
	return p, sub
}

// stageItems is the legend of the per-stage chart, in stacking order.
var stageItems = []legendItem{
	{name: "F", fill: colF}, {name: "B", fill: colB}, {name: "W", fill: colW},
	{name: "warmup", fill: colWarmup}, {name: "P2P wait", fill: colP2P},
	{name: "other wait", fill: colWaitOth}, {name: "cooldown", fill: colCooldown},
}

// stageBars returns per-stage busy time (split F/B/W in proportion to each
// kind's summed op time) stacked under idle time split by cause, ms per
// step. The slowest stage has a heavy outline.
func stageBars(rep *analyze.Report) (*plot.Plot, string) {
	if !hasComplete(rep) {
		return messagePlot(noCompleteMsg), ""
	}
	var bars []bar
	for _, s := range rep.Stages {
		f, b, w := s.F.MeanMs*float64(s.F.N), s.B.MeanMs*float64(s.B.N), s.W.MeanMs*float64(s.W.N)
		tot := f + b + w
		var segs []barSeg
		if tot > 0 {
			segs = []barSeg{{s.BusyMs * f / tot, colF}, {s.BusyMs * b / tot, colB}, {s.BusyMs * w / tot, colW}}
		} else {
			segs = []barSeg{{s.BusyMs, colF}}
		}
		segs = append(segs, barSeg{s.WarmupMs, colWarmup}, barSeg{s.P2PWaitMs, colP2P},
			barSeg{max(s.OtherWaitMs, 0), colWaitOth}, barSeg{s.CooldownMs, colCooldown})
		bars = append(bars, bar{Label: fmt.Sprint(s.Stage), Segs: segs,
			Outline: int(s.Stage) == rep.Imbalance.SlowestStage && len(rep.Stages) > 1 && rep.Imbalance.ExcessFrac >= slowestMinExcess})
	}
	bp := &barsPlotter{Bars: bars, Width: 0.75}
	p := newPlot()
	p.Add(bp)
	var ticks plot.ConstantTicks
	every := max(1, int(math.Ceil(float64(len(bars))/24)))
	for i := range bars {
		if i%every == 0 || bars[i].Outline {
			ticks = append(ticks, plot.Tick{Value: float64(i), Label: bars[i].Label})
		}
	}
	p.X.Tick.Marker = ticks
	p.X.Label.Text = "stage (heavy outline: the slowest)"
	p.Y.Label.Text = "ms per step"
	p.Y.Min = 0
	return p, "busy split F/B/W, idle split by cause"
}

// liveStart returns the start of the window the memory series come from.
func liveStart(rep *analyze.Report) (int64, bool) {
	step := int64(-1)
	for _, m := range rep.Memory.Stages {
		if len(m.Live) > 0 {
			step = m.LiveStep
			break
		}
	}
	if step < 0 {
		return 0, false
	}
	found := false
	var start int64
	for _, w := range rep.Steps {
		if w.Step != step {
			continue
		}
		if !found || w.Complete && w.StartNs < start {
			start, found = w.StartNs, true
		}
	}
	if !found {
		for _, m := range rep.Memory.Stages {
			if len(m.Live) > 0 {
				start = min(start, m.Live[0].AtNs)
				if !found {
					start, found = m.Live[0].AtNs, true
				}
			}
		}
	}
	return start, found
}

// memoryPlotter draws one band per stage: its live micro-batches over time
// as a filled step curve, the part above the schedule's bound in
// vermillion, the bound dashed.
type memoryPlotter struct {
	rep       *analyze.Report
	showBound bool // bands are tall enough for the dashed bound
	startNs   int64
	endMs     float64
}

const memBandFill = 0.82 // of a band's height at the band's scale

func (mp *memoryPlotter) DataRange() (xmin, xmax, ymin, ymax float64) {
	return 0, mp.endMs, 0, float64(len(mp.rep.Memory.Stages))
}

func (mp *memoryPlotter) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	ms := mp.rep.Memory.Stages
	n := len(ms)
	for i, m := range ms {
		base := float64(n - i - 1)
		if i%2 == 1 {
			c.FillPolygon(color.NRGBA{R: 0xF4, G: 0xF4, B: 0xF4, A: 0xFF}, rect(c.Min.X, trY(base), c.Max.X, trY(base+1)))
		}
		scale := float64(max(m.Bound, m.Peak, 1))
		y := func(live int) float64 { return base + memBandFill*float64(live)/scale }
		x := func(ns int64) float64 { return float64(ns-mp.startNs) / 1e6 }
		if len(m.Live) > 0 {
			pts := []vg.Point{{X: trX(x(m.Live[0].AtNs)), Y: trY(base)}}
			for k, lp := range m.Live {
				xe := mp.endMs
				if k+1 < len(m.Live) {
					xe = x(m.Live[k+1].AtNs)
				}
				pts = append(pts, vg.Point{X: trX(x(lp.AtNs)), Y: trY(y(lp.Live))}, vg.Point{X: trX(xe), Y: trY(y(lp.Live))})
				if m.Bound > 0 && lp.Live > m.Bound {
					c.FillPolygon(colOver, rect(trX(x(lp.AtNs)), trY(y(m.Bound)), trX(xe), trY(y(lp.Live))))
				}
			}
			pts = append(pts, vg.Point{X: pts[len(pts)-1].X, Y: trY(base)})
			c.FillPolygon(color.NRGBA{R: colLive.R, G: colLive.G, B: colLive.B, A: 0x90}, pts)
			c.StrokeLines(draw.LineStyle{Color: colLive, Width: px(1)}, pts[1:len(pts)-1])
		}
		if m.Bound > 0 && mp.showBound {
			c.StrokeLine2(draw.LineStyle{Color: colText, Width: px(1.2), Dashes: []vg.Length{px(4), px(3)}},
				c.Min.X, trY(y(m.Bound)), c.Max.X, trY(y(m.Bound)))
		}
	}
}

// memoryChart returns the live micro-batch ridgeline, or nil when the
// analysis has no live series.
func memoryChart(rep *analyze.Report, rowsPx float64) (*plot.Plot, string) {
	start, ok := liveStart(rep)
	if !ok {
		return nil, ""
	}
	var endNs int64 = start
	step := int64(-1)
	for _, m := range rep.Memory.Stages {
		if len(m.Live) > 0 {
			endNs = max(endNs, m.Live[len(m.Live)-1].AtNs)
			step = m.LiveStep
		}
	}
	for _, w := range rep.Steps {
		if w.Step == step && w.Complete {
			endNs = max(endNs, w.EndNs)
		}
	}
	mp := &memoryPlotter{rep: rep, startNs: start, endMs: math.Max(float64(endNs-start)/1e6, 1e-3)}
	n := len(rep.Memory.Stages)
	bandPx := rowsPx / math.Max(float64(n), 1)
	mp.showBound = bandPx >= 12
	p := newPlot()
	p.Add(mp)
	every := 1
	if bandPx < 11 {
		every = int(math.Ceil(12 / math.Max(bandPx, 0.1)))
	}
	var ticks plot.ConstantTicks
	for i, m := range rep.Memory.Stages {
		over := m.Bound > 0 && m.Peak > m.Bound
		if i%every != 0 && !over {
			continue
		}
		lbl := fmt.Sprintf("stage %d: %d", m.Stage, m.Peak)
		if m.Bound > 0 {
			lbl += fmt.Sprintf(" / %d", m.Bound)
		}
		if over {
			lbl += " OVER"
		}
		ticks = append(ticks, plot.Tick{Value: float64(n-i-1) + 0.4, Label: lbl})
	}
	p.Y.Tick.Marker = ticks
	p.Y.Tick.Length = 0
	p.Y.Min, p.Y.Max = 0, float64(n)
	p.X.Min, p.X.Max = 0, mp.endMs
	p.X.Padding, p.Y.Padding = 0, 0
	p.X.Label.Text = fmt.Sprintf("time since the step's first op (ms); step %d, one rank per stage", step)
	return p, "live micro-batches (F done, last B/W not) per stage; label: peak / schedule bound"
}

// hasComplete reports whether some analysed window completed: the factors
// and the per-stage numbers are measured over complete windows only.
func hasComplete(rep *analyze.Report) bool {
	for _, w := range rep.Steps {
		if w.Complete && w.EndNs > w.StartNs {
			return true
		}
	}
	return false
}

// noCompleteMsg is what the charts of the factors say without a complete
// window.
const noCompleteMsg = "no complete step to measure (every analysed step has an op that never ended): see the timeline"

// messagePlotter writes one line of text in the middle of a plot.
type messagePlotter struct{ text string }

func (m messagePlotter) Plot(c draw.Canvas, _ *plot.Plot) {
	ts := textStyle(10, false)
	ts.Color = colMuted
	ts.XAlign, ts.YAlign = draw.XCenter, draw.YCenter
	c.FillText(ts, c.Center(), m.text)
}

// messagePlot is a plot without axes that shows text.
func messagePlot(text string) *plot.Plot {
	p := newPlot()
	p.Add(messagePlotter{text})
	p.HideAxes()
	return p
}
