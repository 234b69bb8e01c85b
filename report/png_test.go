package report

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
	"gonum.org/v1/plot/vg/vgimg"
)

// simAnalysed simulates c and analyses every step.
func simAnalysed(t testing.TB, c sim.Config) (*trace.Trace, *analyze.Report) {
	t.Helper()
	tr, err := sim.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := analyze.Run(tr, analyze.Options{Step: analyze.AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	return tr, rep
}

// renderDecoded renders the PNG report, encodes and decodes it.
func renderDecoded(t testing.TB, tr *trace.Trace, rep *analyze.Report, opt PNGOptions) (image.Image, *pngLayout) {
	t.Helper()
	c, lay, err := renderPNG(tr, rep, opt)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("decoding the PNG: %v", err)
	}
	return img, lay
}

func sameRGB(c color.Color, want color.NRGBA) bool {
	n := color.NRGBAModel.Convert(c).(color.NRGBA)
	return n.R == want.R && n.G == want.G && n.B == want.B
}

func findBox(tl *timeline, row int, k trace.Kind, mb trace.MicroBatch) (tlBox, bool) {
	for _, b := range tl.Boxes {
		if b.Row == row && b.Kind == k && b.MicroBatch == mb {
			return b, true
		}
	}
	return tlBox{}, false
}

// TestPNGTimelinePixels decodes the PNG and checks pixels where the layout
// is known: the F box of micro-batch 0 on stage 0, the B box of
// micro-batch 0 on the last stage, and stage 3's warmup left blank.
func TestPNGTimelinePixels(t *testing.T) {
	tr, rep := simAnalysed(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, SlowStage: 3, SlowFactor: 1.3})
	img, lay := renderDecoded(t, tr, rep, PNGOptions{Step: -1})
	if b := img.Bounds(); b.Dx() != DefaultPNGWidth || b.Dy() != lay.heightPx {
		t.Fatalf("image %v, want %dx%d", b, DefaultPNGWidth, lay.heightPx)
	}
	tl := lay.timeline
	if len(tl.Rows) != 4 || lay.tlLayout.aggregated {
		t.Fatalf("%d rows, aggregated %v; want 4 rows of boxes", len(tl.Rows), lay.tlLayout.aggregated)
	}
	f0, ok := findBox(tl, 0, trace.F, 0)
	if !ok {
		t.Fatal("no F box of micro-batch 0 on stage 0")
	}
	// The box's centre holds the micro-batch label: look just above it.
	x, y := lay.tlLayout.pixel(tl, f0.StartNs+(f0.EndNs-f0.StartNs)/5, 0)
	if c := img.At(x, y); !sameRGB(c, colF) {
		t.Errorf("stage 0, micro-batch 0 F at (%d, %d): %v, want the F colour %v", x, y, c, colF)
	}
	b0, ok := findBox(tl, 3, trace.B, 0)
	if !ok {
		t.Fatal("no B box of micro-batch 0 on stage 3")
	}
	x, y = lay.tlLayout.pixel(tl, b0.StartNs+(b0.EndNs-b0.StartNs)/5, 3)
	if c := img.At(x, y); !sameRGB(c, colB) {
		t.Errorf("stage 3, micro-batch 0 B at (%d, %d): %v, want the B colour %v", x, y, c, colB)
	}
	// Stage 3 waits for micro-batch 0's forward through stages 0-2 before
	// its first op: blank (the slowest stage's highlight) there.
	x, y = lay.tlLayout.pixel(tl, tl.StartNs+(f0.EndNs-f0.StartNs)/2, 3)
	if c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA); c.R < 0xF0 || c.G < 0xF0 || c.B < 0xC0 {
		t.Errorf("stage 3 during warmup at (%d, %d): %v, want the row's light background", x, y, c)
	}
	if !tl.Rows[3].Slowest || tl.Slowest != 3 {
		t.Errorf("slowest row not stage 3: %+v", tl.Rows)
	}
	if tl.WarmupEndNs == 0 || tl.CooldownStartNs <= tl.WarmupEndNs {
		t.Errorf("phases %d, %d", tl.WarmupEndNs, tl.CooldownStartNs)
	}
}

// TestPNGInterleavedRows draws one row per (stage, chunk).
func TestPNGInterleavedRows(t *testing.T) {
	tr, rep := simAnalysed(t, sim.Config{Schedule: "interleaved", Stages: 4, MicroBatches: 8, Virtual: 2, TP: 2})
	img, lay := renderDecoded(t, tr, rep, PNGOptions{Panels: []Panel{PanelTimeline}, Step: -1})
	tl := lay.timeline
	if len(tl.Rows) != 8 || tl.Rows[1].Chunk != 1 || !tl.TPFolded {
		t.Fatalf("rows %+v, TP folded %v", tl.Rows, tl.TPFolded)
	}
	b, ok := findBox(tl, 1, trace.F, 0) // stage 0, chunk 1
	if !ok {
		t.Fatal("no F box of micro-batch 0, chunk 1 on stage 0")
	}
	x, y := lay.tlLayout.pixel(tl, b.StartNs+(b.EndNs-b.StartNs)/5, 1)
	if c := img.At(x, y); !sameRGB(c, colF) {
		t.Errorf("stage 0 chunk 1 F0 at (%d, %d): %v", x, y, c)
	}
}

// TestPNGSizeAndPanels checks --width, --height and --panels.
func TestPNGSizeAndPanels(t *testing.T) {
	tr, rep := simAnalysed(t, sim.Config{Schedule: "gpipe", Stages: 2, MicroBatches: 4})
	for _, c := range []struct {
		opt  PNGOptions
		w, h int
	}{
		{PNGOptions{Width: 800, Height: 600, Panels: []Panel{PanelWaterfall}}, 800, 600},
		{PNGOptions{Width: 1000, Height: 1200, Panels: AllPanels}, 1000, 1200},
		{PNGOptions{Width: 640, Panels: []Panel{PanelStages, PanelWaterfall}}, 640, halfRowPx},
	} {
		img, _ := renderDecoded(t, tr, rep, c.opt)
		if b := img.Bounds(); b.Dx() != c.w || b.Dy() != c.h {
			t.Errorf("%+v: %dx%d, want %dx%d", c.opt, b.Dx(), b.Dy(), c.w, c.h)
		}
	}
	for _, bad := range []string{"timeline,nope", "bubble"} {
		if _, err := ParsePanels(bad); err == nil {
			t.Errorf("ParsePanels(%q) accepted", bad)
		}
	}
	if ps, err := ParsePanels("stages, timeline"); err != nil || len(ps) != 2 || ps[0] != PanelTimeline {
		t.Errorf("ParsePanels: %v, %v", ps, err)
	}
	var buf bytes.Buffer
	if err := WritePNG(&buf, tr, rep, PNGOptions{Width: 50}); err == nil {
		t.Error("a 50 px wide PNG was drawn")
	}
	if err := WritePNG(&buf, tr, rep, PNGOptions{Step: 7}); err == nil || !strings.Contains(err.Error(), "step 7") {
		t.Errorf("absent step: %v", err)
	}
}

// TestPNGLargeAggregates: 64 stages x 256 micro-batches is drawn
// aggregated per pixel column, in the kinds' own colours (not blended into
// a smear), quickly.
func TestPNGLargeAggregates(t *testing.T) {
	if testing.Short() {
		t.Skip("large trace")
	}
	tr, rep := simAnalysed(t, sim.Config{Schedule: "1f1b", Stages: 64, MicroBatches: 256})
	img, lay := renderDecoded(t, tr, rep, PNGOptions{Step: -1})
	tl := lay.timeline
	if !lay.tlLayout.aggregated || len(tl.Rows) != 64 {
		t.Fatalf("aggregated %v, %d rows", lay.tlLayout.aggregated, len(tl.Rows))
	}
	// Across the steady phase of the middle stage, every pixel on the
	// row's band is F, B, or background, and both kinds show.
	counts := map[string]int{}
	for ns := tl.WarmupEndNs; ns < tl.CooldownStartNs; ns += (tl.CooldownStartNs - tl.WarmupEndNs) / 400 {
		x, y := lay.tlLayout.pixel(tl, ns, 32)
		for dy := -1; dy <= 1; dy++ {
			c := img.At(x, y+dy)
			switch {
			case sameRGB(c, colF):
				counts["F"]++
			case sameRGB(c, colB):
				counts["B"]++
			case sameRGB(c, rgb(0xFFFFFF)), sameRGB(c, rgb(0xF4F4F4)):
				counts["bg"]++
			default:
				counts["other"]++
			}
		}
	}
	if counts["F"] == 0 || counts["B"] == 0 || counts["other"] > (counts["F"]+counts["B"])/20 {
		t.Errorf("steady-phase pixels of stage 32: %v", counts)
	}
}

// TestPNGHungTrace draws a trace whose last step hangs: the hung step is
// the one shown, its never-ended ops included.
func TestPNGHungTrace(t *testing.T) {
	f, err := sim.ParseFault("skip:rank=2,step=1,mb=3")
	if err != nil {
		t.Fatal(err)
	}
	tr, rep := simAnalysed(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, Faults: []sim.Fault{f}})
	_, lay := renderDecoded(t, tr, rep, PNGOptions{Step: -1})
	tl := lay.timeline
	if tl.Step != 1 || tl.Complete {
		t.Fatalf("timeline of step %d (complete %v), want the hung step 1", tl.Step, tl.Complete)
	}
	pending := 0
	for _, b := range append(append([]tlBox{}, tl.Boxes...), tl.Waits...) {
		if b.Pending {
			pending++
		}
	}
	if pending == 0 {
		t.Error("no pending op drawn")
	}
}

// TestNoCompleteStep: a job that died in its only step has a timeline but
// no factors; the charts and the HTML say so instead of drawing zeros.
func TestNoCompleteStep(t *testing.T) {
	f, err := sim.ParseFault("crash:rank=1,step=0,mb=2")
	if err != nil {
		t.Fatal(err)
	}
	tr, rep := simAnalysed(t, sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 4, Faults: []sim.Fault{f}})
	if hasComplete(rep) {
		t.Fatal("the crashed step completed")
	}
	_, lay := renderDecoded(t, tr, rep, PNGOptions{Step: -1})
	if lay.timeline == nil || lay.timeline.Complete {
		t.Error("no timeline of the crashed step")
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, tr, rep, HTMLOptions{Step: -1}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "no complete step to measure") || !strings.Contains(buf.String(), "could not be measured") {
		t.Error("the HTML does not say the factors could not be measured")
	}
}
