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

type exportOptions struct {
	paths     []string
	pprof     string
	perfetto  string
	parquet   string
	partition string // --parquet-partition
	step      string
	quiet     bool
	maps      []string
	stream    string // --stream: auto, always or never
	memory    string // --max-memory
	stdout    io.Writer
	stderr    io.Writer
}

func newCmdExport(stdout, stderr io.Writer) *cobra.Command {
	opts := &exportOptions{stdout: stdout, stderr: stderr}
	cmd := &cobra.Command{
		Use:   "export PATH... [--pprof FILE] [--perfetto FILE] [--parquet DIR]",
		Short: "Export a trace for pprof, Perfetto / chrome://tracing, or Parquet (Spark, Trino, DuckDB)",
		Long: `export reads a trace (files, directories, globs; many ranks merge) and
writes it for other tools; give one or more of:

--pprof FILE     a pprof profile of wall time: stacks read pipeline > stage >
                 kind > micro-batch, idle time as idle:warmup, idle:cooldown,
                 idle:p2p-wait and idle:other; labels step, rank, micro-batch.
                 go tool pprof -top FILE, or -http=: FILE for flame graphs.
--perfetto FILE  Chrome trace-event JSON: one process per rank, compute, send
                 and receive tracks, flow arrows from each send to its matched
                 receive. Open it in ui.perfetto.dev or chrome://tracing.
--parquet DIR    the events as Parquet under DIR/step=S/rank=R/part-0.parquet
                 (hive partitioning); DIR must be new or empty. With
                 --parquet-partition step, DIR/step=S/part-N.parquet and
                 rank a column: far fewer, larger files for a fleet job.

--step N limits every export to step N; of ppprof's Arrow rank files, and
of a trace too large to read whole, only step N's events are then read
(--stream), a few pipeline replicas at a time. --parquet alone streams
every step as well (large Arrow rank files, and any trace too large to
read whole): the same files. See docs/report.md.`,
		Args: cobra.MinimumNArgs(1),
		RunE: readingArgs(func(args []string) error {
			opts.paths = args
			return exportRun(opts)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&opts.pprof, "pprof", "", "write a pprof profile to FILE")
	f.StringVar(&opts.perfetto, "perfetto", "", "write Chrome trace-event JSON (Perfetto) to FILE")
	f.StringVar(&opts.parquet, "parquet", "", "write Parquet files under DIR")
	f.StringVar(&opts.partition, "parquet-partition", "step,rank", "the Parquet files' partitions: step,rank (a file per step and rank) or step (a file per step and chunk read, rank a column)")
	f.StringVar(&opts.step, "step", "all", "the step to export (a number), or all")
	f.BoolVarP(&opts.quiet, "quiet", "q", false, "do not print warnings about the input, nor the progress line")
	f.StringVar(&opts.stream, "stream", "auto", "read a few pipeline replicas at a time: with --step N only that step's events, with --parquet alone every step; auto, always or never")
	f.StringVar(&opts.memory, "max-memory", "", "memory the export may plan for, e.g. 8G or 512M (default: the machine's RAM); sizes --stream's decision and chunks")
	addMapFlag(cmd, &opts.maps)
	return cmd
}

func exportRun(opts *exportOptions) error {
	if opts.pprof == "" && opts.perfetto == "" && opts.parquet == "" {
		return fmt.Errorf("nothing to write: give --pprof FILE, --perfetto FILE or --parquet DIR")
	}
	step, err := parseStep(opts.step)
	if err != nil {
		return err
	}
	layout, err := report.ParseParquetLayout(opts.partition)
	if err != nil {
		return fmt.Errorf("--parquet-partition: %w", err)
	}
	parquetOnly := opts.pprof == "" && opts.perfetto == ""
	var plan streamPlan
	if step < 0 && parquetOnly {
		// The Parquet export of every step streams: each chunk read once,
		// its files written, and let go.
		plan, err = planStreamFast(opts.paths, opts.stream, opts.memory, len(opts.maps) > 0, whatIfBytesPerEvent, parquetAutoStreamRows)
	} else {
		plan, err = planStreamFor(opts.paths, opts.stream, opts.memory, len(opts.maps) > 0, whatIfBytesPerEvent)
	}
	if err != nil {
		return err
	}
	plan.forStep(opts.paths, step, len(opts.maps) > 0)
	if plan.stream && step < 0 {
		if parquetOnly {
			done, err := exportParquetStreamed(opts, plan, layout)
			if done || err != nil {
				return err
			}
		} else if opts.stream == "always" {
			return errors.New("--stream always reads one step for --pprof and --perfetto: give --step N (their export of every step reads the trace whole; --parquet alone streams every step)")
		}
		plan.stream = false // auto: as large as it is, read whole if it fits
	}
	var t *trace.Trace
	whole := !plan.stream
	if plan.stream {
		t, _, whole, err = readStep(opts.paths, step, plan, opts.stderr, opts.quiet)
		if err != nil {
			return err
		}
		if !whole {
			readAs("streamed")
		}
	}
	if whole {
		readAs("whole")
		if err := checkFitsWhole(opts.paths, "export reads its input whole for --pprof and --perfetto; give --step N (one step is read, a few pipeline replicas at a time), export --parquet alone (it streams every step), or export fewer files at a time (a pipeline replica's rank files)"); err != nil {
			return err
		}
		res, err := openWithProgress(opts.paths, opts.maps, opts.quiet, opts.stderr)
		if err != nil {
			return err
		}
		if t = res.Trace; step >= 0 {
			t = t.StepRows(step)
		}
	}
	if step >= 0 && t.Len() == 0 {
		return fmt.Errorf("%s: no events in step %d", describePaths(opts.paths), step)
	}
	// Each export is tried; one failing does not stop the others. A bar
	// names the one under way (each takes seconds on a fleet job's
	// trace); what was written is printed once the bar is gone.
	type export struct {
		name, label, path string
		write             func() error
	}
	var exports []export
	if opts.perfetto != "" {
		exports = append(exports, export{"Chrome trace", "Chrome trace:  ", opts.perfetto, func() error {
			return writeFileAtomic(opts.perfetto, func(w io.Writer) error { return report.WritePerfetto(w, t) })
		}})
	}
	if opts.parquet != "" {
		exports = append(exports, export{"Parquet", "Parquet:       ", opts.parquet, func() error {
			w, err := report.NewParquetWriter(opts.parquet, layout)
			if err != nil {
				return err
			}
			return w.Write(t)
		}})
	}
	if opts.pprof != "" {
		exports = append(exports, export{"pprof profile", "pprof profile: ", opts.pprof, func() error {
			return writeFileAtomic(opts.pprof, func(w io.Writer) error {
				return report.WritePprof(w, t, analyze.Options{Step: analyze.AllSteps})
			})
		}})
	}
	onStep, bar := stepsProgress(opts.stderr, opts.quiet, "exporting", "files")
	var errs []error
	var written []string
	for i, e := range exports {
		onStep(i, len(exports), e.name)
		if err := e.write(); err != nil {
			errs = append(errs, err)
		} else {
			written = append(written, e.label+e.path)
		}
	}
	bar.done()
	for _, w := range written {
		fmt.Fprintln(opts.stdout, w)
	}
	return errors.Join(errs...)
}

// parquetAutoStreamRows: under --stream auto, the Parquet export of every
// step streams ppprof's Arrow files from this many events (in at least
// autoStreamChunks chunks), whether or not they fit read whole: each chunk
// is read once either way, and streamed the export holds one chunk, not
// the trace (docs/performance.md "Beyond one machine").
var parquetAutoStreamRows int64 = 4_000_000

// exportParquetStreamed writes the Parquet export of every step of a trace
// read a few pipeline replicas at a time: each chunk's (step, rank) files
// are written as it is read (report.ParquetWriter), the same files as of
// the trace read whole. done is false when the input is to be read whole
// after all (openChunksAuto).
func exportParquetStreamed(opts *exportOptions, plan streamPlan, layout report.ParquetLayout) (done bool, err error) {
	ch, whole, err := openChunksAuto(opts.paths, plan, opts.stderr, opts.quiet, false)
	if whole {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	readAs("streamed")
	if err := checkChunksFit(ch, opts.paths, "the Parquet export reads a pipeline replica at once"); err != nil {
		return true, err
	}
	w, err := report.NewParquetWriter(opts.parquet, layout)
	if err != nil {
		return true, err
	}
	// The default collector pace: the chunk held is pointer-free columns,
	// cheap to mark, and what the Parquet writer allocates a file is
	// garbage at once (24.7M events: 21.8-23.9 s against 25.6-28.2 s at
	// GOGC 25, for 0.31 GB peak against 0.19).
	bar := newProgress(opts.stderr, "exporting Parquet", int64(ch.NumChunks()), "chunks", opts.quiet)
	for i := range ch.NumChunks() {
		t, err := ch.Chunk(i)
		if err != nil {
			bar.done()
			return true, err
		}
		if err := w.Write(t); err != nil {
			bar.done()
			return true, err
		}
		ch.Recycle(t)
		bar.set(int64(i + 1))
	}
	bar.done()
	fmt.Fprintf(opts.stdout, "Parquet:       %s\n", opts.parquet)
	return true, nil
}
