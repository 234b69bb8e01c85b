package hang

import (
	"sync"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

var (
	bigOnce  sync.Once
	bigTrace *trace.Trace
)

// BigHang is bigHang for the external tests.
var BigHang = bigHang

// bigHang is a 4096-rank hang: 1F1B, PP 16 x TP 8 x DP 32, 32 micro-batches,
// 2 steps; rank 1283 (stage 5, pipeline 0, TP rank 3) skips micro-batch 16
// of step 1. About 1.5 million events (a million of them P2P ops),
// simulated once.
func bigHang(tb testing.TB) *trace.Trace {
	bigOnce.Do(func() {
		c := sim.Config{Schedule: "1f1b", Stages: 16, TP: 8, DP: 32, MicroBatches: 32, Steps: 2,
			Faults: []sim.Fault{{Kind: sim.FaultSkip, Rank: 5*32*8 + 3, Step: 1, MicroBatch: 16}}}
		t, err := sim.Run(c)
		if err != nil {
			tb.Fatalf("sim.Run: %v", err)
		}
		bigTrace = t
	})
	return bigTrace
}

// p2pOps counts the P2P rows of t.
func p2pOps(t *trace.Trace) int {
	n := 0
	for _, k := range t.Kind {
		if k.IsP2P() {
			n++
		}
	}
	return n
}

// BenchmarkMatch4096 is the matching step alone (every send paired with
// its receive, every pair's labels checked) on the 4096-rank hang, and
// reports P2P ops matched per second. Run it with -cpu 1 for the figure
// per core.
func BenchmarkMatch4096(b *testing.B) {
	tr := bigHang(b)
	a, err := newAnalysis(tr, Options{})
	if err != nil {
		b.Fatal(err)
	}
	a.scanRanks()
	ops := p2pOps(tr)
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		a.chans, a.pairMM, a.rep.Matched = nil, nil, 0
		a.match()
	}
	reportCPU(b, cpu0, ops)
	b.ReportMetric(float64(ops)*float64(b.N)/b.Elapsed().Seconds(), "p2p-ops/s")
	if 2*a.rep.Matched+64 < ops {
		b.Fatalf("matched %d pairs of %d ops", a.rep.Matched, ops)
	}
}

// BenchmarkMatchColumns4096 is the floor under BenchmarkMatch4096 on
// this machine: one pass over the columns matching reads of every row
// (kind and peer, then step, micro-batch, bytes, shape and dtype: the
// labels every pair compares), summed and nothing else, on the same
// trace. Its "p2p-ops/cpu-s" is the rate matching would have if it cost
// no more than reading its columns once; bench/run.sh prints it beside
// the matching's. Run it with -cpu 1.
func BenchmarkMatchColumns4096(b *testing.B) {
	t := bigHang(b)
	ops := p2pOps(t)
	n := t.Len()
	kind, peer, step, mb, bytes, shape, dtype := t.Kind[:n], t.Peer[:n], t.Step[:n], t.MicroBatch[:n], t.Bytes[:n], t.Shape[:n], t.Dtype[:n]
	var sum uint64
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		for i := range kind {
			sum += uint64(kind[i]) ^ uint64(peer[i]) ^ uint64(step[i]) ^ uint64(mb[i]) ^ uint64(bytes[i]) ^ uint64(shape[i]) ^ uint64(dtype[i])
		}
	}
	reportCPU(b, cpu0, ops)
	b.ReportMetric(float64(2+4+8+4+8+4+4), "B/row") // the columns read
	if sum == 0 {
		b.Fatal("no rows")
	}
}

// reportCPU reports the CPU time per op since cpu0 (all threads: with
// -cpu 1 it is the time of one core), and ops per CPU second.
func reportCPU(b *testing.B, cpu0 int64, ops int) {
	if cpu0 < 0 {
		return
	}
	ns := float64(cpuTime()-cpu0) / float64(b.N)
	b.ReportMetric(ns, "cpu-ns/op")
	b.ReportMetric(float64(ops)/ns*1e9, "p2p-ops/cpu-s")
}

// SetDenseSeqs sets denseSeqs (collective matching's arrays by sequence
// number) for the external tests, and returns its previous value.
func SetDenseSeqs(on bool) bool {
	old := denseSeqs
	denseSeqs = on
	return old
}

// ReportCPU and CPUTime are reportCPU and cpuTime for the external tests.
var (
	ReportCPU = reportCPU
	CPUTime   = cpuTime
)
