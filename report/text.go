package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/ppprof/ppprof/analyze"
)

// maxTextFindings, maxTextStragglers and maxTextSteps bound the text report;
// JSON has everything.
const (
	maxTextFindings   = 8
	maxTextStragglers = 5
	maxTextSteps      = 16
)

// writeText renders rep for a terminal, or as Markdown when md is set: the
// top findings first, then the factors, then the tables behind them.
func writeText(w io.Writer, rep *analyze.Report, md bool) error {
	t := &textWriter{md: md}
	j := rep.Job
	sched := j.Schedule
	if sched == "" {
		sched = "schedule not in metadata"
	}
	t.title(fmt.Sprintf("ppprof analysis: %d ranks, PP %d x TP %d x DP %d, %s, v=%d, %d micro-batches, %d step(s), %d events",
		j.WorldSize, j.PP, max(j.TP, 1), max(j.DP, 1), sched, j.Virtual, j.MicroBatches, j.Steps, j.Events))

	t.findings(rep)
	t.factors(rep)
	t.stages(rep)
	t.imbalance(rep)
	t.stragglers(rep)
	t.p2p(rep)
	t.overhead(rep)
	t.conformance(rep)
	t.steps(rep)
	_, err := io.WriteString(w, t.b.String())
	return err
}

type textWriter struct {
	b  strings.Builder
	md bool
}

func (t *textWriter) title(s string) {
	if t.md {
		fmt.Fprintf(&t.b, "# %s\n", s)
	} else {
		fmt.Fprintf(&t.b, "%s\n", s)
	}
}

func (t *textWriter) section(s string) {
	if t.md {
		fmt.Fprintf(&t.b, "\n## %s\n\n", s)
	} else {
		fmt.Fprintf(&t.b, "\n%s\n%s\n", s, strings.Repeat("-", len(s)))
	}
}

func (t *textWriter) line(format string, args ...any) {
	if t.md {
		t.b.WriteString("- ")
	}
	fmt.Fprintf(&t.b, format+"\n", args...)
}

func (t *textWriter) findings(rep *analyze.Report) {
	t.section("Findings (most costly first)")
	if len(rep.Findings) == 0 {
		t.line("none: nothing to fix that ppprof can see")
		return
	}
	for i, f := range rep.Findings {
		if i == maxTextFindings {
			t.line("... and %d more (see --format json)", len(rep.Findings)-i)
			break
		}
		impact := ""
		if f.ImpactMs > 0 {
			impact = fmt.Sprintf(" [costs ~%.3g ms]", f.ImpactMs)
		}
		t.line("%-7s %s: %s%s", f.Severity, f.Code, f.Message, impact)
	}
}

func (t *textWriter) factors(rep *analyze.Report) {
	u, b := rep.Utilization, rep.Bubble
	t.section("Where the time went")
	t.line("step time:            %.3f ms median, %.3f ms worst", rep.StepMs, rep.StepMsWorst)
	t.line("pipeline utilisation: %.2f %% = (1 - bubble %.2f %%) x balance %.2f %%", 100*u.Pipeline, 100*u.Bubble, 100*u.Balance)
	if u.Compute != nil && u.MFU != nil {
		t.line("compute efficiency:   %.2f %%  ->  MFU %.2f %%", 100**u.Compute, 100**u.MFU)
	} else {
		t.line("compute efficiency, MFU: unknown (needs flops per op and peak_flops in the trace metadata)")
	}
	if b.Theoretical != nil {
		via := "identified from the op order"
		if rep.Schedule.Identified == "" {
			via = "named in the metadata"
		}
		t.line("bubble:               measured %.4f vs theory %.4f (%s, %s)", b.Measured, *b.Theoretical, scheduleName(rep), via)
	} else {
		t.line("bubble:               measured %.4f; theory unknown (schedule not identified)", b.Measured)
	}
	if g := b.Gap; g != nil {
		t.line("  gap %+.4f = P2P %+.4f, overhead %+.4f, jitter/stragglers %+.4f, imbalance %+.4f, other %+.4f",
			g.Gap, g.P2P, g.Overhead, g.Jitter, g.Imbalance, g.Other)
	}
	t.line("idle, share of stage time: warmup %.4f, cooldown %.4f, steady %.4f (exposed P2P %.4f, other waits %.4f)",
		b.Warmup, b.Cooldown, b.Steady, b.SteadyP2P, b.SteadyOther)
}

func scheduleName(rep *analyze.Report) string {
	if s := rep.Schedule.Identified; s != "" {
		if rep.Schedule.Virtual > 1 {
			return fmt.Sprintf("%s v=%d", s, rep.Schedule.Virtual)
		}
		return s
	}
	return rep.Job.Schedule
}

func (t *textWriter) stages(rep *analyze.Report) {
	t.section("Stages (ms per step, means over complete steps)")
	t.table([]string{"stage", "rank", "busy", "idle", "warmup", "cooldown", "p2p wait", "other wait", "F p50", "F p95", "B p50", "B p95", "live/bound"},
		func(row func(...string)) {
			for _, s := range rep.Stages {
				bound := "?"
				if s.LiveBound > 0 {
					bound = fmt.Sprint(s.LiveBound)
				}
				row(fmt.Sprint(s.Stage), fmt.Sprint(s.Rank), f3(s.BusyMs), f3(s.IdleMs), f3(s.WarmupMs), f3(s.CooldownMs),
					f3(s.P2PWaitMs), f3(s.OtherWaitMs), f3(s.F.MedianMs), f3(s.F.P95Ms), f3(s.B.MedianMs), f3(s.B.P95Ms),
					fmt.Sprintf("%d/%s", s.PeakLiveMicroBatches, bound))
			}
		})
}

func (t *textWriter) imbalance(rep *analyze.Report) {
	im := rep.Imbalance
	if im.SlowestStage < 0 {
		return
	}
	t.section("Imbalance")
	t.line("slowest stage by busy time: %d, %.3f ms vs mean %.3f ms (+%.1f %%)", im.SlowestStage, im.BusyMs, im.MeanBusyMs, 100*im.ExcessFrac)
	t.line("slowest stage by compute per micro-batch: %d, %.3f ms vs mean %.3f ms", im.SlowestStageByFB, im.FBMs, im.MeanFBMs)
	if im.BalancedStepMs > 0 {
		t.line("step time if every stage cost the mean stage (replay): %.3f ms (measured %.3f ms)", im.BalancedStepMs, im.MeasuredStepMs)
	}
}

func (t *textWriter) stragglers(rep *analyze.Report) {
	if len(rep.Stragglers) == 0 {
		return
	}
	t.section(fmt.Sprintf("Stragglers (top %d by delay caused)", min(len(rep.Stragglers), maxTextStragglers)))
	t.table([]string{"step", "pipe", "stage", "rank", "mb", "kind", "took ms", "expected ms", "x", "class", "delayed step ms"}, func(row func(...string)) {
		for i, s := range rep.Stragglers {
			if i == maxTextStragglers {
				break
			}
			row(fmt.Sprint(s.Step), fmt.Sprint(s.Pipeline), fmt.Sprint(s.Stage), fmt.Sprint(s.Rank), fmt.Sprint(s.MicroBatch),
				s.Kind, f3(s.DurMs), f3(s.ExpectedMs), fmt.Sprintf("%.2f", s.Factor), s.Class, f3(s.DelayMs))
		}
	})
}

func (t *textWriter) p2p(rep *analyze.Report) {
	p := rep.P2P
	if len(p.Boundaries) == 0 {
		return
	}
	t.section("P2P (per step per pipeline replica)")
	model := "unknown"
	if p.ModelBytesPerStep > 0 {
		model = bytesStr(p.ModelBytesPerStep)
	}
	t.line("sent %s (model m x (V_F + V_B): %s), exposed wait %.3f ms", bytesStr(p.BytesPerStep), model, p.ExposedMs)
	t.table([]string{"from", "to", "kind", "bytes", "model", "GB/s", "exposed ms"}, func(row func(...string)) {
		for _, b := range p.Boundaries {
			m, bw := "?", "-"
			if b.ModelBytesPerStep > 0 {
				m = bytesStr(b.ModelBytesPerStep)
			}
			if b.GBps > 0 {
				bw = fmt.Sprintf("%.2f", b.GBps)
			}
			row(fmt.Sprint(b.From), fmt.Sprint(b.To), b.Kind, bytesStr(b.BytesPerStep), m, bw, f3(b.ExposedMs))
		}
	})
}

func (t *textWriter) overhead(rep *analyze.Report) {
	if len(rep.Overhead) == 0 {
		return
	}
	t.section("Step overhead outside the pipeline window")
	for _, o := range rep.Overhead {
		t.line("%-10s %.3f ms per step (worst %.3f ms, in %d step(s))", o.Kind, o.MeanMs, o.MaxMs, o.Steps)
	}
}

func (t *textWriter) conformance(rep *analyze.Report) {
	c := rep.Schedule
	t.section("Schedule")
	if c.Identified == "" {
		t.line("not identified: no known schedule matches the op order within 25%%")
	} else {
		t.line("identified: %s; %d op(s) out of its order", scheduleName(rep), c.DeviationCount)
	}
	for i, d := range c.Deviations {
		if i == 3 {
			break
		}
		t.line("  step %d, rank %d (stage %d), op %d: want %s, got %s", d.Step, d.Rank, d.Stage, d.Index, d.Want, d.Got)
	}
	if c.ViolationCount == 0 {
		t.line("synchronous training: consistent (every F/B once, optimizer steps agree, no F before the previous OPT)")
		return
	}
	t.line("synchronous training: %d violation(s)", c.ViolationCount)
	for i, v := range c.Violations {
		if i == 5 {
			break
		}
		t.line("  %s: %s", v.Code, v.Message)
	}
}

func (t *textWriter) steps(rep *analyze.Report) {
	t.section("Steps")
	t.table([]string{"step", "pipeline", "window ms", "bubble", "balance", "utilisation", "complete"}, func(row func(...string)) {
		for i, s := range rep.Steps {
			if i == maxTextSteps {
				row("...", fmt.Sprintf("%d more", len(rep.Steps)-i), "", "", "", "", "")
				break
			}
			row(fmt.Sprint(s.Step), fmt.Sprint(s.Pipeline), f3(s.WindowMs()), fmt.Sprintf("%.4f", s.Bubble),
				fmt.Sprintf("%.4f", s.Balance), fmt.Sprintf("%.4f", s.UPipeline), fmt.Sprint(s.Complete))
		}
	})
}

func f3(x float64) string { return fmt.Sprintf("%.3f", x) }

// bytesStr prints a byte count with a binary unit.
func bytesStr(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.2f %s", b, units[i])
}

// table writes an aligned text table, or a Markdown one.
func (t *textWriter) table(head []string, rows func(row func(...string))) {
	b := &t.b
	var all [][]string
	rows(func(cells ...string) { all = append(all, cells) })
	if t.md {
		fmt.Fprintf(b, "\n| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat(" --- |", len(head)))
		for _, r := range all {
			fmt.Fprintf(b, "| %s |\n", strings.Join(r, " | "))
		}
		return
	}
	width := make([]int, len(head))
	for i, h := range head {
		width[i] = len(h)
	}
	for _, r := range all {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	line := func(cells []string) {
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			fmt.Fprintf(b, "%*s", width[i], c)
		}
		b.WriteString("\n")
	}
	line(head)
	for _, r := range all {
		line(r)
	}
}
