package report

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// panelSVG draws one panel (as the PNG draws it) as an SVG element sized
// wPx x hPx that scales to its container: no XML prolog, no fixed size,
// fonts falling back to the browser's sans-serif. vgsvg escapes text.
func panelSVG(p *pngPanel, wPx, hPx float64) (string, error) {
	c := vgsvg.New(px(wPx), px(hPx))
	dc := draw.New(c)
	dc.FillPolygon(rgb(0xFFFFFF), rect(dc.Min.X, dc.Min.Y, dc.Max.X, dc.Max.Y))
	drawPanel(dc, p)
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("drawing %s as SVG: %w", p.title, err)
	}
	return inlineSVG(buf.String(), p.title)
}

var svgSize = regexp.MustCompile(`^<svg width="[^"]*" height="[^"]*"`)

// inlineSVG makes vgsvg's document fit inside HTML.
func inlineSVG(doc, label string) (string, error) {
	i := strings.Index(doc, "<svg")
	if i < 0 {
		return "", fmt.Errorf("drawing %s as SVG: no <svg> element", label)
	}
	doc = doc[i:]
	doc = svgSize.ReplaceAllLiteralString(doc, `<svg class="chart" role="img" aria-label="`+htmlAttrEscape(label)+`"`)
	doc = strings.ReplaceAll(doc, "font-family:Liberation Sans;", "font-family:'Liberation Sans',Arial,Helvetica,sans-serif;")
	return doc, nil
}

// htmlAttrEscape escapes s for a double-quoted attribute.
func htmlAttrEscape(s string) string {
	r := strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;", `"`, "&#34;", `'`, "&#39;")
	return r.Replace(s)
}
