package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/report"
	"github.com/ppprof/ppprof/trace"
	"github.com/spf13/cobra"
)

type whatIfOptions struct {
	paths     []string
	format    string
	step      string
	scenarios []string
	quiet     bool
	stream    string // --stream: auto, always or never
	memory    string // --max-memory
	stdout    io.Writer
	stderr    io.Writer
}

func newCmdWhatIf(stdout, stderr io.Writer) *cobra.Command {
	opts := &whatIfOptions{stdout: stdout, stderr: stderr}
	cmd := &cobra.Command{
		Use:   "whatif PATH...",
		Short: "Predict the step time if a stage, a straggler, P2P, a slow worker or the schedule changed",
		Long: `whatif re-times each step of a trace through its dependency graph (each
rank's ops in order, sends matched to receives as NCCL does, OPT and grouped
collectives as barriers) with changed durations, and predicts the step time
of each scenario:

  balanced             every stage as fast as the median stage
  no_stragglers        straggling ops at their expected durations
  free_p2p             point-to-point transfers take no time
  slow_worker_fixed    the slowest worker restored to its peers in the other replicas
  double_microbatches  2m micro-batches of half the size (same global batch)
  interleave_v2        interleaved 1F1B with 2 chunks per stage
  zb_h1                ZB-H1 (backward split into B and W)

It also says whether a slow worker (one replica) or a slow stage (every
replica) costs the time, and prints the critical path. Definitions and
assumptions: docs/whatif.md.

The what-if of every step reads the trace whole. With --step N, ppprof's
rank files, and a trace too large to read whole (--stream; ppprof's own
formats only), are read a few pipeline replicas at a time, keeping only
step N's events: the what-if of one step of a fleet-sized job.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.paths = args
			return whatIfRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.format, "format", "text", "output format: text, json or markdown")
	cmd.Flags().StringVar(&opts.step, "step", "all", "the step to analyse (a number), or all")
	cmd.Flags().StringArrayVar(&opts.scenarios, "scenario", nil, "a scenario to report (repeatable; default all)")
	cmd.Flags().BoolVarP(&opts.quiet, "quiet", "q", false, "do not print warnings about the input, nor the progress line")
	cmd.Flags().StringVar(&opts.stream, "stream", "auto", "with --step N, read only that step's events, a few pipeline replicas at a time (for traces too large to read whole): auto, always or never")
	cmd.Flags().StringVar(&opts.memory, "max-memory", "", "memory the what-if may plan for, e.g. 8G or 512M (default: the machine's RAM); sizes --stream's decision and chunks")
	return cmd
}

// whatIfBytesPerEvent is what whatif needs per event of a trace it reads
// whole (the model, the analysis, the samples of every step, two step
// graphs at a time), measured on the 24.7M-event fleet trace: 310 bytes
// (docs/performance-history.md "Before and after the tenth session"); 256-261
// since the what-if collects often (collectOften, eleventh session). With --step
// N, --stream auto reads only the step when the input would need more than
// half the memory (and for several Arrow files whatever their size,
// streamPlan.forStep).
const whatIfBytesPerEvent = 280

func whatIfRun(opts *whatIfOptions) error {
	format, err := report.ParseFormat(opts.format)
	if err != nil {
		return fmt.Errorf("--format: %w", err)
	}
	step, err := parseStep(opts.step)
	if err != nil {
		return err
	}
	if err := analyze.CheckScenarios(opts.scenarios); err != nil {
		return fmt.Errorf("--scenario: %w", err)
	}
	plan, err := planStreamFor(opts.paths, opts.stream, opts.memory, false, whatIfBytesPerEvent)
	if err != nil {
		return err
	}
	plan.forStep(opts.paths, step, false)
	var t *trace.Trace
	if plan.stream && step < 0 {
		if opts.stream == "always" {
			return errors.New("--stream always reads one step: give --step N (the what-if of every step reads the trace whole)")
		}
		plan.stream = false // auto: as large as it is, read whole if it fits
	}
	if plan.stream {
		t, err = whatIfStep(opts, step, plan)
	} else {
		t, err = whatIfWhole(opts)
	}
	if err != nil {
		return err
	}
	defer collectOften()()
	onPhase, bar := stepsProgress(opts.stderr, opts.quiet, "what-if", "phases")
	wi, err := analyze.RunWhatIf(t, analyze.WhatIfOptions{Step: step, Scenarios: opts.scenarios, Progress: onPhase})
	bar.done()
	if err != nil {
		return fmt.Errorf("what-if on %s: %w", describePaths(opts.paths), err)
	}
	return report.WriteWhatIf(opts.stdout, wi, format)
}

// whatIfWhole reads the input whole for the what-if, refusing before it
// decodes anything an input that cannot fit.
func whatIfWhole(opts *whatIfOptions) (*trace.Trace, error) {
	if err := checkFitsWhole(opts.paths, "whatif reads its input whole; give --step N (one step is read, a few pipeline replicas at a time), give it the files of fewer pipeline replicas, or use ppprof analyze, which streams"); err != nil {
		return nil, err
	}
	res, err := openWithProgress(opts.paths, nil, opts.quiet, opts.stderr)
	if err != nil {
		return nil, err
	}
	return res.Trace, nil
}

// whatIfStep reads step's events of the input, a few pipeline replicas at
// a time (ingest.Chunks.ReadStep). Under --stream auto, input that cannot
// be chunked (other tools' formats) is read whole after all.
func whatIfStep(opts *whatIfOptions, step int64, plan streamPlan) (*trace.Trace, error) {
	t, _, whole, err := readStep(opts.paths, step, plan, opts.stderr, opts.quiet)
	if whole {
		return whatIfWhole(opts)
	}
	if err != nil {
		return nil, err
	}
	readAs("streamed")
	if t.Len() == 0 { // as the analysis of the whole trace says it
		return nil, fmt.Errorf("what-if on %s: no events for step %d", describePaths(opts.paths), step)
	}
	return t, nil
}
