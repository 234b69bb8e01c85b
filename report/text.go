package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/ppprof/ppprof/analyze"
)

// writeText renders rep for a terminal, or as Markdown tables when md is set.
func writeText(w io.Writer, rep *analyze.Report, md bool) error {
	var b strings.Builder
	j := rep.Job
	sched := j.Schedule
	if sched == "" {
		sched = "unknown schedule"
	}
	title := fmt.Sprintf("Job: %d ranks, PP %d x TP %d x DP %d, %s, v=%d, %d micro-batches, %d step(s), %d events",
		j.WorldSize, j.PP, max(j.TP, 1), max(j.DP, 1), sched, j.Virtual, j.MicroBatches, j.Steps, j.Events)
	if md {
		fmt.Fprintf(&b, "# ppprof analysis\n\n%s\n\n", title)
	} else {
		fmt.Fprintf(&b, "%s\n\n", title)
	}
	u := rep.Utilization
	fmt.Fprintf(&b, "Step time (median):   %10.3f ms\n", rep.StepMs)
	fmt.Fprintf(&b, "Pipeline utilisation: %9.2f %%  = (1 - bubble %.2f %%) x balance %.2f %%\n",
		100*u.Pipeline, 100*u.Bubble, 100*u.Balance)
	if rep.Bubble.Theoretical != nil {
		fmt.Fprintf(&b, "Bubble: measured %.4f, theoretical %.4f (schedule %s)\n", rep.Bubble.Measured, *rep.Bubble.Theoretical, sched)
	} else {
		fmt.Fprintf(&b, "Bubble: measured %.4f, theoretical unknown (no schedule in the trace metadata)\n", rep.Bubble.Measured)
	}
	fmt.Fprintf(&b, "Idle split (share of stage time): warmup %.4f, cooldown %.4f, steady %.4f\n",
		rep.Bubble.Warmup, rep.Bubble.Cooldown, rep.Bubble.Steady)
	if u.Compute != nil {
		fmt.Fprintf(&b, "Compute efficiency %.2f %%, MFU %.2f %%\n", 100**u.Compute, 100**u.MFU)
	} else {
		fmt.Fprintf(&b, "Compute efficiency and MFU: unknown (needs flops per op and peak_flops in the metadata)\n")
	}
	b.WriteString("\n")

	table(&b, md, []string{"stage", "rank", "fwd ms", "bwd ms", "busy ms", "idle ms", "bubble", "peak live"}, func(row func(...string)) {
		for _, s := range rep.Stages {
			row(fmt.Sprint(s.Stage), fmt.Sprint(s.Rank), f3(s.FwdMs), f3(s.BwdMs), f3(s.BusyMs), f3(s.IdleMs),
				fmt.Sprintf("%.4f", s.Bubble), fmt.Sprint(s.PeakLiveMicroBatches))
		}
	})
	b.WriteString("\n")
	table(&b, md, []string{"step", "pipeline", "window ms", "bubble", "balance", "utilisation", "complete"}, func(row func(...string)) {
		for _, s := range rep.Steps {
			row(fmt.Sprint(s.Step), fmt.Sprint(s.Pipeline), f3(s.WindowMs()), fmt.Sprintf("%.4f", s.Bubble),
				fmt.Sprintf("%.4f", s.Balance), fmt.Sprintf("%.4f", s.UPipeline), fmt.Sprint(s.Complete))
		}
	})
	if len(rep.Findings) > 0 {
		b.WriteString("\nFindings:\n")
		for _, f := range rep.Findings {
			fmt.Fprintf(&b, "- [%s] %s: %s\n", f.Severity, f.Code, f.Message)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func f3(x float64) string { return fmt.Sprintf("%.3f", x) }

// table writes an aligned text table, or a Markdown one.
func table(b *strings.Builder, md bool, head []string, rows func(row func(...string))) {
	var all [][]string
	rows(func(cells ...string) { all = append(all, cells) })
	if md {
		fmt.Fprintf(b, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat(" --- |", len(head)))
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
