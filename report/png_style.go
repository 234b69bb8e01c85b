package report

import (
	"fmt"
	"image/color"

	"github.com/ppprof/ppprof/trace"
	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The palette of every chart (PNG, SVG and the HTML timeline): Okabe and
// Ito's colour-blind-safe colours. One meaning per colour across charts.
var (
	colF        = rgb(0x0072B2) // blue: forward
	colB        = rgb(0xD55E00) // vermillion: backward
	colW        = rgb(0x009E73) // bluish green: backward-weight
	colP2P      = rgb(0x7F7F7F) // grey: P2P transfer (a wait)
	colOther    = rgb(0xCC79A7) // reddish purple: OPT, DATA and other kinds
	colWarmup   = rgb(0x56B4E9) // sky blue: warmup idle
	colCooldown = rgb(0xE69F00) // orange: cooldown idle
	colWaitOth  = rgb(0xF0E442) // yellow: other steady idle
	colSlowBg   = color.NRGBA{R: 0xF0, G: 0xE4, B: 0x42, A: 0x40}
	colOver     = rgb(0xD55E00)
	colGrid     = color.NRGBA{R: 0xD0, G: 0xD0, B: 0xD0, A: 0xFF}
	colText     = color.Black
	colMuted    = rgb(0x555555)
	colPending  = rgb(0xCC0000)
	colLive     = rgb(0x0072B2)
)

func rgb(x uint32) color.NRGBA {
	return color.NRGBA{R: uint8(x >> 16), G: uint8(x >> 8), B: uint8(x), A: 0xFF}
}

// hexColor returns c as "#rrggbb" for CSS and SVG.
func hexColor(c color.NRGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// kindColor is the fill of an op of kind k on a timeline.
func kindColor(k trace.Kind) color.NRGBA {
	switch {
	case k == trace.F:
		return colF
	case k == trace.B:
		return colB
	case k == trace.W:
		return colW
	case k.IsP2P():
		return colP2P
	}
	return colOther
}

// Text styles. Sizes are in points of the canvas (1 px = 0.75 pt at the
// 96 dpi the PNG is drawn at).
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

func textStyle(size float64, bold bool) text.Style {
	f := sans
	if bold {
		f.Weight = xfont.WeightBold
	}
	return text.Style{Color: colText, Font: font.From(f, vg.Length(size)), XAlign: draw.XLeft, YAlign: draw.YBottom,
		Handler: plot.DefaultTextHandler}
}

// pxDPI is the resolution the PNG is drawn at: one CSS pixel per pixel.
const pxDPI = 96

// px converts pixels to canvas length.
func px(n float64) vg.Length { return vg.Length(n * 72 / pxDPI) }

// newPlot returns a plot in the house style: sans fonts, light grid.
func newPlot() *plot.Plot {
	p := plot.New()
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 9)
		a.Tick.Label.Font = font.From(sans, 8)
		a.Tick.Length = px(4)
		a.LineStyle.Color, a.Tick.LineStyle.Color = colMuted, colMuted
	}
	return p
}

// legendItem is one entry of a horizontal legend.
type legendItem struct {
	name string
	fill color.Color
	line bool // a dashed line instead of a swatch
}

// drawHeader writes a panel's title at the left of the strip c and its
// legend at the right.
func drawHeader(c draw.Canvas, title, sub string, items []legendItem) {
	ts := textStyle(11, true)
	ts.YAlign = draw.YCenter
	y := (c.Min.Y + c.Max.Y) / 2
	x := c.Min.X + px(8)
	c.FillText(ts, vg.Point{X: x, Y: y}, title)
	x += ts.Width(title) + px(10)
	if sub != "" {
		ss := textStyle(9, false)
		ss.Color = colMuted
		ss.YAlign = draw.YCenter
		c.FillText(ss, vg.Point{X: x, Y: y}, sub)
	}
	ls := textStyle(9, false)
	ls.YAlign = draw.YCenter
	sw := px(12)
	right := c.Max.X - px(8)
	// Lay out from the right so the legend ends at the strip's edge.
	var width vg.Length
	for _, it := range items {
		width += sw + px(4) + ls.Width(it.name) + px(12)
	}
	lx := right - width
	for _, it := range items {
		if it.line {
			c.StrokeLine2(draw.LineStyle{Color: it.fill, Width: px(1.5), Dashes: []vg.Length{px(4), px(3)}},
				lx, y, lx+sw, y)
		} else {
			c.FillPolygon(it.fill, rect(lx, y-sw/2, lx+sw, y+sw/2))
		}
		c.FillText(ls, vg.Point{X: lx + sw + px(4), Y: y}, it.name)
		lx += sw + px(4) + ls.Width(it.name) + px(12)
	}
}

// rect returns the corners of an axis-aligned rectangle.
func rect(x0, y0, x1, y1 vg.Length) []vg.Point {
	return []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
}
