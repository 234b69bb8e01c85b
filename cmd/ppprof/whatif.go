package main

import (
	"fmt"
	"io"
	"runtime/debug"

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

A trace that fits is read whole. With --step N, ppprof's rank files, and
a trace too large to read whole (--stream; ppprof's own formats only), are
read a few pipeline replicas at a time, keeping only step N's events: the
what-if of one step of a fleet-sized job. Without --step, a trace too large
to read whole (or any under --stream always) is read a few whole steps at a
time, held packed between the phases when it fits in memory that way: the
what-if of every step of a fleet-sized job, the same as read whole.`,
		Args: cobra.MinimumNArgs(1),
		RunE: readingArgs(func(args []string) error {
			opts.paths = args
			return whatIfRun(opts)
		}),
	}
	cmd.Flags().StringVar(&opts.format, "format", "text", "output format: text, json or markdown")
	cmd.Flags().StringVar(&opts.step, "step", "all", "the step to analyse (a number), or all")
	cmd.Flags().StringArrayVar(&opts.scenarios, "scenario", nil, "a scenario to report (repeatable; default all)")
	cmd.Flags().BoolVarP(&opts.quiet, "quiet", "q", false, "do not print warnings about the input, nor the progress line")
	cmd.Flags().StringVar(&opts.stream, "stream", "auto", "read a trace too large to read whole in chunks (with --step N only that step's events, a few pipeline replicas at a time; else a few whole steps at a time): auto, always or never")
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
	if plan.stream && step < 0 {
		// Every step of a trace too large to read whole: a few whole
		// steps at a time.
		wi, whole, err := whatIfAllStreamed(opts, plan)
		if !whole {
			if err != nil {
				return err
			}
			return report.WriteWhatIf(opts.stdout, wi, format)
		}
		plan.stream = false
	}
	var t *trace.Trace
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
	wi, err := analyze.RunWhatIf(t, analyze.WhatIfOptions{Step: step, Scenarios: opts.scenarios, GraphMemory: whatIfGraphMemory(plan), Progress: onPhase})
	bar.done()
	if err != nil {
		return fmt.Errorf("what-if on %s: %w", describePaths(opts.paths), err)
	}
	return report.WriteWhatIf(opts.stdout, wi, format)
}

// whatIfAllStreamed is the what-if of every step of a trace read a few
// whole steps at a time (analyze.RunWhatIfChunks): the job's files opened
// as one group, cut between steps (ingest.Chunks.CutSteps: Arrow rank
// files whose steps never decrease), the chunks held packed between the
// phases when they fit (plan.packBytes), else read again by each. Under
// --stream auto, input that cannot be chunked (other tools' formats) is
// read whole after all, if it fits.
func whatIfAllStreamed(opts *whatIfOptions, plan streamPlan) (wi *analyze.WhatIf, whole bool, err error) {
	plan.chunkRows = 0 // one group of every file, cut below
	ch, whole, err := openChunks(opts.paths, plan, opts.stderr, opts.quiet)
	if whole || err != nil {
		return nil, whole, err
	}
	readAs("streamed")
	bar := newProgress(opts.stderr, "indexing steps", 0, "files", opts.quiet)
	cutAs(ch.CutStepsBatches(1, whatIfStepRows(plan), whatIfCutBatches, func(done, total int) {
		bar.update(func() { bar.total, bar.cur = int64(total), int64(done) })
	}), ch.NumChunks())
	bar.done()
	// A chunk the what-if could not hold: files that cannot be cut
	// between steps left whole (or a step larger than the machine).
	ram := machineMemory()
	if ram > 0 {
		for i := range ch.NumChunks() {
			if n := int64(ch.Rows(i)); n*whatIfBytesPerEvent > ram {
				return nil, false, fmt.Errorf("%s: the what-if of every step reads a few whole steps at a time, but %d events must be read at once (%s at %d bytes an event, more than this machine's %s of memory): its files cannot be cut between steps (Arrow rank files, not gzip-compressed, whose steps never decrease, can); give --step N",
					describePaths(opts.paths), n, gib(n*whatIfBytesPerEvent), whatIfBytesPerEvent, gib(ram))
			}
		}
	}
	// What the what-if keeps of every step until its statistics are
	// made: refused when it alone would not fit; and the chunks are held
	// packed only in what three fifths of the memory leave beside it
	// (the rest: the chunk at hand, the step graphs, the collector's
	// slack), else read again by each phase. The 302M-event fleet trace
	// keeps 7.3 GB and packs in 4.5 with its lists, within 23.5 GiB.
	kept := int64(ch.Events) * whatIfKeptBytesPerEvent
	if ram > 0 && kept > ram {
		return nil, false, fmt.Errorf("%s: the what-if of every step keeps about %d bytes an event of every step for its statistics: %d events need %s, more than this machine's %s of memory; give --step N",
			describePaths(opts.paths), whatIfKeptBytesPerEvent, ch.Events, gib(kept), gib(ram))
	}
	// As analyzeStreamed: chunks unpacked or read again by each phase
	// are garbage as soon as it moves on.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	onPhase, pbar := stepsProgress(opts.stderr, opts.quiet, "what-if", "phases")
	wi, err = analyze.RunWhatIfChunks(ch, analyze.WhatIfOptions{Step: analyze.AllSteps, Scenarios: opts.scenarios, GraphMemory: whatIfGraphMemory(plan), Progress: onPhase},
		analyze.Options{PackBytes: max(min(plan.packBytes, plan.ram/5*3-kept), 0)})
	pbar.done()
	if err != nil {
		return nil, false, fmt.Errorf("what-if on %s: %w", describePaths(opts.paths), err)
	}
	return wi, false, nil
}

// whatIfGraphMemory is what the what-if's step graphs may take at once
// (analyze.WhatIfOptions.GraphMemory): a third of the memory planned for,
// the rest being the trace (whole, or packed and a chunk at hand), what
// the statistics keep and the collector's slack. A graph takes about
// analyze.GraphNodeBytes an event of its step: a step of a 32768-rank job
// (24.6M events, 5.7 GB) is re-timed one at a time within 23.5 GiB,
// where two at a time peaked at 18.7 GB.
func whatIfGraphMemory(plan streamPlan) int64 { return plan.ram / 3 }

// whatIfKeptBytesPerEvent is what the streamed what-if of every step
// keeps per event of the trace until its statistics are made, besides the
// packed chunks and the op groups' lists (analyze.RunChunks counts
// those): each step's samples (8 bytes a compute op and receive) and
// transfers (32 bytes a receive), and the P2P fit's copy of the
// transfers (20 bytes each). Measured on the 302M-event fleet trace:
// 1.6 + 3.2 + 2.0 GB, 22.5 bytes an event.
const whatIfKeptBytesPerEvent = 24

// whatIfCutBatches is the fewest record batches of each file a chunk of
// the streamed what-if of every step reads (ingest.Chunks.CutStepsBatches):
// ppprof's rank files hold 2048 rows a batch, about three steps of a
// fleet job's rank, and a batch across a cut is decoded by both chunks:
// chunks of a few steps each (about 2.7 of the fleet trace's), most
// batches decoded once or twice. (At CutSteps' four, the 24.7M-event
// fleet trace made one chunk: no memory saved.)
const whatIfCutBatches = 1

// whatIfStepRows is the most rows of a chunk of whole steps the streamed
// what-if of every step reads at once (a step of more is a chunk of its
// own, and a chunk holds at least whatIfCutBatches record batches of each
// file): a tenth of the memory's worth at whatIfBytesPerEvent.
func whatIfStepRows(plan streamPlan) int {
	return int(max(plan.ram/10/whatIfBytesPerEvent, 1))
}

// whatIfWhole reads the input whole for the what-if, refusing before it
// decodes anything an input that cannot fit.
func whatIfWhole(opts *whatIfOptions) (*trace.Trace, error) {
	if err := checkFitsWhole(opts.paths, "whatif reads this input whole (--stream never, or files of other tools' formats); --stream auto reads ppprof's Arrow rank files a few whole steps at a time, or give --step N (one step is read, a few pipeline replicas at a time)"); err != nil {
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
