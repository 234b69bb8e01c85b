package report

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"strings"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/trace"
)

var (
	//go:embed assets/report.html.tmpl
	htmlTemplateText string
	//go:embed assets/report.css
	htmlCSS string
	//go:embed assets/timeline.js
	htmlJS string
)

var htmlTemplate = template.Must(template.New("report").Parse(htmlTemplateText))

// HTMLOptions configures WriteHTML.
type HTMLOptions struct {
	// Step is the step the timeline shows, as PNGOptions.Step.
	Step int64
	// Hang is the hang post-mortem of the same trace; its section is shown
	// when the verdict is not ok. Nil leaves the section out.
	Hang *hang.Report
	// WhatIf is the what-if analysis of the same trace (WriteWhatIfHTML
	// draws its section). Nil leaves the section out.
	WhatIf *analyze.WhatIf
	// WhatIfNote is a line under the what-if's heading (none when empty):
	// what it re-timed, when not the trace's every step.
	WhatIfNote string
}

// WriteHTML writes the HTML report of rep (the analysis of t) to w: one
// self-contained file (inline styles, script and SVG; a Content Security
// Policy that forbids loading anything) with the job summary, findings,
// the hang verdict when there is one, an interactive timeline, the charts,
// and the factor, stage, P2P, step, straggler and schedule tables. Every
// string that comes from the trace is escaped (html/template; the timeline
// data is JSON read with JSON.parse and shown with textContent).
func WriteHTML(w io.Writer, t *trace.Trace, rep *analyze.Report, opt HTMLOptions) error {
	win, err := chooseWindow(rep, opt.Step)
	if err != nil {
		return err
	}
	tl := buildTimeline(t, rep, win)
	data, err := timelineJSON(t, tl)
	if err != nil {
		return err
	}
	pg := &htmlPage{
		Title:       jobTitle(t, rep),
		Shape:       jobShape(rep),
		CSS:         template.CSS(htmlCSS),
		JS:          template.JS(htmlJS),
		Data:        template.JS(data),
		TimelineSub: timelineSub(rep, tl) + htmlTimelineNote(tl),
		Legend:      htmlLegend(tl),
		Findings:    rep.Findings,
	}
	pg.Cards = htmlCards(rep)
	if pg.Charts, err = htmlCharts(rep); err != nil {
		return err
	}
	pg.Factors, pg.BubbleTable, pg.Gap = factorTables(rep)
	if !hasComplete(rep) {
		pg.FactorsNote = "No analysed step completed (every one has an op that never ended), so these factors could not be measured."
	}
	pg.Stages, pg.Overhead = stageTables(rep)
	pg.P2PSub, pg.P2P = p2pTable(rep)
	pg.Steps = stepTable(rep)
	pg.Stragglers = stragglerTable(rep)
	pg.ScheduleSub, pg.Candidates, pg.Violations = scheduleTables(rep)
	pg.Meta = metaTable(t, rep)
	if opt.Hang != nil && opt.Hang.Verdict != hang.VerdictOK {
		pg.Hang = hangSection(opt.Hang)
	}
	if opt.WhatIf != nil {
		var b strings.Builder
		if err := writeWhatIfHTML(&b, opt.WhatIf, opt.WhatIfNote); err != nil {
			return err
		}
		pg.WhatIf = template.HTML(b.String()) // escaped by WriteWhatIfHTML's own template
	}
	if err := htmlTemplate.Execute(w, pg); err != nil {
		return fmt.Errorf("writing HTML: %w", err)
	}
	return nil
}

// htmlPage is what the template renders. Strings are plain text: the
// template escapes them. Only CSS, JS, Data (JSON with <, > and & escaped),
// the charts' SVG (vgsvg's output, which escapes its text) and the what-if
// fragment (WriteWhatIfHTML's html/template output) are trusted.
type htmlPage struct {
	Title, Shape string
	CSS          template.CSS
	JS           template.JS
	Data         template.JS
	Cards        []htmlKV
	Findings     []analyze.Finding
	Hang         *htmlHang
	WhatIf       template.HTML
	TimelineSub  string
	Legend       []htmlLegendItem
	Charts       []htmlChart

	Factors, BubbleTable, Gap htmlTable
	FactorsNote               string
	Stages, Overhead          htmlTable
	P2PSub                    string
	P2P                       htmlTable
	Steps                     htmlTable
	Stragglers                htmlTable
	ScheduleSub               string
	Candidates, Violations    htmlTable
	Meta                      htmlTable
}

type htmlKV struct{ K, V string }

type htmlLegendItem struct {
	Name  string
	Color template.CSS
}

type htmlChart struct {
	Class string
	SVG   template.HTML
}

// htmlTable is a table of text cells; Num marks right-aligned numeric
// columns, HL highlighted rows.
type htmlTable struct {
	Caption string
	Class   string
	Head    []string
	Rows    [][]string
	Num     map[int]bool
	HL      map[int]bool
}

// IsNum reports whether column i is numeric (for the template).
func (t htmlTable) IsNum(i int) bool { return t.Num[i] }

// IsHL reports whether row r is highlighted (for the template).
func (t htmlTable) IsHL(r int) bool { return t.HL[r] }

func numCols(cols ...int) map[int]bool {
	m := map[int]bool{}
	for _, c := range cols {
		m[c] = true
	}
	return m
}

func jobTitle(t *trace.Trace, rep *analyze.Report) string {
	if t.Meta.Job != "" {
		return t.Meta.Job
	}
	return fmt.Sprintf("%d-stage %s job", rep.Job.PP, orUnknown(rep.Job.Schedule, "pipeline"))
}

func orUnknown(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func jobShape(rep *analyze.Report) string {
	j := rep.Job
	return fmt.Sprintf("%d ranks: PP %d x TP %d x DP %d, %s, v=%d, %d micro-batches, %d step(s) analysed, %d events",
		j.WorldSize, j.PP, max(j.TP, 1), max(j.DP, 1), orUnknown(j.Schedule, "unknown schedule"), j.Virtual, j.MicroBatches, j.Steps, j.Events)
}

func pct(x float64) string { return fmt.Sprintf("%.2f %%", 100*x) }

func optPct(x *float64) string {
	if x == nil {
		return "unknown"
	}
	return pct(*x)
}

func htmlCards(rep *analyze.Report) []htmlKV {
	u := rep.Utilization
	cards := []htmlKV{
		{"step time (median)", fmt.Sprintf("%.3f ms", rep.StepMs)},
		{"pipeline utilisation", pct(u.Pipeline)},
		{"bubble (measured)", fmt.Sprintf("%.4f", rep.Bubble.Measured)},
	}
	if th := rep.Bubble.Theoretical; th != nil {
		cards = append(cards, htmlKV{"bubble (schedule's theory)", fmt.Sprintf("%.4f", *th)})
	}
	cards = append(cards, htmlKV{"balance", pct(u.Balance)}, htmlKV{"MFU", optPct(u.MFU)})
	if im := rep.Imbalance; im.SlowestStage >= 0 && len(rep.Stages) > 1 && im.ExcessFrac >= slowestMinExcess {
		cards = append(cards, htmlKV{"slowest stage", fmt.Sprintf("%d (+%.1f %%)", im.SlowestStage, 100*im.ExcessFrac)})
	}
	return cards
}

func htmlTimelineNote(tl *timeline) string {
	if len(tl.Boxes)+len(tl.Waits) == 0 {
		return "; no ops to draw"
	}
	return ""
}

func htmlLegend(tl *timeline) []htmlLegendItem {
	var out []htmlLegendItem
	for _, it := range timelineItems(tl) {
		out = append(out, htmlLegendItem{Name: it.name, Color: template.CSS(cssColor(it.fill))})
	}
	if !tl.Complete {
		out = append(out, htmlLegendItem{Name: "never ended", Color: template.CSS(hexColor(colPending))})
	}
	return out
}

// htmlCharts draws the waterfall, the stage bars and the live ridgeline as
// inline SVG.
// cssColor returns c as CSS: #rrggbb, or rgba() when translucent.
func cssColor(c color.Color) string {
	n := color.NRGBAModel.Convert(c).(color.NRGBA)
	if n.A == 0xFF {
		return hexColor(n)
	}
	return fmt.Sprintf("rgba(%d,%d,%d,%.2f)", n.R, n.G, n.B, float64(n.A)/255)
}

func htmlCharts(rep *analyze.Report) ([]htmlChart, error) {
	var out []htmlChart
	add := func(class string, p *pngPanel, w, h float64) error {
		svg, err := panelSVG(p, w, h)
		if err != nil {
			return err
		}
		out = append(out, htmlChart{Class: class, SVG: template.HTML(svg)})
		return nil
	}
	wp, wsub := waterfall(rep)
	if err := add("", &pngPanel{title: "Utilisation waterfall", sub: wsub, plot: wp}, 620, 400); err != nil {
		return nil, err
	}
	sp, ssub := stageBars(rep)
	if err := add("", &pngPanel{title: "Stages", sub: ssub, items: stageItems, plot: sp}, 940, 400); err != nil {
		return nil, err
	}
	n := len(rep.Memory.Stages)
	bandPx := math.Min(36, math.Max(6, 420/math.Max(float64(n), 1)))
	if mp, msub := memoryChart(rep, bandPx*float64(n)); mp != nil {
		items := []legendItem{{name: "live", fill: colLive}, {name: "over bound", fill: colOver}, {name: "schedule bound", fill: colText, line: true}}
		if err := add("wide", &pngPanel{title: "Live micro-batches", sub: msub, items: items, plot: mp}, 1580, bandPx*float64(n)+headerPx+plotFramePx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func f3s(x float64) string { return fmt.Sprintf("%.3f", x) }
func f4s(x float64) string { return fmt.Sprintf("%.4f", x) }

func factorTables(rep *analyze.Report) (factors, bubble, gap htmlTable) {
	u := rep.Utilization
	factors = htmlTable{Head: []string{"factor", "value", "definition"}, Num: numCols(1)}
	factors.Rows = [][]string{
		{"pipeline utilisation", f4s(u.Pipeline), "sum(busy) / (p x window)"},
		{"1 - bubble", f4s(1 - u.Bubble), "max(busy) / window: the slowest stage's busy share"},
		{"balance", f4s(u.Balance), "mean(busy) / max(busy)"},
		{"compute efficiency", optF4(u.Compute), "sum(FLOPs) / (sum(busy) x peak FLOP/s)"},
		{"MFU", optF4(u.MFU), "pipeline utilisation x compute efficiency"},
	}
	b := rep.Bubble
	bubble = htmlTable{Caption: "Bubble", Head: []string{"", "value", "meaning"}, Num: numCols(1)}
	th := "unknown"
	if b.Theoretical != nil {
		th = f4s(*b.Theoretical)
	}
	bubble.Rows = [][]string{
		{"measured", f4s(b.Measured), "1 - max(busy) / window"},
		{"theoretical", th, "the identified schedule with uniform stages and free communication"},
		{"warmup", f4s(b.Warmup), "idle before each stage's first compute, share of stage time"},
		{"cooldown", f4s(b.Cooldown), "idle after each stage's last compute"},
		{"steady", f4s(b.Steady), "idle between computes"},
		{"  of which P2P", f4s(b.SteadyP2P), "bytes on the wire while the stage waited"},
		{"  of which other", f4s(b.SteadyOther), "waiting on a peer's compute and the like"},
	}
	if g := b.Gap; g != nil {
		gap = htmlTable{Caption: "Why the bubble exceeds the theory (replays with one cause removed after another)",
			Head: []string{"cause", "share of the bubble"}, Num: numCols(1)}
		gap.Rows = [][]string{
			{"gap (measured - theory)", f4s(g.Gap)}, {"P2P transfers", f4s(g.P2P)}, {"step overhead in the window", f4s(g.Overhead)},
			{"jitter and stragglers", f4s(g.Jitter)}, {"stage imbalance", f4s(g.Imbalance)}, {"other", f4s(g.Other)},
		}
	}
	return factors, bubble, gap
}

func optF4(x *float64) string {
	if x == nil {
		return "unknown"
	}
	return f4s(*x)
}

func stageTables(rep *analyze.Report) (stages, overhead htmlTable) {
	stages = htmlTable{Caption: "Per stage (ms per step; F/B/W: one op)",
		Head: []string{"stage", "rank", "F mean", "F p95", "B mean", "B p95", "W mean", "busy", "idle", "warmup", "cooldown",
			"P2P wait", "other wait", "bubble", "peak live", "bound", "peak activations"},
		Num: numCols(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16), HL: map[int]bool{}}
	for i, s := range rep.Stages {
		bound := "-"
		if s.LiveBound > 0 {
			bound = fmt.Sprint(s.LiveBound)
		}
		stages.Rows = append(stages.Rows, []string{fmt.Sprint(s.Stage), fmt.Sprint(s.Rank), f3s(s.F.MeanMs), f3s(s.F.P95Ms),
			f3s(s.B.MeanMs), f3s(s.B.P95Ms), f3s(s.W.MeanMs), f3s(s.BusyMs), f3s(s.IdleMs), f3s(s.WarmupMs), f3s(s.CooldownMs),
			f3s(s.P2PWaitMs), f3s(s.OtherWaitMs), f4s(s.Bubble), fmt.Sprint(s.PeakLiveMicroBatches), bound, humanBytes(s.PeakActivationBytes)})
		if int(s.Stage) == rep.Imbalance.SlowestStage && rep.Imbalance.ExcessFrac >= slowestMinExcess {
			stages.HL[i] = true
		}
	}
	if len(rep.Overhead) > 0 {
		overhead = htmlTable{Caption: "Step overhead outside the pipeline window", Head: []string{"kind", "mean ms", "max ms", "steps"}, Num: numCols(1, 2, 3)}
		for _, o := range rep.Overhead {
			overhead.Rows = append(overhead.Rows, []string{o.Kind, f3s(o.MeanMs), f3s(o.MaxMs), fmt.Sprint(o.Steps)})
		}
	}
	return stages, overhead
}

func humanBytes(b int64) string {
	if b <= 0 {
		return "-"
	}
	f := float64(b)
	for _, u := range []string{"B", "KiB", "MiB", "GiB"} {
		if f < 1024 || u == "GiB" {
			if u == "B" {
				return fmt.Sprintf("%d B", b)
			}
			return fmt.Sprintf("%.1f %s", f, u)
		}
		f /= 1024
	}
	return ""
}

func p2pTable(rep *analyze.Report) (string, htmlTable) {
	p := rep.P2P
	sub := fmt.Sprintf("%.1f MB sent per step per pipeline; exposed wait %.3f ms per step over all stages", p.BytesPerStep/1e6, p.ExposedMs)
	t := htmlTable{Head: []string{"from", "to", "kind", "MB per step", "model MB", "sends", "GB/s", "exposed ms"}, Num: numCols(0, 1, 3, 4, 5, 6, 7)}
	for _, b := range p.Boundaries {
		model := "-"
		if b.ModelBytesPerStep > 0 {
			model = fmt.Sprintf("%.1f", b.ModelBytesPerStep/1e6)
		}
		t.Rows = append(t.Rows, []string{fmt.Sprint(b.From), fmt.Sprint(b.To), b.Kind, fmt.Sprintf("%.1f", b.BytesPerStep/1e6), model,
			fmt.Sprintf("%.0f", b.SendsPerStep), fmt.Sprintf("%.1f", b.GBps), f3s(b.ExposedMs)})
	}
	return sub, t
}

func stepTable(rep *analyze.Report) htmlTable {
	t := htmlTable{Head: []string{"step", "pipeline", "window ms", "bubble", "balance", "utilisation", "complete"}, Num: numCols(0, 1, 2, 3, 4, 5), HL: map[int]bool{}}
	for i, s := range rep.Steps {
		t.Rows = append(t.Rows, []string{fmt.Sprint(s.Step), fmt.Sprint(s.Pipeline), f3s(s.WindowMs()), f4s(s.Bubble), f4s(s.Balance), f4s(s.UPipeline), fmt.Sprint(s.Complete)})
		if !s.Complete {
			t.HL[i] = true
		}
	}
	return t
}

func stragglerTable(rep *analyze.Report) htmlTable {
	t := htmlTable{Head: []string{"step", "pipeline", "stage", "rank", "chunk", "micro-batch", "kind", "ms", "typical ms", "expected ms", "factor", "tokens", "class", "delays step ms"},
		Num: numCols(0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 13)}
	for _, s := range rep.Stragglers {
		t.Rows = append(t.Rows, []string{fmt.Sprint(s.Step), fmt.Sprint(s.Pipeline), fmt.Sprint(s.Stage), fmt.Sprint(s.Rank), fmt.Sprint(s.Chunk),
			fmt.Sprint(s.MicroBatch), s.Kind, f3s(s.DurMs), f3s(s.TypicalMs), f3s(s.ExpectedMs), fmt.Sprintf("%.2f", s.Factor),
			fmt.Sprint(s.Tokens), s.Class, f3s(s.DelayMs)})
	}
	return t
}

func scheduleTables(rep *analyze.Report) (string, htmlTable, htmlTable) {
	c := rep.Schedule
	sub := "No schedule fits the trace's compute order."
	if c.Identified != "" {
		sub = fmt.Sprintf("Identified schedule: %s (v=%d); %d op(s) out of order, %d violation(s) of synchronous training.", c.Identified, c.Virtual, c.DeviationCount, c.ViolationCount)
	}
	if rep.Job.Schedule != "" {
		sub += " The metadata says " + rep.Job.Schedule + "."
	}
	cand := htmlTable{Caption: "Candidates", Head: []string{"schedule", "v", "ops compared", "deviating", "fraction"}, Num: numCols(1, 2, 3, 4)}
	for _, m := range c.Candidates {
		cand.Rows = append(cand.Rows, []string{m.Name, fmt.Sprint(m.Virtual), fmt.Sprint(m.Ops), fmt.Sprint(m.Deviating), f4s(m.Fraction)})
	}
	viol := htmlTable{Caption: "Violations", Head: []string{"code", "step", "stage", "rank", "message"}, Num: numCols(1, 2, 3)}
	for _, v := range c.Violations {
		viol.Rows = append(viol.Rows, []string{v.Code, fmt.Sprint(v.Step), fmt.Sprint(v.Stage), fmt.Sprint(v.Rank), v.Message})
	}
	return sub, cand, viol
}

func metaTable(t *trace.Trace, rep *analyze.Report) htmlTable {
	tb := htmlTable{Class: "kv", Head: []string{"key", "value"}}
	kv := t.Meta.Map()
	for _, k := range trace.Keys(kv) {
		tb.Rows = append(tb.Rows, []string{k, kv[k]})
	}
	tb.Rows = append(tb.Rows, []string{"events", fmt.Sprint(rep.Job.Events)})
	return tb
}

// timelineData is the JSON the page's script draws: ops column by column,
// times in µs from the timeline's start, strings interned.
type timelineData struct {
	Step            int64     `json:"step"`
	Pipeline        int32     `json:"pipeline"`
	DurUs           float64   `json:"durUs"`
	WarmupEndUs     *float64  `json:"warmupEndUs"`
	CooldownStartUs *float64  `json:"cooldownStartUs"`
	Chunks          int       `json:"chunks"`
	Rows            []tlRowJS `json:"rows"`
	Kinds           []string  `json:"kinds"`
	KindColors      []string  `json:"kcol"`
	PendingColor    string    `json:"pendingColor"`
	Shapes          []string  `json:"shapes"`
	Dtypes          []string  `json:"dtypes"`
	Ops             tlOpsJS   `json:"ops"`
}

type tlRowJS struct {
	Label   string `json:"label"`
	Stage   int    `json:"stage"`
	Rank    int32  `json:"rank"`
	Slowest bool   `json:"slowest"`
}

type tlOpsJS struct {
	Row     []int     `json:"row"`
	Kind    []int     `json:"k"`
	Start   []float64 `json:"s"`
	End     []float64 `json:"e"`
	MB      []int32   `json:"mb"`
	Rank    []int32   `json:"rank"`
	Chunk   []int32   `json:"chunk"`
	Bytes   []int64   `json:"b"`
	Shape   []int     `json:"sh"`
	Dtype   []int     `json:"dt"`
	Pending []int8    `json:"pend"` // 1: never ended (int8: encoding/json writes []uint8 as base64)
	Wait    []int8    `json:"wait"` // 1: a receive, drawn thin
}

// timelineJSON encodes tl for the page. encoding/json escapes <, > and &,
// so the result can sit inside a <script> element.
func timelineJSON(t *trace.Trace, tl *timeline) ([]byte, error) {
	d := timelineData{Step: tl.Step, Pipeline: tl.Pipeline, DurUs: us(tl.EndNs - tl.StartNs), PendingColor: hexColor(colPending),
		Shapes: []string{""}, Dtypes: []string{""}}
	if tl.WarmupEndNs != 0 || tl.CooldownStartNs != 0 {
		a, b := us(tl.WarmupEndNs-tl.StartNs), us(tl.CooldownStartNs-tl.StartNs)
		d.WarmupEndUs, d.CooldownStartUs = &a, &b
	}
	for _, r := range tl.Rows {
		d.Rows = append(d.Rows, tlRowJS{Label: r.Label, Stage: r.Stage, Rank: int32(r.Rank), Slowest: r.Slowest})
		d.Chunks = max(d.Chunks, r.Chunk+1)
	}
	kinds := map[trace.Kind]int{}
	shapes := map[string]int{"": 0}
	dtypes := map[string]int{"": 0}
	intern := func(m map[string]int, list *[]string, s string) int {
		if i, ok := m[s]; ok {
			return i
		}
		m[s] = len(*list)
		*list = append(*list, s)
		return m[s]
	}
	add := func(b tlBox, wait bool) {
		k, ok := kinds[b.Kind]
		if !ok {
			k = len(d.Kinds)
			kinds[b.Kind] = k
			d.Kinds = append(d.Kinds, b.Kind.String())
			d.KindColors = append(d.KindColors, hexColor(kindColor(b.Kind)))
		}
		i := b.TraceRow
		o := &d.Ops
		o.Row = append(o.Row, b.Row)
		o.Kind = append(o.Kind, k)
		o.Start = append(o.Start, us(b.StartNs-tl.StartNs))
		o.End = append(o.End, us(b.EndNs-tl.StartNs))
		o.MB = append(o.MB, int32(b.MicroBatch))
		o.Rank = append(o.Rank, int32(t.Rank[i]))
		o.Chunk = append(o.Chunk, t.Chunk[i])
		o.Bytes = append(o.Bytes, t.Bytes[i])
		o.Shape = append(o.Shape, intern(shapes, &d.Shapes, t.Shape[i].String()))
		o.Dtype = append(o.Dtype, intern(dtypes, &d.Dtypes, t.Dtype[i].String()))
		o.Pending = append(o.Pending, b2u(b.Pending))
		o.Wait = append(o.Wait, b2u(wait))
	}
	for _, b := range tl.Boxes {
		add(b, false)
	}
	for _, b := range tl.Waits {
		add(b, true)
	}
	out, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encoding the timeline: %w", err)
	}
	return out, nil
}

// us converts ns to µs, rounded to the ns.
func us(ns int64) float64 { return math.Round(float64(ns)) / 1e3 }

func b2u(b bool) int8 {
	if b {
		return 1
	}
	return 0
}

// htmlHang is the hang section.
type htmlHang struct {
	Verdict    string
	Summary    string
	Graph      *waitGraph
	GraphTitle string
	Cycle      bool
	Blocked    htmlTable
	Mismatches htmlTable
	Notes      []string
}

// waitGraph is the wait-for path laid out for SVG: a circle for a cycle, a
// row for a chain ending at the root cause.
type waitGraph struct {
	W, H  int
	Nodes []waitNode
	Edges []waitEdge
}

type waitNode struct {
	X, Y, W, H, TX, TY1, TY2 int
	Label, Sub               string
	Root                     bool
}

type waitEdge struct{ X1, Y1, X2, Y2 int }

func hangSection(h *hang.Report) *htmlHang {
	s := &htmlHang{Verdict: string(h.Verdict), Summary: h.RootCause.Summary, Notes: h.Notes, Cycle: len(h.Cycle) > 0}
	stageOf := map[trace.Rank]trace.Stage{}
	for _, r := range h.Ranks {
		stageOf[r.Rank] = r.Stage
	}
	if len(h.Path) > 1 {
		s.Graph = layoutWaitFor(h.Path, len(h.Cycle) > 0, h.RootCause.Rank, stageOf)
		s.GraphTitle = "Wait-for chain"
		if s.Cycle {
			s.GraphTitle = "Wait-for cycle"
		}
	}
	s.Blocked = htmlTable{Caption: "Blocked ops", Head: []string{"rank", "kind", "peer", "step", "micro-batch", "seq", "waiting ms"}, Num: numCols(0, 2, 3, 4, 5, 6)}
	for _, b := range h.Blocked {
		peer := "-"
		if b.Op.Peer != trace.NoRank {
			peer = fmt.Sprint(b.Op.Peer)
		}
		s.Blocked.Rows = append(s.Blocked.Rows, []string{fmt.Sprint(b.Op.Rank), b.Op.Kind.String(), peer, fmt.Sprint(b.Op.Step),
			fmt.Sprint(b.Op.MicroBatch), fmt.Sprint(b.Op.Seq), f3s(float64(b.WaitNs) / 1e6)})
	}
	s.Mismatches = htmlTable{Caption: "Mismatches", Head: []string{"kind", "ranks", "step", "micro-batch", "count", "detail"}, Num: numCols(2, 3, 4)}
	for _, m := range h.Mismatches {
		rs := make([]string, len(m.Ranks))
		for i, r := range m.Ranks {
			rs[i] = fmt.Sprint(r)
		}
		s.Mismatches.Rows = append(s.Mismatches.Rows, []string{string(m.Kind), strings.Join(rs, ", "), fmt.Sprint(m.Step),
			fmt.Sprint(m.MicroBatch), fmt.Sprint(m.Count), m.Detail})
	}
	return s
}

// layoutWaitFor places the path's nodes (for a cycle the first node is
// repeated at the end) and the arrows between them.
func layoutWaitFor(path []hang.Node, cycle bool, root trace.Rank, stageOf map[trace.Rank]trace.Stage) *waitGraph {
	nodes := path
	if cycle && len(path) > 1 && path[0] == path[len(path)-1] {
		nodes = path[:len(path)-1]
	}
	const nw, nh = 150, 46
	g := &waitGraph{}
	n := len(nodes)
	centers := make([][2]float64, n)
	if cycle && n > 1 {
		r := math.Max(90, float64(n)*nw/(2*math.Pi)*1.15)
		g.W, g.H = int(2*r+nw+40), int(2*r+nh+40)
		cx, cy := float64(g.W)/2, float64(g.H)/2
		for i := range nodes {
			a := -math.Pi/2 + 2*math.Pi*float64(i)/float64(n)
			centers[i] = [2]float64{cx + r*math.Cos(a), cy + r*math.Sin(a)}
		}
	} else {
		g.W, g.H = n*(nw+70)+20, nh+40
		for i := range nodes {
			centers[i] = [2]float64{float64(20 + nw/2 + i*(nw+70)), float64(g.H) / 2}
		}
	}
	for i, nd := range nodes {
		c := centers[i]
		wn := waitNode{X: int(c[0]) - nw/2, Y: int(c[1]) - nh/2, W: nw, H: nh, TX: int(c[0]), TY1: int(c[1]) - 4, TY2: int(c[1]) + 14}
		if nd.Barrier {
			wn.Label, wn.Sub = "OPT barrier", fmt.Sprintf("step %d", nd.Step)
		} else if nd.Group != "" {
			wn.Label, wn.Sub = nd.Kind.String(), fmt.Sprintf("group %s #%d", nd.Group, nd.GroupSeq)
		} else {
			wn.Label = fmt.Sprintf("rank %d", nd.Rank)
			if st, ok := stageOf[nd.Rank]; ok && st >= 0 {
				wn.Sub = fmt.Sprintf("stage %d", st)
			}
			wn.Root = nd.Rank == root
		}
		g.Nodes = append(g.Nodes, wn)
	}
	edges := n - 1
	if cycle {
		edges = n
	}
	for i := 0; i < edges; i++ {
		a, b := centers[i], centers[(i+1)%n]
		x1, y1 := clipToBox(a, b, nw, nh)
		x2, y2 := clipToBox(b, a, nw, nh)
		g.Edges = append(g.Edges, waitEdge{int(x1), int(y1), int(x2), int(y2)})
	}
	return g
}

// clipToBox returns where the segment from a's centre toward b leaves a's
// box of w x h (plus a small margin).
func clipToBox(a, b [2]float64, w, h float64) (float64, float64) {
	dx, dy := b[0]-a[0], b[1]-a[1]
	if dx == 0 && dy == 0 {
		return a[0], a[1]
	}
	sx, sy := math.Inf(1), math.Inf(1)
	if dx != 0 {
		sx = (w/2 + 4) / math.Abs(dx)
	}
	if dy != 0 {
		sy = (h/2 + 4) / math.Abs(dy)
	}
	s := math.Min(sx, sy)
	return a[0] + dx*s, a[1] + dy*s
}
