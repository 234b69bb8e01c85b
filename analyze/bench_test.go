package analyze

import (
	"runtime"
	"sync"
	"syscall"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

var (
	largeOnce  sync.Once
	largeTrace *trace.Trace
	largeErr   error
)

// largeSim is a 10.6 million event trace: PP 16 x TP 8 x DP 8 (1024 ranks),
// 1F1B, 64 micro-batches, 28 steps, with jitter and P2P costs. It is built
// once per test binary, only by the benchmark.
func largeSim() (*trace.Trace, error) {
	largeOnce.Do(func() {
		largeTrace, largeErr = sim.Run(sim.Config{Schedule: "1f1b", Stages: 16, MicroBatches: 64, Steps: 28,
			DP: 8, TP: 8, Jitter: 0.05, P2PLatencyUs: 10, P2PGbps: 400, OptMs: 2, Seed: 3})
	})
	return largeTrace, largeErr
}

// BenchmarkAnalyzeLarge runs the whole analysis on a 10M-event simulated
// trace and reports events/s and the heap the analysis itself allocated
// (bytes per event of the trace), so the cost of keeping the model in memory
// is not counted twice.
//
//	go test -run XXX -bench AnalyzeLarge -benchtime 3x ./analyze/
func BenchmarkAnalyzeLarge(b *testing.B) {
	t, err := largeSim()
	if err != nil {
		b.Fatal(err)
	}
	if t.Len() < 10_000_000 {
		b.Fatalf("only %d events", t.Len())
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Run(t, Options{Step: AllSteps}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&after)
	perRun := float64(after.TotalAlloc-before.TotalAlloc) / float64(b.N)
	b.ReportMetric(float64(t.Len())*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(perRun/float64(t.Len()), "alloc-B/event")
	b.ReportMetric(float64(t.Len()), "events")
	b.ReportMetric(float64(cpu)/float64(b.N)/float64(t.Len()), "cpu-ns/event")
}

// cpuTime is the process's user + system CPU time so far, ns (the
// benchmarks report it beside the wall time: on a shared machine it is
// the steadier figure).
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
