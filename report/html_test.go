package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
	"golang.org/x/net/html"
)

// renderHTML writes the HTML report of tr and parses it.
func renderHTML(t testing.TB, tr *trace.Trace, rep *analyze.Report, h *hang.Report) (string, *html.Node) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, tr, rep, HTMLOptions{Step: -1, Hang: h}); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("parsing the HTML: %v", err)
	}
	return buf.String(), doc
}

func walk(n *html.Node, fn func(*html.Node)) {
	fn(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, fn)
	}
}

// textOf returns the text content of the document outside scripts and
// styles: what a reader sees.
func textOf(doc *html.Node) string {
	var b strings.Builder
	var rec func(*html.Node)
	rec = func(n *html.Node) {
		if n.Type == html.ElementNode && (n.Data == "script" || n.Data == "style") {
			return
		}
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteString(" ")
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			rec(c)
		}
	}
	rec(doc)
	return b.String()
}

// externalRefs lists every reference in doc that would load something
// from elsewhere: src/href/xlink:href/action/poster/srcset to http(s) or a
// protocol-relative //, <link> elements, and @import or url() pointing
// outside in styles.
func externalRefs(doc *html.Node) []string {
	var out []string
	remote := func(v string) bool {
		v = strings.ToLower(strings.TrimSpace(v))
		return strings.HasPrefix(v, "http:") || strings.HasPrefix(v, "https:") || strings.HasPrefix(v, "//") ||
			strings.HasPrefix(v, "ftp:") || strings.HasPrefix(v, "ws:") || strings.HasPrefix(v, "wss:")
	}
	css := func(where, s string) {
		l := strings.ToLower(s)
		if strings.Contains(l, "@import") {
			out = append(out, where+": @import")
		}
		for _, part := range strings.Split(l, "url(")[1:] {
			u := strings.Trim(strings.TrimSpace(part), `'"`)
			if !strings.HasPrefix(u, "#") && !strings.HasPrefix(u, "data:") {
				out = append(out, where+": url("+u)
			}
		}
	}
	walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		if n.Data == "link" || n.Data == "iframe" || n.Data == "object" || n.Data == "embed" {
			out = append(out, "<"+n.Data+">")
		}
		for _, a := range n.Attr {
			key := strings.ToLower(a.Key)
			if a.Namespace != "" {
				key = a.Namespace + ":" + key
			}
			switch key {
			case "src", "href", "xlink:href", "xlink href", "action", "poster", "srcset", "data", "formaction":
				if remote(a.Val) {
					out = append(out, fmt.Sprintf("<%s %s=%q>", n.Data, key, a.Val))
				}
			case "style":
				css("style attribute", a.Val)
			}
			if strings.HasPrefix(key, "on") {
				out = append(out, fmt.Sprintf("<%s %s> (inline handler)", n.Data, key))
			}
		}
		if n.Data == "style" && n.FirstChild != nil {
			css("<style>", n.FirstChild.Data)
		}
	})
	return out
}

// TestHTMLSelfContained checks the report loads nothing from elsewhere and
// prints the analysis' numbers.
func TestHTMLSelfContained(t *testing.T) {
	tr, rep := simAnalysed(t, sim.Config{Job: "selfcontained", Schedule: "interleaved", Stages: 4, MicroBatches: 8, Steps: 2,
		P2PLatencyUs: 30, P2PGbps: 400, SlowStage: 2, SlowFactor: 1.2, PeakFlops: 1e15})
	src, doc := renderHTML(t, tr, rep, nil)
	if refs := externalRefs(doc); len(refs) > 0 {
		t.Errorf("external references: %v", refs)
	}
	if !strings.Contains(src, "Content-Security-Policy") || !strings.Contains(src, "default-src 'none'") {
		t.Error("no Content-Security-Policy forbidding loads")
	}
	text := textOf(doc)
	for _, want := range []string{
		fmt.Sprintf("%.4f", rep.Bubble.Measured),
		fmt.Sprintf("%.4f", *rep.Bubble.Theoretical),
		fmt.Sprintf("%.3f ms", rep.StepMs),
		fmt.Sprintf("%.2f %%", 100*rep.Utilization.Pipeline),
		fmt.Sprintf("%.2f %%", 100**rep.Utilization.MFU),
		fmt.Sprintf("%.3f", rep.Stages[2].BusyMs),
		rep.Findings[0].Message,
		"selfcontained",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
	// Three charts as inline SVG, and the timeline's data for the script.
	svgs, scripts := 0, 0
	var data string
	walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		switch n.Data {
		case "svg":
			for _, a := range n.Attr {
				if a.Key == "class" && a.Val == "chart" {
					svgs++
				}
			}
		case "script":
			scripts++
			for _, a := range n.Attr {
				if a.Key == "src" {
					t.Errorf("script with src %q", a.Val)
				}
				if a.Key == "id" && a.Val == "ppprof-data" && n.FirstChild != nil {
					data = n.FirstChild.Data
				}
			}
		}
	})
	if strings.Contains(text, "What if") {
		t.Error("a what-if section without a what-if result")
	}
	if svgs != 3 || scripts != 2 {
		t.Errorf("%d chart SVGs and %d scripts, want 3 and 2", svgs, scripts)
	}
	var d timelineData
	if err := json.Unmarshal([]byte(data), &d); err != nil {
		t.Fatalf("timeline data: %v", err)
	}
	if len(d.Rows) != 8 || len(d.Ops.Kind) == 0 || len(d.Ops.Start) != len(d.Ops.Kind) {
		t.Errorf("timeline data: %d rows, %d ops", len(d.Rows), len(d.Ops.Kind))
	}
}

// TestHTMLEscapesTraceStrings puts markup in every free-text field of a
// trace (job name, shape, dtype, metadata) and checks it stays text.
func TestHTMLEscapesTraceStrings(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 4})
	if err != nil {
		t.Fatal(err)
	}
	evil := `<script>alert("job")</script><img src=x onerror=alert(1)>`
	tr.Meta.Job = evil
	tr.Meta.Device = `</title><script>alert("device")</script>`
	tr.Meta.Extra = map[string]string{"note": `"><svg onload=alert(3)>`, `<b>key</b>`: "v"}
	for i := range tr.Shape {
		if tr.Kind[i].IsP2P() {
			tr.Shape[i] = trace.Intern(`</script><script>alert("shape")</script>`)
			tr.Dtype[i] = trace.Intern(`"><iframe src="https://example.com/x"></iframe>`)
		}
	}
	rep, err := analyze.Run(tr, analyze.Options{Step: analyze.AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	_, doc := renderHTML(t, tr, rep, nil)
	scripts := 0
	var data string
	walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		switch n.Data {
		case "script":
			scripts++
			for _, a := range n.Attr {
				if a.Key == "id" && a.Val == "ppprof-data" && n.FirstChild != nil {
					data = n.FirstChild.Data
				}
			}
		case "img", "iframe", "b":
			t.Errorf("trace markup became an element: <%s>", n.Data)
		}
		for _, a := range n.Attr {
			if strings.HasPrefix(a.Key, "on") {
				t.Errorf("trace markup became a handler: <%s %s>", n.Data, a.Key)
			}
		}
	})
	if scripts != 2 {
		t.Errorf("%d script elements, want 2 (the data and the timeline)", scripts)
	}
	if refs := externalRefs(doc); len(refs) > 0 {
		t.Errorf("external references: %v", refs)
	}
	text := textOf(doc)
	for _, want := range []string{evil, `"><svg onload=alert(3)>`, `<b>key</b>`} {
		if !strings.Contains(text, want) {
			t.Errorf("the page does not show %q as text", want)
		}
	}
	// The data round-trips: the shape is a string the script shows with
	// textContent.
	var d timelineData
	if err := json.Unmarshal([]byte(data), &d); err != nil {
		t.Fatalf("timeline data: %v", err)
	}
	if !strings.Contains(strings.Join(d.Shapes, "|"), `</script><script>alert("shape")</script>`) {
		t.Errorf("shapes in the data: %q", d.Shapes)
	}
	if strings.Contains(data, "</script") || strings.Contains(data, "<") {
		t.Error("the JSON data holds a raw '<'")
	}
}

// TestHTMLHangSection checks a hung trace's verdict and wait-for cycle.
func TestHTMLHangSection(t *testing.T) {
	f, err := sim.ParseFault("skip:rank=2,step=1,mb=3")
	if err != nil {
		t.Fatal(err)
	}
	tr, rep := simAnalysed(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, Faults: []sim.Fault{f}})
	h, err := hang.Run(tr, hang.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Verdict == hang.VerdictOK || len(h.Path) < 2 {
		t.Fatalf("the fault did not hang the job: %s, path %v", h.Verdict, h.Path)
	}
	_, doc := renderHTML(t, tr, rep, h)
	text := textOf(doc)
	for _, want := range []string{"Hang post-mortem", string(h.Verdict), h.RootCause.Summary} {
		if !strings.Contains(text, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
	nodes, edges := 0, 0
	walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "svg" {
			for _, a := range n.Attr {
				if a.Key == "class" && a.Val == "waitfor" {
					walk(n, func(m *html.Node) {
						switch {
						case m.Type == html.ElementNode && m.Data == "rect":
							nodes++
						case m.Type == html.ElementNode && m.Data == "line":
							edges++
						}
					})
				}
			}
		}
	})
	want := len(h.Path) - 1 // the path repeats its first node to close a cycle
	if len(h.Cycle) == 0 {
		want = len(h.Path)
	}
	if nodes != want || edges < want-1 {
		t.Errorf("wait-for graph: %d nodes, %d arrows; path %v", nodes, edges, h.Path)
	}
	// A healthy trace has no hang section.
	tr2, rep2 := simAnalysed(t, sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 2})
	h2, err := hang.Run(tr2, hang.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, doc := renderHTML(t, tr2, rep2, h2); strings.Contains(textOf(doc), "Hang post-mortem") {
		t.Error("a healthy trace shows a hang section")
	}
}

// TestHTMLWhatIf embeds the what-if section when given one.
func TestHTMLWhatIf(t *testing.T) {
	tr, rep := simAnalysed(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, SlowStage: 2, SlowFactor: 1.5})
	wi, err := analyze.RunWhatIf(tr, analyze.WhatIfOptions{Step: analyze.AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, tr, rep, HTMLOptions{Step: -1, WhatIf: wi}); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	text := textOf(doc)
	for _, want := range []string{"What if", "balanced", "Critical path"} {
		if !strings.Contains(text, want) {
			t.Errorf("the what-if section lacks %q", want)
		}
	}
	if refs := externalRefs(doc); len(refs) > 0 {
		t.Errorf("external references: %v", refs)
	}
}
