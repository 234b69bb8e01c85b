package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/report"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace/arrowv1"
	"github.com/spf13/cobra"
)

type demoOptions struct {
	out    string
	stdout io.Writer
	stderr io.Writer
}

func newCmdDemo(stdout, stderr io.Writer) *cobra.Command {
	opts := &demoOptions{stdout: stdout, stderr: stderr}
	cmd := &cobra.Command{
		Use:   "demo [--out DIR]",
		Short: "Simulate a realistic job, analyse it and write its trace, PNG and HTML reports",
		Long: `demo needs no input. It simulates an 8-stage interleaved 1F1B job (v=2,
32 micro-batches, 2 steps) with a last stage 12% slower than the others
(the loss head), a few straggler micro-batches, variable sequence lengths,
jitter and realistic P2P costs; analyses it; and writes, into DIR:

  trace.arrow    the trace a collector would have written
  report.png     the PNG report (every panel)
  timeline.png   the timeline panel alone (docs/demo-timeline.png)
  report.html    the HTML report

then prints where they are and the text analysis. Without --out it makes a
new directory ppprof-demo-NNNN in the current directory (in the system's
temporary directory when the current one is not writable). The simulation
is seeded: every run writes the same trace.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return demoRun(opts) },
	}
	cmd.Flags().StringVarP(&opts.out, "out", "o", "", "directory to write into (created if missing; default: a new ./ppprof-demo-NNNN)")
	return cmd
}

// demoConfig is the demo job: realistic enough to show every panel.
func demoConfig() sim.Config {
	return sim.Config{
		Job:          "demo: 8-stage interleaved 1F1B",
		Schedule:     "interleaved",
		Stages:       8,
		MicroBatches: 32,
		Virtual:      2,
		Steps:        2,
		FwdMs:        6,
		BwdMs:        12,
		OptMs:        4,
		P2PLatencyUs: 25,
		P2PGbps:      800,
		SlowStage:    7,
		SlowFactor:   1.12,
		Stragglers: []sim.Straggler{
			{Step: -1, MicroBatch: 13, Stage: 3, Factor: 1.9},
			{Step: 1, MicroBatch: 22, Stage: 5, Factor: 2.2},
		},
		VarSeqLen:         true,
		Jitter:            0.03,
		Seed:              42,
		Device:            "H100-SXM",
		PeakFlops:         989e12,
		ComputeEfficiency: 0.55,
	}
}

func demoRun(opts *demoOptions) error {
	dir, err := demoDir(opts.out)
	if err != nil {
		return err
	}
	t, err := sim.Run(demoConfig())
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	tracePath := filepath.Join(dir, "trace.arrow")
	if err := writeArrowFile(tracePath, t, arrowv1.Options{}); err != nil {
		return err
	}
	rep, err := analyze.Run(t, analyze.Options{Step: analyze.AllSteps})
	if err != nil {
		return fmt.Errorf("demo: analyzing: %w", err)
	}
	pngPath := filepath.Join(dir, "report.png")
	if err := writeFileAtomic(pngPath, func(w io.Writer) error {
		return report.WritePNG(w, t, rep, report.PNGOptions{Step: analyze.AllSteps})
	}); err != nil {
		return err
	}
	tlPath := filepath.Join(dir, "timeline.png")
	if err := writeFileAtomic(tlPath, func(w io.Writer) error {
		return report.WritePNG(w, t, rep, report.PNGOptions{Width: 1200, Panels: []report.Panel{report.PanelTimeline}, Step: analyze.AllSteps})
	}); err != nil {
		return err
	}
	htmlPath := filepath.Join(dir, "report.html")
	hopt := report.HTMLOptions{Step: analyze.AllSteps}
	if wi, err := analyze.RunWhatIf(t, analyze.WhatIfOptions{Step: analyze.AllSteps, Analysis: rep}); err == nil {
		hopt.WhatIf = wi
	}
	if err := writeFileAtomic(htmlPath, func(w io.Writer) error {
		return report.WriteHTML(w, t, rep, hopt)
	}); err != nil {
		return err
	}
	fmt.Fprintf(opts.stdout, "Wrote the demo into %s:\n  trace:        %s\n  PNG report:   %s\n  timeline PNG: %s\n  HTML report:  %s\n\n",
		dir, tracePath, pngPath, tlPath, htmlPath)
	fmt.Fprintf(opts.stdout, "Next: ppprof analyze %s, or open %s in a browser.\n\n", tracePath, htmlPath)
	return report.Write(opts.stdout, rep, report.Text)
}

// demoDir returns the directory to write into: out (created when missing),
// or a new ppprof-demo-NNNN under the current directory, or under the
// system's temporary directory when the current one is not writable.
func demoDir(out string) (string, error) {
	if out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return "", fmt.Errorf("demo: %w", err)
		}
		return out, nil
	}
	dir, err := os.MkdirTemp(".", "ppprof-demo-")
	if err != nil {
		if dir, err = os.MkdirTemp("", "ppprof-demo-"); err != nil {
			return "", fmt.Errorf("demo: %w", err)
		}
	}
	return dir, nil
}
