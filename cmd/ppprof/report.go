package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/internal/cleanup"
	"github.com/ppprof/ppprof/report"
	"github.com/ppprof/ppprof/trace"
	"github.com/spf13/cobra"
)

type reportOptions struct {
	paths  []string
	html   string
	png    string
	width  int
	height int
	panels string
	step   string
	quiet  bool
	maps   []string
	stream string // --stream: auto, always or never
	memory string // --max-memory
	stdout io.Writer
	stderr io.Writer
}

func newCmdReport(stdout, stderr io.Writer) *cobra.Command {
	opts := &reportOptions{stdout: stdout, stderr: stderr}
	cmd := &cobra.Command{
		Use:   "report PATH... [--html FILE] [--png FILE]",
		Short: "Write the analysis as a PNG (for CI logs) and a self-contained HTML report",
		Long: `report analyses a trace (files, directories, globs; many ranks merge) and
draws it.

--png FILE writes one image: the pipeline timeline of one step (one row per
stage, or per chunk when interleaved; F, B and W boxes labelled with their
micro-batch, P2P waits thin, warmup/steady/cooldown marked, the slowest
stage highlighted), the live micro-batches per stage against the schedule's
bound, the utilisation waterfall (100% -> bubble -> imbalance -> compute
efficiency -> MFU) and per-stage busy/idle bars with idle split by cause.

--html FILE writes one self-contained page (no network: inline styles,
script and SVG) with the job summary, findings, the hang verdict and
wait-for graph of a hung trace, an interactive timeline (wheel to zoom,
drag to pan, hover for an op's details), the charts and every table.

--step N analyses and draws step N; by default every step is analysed and
the timeline shows the first step with a pending op, else the complete step
of median length. With --step N, ppprof's rank files, and a trace too
large to read whole (--stream; ppprof's own formats only), are analysed
and diagnosed a few pipeline replicas at a time and only step N's events
are kept for the drawings and the what-if: the same report. Without
--step, a trace too large to read whole (or any, with --stream always) is
analysed and diagnosed the same way, every step, and only the drawn
step's events are kept: the same report but for the what-if, which then
re-times that step alone (its section says so). See docs/report.md.`,
		Args: cobra.MinimumNArgs(1),
		RunE: readingArgs(func(args []string) error {
			opts.paths = args
			return reportRun(opts)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&opts.html, "html", "", "write the HTML report to FILE")
	f.StringVar(&opts.png, "png", "", "write the PNG report to FILE")
	f.IntVar(&opts.width, "width", report.DefaultPNGWidth, "PNG width, pixels")
	f.IntVar(&opts.height, "height", 0, "PNG height, pixels (0: fit the panels)")
	f.StringVar(&opts.panels, "panels", "all", "PNG panels, comma-separated: timeline, waterfall, stages, memory (or all)")
	f.StringVar(&opts.step, "step", "all", "the step to analyse and draw (a number), or all")
	f.BoolVarP(&opts.quiet, "quiet", "q", false, "do not print warnings about the input, nor the progress line")
	f.StringVar(&opts.stream, "stream", "auto", "read the input a few pipeline replicas at a time: with --step N keeping only that step's events, without it analysing every step and keeping the drawn step's (for traces too large to read whole): auto, always or never")
	f.StringVar(&opts.memory, "max-memory", "", "memory the report may plan for, e.g. 8G or 512M (default: the machine's RAM); sizes --stream's decision and chunks")
	addMapFlag(cmd, &opts.maps)
	return cmd
}

func reportRun(opts *reportOptions) error {
	if opts.html == "" && opts.png == "" {
		return fmt.Errorf("nothing to write: give --html FILE, --png FILE or both")
	}
	panels, err := report.ParsePanels(opts.panels)
	if err != nil {
		return fmt.Errorf("--panels: %w", err)
	}
	step, err := parseStep(opts.step)
	if err != nil {
		return err
	}
	plan, err := planStreamFor(opts.paths, opts.stream, opts.memory, len(opts.maps) > 0, whatIfBytesPerEvent)
	if err != nil {
		return err
	}
	plan.forStep(opts.paths, step, len(opts.maps) > 0)
	if plan.stream && step < 0 && opts.stream == "auto" && checkFitsWhole(opts.paths, "") == nil {
		plan.stream = false // every step: read whole whatever its size, if it fits
	}
	var in reportInput
	switch {
	case plan.stream && step < 0:
		in, err = reportAllStreamed(opts, plan)
	case plan.stream:
		in, err = reportStep(opts, step, plan)
	default:
		in, err = reportWhole(opts, step)
	}
	if err != nil {
		return err
	}
	t, rep := in.t, in.rep
	whatIfStep, whatIfTrace := step, t
	if in.whatIf != nil {
		whatIfStep, whatIfTrace = in.whatIfStep, in.whatIf
	}
	defer collectOften()()
	if opts.png != "" {
		popt := report.PNGOptions{Width: opts.width, Height: opts.height, Panels: panels, Step: step}
		if err := writeFileAtomic(opts.png, func(w io.Writer) error { return report.WritePNG(w, t, rep, popt) }); err != nil {
			return err
		}
		fmt.Fprintf(opts.stdout, "PNG report:  %s\n", opts.png)
	}
	if opts.html != "" {
		hopt := report.HTMLOptions{Step: step, Hang: in.hang()}
		onPhase, bar := stepsProgress(opts.stderr, opts.quiet, "what-if", "phases")
		wi, err := analyze.RunWhatIf(whatIfTrace, analyze.WhatIfOptions{Step: whatIfStep, Analysis: rep, GraphMemory: whatIfGraphMemory(plan), Progress: onPhase})
		bar.done()
		if err == nil {
			hopt.WhatIf = wi
			if in.whatIf != nil {
				hopt.WhatIfNote = in.whatIfNote
			}
		} else if !opts.quiet {
			fmt.Fprintf(opts.stderr, "ppprof: warning: no what-if section: %v\n", err)
		}
		if err := writeFileAtomic(opts.html, func(w io.Writer) error { return report.WriteHTML(w, t, rep, hopt) }); err != nil {
			return err
		}
		fmt.Fprintf(opts.stdout, "HTML report: %s\n", opts.html)
	}
	return nil
}

// reportInput is what a report is drawn from: the trace (or the step of
// it drawn), its analysis, and the hang post-mortem, run when asked for.
type reportInput struct {
	t    *trace.Trace
	rep  *analyze.Report
	hang func() *hang.Report
	// Of a report of every step that holds one step of the trace
	// (reportAllStreamed): the what-if re-times whatIfStep alone, whose
	// events whatIf holds (t itself when it is the step drawn), and its
	// section says so (whatIfNote). whatIf is nil otherwise: the what-if
	// is of t, as the report's steps.
	whatIf     *trace.Trace
	whatIfStep int64
	whatIfNote string
}

// reportWhole reads the input whole and analyses it, refusing before it
// decodes anything an input that cannot fit.
func reportWhole(opts *reportOptions, step int64) (reportInput, error) {
	if err := checkFitsWhole(opts.paths, "report reads its input whole; give --step N (one step is drawn, the trace read a few pipeline replicas at a time), use ppprof analyze (which streams) for the numbers, or report on fewer files (a pipeline replica's rank files)"); err != nil {
		return reportInput{}, err
	}
	res, err := openWithProgress(opts.paths, opts.maps, opts.quiet, opts.stderr)
	if err != nil {
		return reportInput{}, err
	}
	t := res.Trace
	onPass, bar := analyzeProgress(opts.stderr, opts.quiet, false)
	rep, err := analyze.Run(t, analyze.Options{Step: step, Progress: onPass})
	bar.done()
	if err != nil {
		return reportInput{}, fmt.Errorf("analyzing %s: %w", describePaths(opts.paths), err)
	}
	return reportInput{t: t, rep: rep, hang: func() *hang.Report { return hangReport(t, res, opts.stderr, opts.quiet) }}, nil
}

// reportStep is the report of one step of a trace read a few pipeline
// replicas at a time: the analysis of step N streamed (as analyze --step
// N streams it), step N's events read for the drawings and the what-if
// (ingest.Chunks.ReadStep), and the hang post-mortem streamed (as hang
// streams it). Under --stream auto, input that cannot be chunked (other
// tools' formats) is read whole after all.
func reportStep(opts *reportOptions, step int64, plan streamPlan) (reportInput, error) {
	t, ch, whole, err := readStep(opts.paths, step, plan, opts.stderr, opts.quiet)
	if whole {
		return reportWhole(opts, step)
	}
	if err != nil {
		return reportInput{}, err
	}
	// The analysis opens the input again (it may cut replicas between
	// steps, which the hang post-mortem must not see): its warnings were
	// printed by readStep, its progress is shown.
	aopts := &analyzeOptions{paths: opts.paths, quiet: opts.quiet, noWarn: true, stream: "always", memory: opts.memory, stdout: io.Discard, stderr: opts.stderr}
	rep, err := analyzeStreamed(aopts, step, plan)
	if err != nil {
		return reportInput{}, err
	}
	return reportInput{t: t, rep: rep, hang: streamedHang(ch, opts)}, nil
}

// reportAllStreamed is the report of every step of a trace too large to
// read whole (or of --stream always without --step): every step analysed
// a few pipeline replicas at a time (as analyze streams it), the step the
// drawings show (report.DrawnStep: the first with a pending op, else the
// complete step of median length) read alone for them, the what-if of
// that step alone, and the hang post-mortem streamed. The numbers, tables
// and findings are those of the trace read whole; the what-if re-times
// one step instead of every step. Input that cannot be chunked is read
// whole after all (refused when it cannot fit).
func reportAllStreamed(opts *reportOptions, plan streamPlan) (reportInput, error) {
	ch, whole, err := openChunks(opts.paths, plan, opts.stderr, opts.quiet)
	if whole {
		return reportWhole(opts, analyze.AllSteps)
	}
	if err != nil {
		return reportInput{}, err
	}
	if err := checkChunksFit(ch, opts.paths, "the drawn step is read a pipeline replica at a time (the replica's events of the step whole, the others' shape columns)"); err != nil {
		return reportInput{}, err
	}
	// The analysis opens the input again (it may cut replicas between
	// steps, which the hang post-mortem must not see): its warnings were
	// printed by openChunks.
	aopts := &analyzeOptions{paths: opts.paths, quiet: opts.quiet, noWarn: true, stream: "always", memory: opts.memory, stdout: io.Discard, stderr: opts.stderr}
	rep, err := analyzeStreamed(aopts, analyze.AllSteps, plan)
	if err != nil {
		return reportInput{}, err
	}
	// The analysis' packed chunks are garbage now, but the collector
	// would wait for the heap to double over them (the fleet trace: 4.9
	// GB) before it runs: collected now, what follows reuses their memory
	// (fleet trace: peak RSS 8.3 GB without this, 4.95 with).
	runtime.GC()
	step, err := report.DrawnStep(rep)
	if err != nil {
		return reportInput{}, fmt.Errorf("%s: %w", describePaths(opts.paths), err)
	}
	// The what-if re-times the step drawn, or, when that one is hung, the
	// typical complete step (re-timing needs every op ended).
	wiStep := step
	if slices.ContainsFunc(rep.Steps, func(w analyze.StepWindow) bool { return w.Step == step && !w.Complete }) {
		if s, ok := report.TypicalStep(rep); ok {
			wiStep = s
		}
	}
	if !opts.quiet {
		fmt.Fprintf(opts.stderr, "ppprof: every step analysed a few pipeline replicas at a time, the trace not read whole; step %d drawn, the what-if of step %d (--step N for another)\n", step, wiStep)
	}
	read := func(s int64) (*trace.Trace, error) {
		bar := newProgress(opts.stderr, fmt.Sprintf("reading step %d", s), int64(ch.NumChunks()), "chunks", opts.quiet)
		defer bar.done()
		return ch.ReadStep(s, func(done, total int) { bar.set(int64(done)) })
	}
	in := reportInput{rep: rep, hang: streamedHang(ch, opts), whatIfStep: wiStep}
	if in.t, err = read(step); err != nil {
		return reportInput{}, err
	}
	in.whatIf = in.t
	if wiStep != step && opts.html != "" { // only the HTML has a what-if
		if in.whatIf, err = read(wiStep); err != nil {
			return reportInput{}, err
		}
	}
	drawn := "the step drawn below"
	if wiStep != step {
		drawn = fmt.Sprintf("the typical complete step (step %d, drawn below, never ended)", step)
	}
	in.whatIfNote = fmt.Sprintf("Of step %d only, %s: every step was analysed a few pipeline replicas at a time, the trace never read whole, and this step alone re-timed (ppprof whatif re-times every step, a few whole steps at a time; report --step N or whatif --step N another).", wiStep, drawn)
	return in, nil
}

// streamedHang is the hang post-mortem of a report's input read in chunks
// (as hang streams it), run when the HTML asks for it; a failure only
// leaves the section out.
func streamedHang(ch *ingest.Chunks, opts *reportOptions) func() *hang.Report {
	return func() *hang.Report {
		if err := checkChunksFit(ch, opts.paths, "hang matches each replica's P2P ops over its whole history, so it reads a replica at once"); err != nil {
			if !opts.quiet {
				fmt.Fprintf(opts.stderr, "ppprof: warning: no hang section: %v\n", err)
			}
			return nil
		}
		ch.MapFiles()
		defer debug.SetGCPercent(debug.SetGCPercent(25))
		bar := newProgress(opts.stderr, "diagnosing", int64(ch.NumChunks()), "chunks", opts.quiet)
		defer bar.done()
		h, err := hang.RunChunks(ch, hang.Options{Files: hangFiles(ch.Files), Progress: func(done, total int) { bar.set(int64(done)) }})
		if err != nil {
			if !opts.quiet {
				fmt.Fprintf(opts.stderr, "ppprof: warning: no hang section: %v\n", err)
			}
			return nil
		}
		return h
	}
}

// hangReport runs the hang post-mortem for the HTML report, with what
// ingest knows of the files and process groups, exactly as `ppprof hang`
// does; a failure only leaves the section out.
func hangReport(t *trace.Trace, res *ingest.Result, stderr io.Writer, quiet bool) *hang.Report {
	hopt := hang.Options{Files: hangFiles(res.Files)}
	hopt.Groups, hopt.Dumps = hangComms(res.Comms)
	var bar *progress
	hopt.Progress, bar = countProgress(stderr, quiet, "diagnosing", "phases")
	h, err := hang.Run(t, hopt)
	bar.done()
	if err != nil {
		if !quiet {
			fmt.Fprintf(stderr, "ppprof: warning: no hang section: %v\n", err)
		}
		return nil
	}
	return h
}

// writeFileAtomic writes path through fn: to a temporary file beside it,
// renamed into place once complete, so a failed run never leaves a partial
// report under the final name, nor does a signal that ends it leave the
// temporary file (createTemp). The file is made readable by all (0644),
// not only by its owner as the temporary file is.
func writeFileAtomic(path string, fn func(w io.Writer) error) error {
	tmp, err := createTemp(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer cleanup.Remove(tmp.Name()) // nothing left to remove once renamed
	bw := bufio.NewWriterSize(tmp, 1<<16)
	if err := fn(bw); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
