package main

import (
	"fmt"
	"io"
	"os"

	"github.com/ppprof/ppprof/partition"
	"github.com/ppprof/ppprof/report"
	"github.com/spf13/cobra"
)

type partitionOptions struct {
	layers       string
	stages       int
	schedule     string
	microbatches int
	memLimit     int64
	format       string
	stdout       io.Writer
}

func newCmdPartition(stdout, _ io.Writer) *cobra.Command {
	opts := &partitionOptions{stdout: stdout}
	cmd := &cobra.Command{
		Use:   "partition --layers FILE --stages P",
		Short: "Split a model's layers into pipeline stages so that the slowest stage is as fast as it can be",
		Long: `partition reads per-layer costs from a CSV file (header
layer,fwd_ms,bwd_ms,act_bytes; rows named embedding and loss count on the
first and last stage) and prints the contiguous split of the layers into P
stages that minimises the slowest stage's forward + backward time per
micro-batch, with each stage's activation memory (its layers' act_bytes times
the schedule's live micro-batches on that stage) within --mem-limit. It also
predicts the step time of the split and of the even split by layer count by
replaying the schedule. Format and algorithm: docs/whatif.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return partitionRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.layers, "layers", "", "CSV file of per-layer costs (required)")
	cmd.Flags().IntVar(&opts.stages, "stages", 0, "pipeline stages (required)")
	cmd.Flags().StringVar(&opts.schedule, "schedule", "1f1b", "schedule: gpipe, 1f1b or zb-h1")
	cmd.Flags().IntVar(&opts.microbatches, "microbatches", 0, "micro-batches per step (0: 4 x stages)")
	cmd.Flags().Int64Var(&opts.memLimit, "mem-limit", 0, "activation bytes allowed per stage (0: no limit)")
	cmd.Flags().StringVar(&opts.format, "format", "text", "output format: text, json or markdown")
	_ = cmd.MarkFlagRequired("layers")
	_ = cmd.MarkFlagRequired("stages")
	return cmd
}

func partitionRun(opts *partitionOptions) error {
	format, err := report.ParseFormat(opts.format)
	if err != nil {
		return fmt.Errorf("--format: %w", err)
	}
	f, err := os.Open(opts.layers)
	if err != nil {
		return fmt.Errorf("--layers: %w", err)
	}
	defer f.Close()
	m, err := partition.ReadCSV(f)
	if err != nil {
		return fmt.Errorf("reading %s: %w", opts.layers, err)
	}
	res, err := partition.Solve(m, partition.Options{Stages: opts.stages, Schedule: opts.schedule,
		MicroBatches: opts.microbatches, MemLimitBytes: opts.memLimit})
	if err != nil {
		return fmt.Errorf("partitioning %s: %w", opts.layers, err)
	}
	return report.WritePartition(opts.stdout, res, format)
}
