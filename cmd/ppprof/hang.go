package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/report"
	"github.com/ppprof/ppprof/trace"
	"github.com/spf13/cobra"
)

type hangOptions struct {
	paths     []string
	format    string
	quiet     bool
	dumpNs    int64
	worldSize int
	stream    string // --stream: auto, always or never
	memory    string // --max-memory
	stdout    io.Writer
	stderr    io.Writer
}

func newCmdHang(stdout, stderr io.Writer) *cobra.Command {
	opts := &hangOptions{stdout: stdout, stderr: stderr}
	cmd := &cobra.Command{
		Use:   "hang PATH...",
		Short: "Diagnose a hung job: the ranks whose send/recv or collectives stopped matching, where, and why",
		Long: `hang reads what every rank recorded before a hang (files, directories,
globs; truncated files and ranks that wrote nothing included; PyTorch Flight
Recorder dumps too), matches sends and receives as NCCL does (per rank pair,
or per process group and rank pair, in issue order) and collectives per
process group by sequence number (who posted each, who completed it, who
never arrived), builds the wait-for graph of the blocked ranks and names the
root cause.

Verdicts: ok, deadlock (a wait-for cycle), stalled (a chain ending at a rank
that is computing, crashed, exited, absent, idle with nothing in flight, or
stuck in a collective the other members completed), mismatch (a pair
disagrees on its labels, shape, dtype or bytes, members of a collective
disagree on it, or ranks disagree on skipping the optimizer step), incomplete
(the answer depends on events the dump lost).

A trace larger than memory is read a few pipeline replicas at a time
(--stream; ppprof's own formats only): each chunk is matched and checked on
its own and leaves behind only each rank's frontier (its pending ops, its last
completed op, what it is blocked in), the mismatched pairs and unmatched ops,
and the collectives; the report is the one a whole read gives.

Exit status: 4 for deadlock, stalled or mismatch; 0 for ok and for incomplete
(with a warning: nothing was found, the dump cannot decide); 1 for bad input.`,
		Args: cobra.MinimumNArgs(1),
		RunE: readingArgs(func(args []string) error {
			opts.paths = args
			return hangRun(opts)
		}),
	}
	cmd.Flags().StringVar(&opts.format, "format", "text", "output format: text or json")
	cmd.Flags().BoolVarP(&opts.quiet, "quiet", "q", false, "do not print warnings about the input or an incomplete dump, nor the progress line")
	cmd.Flags().Int64Var(&opts.dumpNs, "dump-ns", 0, "when the dump was written, on the trace's time base (0: the latest timestamp in the trace)")
	cmd.Flags().IntVar(&opts.worldSize, "world-size", 0, "ranks in the job (0: the trace's world_size metadata); ranks without events are absent")
	cmd.Flags().StringVar(&opts.stream, "stream", "auto", "read the input a few pipeline replicas at a time (for traces larger than memory): auto, always or never")
	cmd.Flags().StringVar(&opts.memory, "max-memory", "", "memory the diagnosis may plan for, e.g. 8G or 512M (default: the machine's RAM); sizes --stream's decision and chunks")
	return cmd
}

func hangRun(opts *hangOptions) error {
	format, err := report.ParseFormat(opts.format)
	if err != nil || format == report.Markdown {
		return fmt.Errorf("--format %q: want text or json", opts.format)
	}
	if opts.worldSize < 0 {
		return fmt.Errorf("--world-size %d: want >= 0", opts.worldSize)
	}
	plan, err := planStreamFast(opts.paths, opts.stream, opts.memory, false, hangBytesPerEvent, hangAutoStreamRows)
	if err != nil {
		return err
	}
	var rep *hang.Report
	if plan.stream {
		rep, err = hangStreamed(opts, plan)
	} else {
		rep, err = hangWhole(opts)
	}
	if err != nil {
		return err
	}
	if err := report.WriteHang(opts.stdout, rep, format); err != nil {
		return err
	}
	switch {
	case rep.Verdict.Found():
		return &exitCodeError{code: exitHangFound}
	case rep.Verdict == hang.VerdictIncomplete && !opts.quiet:
		fmt.Fprintf(opts.stderr, "ppprof: warning: verdict incomplete, exit status 0: %s\n", rep.RootCause.Summary)
	}
	return nil
}

// hangBytesPerEvent is what hang needs per event of a trace it reads whole
// (the model, about 160 bytes, and the diagnosis' scratch), measured
// (docs/performance.md "Memory"): --stream auto streams when the input
// would need more than half the memory.
const hangBytesPerEvent = 200

// hangAutoStreamRows: under --stream auto, hang streams an input of Arrow
// files that fits in memory from this many events on (and in at least
// autoStreamChunks chunks), for speed: a job's hung rank files read whole
// cost their model's fresh memory (1.6 GB for 12.3M events), which this
// host pays for in kernel time. Twenty-sixth session, hung fleet jobs
// (PP 16 x TP 8 x DP 32, 32 replicas), three runs each in turns, read
// whole against streamed: 3.1M events 0.79-1.08 s against 0.95-1.13 s;
// 6.2M 0.86-1.66 s against 1.29-1.44 s; 12.3M 2.6-3.8 s (1.58 GB)
// against 1.8-2.7 s (0.18 GB); 18.5M 3.2-4.4 s (2.31 GB) against 2.0-2.7
// s (0.15-0.18 GB); dumps missing ranks (the first 1024 or 2048 of a
// 24.7M-event job's 4096 rank files, which the twenty-second session found
// slower streamed), 6.2M events 0.53-2.38 s against 1.19-1.39 s, 12.3M
// 2.9-3.3 s against 1.7-2.2 s; the same reports (docs/performance-
// history.md, "Before and after the twenty-sixth session"). A variable
// for the tests.
var hangAutoStreamRows int64 = 8_000_000

// hangWhole is hang of a trace read whole (ingest.Open, hang.Run).
func hangWhole(opts *hangOptions) (*hang.Report, error) {
	readAs("whole")
	if opts.stream == "never" { // auto reads whole only what fits
		if err := checkFitsWhole(opts.paths, "use --stream auto (the default) or always"); err != nil {
			return nil, err
		}
	} else if err := checkFRFits(opts.paths); err != nil { // dumps are read whole whatever --stream says
		return nil, err
	}
	res, err := openWithProgress(opts.paths, nil, opts.quiet, opts.stderr)
	if err != nil {
		return nil, err
	}
	hopt := hang.Options{DumpNs: opts.dumpNs, WorldSize: opts.worldSize, Files: hangFiles(res.Files)}
	hopt.Groups, hopt.Dumps = hangComms(res.Comms)
	// The trace is the live heap; the diagnosis' garbage is collected
	// before it piles up to the trace's size again (GOGC 100): a
	// 4096-rank job's Flight Recorder dumps peaked here, at 2.18 GB
	// instead of 2.02-2.12 (docs/performance.md, sixteenth session).
	defer collectOften()()
	var bar *progress
	hopt.Progress, bar = countProgress(opts.stderr, opts.quiet, "diagnosing", "phases")
	rep, err := hang.Run(res.Trace, hopt)
	bar.done()
	if err != nil {
		return nil, fmt.Errorf("diagnosing %s: %w", describePaths(opts.paths), err)
	}
	return rep, nil
}

// hangStreamed is hang of a trace read a few pipeline replicas at a time
// (ingest.OpenChunks, hang.RunChunks). Under --stream auto, input that
// cannot be chunked (other tools' formats, Flight Recorder dumps) is read
// whole after all.
func hangStreamed(opts *hangOptions, plan streamPlan) (*hang.Report, error) {
	ch, whole, err := openChunksAuto(opts.paths, plan, opts.stderr, opts.quiet, false)
	if whole {
		return hangWhole(opts)
	}
	readAs("streamed")
	if err != nil {
		return nil, err
	}
	if err := checkChunksFit(ch, opts.paths, "hang matches each replica's P2P ops over its whole history, so it reads a replica at once"); err != nil {
		return nil, err
	}
	// Mapped, not copied: the hung 302M-event fleet dump faster in seven
	// interleaved pairs of ten, less kernel time in nine
	// (docs/performance-history.md, "Before and after the ninth session").
	ch.MapFiles()
	// Each chunk is garbage once scanned, but for the few rows it leaves
	// behind: collect often, so the heap stays near one chunk.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	bar := newProgress(opts.stderr, "diagnosing", int64(ch.NumChunks()), "chunks", opts.quiet)
	defer bar.done()
	hopt := hang.Options{DumpNs: opts.dumpNs, WorldSize: opts.worldSize, Files: hangFiles(ch.Files),
		Progress: func(done, total int) { bar.set(int64(done)) }}
	rep, err := hang.RunChunks(ch, hopt)
	if err != nil {
		return nil, fmt.Errorf("diagnosing %s: %w", describePaths(opts.paths), err)
	}
	return rep, nil
}

// hangFiles passes what ingest knows about each file to the analysis.
func hangFiles(fs []ingest.FileInfo) []hang.File {
	out := make([]hang.File, len(fs))
	for i, f := range fs {
		out[i] = hang.File{Path: f.Path, Ranks: f.Ranks, Truncated: f.Truncated, BytesLost: f.BytesLost}
	}
	return out
}

// hangComms passes what ingest learnt about communicators (process groups,
// Flight Recorder dumps) to the analysis; nils when it learnt nothing.
func hangComms(c *ingest.Comms) (map[string]hang.Group, map[trace.Rank]hang.Dump) {
	if c == nil {
		return nil, nil
	}
	var groups map[string]hang.Group
	if len(c.Groups) > 0 {
		groups = make(map[string]hang.Group, len(c.Groups))
		for name, g := range c.Groups {
			groups[name] = hang.Group{Desc: g.Desc, Ranks: g.Ranks}
		}
	}
	var dumps map[trace.Rank]hang.Dump
	if len(c.FlightRecorder) > 0 {
		dumps = make(map[trace.Rank]hang.Dump, len(c.FlightRecorder))
		for r, f := range c.FlightRecorder {
			d := hang.Dump{Path: f.Path, Entries: f.Entries, Progress: make(map[string]hang.GroupProgress, len(f.PGStatus))}
			for k, st := range f.PGStatus {
				d.Progress[k] = hang.GroupProgress{LastEnqueued: st.LastEnqueued, LastStarted: st.LastStarted, LastCompleted: st.LastCompleted}
			}
			dumps[r] = d
		}
	}
	return groups, dumps
}
