package report

import (
	"fmt"
	"html/template"
	"io"

	"github.com/ppprof/ppprof/analyze"
)

// WriteWhatIfHTML writes the what-if result as an HTML fragment, one
// <section class="ppprof-whatif"> with the scenarios table, the slow worker
// or slow stage verdict and the critical path's parts, for the HTML report
// to embed. Every string is escaped; it writes no <html>, <head> or
// styles (classes: ppprof-whatif, unavailable).
func WriteWhatIfHTML(w io.Writer, res *analyze.WhatIf) error {
	return writeWhatIfHTML(w, res, "")
}

// writeWhatIfHTML is WriteWhatIfHTML with a note under the heading (none
// when empty).
func writeWhatIfHTML(w io.Writer, res *analyze.WhatIf, note string) error {
	type row struct {
		Name, StepMs, Speedup, SavedMs, Detail string
		Available                              bool
	}
	data := struct {
		Res  *analyze.WhatIf
		Rows []row
		Note string
	}{Res: res, Note: note}
	for _, sc := range res.Scenarios {
		r := row{Name: sc.Name, Detail: sc.Detail, Available: sc.Available, StepMs: "-", Speedup: "-", SavedMs: "-"}
		if sc.Available {
			r.StepMs, r.Speedup, r.SavedMs = fmt.Sprintf("%.4g", sc.StepMs), fmt.Sprintf("%.3gx", sc.Speedup), fmt.Sprintf("%.3g", sc.SavedMs)
		}
		data.Rows = append(data.Rows, r)
	}
	return whatIfHTML.Execute(w, data)
}

var whatIfHTML = template.Must(template.New("whatif").Funcs(template.FuncMap{
	"ms": func(x float64) string { return fmt.Sprintf("%.4g", x) },
}).Parse(`<section class="ppprof-whatif">
<h2>What if</h2>
{{- with .Note}}
<p class="sub">{{.}}</p>
{{- end}}
<p>Measured step {{ms .Res.StepMs}} ms ({{.Res.Steps}} step(s) replayed; replayed with measured durations {{ms .Res.ReplayStepMs}} ms).</p>
<table>
<thead><tr><th>scenario</th><th>step ms</th><th>speedup</th><th>saves ms</th><th>what changes</th></tr></thead>
<tbody>
{{- range .Rows}}
<tr{{if not .Available}} class="unavailable"{{end}}><td>{{.Name}}</td><td>{{.StepMs}}</td><td>{{.Speedup}}</td><td>{{.SavedMs}}</td><td>{{.Detail}}</td></tr>
{{- end}}
</tbody>
</table>
<h3>Slow worker or slow stage</h3>
<p>{{.Res.Verdict.Message}}</p>
<h3>Critical path</h3>
{{- with .Res.CriticalPath}}
<p>{{ms .LengthMs}} ms per step: compute {{ms .ComputeMs}}, P2P {{ms .P2PMs}}, OPT and collectives {{ms .CollectiveMs}}, other {{ms .OtherMs}}, waits {{ms .WaitMs}}.</p>
<table>
<thead><tr><th>stage</th><th>compute ms</th><th>P2P ms</th></tr></thead>
<tbody>
{{- range .Stages}}
<tr><td>{{.Stage}}</td><td>{{ms .ComputeMs}}</td><td>{{ms .P2PMs}}</td></tr>
{{- end}}
</tbody>
</table>
{{- end}}
</section>
`))
