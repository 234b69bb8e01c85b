package report

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"slices"
	"strconv"

	"github.com/ppprof/ppprof/trace"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Box geometry inside a row, as fractions of the row height.
const (
	tlBoxFrac  = 0.72 // compute and other ops
	tlWaitFrac = 0.16 // receives: thin
	// tlPhaseBand is the height, in rows, of the band above the rows that
	// marks warmup, steady and cooldown.
	tlPhaseBand = 0.9
	// Below tlMinBoxPx median box width (or above tlMaxBoxes boxes) the
	// rows are drawn aggregated: per pixel column, the share of each kind.
	tlMinBoxPx = 4.0
	tlMaxBoxes = 40000
)

// timelinePlotter draws a timeline in a gonum plot. X is ms from the
// timeline's start; row r spans Y in [n-r-1, n-r] for n rows, so row 0 is
// on top; the phase band sits above Y = n.
type timelinePlotter struct {
	tl *timeline
	// layout is set by Plot: where the data area fell, for tests that
	// look for a box's pixels.
	layout *tlLayout
}

// tlLayout maps timeline coordinates to pixels of the drawn image.
type tlLayout struct {
	minX, maxX, minY, maxY vg.Length // the data area, canvas units
	x0, x1                 float64   // data X range, ms
	y0, y1                 float64   // data Y range
	heightPx               int       // the whole image's height
	aggregated             bool
}

// pixel returns the image pixel of time ns on row r's vertical centre.
func (l *tlLayout) pixel(tl *timeline, ns int64, r int) (x, y int) {
	n := len(tl.Rows)
	xm := float64(ns-tl.StartNs) / 1e6
	ym := float64(n-r) - 0.5
	xc := l.minX + vg.Length((xm-l.x0)/(l.x1-l.x0))*(l.maxX-l.minX)
	yc := l.minY + vg.Length((ym-l.y0)/(l.y1-l.y0))*(l.maxY-l.minY)
	return int(math.Floor(float64(xc) * pxDPI / 72)), l.heightPx - 1 - int(math.Floor(float64(yc)*pxDPI/72))
}

func (tp *timelinePlotter) DataRange() (xmin, xmax, ymin, ymax float64) {
	return 0, float64(tp.tl.EndNs-tp.tl.StartNs) / 1e6, 0, float64(len(tp.tl.Rows)) + tlPhaseBand
}

func (tp *timelinePlotter) ms(ns int64) float64 { return float64(ns-tp.tl.StartNs) / 1e6 }

// Plot implements plot.Plotter.
func (tp *timelinePlotter) Plot(c draw.Canvas, p *plot.Plot) {
	tl := tp.tl
	n := len(tl.Rows)
	trX, trY := p.Transforms(&c)
	rowH := trY(1) - trY(0)
	if l := tp.layout; l != nil {
		l.minX, l.maxX, l.minY, l.maxY = c.Min.X, c.Max.X, c.Min.Y, c.Max.Y
		l.x0, l.x1, l.y0, l.y1 = p.X.Min, p.X.Max, p.Y.Min, p.Y.Max
	}
	yTop := func(r int) vg.Length { return trY(float64(n - r)) }
	// Row backgrounds: the slowest stage highlighted, stages banded.
	for r, row := range tl.Rows {
		var bg color.Color
		switch {
		case row.Slowest:
			bg = colSlowBg
		case row.Stage%2 == 1:
			bg = color.NRGBA{R: 0xF4, G: 0xF4, B: 0xF4, A: 0xFF}
		}
		if bg != nil {
			c.FillPolygon(bg, rect(c.Min.X, yTop(r)-rowH, c.Max.X, yTop(r)))
		}
	}
	aggregated := len(tl.Boxes) > tlMaxBoxes || medianBoxPx(tl, trX) < tlMinBoxPx
	if tp.layout != nil {
		tp.layout.aggregated = aggregated
	}
	if aggregated {
		tp.plotAggregated(c, trX, yTop, rowH)
	} else {
		tp.plotBoxes(c, trX, yTop, rowH)
	}
	tp.plotPhases(c, trX, trY)
}

// medianBoxPx is the median width of the compute boxes, canvas pixels.
func medianBoxPx(tl *timeline, trX func(float64) vg.Length) float64 {
	var ws []float64
	for _, b := range tl.Boxes {
		if b.Kind.IsCompute() {
			ws = append(ws, float64(trX(float64(b.EndNs-tl.StartNs)/1e6)-trX(float64(b.StartNs-tl.StartNs)/1e6)))
		}
	}
	if len(ws) == 0 {
		return math.Inf(1)
	}
	slices.Sort(ws)
	return ws[len(ws)/2] * pxDPI / 72
}

// plotBoxes draws one rectangle per op, labelled with its micro-batch
// when the label fits.
func (tp *timelinePlotter) plotBoxes(c draw.Canvas, trX func(float64) vg.Length, yTop func(int) vg.Length, rowH vg.Length) {
	tl := tp.tl
	gap := px(0.5)
	for _, b := range tl.Waits {
		x0, x1 := trX(tp.ms(b.StartNs)), trX(tp.ms(b.EndNs))
		if x1-x0 < px(1) {
			x1 = x0 + px(1)
		}
		mid := yTop(b.Row) - rowH/2
		h := rowH * tlWaitFrac / 2
		col := colP2P
		if b.Pending {
			col = colPending
		}
		c.FillPolygon(col, rect(x0, mid-h, x1, mid+h))
	}
	ls := textStyle(7, false)
	if rowH >= px(16) {
		ls = textStyle(8, false)
	}
	ls.XAlign, ls.YAlign = draw.XCenter, draw.YCenter
	ls.Color = color.White
	labelH := ls.Height("0")
	for _, b := range tl.Boxes {
		x0, x1 := trX(tp.ms(b.StartNs)), trX(tp.ms(b.EndNs))
		if x1-x0 > 4*gap {
			x0, x1 = x0+gap, x1-gap
		} else if x1-x0 < px(1) {
			x1 = x0 + px(1)
		}
		mid := yTop(b.Row) - rowH/2
		h := rowH * tlBoxFrac / 2
		c.FillPolygon(kindColor(b.Kind), rect(x0, mid-h, x1, mid+h))
		if b.Pending {
			c.StrokeLines(draw.LineStyle{Color: colPending, Width: px(2)}, append(rect(x0, mid-h, x1, mid+h), vg.Point{X: x0, Y: mid - h}))
		}
		if b.MicroBatch >= 0 && 2*h >= labelH {
			lbl := strconv.Itoa(int(b.MicroBatch))
			if ls.Width(lbl)+px(3) <= x1-x0 {
				c.FillText(ls, vg.Point{X: (x0 + x1) / 2, Y: mid}, lbl)
			}
		}
	}
}

// plotAggregated draws the rows as one raster: per pixel column of each
// row, the share of the column's time each kind took, stacked from the
// bottom of the row's box band (F, B, W, other, then P2P waits). A fully
// busy column is a full band; idle is blank.
func (tp *timelinePlotter) plotAggregated(c draw.Canvas, trX func(float64) vg.Length, yTop func(int) vg.Length, rowH vg.Length) {
	tl := tp.tl
	n := len(tl.Rows)
	toPx := func(l vg.Length) float64 { return float64(l) * pxDPI / 72 }
	// The raster covers whole pixels, so it is copied, not resampled.
	x0, x1 := math.Floor(toPx(c.Min.X)), math.Ceil(toPx(c.Max.X))
	y0, y1 := math.Floor(toPx(yTop(n))), math.Ceil(toPx(yTop(0)))
	wpx, hpx := int(x1-x0), int(y1-y0)
	if wpx <= 0 || hpx <= 0 || n == 0 {
		return
	}
	const nk = 5 // F, B, W, other, wait
	cover := make([]float64, n*wpx*nk)
	add := func(b tlBox, k int) {
		a := toPx(trX(tp.ms(b.StartNs))) - x0
		e := toPx(trX(tp.ms(b.EndNs))) - x0
		a, e = max(a, 0), min(e, float64(wpx))
		for col := int(a); col < wpx && float64(col) < e; col++ {
			if f := min(e, float64(col+1)) - max(a, float64(col)); f > 0 {
				cover[(b.Row*wpx+col)*nk+k] += f
			}
		}
	}
	for _, b := range tl.Boxes {
		k := 3
		switch b.Kind {
		case trace.F:
			k = 0
		case trace.B:
			k = 1
		case trace.W:
			k = 2
		}
		add(b, k)
	}
	for _, b := range tl.Waits {
		add(b, 4)
	}
	cols := [nk]color.NRGBA{colF, colB, colW, colOther, colP2P}
	img := image.NewNRGBA(image.Rect(0, 0, wpx, hpx))
	rowPx := toPx(rowH)
	for r := 0; r < n; r++ {
		// Image rows run down from y1.
		mid := y1 - toPx(yTop(r)) + rowPx/2
		band := rowPx * tlBoxFrac
		bottom := mid + band/2
		for col := 0; col < wpx; col++ {
			y := bottom
			for k := 0; k < nk; k++ {
				f := min(cover[(r*wpx+col)*nk+k], 1)
				if f <= 0 {
					continue
				}
				top := y - f*band
				for py := int(math.Round(top)); py < int(math.Round(y)); py++ {
					if py >= 0 && py < hpx {
						img.SetNRGBA(col, py, cols[k])
					}
				}
				y = top
			}
		}
	}
	c.DrawImage(vg.Rectangle{Min: vg.Point{X: vg.Length(x0 * 72 / pxDPI), Y: vg.Length(y0 * 72 / pxDPI)},
		Max: vg.Point{X: vg.Length(x1 * 72 / pxDPI), Y: vg.Length(y1 * 72 / pxDPI)}}, img)
}

// plotPhases marks warmup, steady and cooldown in the band above the rows:
// dashed lines across the rows where the steady phase starts and ends, and
// a labelled bracket per phase.
func (tp *timelinePlotter) plotPhases(c draw.Canvas, trX, trY func(float64) vg.Length) {
	tl := tp.tl
	if tl.WarmupEndNs == 0 && tl.CooldownStartNs == 0 {
		return
	}
	n := float64(len(tl.Rows))
	dash := draw.LineStyle{Color: colMuted, Width: px(1), Dashes: []vg.Length{px(5), px(3)}}
	top, bottom := trY(n+tlPhaseBand*0.5), trY(0)
	xs := []float64{0, tp.ms(tl.WarmupEndNs), tp.ms(tl.CooldownStartNs), tp.ms(tl.EndNs)}
	for _, x := range xs[1:3] {
		c.StrokeLine2(dash, trX(x), bottom, trX(x), top)
	}
	ls := textStyle(8, false)
	ls.XAlign, ls.YAlign = draw.XCenter, draw.YCenter
	ls.Color = colMuted
	y := trY(n + tlPhaseBand*0.5)
	line := draw.LineStyle{Color: colMuted, Width: px(1)}
	for i, name := range []string{"warmup", "steady", "cooldown"} {
		x0, x1 := trX(xs[i]), trX(xs[i+1])
		if x1-x0 < px(6) {
			continue
		}
		w := ls.Width(name) + px(8)
		mid := (x0 + x1) / 2
		if x1-x0 > w+px(4) {
			c.StrokeLine2(line, x0+px(2), y, mid-w/2, y)
			c.StrokeLine2(line, mid+w/2, y, x1-px(2), y)
			c.StrokeLine2(line, x0+px(2), y-px(3), x0+px(2), y+px(3))
			c.StrokeLine2(line, x1-px(2), y-px(3), x1-px(2), y+px(3))
		}
		if x1-x0 > ls.Width(name) {
			c.FillText(ls, vg.Point{X: mid, Y: y}, name)
		}
	}
}

// newTimelinePlot returns the timeline as a plot; heightPx is the height
// of the data rows, for the tick thinning.
func newTimelinePlot(tl *timeline, rowsPx float64) (*plot.Plot, *timelinePlotter) {
	p := newPlot()
	tp := &timelinePlotter{tl: tl, layout: &tlLayout{}}
	p.Add(tp)
	p.X.Label.Text = fmt.Sprintf("time since the step's first op (ms); step %d, pipeline %d", tl.Step, tl.Pipeline)
	p.X.Min = 0
	p.Y.Min, p.Y.Max = 0, float64(len(tl.Rows))+tlPhaseBand
	n := len(tl.Rows)
	rowPx := rowsPx / math.Max(float64(n), 1)
	// Label every row when there is room, else every k-th stage.
	every := 1
	if rowPx < 11 {
		stages := 0
		for _, r := range tl.Rows {
			stages = max(stages, r.Stage+1)
		}
		perStage := float64(n) / math.Max(float64(stages), 1) * rowPx
		every = int(math.Ceil(12 / math.Max(perStage, 0.1)))
	}
	var ticks plot.ConstantTicks
	for r, row := range tl.Rows {
		if every > 1 && (row.Stage%every != 0 || row.Chunk > 0) && !row.Slowest {
			continue
		}
		if every > 1 && row.Chunk > 0 {
			continue
		}
		lbl := row.Label
		if every > 1 {
			lbl = fmt.Sprintf("stage %d", row.Stage)
		}
		if row.Slowest && (row.Chunk <= 0) {
			lbl += " (slowest)"
		}
		ticks = append(ticks, plot.Tick{Value: float64(n-r) - 0.5, Label: lbl})
	}
	p.Y.Tick.Marker = ticks
	p.Y.Tick.Length = 0
	p.Y.Padding = 0
	p.X.Padding = 0
	return p, tp
}
