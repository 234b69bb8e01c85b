package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
	"github.com/spf13/cobra"
)

type simulateOptions struct {
	cfg         sim.Config
	stragglers  []string
	slowRanks   []string
	faults      []string
	out         string
	compression string
	fleet       fleetOptions // --fleet (simulate_fleet.go)
	quiet       bool
	stdout      io.Writer
	stderr      io.Writer
}

func newCmdSimulate(stdout, stderr io.Writer) *cobra.Command {
	opts := &simulateOptions{stdout: stdout, stderr: stderr}
	c := &opts.cfg
	cmd := &cobra.Command{
		Use:   "simulate -o FILE|DIR",
		Short: "Simulate a pipeline schedule and write the trace a collector would",
		Long: `simulate runs a pipeline schedule on a cost model in a discrete-event
simulator and writes the trace a collector would have written.

-o DIR (an existing directory) writes one Arrow stream per rank, named
rank-NNNNN.arrows; -o FILE writes one Arrow file holding every rank.

Ranks are numbered as Megatron does: rank = (stage*dp + pipeline)*tp + tp_rank.
Fault specs (--fault, repeatable):
  skip:rank=R,step=S,mb=M     R never runs micro-batch M of step S
  shape:rank=R,step=S,mb=M    R sends micro-batch M with a wrong shape
  dtype:rank=R,step=S,mb=M    R sends micro-batch M with a wrong dtype
  crash:rank=R,step=S,mb=M    R dies at micro-batch M of step S
  exit:rank=R,step=S          R exits before step S
  reorder:rank=R,step=S,mb=M  R issues its sends of M and M+1 swapped
  optskip:rank=R,step=S       only R skips its optimizer step`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return simulateRun(opts) },
	}
	f := cmd.Flags()
	f.StringVar(&c.Schedule, "schedule", "1f1b", "schedule: gpipe, 1f1b, interleaved or zb-h1")
	f.IntVar(&c.Stages, "stages", 4, "pipeline stages (p)")
	f.IntVar(&c.MicroBatches, "microbatches", 8, "micro-batches per step (m)")
	f.IntVar(&c.Virtual, "virtual", 0, "model chunks per stage for interleaved (v; 0: 2 for interleaved, else 1)")
	f.IntVar(&c.Steps, "steps", 1, "optimizer steps")
	f.IntVar(&c.DP, "dp", 1, "data-parallel pipeline replicas")
	f.IntVar(&c.TP, "tp", 1, "tensor-parallel ranks per stage")
	f.Float64Var(&c.FwdMs, "fwd-ms", 1, "forward time of one micro-batch on one stage, ms")
	f.Float64Var(&c.BwdMs, "bwd-ms", 2, "backward time of one micro-batch on one stage, ms")
	f.Float64Var(&c.WgradMs, "wgrad-ms", 0, "backward-weight time (zb-h1), ms; see sim docs for 0")
	f.Float64Var(&c.OptMs, "opt-ms", 0, "optimizer step time, ms")
	f.Float64Var(&c.P2PLatencyUs, "p2p-latency-us", 0, "P2P latency, µs (0 with --p2p-gbps 0: free)")
	f.Float64Var(&c.P2PGbps, "p2p-gbps", 0, "P2P bandwidth, Gbit/s (0: infinite)")
	f.IntVar(&c.SlowStage, "slow-stage", -1, "stage whose compute is slowed by --slow-factor (-1: none)")
	f.Float64Var(&c.SlowFactor, "slow-factor", 1, "compute time multiplier of --slow-stage")
	f.StringArrayVar(&opts.stragglers, "straggler", nil, "slow micro-batch: mb=M,factor=X[,stage=S][,step=N] (repeatable)")
	f.StringArrayVar(&opts.slowRanks, "slow-worker", nil, "one slow worker (a stage of one replica, all its TP ranks): [pipeline=P,]stage=S,factor=X (repeatable)")
	f.Float64Var(&c.Jitter, "jitter", 0, "relative random variation of compute times (seeded)")
	f.Int64Var(&c.Seed, "seed", 1, "random seed")
	f.StringArrayVar(&opts.faults, "fault", nil, "fault spec, see above (repeatable)")
	f.StringVar(&c.Job, "job", "simulated", "job name written to the trace metadata")
	f.StringVarP(&opts.out, "output", "o", "", "output: an Arrow file, or an existing directory for per-rank streams")
	f.StringVar(&opts.compression, "compression", "", "record batch compression: none, lz4 or zstd")
	f.BoolVar(&opts.fleet.on, "fleet", false, "fleet-sized jobs: simulate one step and replica at a time and stream each rank's rows to -o DIR, never holding the trace (faults apply; no slow workers; see docs/performance.md)")
	f.IntVar(&opts.fleet.batchRows, "fleet-batch-rows", 2048, "--fleet: rows per rank buffered (packed, ~10-30 bytes a row) and written as one record batch")
	f.BoolVarP(&opts.quiet, "quiet", "q", false, "no progress bar or summary on stderr")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func simulateRun(opts *simulateOptions) error {
	c := opts.cfg
	for _, s := range opts.stragglers {
		st, err := sim.ParseStraggler(s)
		if err != nil {
			return fmt.Errorf("--straggler %q: %w", s, err)
		}
		c.Stragglers = append(c.Stragglers, st)
	}
	for _, s := range opts.slowRanks {
		sr, err := sim.ParseSlowRank(s)
		if err != nil {
			return fmt.Errorf("--slow-worker %q: %w", s, err)
		}
		c.SlowRanks = append(c.SlowRanks, sr)
	}
	for _, s := range opts.faults {
		ft, err := sim.ParseFault(s)
		if err != nil {
			return fmt.Errorf("--fault %q: %w", s, err)
		}
		c.Faults = append(c.Faults, ft)
	}
	comp, err := arrowv1.ParseCompression(opts.compression)
	if err != nil {
		return fmt.Errorf("--compression: %w", err)
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	if opts.fleet.on {
		return simulateFleet(opts, c, arrowv1.Options{Compression: comp})
	}
	t, err := sim.Run(c)
	if err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	aopt := arrowv1.Options{Compression: comp}
	if fi, err := os.Stat(opts.out); err == nil && fi.IsDir() {
		return writeRankStreams(opts.out, t, aopt)
	}
	return writeArrowFile(opts.out, t, aopt)
}

// writeArrowFile writes t as one Arrow IPC file, atomically: a partial file
// never appears under the final name (writeFileAtomic).
func writeArrowFile(path string, t *trace.Trace, opt arrowv1.Options) error {
	return writeFileAtomic(path, func(w io.Writer) error { return arrowv1.WriteFile(w, t, opt) })
}

// writeRankStreams writes what a collector would: one Arrow stream per rank,
// rank-NNNNN.arrows, in dir.
func writeRankStreams(dir string, t *trace.Trace, opt arrowv1.Options) error {
	start := 0
	for start < t.Len() {
		end := start
		for end < t.Len() && t.Rank[end] == t.Rank[start] {
			end++
		}
		rows := t.Slice(start, end)
		path := filepath.Join(dir, fmt.Sprintf("rank-%05d.arrows", t.Rank[start]))
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		err = arrowv1.WriteStream(f, rows, opt)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		start = end
	}
	return nil
}
