package main

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/internal/frdump"
	"github.com/ppprof/ppprof/sim"
)

// frFleet is the job BenchmarkHangFlightRecorder diagnoses: PP 16 x TP 8
// x DP (PPPROF_FR_DP, default 32: 4096 ranks), 1F1B over 4 steps of 32
// micro-batches, 4 tensor-parallel collectives of each kind per compute
// op; the rank at stage 5, replica 0, TP rank 3 skips micro-batch 16 of
// the last step. Each rank's dump keeps its last 2000 entries, as
// TORCH_NCCL_TRACE_BUFFER_SIZE=2000 does: 8.2M entries, 1.3 GB of pickles.
func frFleet(dp int) frdump.Config {
	return frdump.Config{Sim: sim.Config{Schedule: "1f1b", Stages: 16, TP: 8, DP: dp, MicroBatches: 32, Steps: 4, P2PLatencyUs: 20,
		Faults: []sim.Fault{{Kind: sim.FaultSkip, Rank: (5*dp+0)*8 + 3, Step: 3, MicroBatch: 16}}},
		Layers: 4, Entries: 2000, SkewNs: 1000}
}

// BenchmarkHangFlightRecorder is `ppprof hang DIR` (read whole) on the
// Flight Recorder dumps of every rank of a hung fleet job (frFleet), and
// reports entries/s and MB/s of pickle. The dumps are written once per
// run of the benchmark, into its temporary directory.
func BenchmarkHangFlightRecorder(b *testing.B) {
	dp := 32
	if s := os.Getenv("PPPROF_FR_DP"); s != "" {
		var err error
		if dp, err = strconv.Atoi(s); err != nil || dp < 1 {
			b.Fatalf("PPPROF_FR_DP=%q: want a number of replicas", s)
		}
	}
	dir := b.TempDir()
	dumps, entries, err := frdump.Write(dir, frFleet(dp))
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	paths, _ := filepath.Glob(filepath.Join(dir, "_dump_*"))
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		size += st.Size()
	}
	b.ResetTimer()
	var rep *hang.Report
	for b.Loop() {
		rep, err = hangWhole(&hangOptions{paths: []string{dir}, quiet: true, stream: "never", stdout: io.Discard, stderr: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(entries)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
	b.ReportMetric(float64(dumps), "dumps")
	if rep.Job.RanksPresent != dumps {
		b.Fatalf("%d ranks diagnosed of %d dumps", rep.Job.RanksPresent, dumps)
	}
}
