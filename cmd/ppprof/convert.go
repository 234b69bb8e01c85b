package main

import (
	"fmt"
	"io"

	"github.com/ppprof/ppprof/trace/arrowv1"
	"github.com/spf13/cobra"
)

type convertOptions struct {
	paths       []string
	out         string
	compression string
	quiet       bool
	maps        []string // --map rules (mapflags.go)
	stdout      io.Writer
	stderr      io.Writer
}

func newCmdConvert(stdout, stderr io.Writer) *cobra.Command {
	opts := &convertOptions{stdout: stdout, stderr: stderr}
	cmd := &cobra.Command{
		Use:   "convert PATH... -o trace.arrow",
		Short: "Merge traces (Arrow, CSV, JSONL, Kineto, Megatron timelines, Chrome traces, Flight Recorder dumps) into one Arrow file",
		Long: `convert reads traces of any format ppprof knows (recognised by content:
Arrow, CSV, JSONL, torch.profiler / Kineto JSON, Megatron-style timer
timelines, plain Chrome traces such as PiPPy's, PyTorch Flight Recorder
dumps), merges every rank's files and writes one Arrow file. What could
not be mapped or had to be inferred is printed as warnings. See
docs/formats.md for the mapping rules.`,
		Args: cobra.MinimumNArgs(1),
		RunE: readingArgs(func(args []string) error {
			opts.paths = args
			return convertRun(opts)
		}),
	}
	cmd.Flags().StringVarP(&opts.out, "output", "o", "", "the Arrow file to write")
	cmd.Flags().StringVar(&opts.compression, "compression", "", "record batch compression: none, lz4 or zstd")
	cmd.Flags().BoolVarP(&opts.quiet, "quiet", "q", false, "do not print warnings about the input, nor the progress line")
	addMapFlag(cmd, &opts.maps)
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func convertRun(opts *convertOptions) error {
	comp, err := arrowv1.ParseCompression(opts.compression)
	if err != nil {
		return fmt.Errorf("--compression: %w", err)
	}
	if err := checkFitsWhole(opts.paths, "convert merges its input in memory; convert fewer files at a time"); err != nil {
		return err
	}
	res, err := openWithProgress(opts.paths, opts.maps, opts.quiet, opts.stderr)
	if err != nil {
		return err
	}
	// Writing a large trace takes seconds (20 s for 24.7M events
	// uncompressed on the benchmarks' host): a bar counts the events.
	bar := newProgress(opts.stderr, "writing", int64(res.Trace.Len()), "events", opts.quiet)
	err = writeArrowFile(opts.out, res.Trace, arrowv1.Options{Compression: comp, Progress: func(done, _ int) { bar.set(int64(done)) }})
	bar.done()
	return err
}
