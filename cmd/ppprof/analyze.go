package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/report"
	"github.com/spf13/cobra"
)

type analyzeOptions struct {
	paths  []string
	format string
	step   string
	failOn []string
	quiet  bool
	maps   []string // --map rules (mapflags.go)
	stream string   // --stream: auto, always or never
	memory string   // --max-memory: what the analysis may use ("" = the machine's RAM)
	// noWarn: input warnings are not printed (another read of the same
	// input printed them), progress still is.
	noWarn bool
	stdout io.Writer
	stderr io.Writer
}

func newCmdAnalyze(stdout, stderr io.Writer) *cobra.Command {
	opts := &analyzeOptions{stdout: stdout, stderr: stderr}
	cmd := &cobra.Command{
		Use:   "analyze PATH...",
		Short: "Break pipeline utilisation into bubble and balance, per step and stage",
		Long: `analyze reads a trace (files, directories, globs; many ranks merge) and
prints the job shape, the step time, the pipeline utilisation as
(1 - bubble) x balance, the measured bubble beside the schedule's theory,
and per-stage and per-step tables. Definitions: README "The numbers".`,
		Args: cobra.MinimumNArgs(1),
		RunE: readingArgs(func(args []string) error {
			opts.paths = args
			return analyzeRun(opts)
		}),
	}
	cmd.Flags().StringVar(&opts.format, "format", "text", "output format: text, json or markdown")
	cmd.Flags().StringVar(&opts.step, "step", "all", "the step to analyse (a number), or all")
	cmd.Flags().StringArrayVar(&opts.failOn, "fail-on", nil, "exit 3 when a threshold is crossed, e.g. 'bubble>0.3', 'balance<0.9', 'mfu<0.4', 'step_ms>1200' (repeatable)")
	cmd.Flags().BoolVarP(&opts.quiet, "quiet", "q", false, "do not print warnings about the input, nor the progress line")
	cmd.Flags().StringVar(&opts.stream, "stream", "auto", "read the input a few pipeline replicas at a time (for traces larger than memory; auto also streams Arrow files of 16M events or more in 4+ chunks): auto, always or never")
	cmd.Flags().StringVar(&opts.memory, "max-memory", "", "memory the analysis may plan for, e.g. 8G or 512M (default: the machine's RAM); sizes --stream's decision and chunks")
	addMapFlag(cmd, &opts.maps)
	return cmd
}

func parseStep(s string) (int64, error) {
	if s == "all" || s == "" {
		return analyze.AllSteps, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--step %q: want a step number or all", s)
	}
	return n, nil
}

func analyzeRun(opts *analyzeOptions) error {
	format, err := report.ParseFormat(opts.format)
	if err != nil {
		return fmt.Errorf("--format: %w", err)
	}
	step, err := parseStep(opts.step)
	if err != nil {
		return err
	}
	gates, err := parseGates(opts.failOn)
	if err != nil {
		return err
	}
	plan, err := planStream(opts.paths, opts.stream, opts.memory, len(opts.maps) > 0)
	if err != nil {
		return err
	}
	plan.forStep(opts.paths, step, len(opts.maps) > 0)
	var rep *analyze.Report
	if plan.stream {
		rep, err = analyzeStreamed(opts, step, plan)
	} else {
		rep, err = analyzeWhole(opts, step)
	}
	if err != nil {
		return err
	}
	if err := report.Write(opts.stdout, rep, format); err != nil {
		return err
	}
	if len(gates) == 0 {
		return nil
	}
	vals, _, err := analysisValues(rep)
	if err != nil {
		return err
	}
	return checkGates(gates, vals, opts.stderr)
}

// readAs is told how analyze or hang (also export and whatif, streamed)
// reads its input ("whole" or "streamed"): a hook for the tests, which see
// the same output either way.
var readAs = func(string) {}

// analyzeWhole is analyze of a trace read whole (ingest.Open, analyze.Run).
func analyzeWhole(opts *analyzeOptions, step int64) (*analyze.Report, error) {
	readAs("whole")
	if opts.stream == "never" { // auto reads whole only what fits
		if err := checkFitsWhole(opts.paths, "use --stream auto (the default) or always"); err != nil {
			return nil, err
		}
	} else if err := checkFRFits(opts.paths); err != nil { // dumps are read whole whatever --stream says
		return nil, err
	}
	res, err := openWithProgress(opts.paths, opts.maps, opts.quiet, opts.stderr)
	if err != nil {
		return nil, err
	}
	onPass, bar := analyzeProgress(opts.stderr, opts.quiet, false)
	defer bar.done()
	rep, err := analyze.Run(res.Trace, analyze.Options{Step: step, Progress: onPass})
	if err != nil {
		return nil, fmt.Errorf("analyzing %s: %w", describePaths(opts.paths), err)
	}
	return rep, nil
}
