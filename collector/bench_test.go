package collector

import (
	"io"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// BenchmarkBeginEnd is the hot-path cost of one recorded event (a Begin
// and its End) with the host clock. Batches are written between bursts,
// off the clock, as a real job's writer works while the training thread
// computes: see BenchmarkBeginEndSustained for the writer competing.
func BenchmarkBeginEnd(b *testing.B) {
	r, err := New(Config{Dir: b.TempDir(), Log: io.Discard, BatchEvents: drainEvery})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	op := Op{Kind: trace.F, Step: 1, MicroBatch: 3}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.End(r.Begin(op))
		if i%drainEvery == drainEvery-1 {
			drain(b, r)
		}
	}
	b.StopTimer()
	reportDropped(b, r)
}

// BenchmarkBeginEndSustained records millions of events per second with
// the default configuration: the writer encodes batches at the same time,
// on the other cores, and its allocations make the garbage collector run.
// The worst case, far beyond a training job's thousands of events a second.
func BenchmarkBeginEndSustained(b *testing.B) {
	r, err := New(Config{Dir: b.TempDir(), Log: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	op := Op{Kind: trace.F, Step: 1, MicroBatch: 3}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.End(r.Begin(op))
		if i%drainEvery == drainEvery-1 {
			drain(b, r)
		}
	}
	b.StopTimer()
	reportDropped(b, r)
}

// drainEvery is how many events a benchmark records before it lets the
// writer catch up, off the clock: a real job records thousands of events
// per second, not tens of millions, and the cost to measure is that of an
// event that is recorded, not dropped.
const drainEvery = DefaultBufferEvents / 2

func drain(b *testing.B, r *Recorder) {
	b.StopTimer()
	if err := r.Flush(); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
}

func reportDropped(b *testing.B, r *Recorder) {
	if st := r.Stats(); st.Dropped > 0 {
		b.Errorf("%d of %d events dropped: the benchmark measures the drop path", st.Dropped, b.N)
	}
}

// BenchmarkIssueComplete is BenchmarkBeginEnd for a P2P op with labels.
func BenchmarkIssueComplete(b *testing.B) {
	r, err := New(Config{Dir: b.TempDir(), Log: io.Discard, Rank: 1, BatchEvents: drainEvery})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	op := Op{Kind: trace.SendF, Step: 1, MicroBatch: 3, Peer: 2, Bytes: 1 << 20, Shape: "4x2048x1024", Dtype: "bf16"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Complete(r.Issue(op))
		if i%drainEvery == drainEvery-1 {
			drain(b, r)
		}
	}
	b.StopTimer()
	reportDropped(b, r)
}

// TestHotPathAllocs: recording allocates nothing.
func TestHotPathAllocs(t *testing.T) {
	r := newTestRecorder(t, Config{Rank: 1})
	op := Op{Kind: trace.SendF, Peer: 2, Shape: "4x4", Dtype: "bf16"}
	f := Op{Kind: trace.F}
	n := testing.AllocsPerRun(1000, func() {
		r.Complete(r.Issue(op))
		r.End(r.Begin(f))
		r.OptimizerEnd(r.OptimizerBegin(1, 0), true)
	})
	if n != 0 {
		t.Errorf("%v allocations per run, want 0", n)
	}
}
