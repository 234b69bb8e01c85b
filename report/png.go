package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/trace"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Panel names one chart of the PNG report.
type Panel string

// The panels, in the order the PNG stacks them.
const (
	PanelTimeline  Panel = "timeline"  // the pipeline timeline of one step
	PanelWaterfall Panel = "waterfall" // utilisation: 100% -> bubble -> imbalance -> compute -> MFU
	PanelStages    Panel = "stages"    // per-stage busy and idle-by-cause bars
	PanelMemory    Panel = "memory"    // live micro-batches per stage against the schedule's bound
)

// AllPanels lists every panel in drawing order.
var AllPanels = []Panel{PanelTimeline, PanelMemory, PanelWaterfall, PanelStages}

// ParsePanels reads a --panels value: comma-separated panel names, or
// "all". The result is in drawing order, without repeats.
func ParsePanels(s string) ([]Panel, error) {
	if s == "" || s == "all" {
		return AllPanels, nil
	}
	want := map[Panel]bool{}
	for _, f := range strings.Split(s, ",") {
		p := Panel(strings.TrimSpace(f))
		switch p {
		case PanelTimeline, PanelWaterfall, PanelStages, PanelMemory:
			want[p] = true
		default:
			return nil, fmt.Errorf("unknown panel %q (want timeline, waterfall, stages, memory or all)", f)
		}
	}
	var out []Panel
	for _, p := range AllPanels {
		if want[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

// PNGOptions sizes the PNG report and picks its panels.
type PNGOptions struct {
	Width  int     // pixels; 0 means 1600
	Height int     // pixels; 0 sizes the image to its panels
	Panels []Panel // nil means AllPanels
	// Step is the step the timeline shows; analyze.AllSteps (any negative
	// value) lets the report choose: the first step with a pending op,
	// else the complete step whose length is nearest the median.
	Step int64
}

// DefaultPNGWidth is the width of a PNG report when none is asked for.
const DefaultPNGWidth = 1600

// WritePNG draws the PNG report of rep (the analysis of t) to w: the
// chosen panels stacked, the waterfall and the stage bars side by side.
// The image is PNGOptions.Width pixels wide.
func WritePNG(w io.Writer, t *trace.Trace, rep *analyze.Report, opt PNGOptions) error {
	img, _, err := renderPNG(t, rep, opt)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		return fmt.Errorf("writing PNG: %w", err)
	}
	return nil
}

// pngLayout says where things fell in a rendered PNG, for tests.
type pngLayout struct {
	widthPx, heightPx int
	timeline          *timeline
	tlLayout          *tlLayout
}

// pngPanel is one panel placed in the image.
type pngPanel struct {
	title, sub string
	items      []legendItem
	plot       *plot.Plot
	heightPx   float64
	half       bool // shares its row with the next half panel
}

// Panel geometry, pixels.
const (
	headerPx    = 30
	plotFramePx = 70 // axis, tick labels and padding around a plot's data area
	halfRowPx   = 380
)

func renderPNG(t *trace.Trace, rep *analyze.Report, opt PNGOptions) (*vgimg.Canvas, *pngLayout, error) {
	width := opt.Width
	if width == 0 {
		width = DefaultPNGWidth
	}
	if width < 200 || width > 20000 || opt.Height < 0 || opt.Height > 20000 || opt.Height > 0 && opt.Height < 100 {
		return nil, nil, fmt.Errorf("PNG size %dx%d: want a width in [200, 20000] and a height of 0 (auto) or in [100, 20000]", width, opt.Height)
	}
	var panels []Panel // in drawing order
	for _, p := range AllPanels {
		if opt.Panels == nil || slices.Contains(opt.Panels, p) {
			panels = append(panels, p)
		}
	}
	if len(panels) == 0 {
		return nil, nil, fmt.Errorf("no panels to draw")
	}
	lay := &pngLayout{widthPx: width}
	var ps []*pngPanel
	for _, pn := range panels {
		switch pn {
		case PanelTimeline:
			w, err := chooseWindow(rep, opt.Step)
			if err != nil {
				return nil, nil, err
			}
			tl := buildTimeline(t, rep, w)
			n := len(tl.Rows)
			rowPx := math.Min(24, math.Max(6, 720/math.Max(float64(n), 1)))
			rowsPx := rowPx * float64(n)
			p, tp := newTimelinePlot(tl, rowsPx)
			lay.timeline, lay.tlLayout = tl, tp.layout
			ps = append(ps, &pngPanel{title: "Pipeline timeline", sub: timelineSub(rep, tl), items: timelineItems(tl),
				plot: p, heightPx: rowsPx + rowPx*tlPhaseBand + headerPx + plotFramePx})
		case PanelMemory:
			n := len(rep.Memory.Stages)
			bandPx := math.Min(36, math.Max(6, 420/math.Max(float64(n), 1)))
			p, sub := memoryChart(rep, bandPx*float64(n))
			if p == nil {
				continue
			}
			ps = append(ps, &pngPanel{title: "Live micro-batches", sub: sub,
				items: []legendItem{{name: "live", fill: colLive}, {name: "over bound", fill: colOver}, {name: "schedule bound", fill: colText, line: true}},
				plot:  p, heightPx: bandPx*float64(n) + headerPx + plotFramePx})
		case PanelWaterfall:
			p, sub := waterfall(rep)
			ps = append(ps, &pngPanel{title: "Utilisation waterfall", sub: sub, plot: p, heightPx: halfRowPx})
		case PanelStages:
			p, sub := stageBars(rep)
			items := stageItems
			if !hasComplete(rep) {
				items = nil
			}
			ps = append(ps, &pngPanel{title: "Stages", sub: sub, items: items, plot: p, heightPx: halfRowPx})
		}
	}
	if len(ps) == 0 {
		return nil, nil, fmt.Errorf("nothing to draw: the analysis has no data for the panels asked for")
	}
	// The waterfall and the stage bars share a row when both are drawn.
	for i := 0; i+1 < len(ps); i++ {
		if ps[i].title == "Utilisation waterfall" && ps[i+1].title == "Stages" {
			ps[i].half = true
		}
	}
	var total float64
	for i, p := range ps {
		if i > 0 && ps[i-1].half {
			continue
		}
		total += p.heightPx
	}
	scale := 1.0
	height := int(math.Ceil(total))
	if opt.Height > 0 {
		scale, height = float64(opt.Height)/total, opt.Height
	}
	lay.heightPx = height
	if lay.tlLayout != nil {
		lay.tlLayout.heightPx = height
	}
	img := vgimg.NewWith(vgimg.UseWH(px(float64(width)), px(float64(height))), vgimg.UseDPI(pxDPI))
	dc := draw.New(img)
	dc.FillPolygon(rgb(0xFFFFFF), rect(dc.Min.X, dc.Min.Y, dc.Max.X, dc.Max.Y))
	top := dc.Max.Y
	for i := 0; i < len(ps); i++ {
		p := ps[i]
		h := px(p.heightPx * scale)
		row := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{Min: vg.Point{X: dc.Min.X, Y: top - h}, Max: vg.Point{X: dc.Max.X, Y: top}}}
		if p.half {
			split := row.Min.X + (row.Max.X-row.Min.X)*0.42
			left, right := row, row
			left.Max.X, right.Min.X = split, split
			drawPanel(left, p)
			drawPanel(right, ps[i+1])
			i++
		} else {
			drawPanel(row, p)
		}
		top -= h
	}
	return img, lay, nil
}

// drawPanel draws a panel's header strip and its plot into c.
func drawPanel(c draw.Canvas, p *pngPanel) {
	hdr := c
	hdr.Min.Y = c.Max.Y - px(headerPx)
	drawHeader(hdr, p.title, p.sub, p.items)
	body := c
	body.Max.Y = hdr.Min.Y
	body = draw.Crop(body, px(8), -px(16), px(4), 0)
	p.plot.Draw(body)
}

// timelineSub is the timeline panel's subtitle.
func timelineSub(rep *analyze.Report, tl *timeline) string {
	j := rep.Job
	s := fmt.Sprintf("step %d, pipeline %d: %.1f ms", tl.Step, tl.Pipeline, float64(tl.EndNs-tl.StartNs)/1e6)
	if j.Schedule != "" {
		s += "; " + j.Schedule
	}
	s += fmt.Sprintf(", %d stages x %d micro-batches", j.PP, j.MicroBatches)
	if j.Virtual > 1 {
		s += fmt.Sprintf(", v=%d", j.Virtual)
	}
	if tl.Folded {
		s += "; chunks folded"
	}
	if tl.TPFolded {
		s += "; TP ranks folded"
	}
	if !tl.Complete {
		s += "; INCOMPLETE (red: never ended)"
	}
	return s
}

// timelineItems is the timeline's legend.
func timelineItems(tl *timeline) []legendItem {
	items := []legendItem{{name: "F", fill: colF}, {name: "B", fill: colB}}
	hasW, hasOther := false, false
	for _, b := range tl.Boxes {
		hasW = hasW || b.Kind == trace.W
		hasOther = hasOther || !b.Kind.IsCompute()
	}
	if hasW {
		items = append(items, legendItem{name: "W", fill: colW})
	}
	items = append(items, legendItem{name: "P2P wait", fill: colP2P})
	if hasOther {
		items = append(items, legendItem{name: "OPT/other", fill: colOther})
	}
	if tl.Slowest >= 0 {
		items = append(items, legendItem{name: "slowest stage", fill: colSlowBg})
	}
	return items
}
