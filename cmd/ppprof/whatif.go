package main

import (
	"fmt"
	"io"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/report"
	"github.com/spf13/cobra"
)

type whatIfOptions struct {
	paths     []string
	format    string
	step      string
	scenarios []string
	quiet     bool
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
assumptions: docs/whatif.md.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.paths = args
			return whatIfRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.format, "format", "text", "output format: text, json or markdown")
	cmd.Flags().StringVar(&opts.step, "step", "all", "the step to analyse (a number), or all")
	cmd.Flags().StringArrayVar(&opts.scenarios, "scenario", nil, "a scenario to report (repeatable; default all)")
	cmd.Flags().BoolVarP(&opts.quiet, "quiet", "q", false, "do not print warnings about the input")
	return cmd
}

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
	if err := checkFitsWhole(opts.paths, "whatif reads its input whole; give it the files of fewer pipeline replicas (e.g. one replica's rank files), or use ppprof analyze, which streams"); err != nil {
		return err
	}
	res, err := openTraces(opts.paths, opts.quiet, opts.stderr)
	if err != nil {
		return err
	}
	wi, err := analyze.RunWhatIf(res.Trace, analyze.WhatIfOptions{Step: step, Scenarios: opts.scenarios})
	if err != nil {
		return fmt.Errorf("what-if on %s: %w", describePaths(opts.paths), err)
	}
	return report.WriteWhatIf(opts.stdout, wi, format)
}
