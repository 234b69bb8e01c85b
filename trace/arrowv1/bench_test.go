package arrowv1

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/ppprof/ppprof/trace"
)

// benchEvents is the size of the benchmark trace.
const benchEvents = 1 << 20

// benchTrace is a trace shaped like a real one: 8 ranks running 1F1B-like
// steps (F, SEND_F, RECV_B, B, ... per micro-batch), times that advance by
// about a millisecond with jitter, constant shapes and dtypes, so that the
// compression figures mean something.
var benchTrace = sync.OnceValue(func() *trace.Trace {
	rng := rand.New(rand.NewSource(1))
	const ranks = 8
	t := &trace.Trace{Meta: trace.Meta{Job: "bench", WorldSize: ranks, PP: ranks, MicroBatches: 16, Schedule: "1f1b", Clock: trace.ClockCUDAEvent}}
	t.Grow(benchEvents)
	perRank := benchEvents / ranks
	cycle := []trace.Kind{trace.RecvF, trace.F, trace.SendF, trace.RecvB, trace.B, trace.SendB}
	for r := trace.Rank(0); r < ranks; r++ {
		now := int64(1_700_000_000_000_000_000) + rng.Int63n(1e6)
		for i := 0; i < perRank; i++ {
			k := cycle[i%len(cycle)]
			mb := (i / len(cycle)) % 16
			step := int64(i / (len(cycle) * 16))
			peer := trace.NoRank
			var nbytes int64
			shape, dtype := "", ""
			if k.IsP2P() {
				peer = (r + 1) % ranks
				if k == trace.RecvF || k == trace.SendB {
					peer = (r + ranks - 1) % ranks
				}
				nbytes, shape, dtype = 4096*2*8192*2, "4096x2x8192", "bf16"
			}
			dur := 200_000 + rng.Int63n(50_000)
			var flops float64
			if k.IsCompute() {
				dur = 1_000_000 + rng.Int63n(100_000)
				flops = 3.2e12
			}
			issue := now
			start := now + rng.Int63n(5_000)
			end := start + dur
			now = end + rng.Int63n(20_000)
			t.Append(trace.Event{
				Rank: r, Stage: trace.Stage(r), Step: step, MicroBatch: trace.MicroBatch(mb),
				Kind: k, Seq: int64(i), IssueNs: issue, StartNs: start, EndNs: end, Peer: peer,
				Bytes: nbytes, Shape: shape, Dtype: dtype, Tokens: 8192, Flops: flops,
				MemBytes: 40<<30 + rng.Int63n(1<<30), GroupSeq: trace.NoGroupSeq,
			})
		}
	}
	return t
})

// benchWriters are the whole-trace encodings benchmarked.
var benchWriters = []struct {
	name  string
	write func(io.Writer, *trace.Trace, Options, memory.Allocator) error
}{
	{"file", writeFile},
	{"stream", writeStream},
}

// BenchmarkEncode measures writing a million events, per format and codec.
func BenchmarkEncode(b *testing.B) {
	t := benchTrace()
	for _, w := range benchWriters {
		for _, codec := range codecs {
			b.Run(fmt.Sprintf("%s/%s", w.name, codecName(codec)), func(b *testing.B) {
				var buf bytes.Buffer
				for b.Loop() {
					buf.Reset()
					if err := w.write(&buf, t, Options{Compression: codec}, memory.DefaultAllocator); err != nil {
						b.Fatal(err)
					}
				}
				reportEvents(b, t.Len(), buf.Len())
			})
		}
	}
}

// BenchmarkDecode measures reading a million events back.
func BenchmarkDecode(b *testing.B) {
	t := benchTrace()
	for _, w := range benchWriters {
		for _, codec := range codecs {
			b.Run(fmt.Sprintf("%s/%s", w.name, codecName(codec)), func(b *testing.B) {
				var buf bytes.Buffer
				if err := w.write(&buf, t, Options{Compression: codec}, memory.DefaultAllocator); err != nil {
					b.Fatal(err)
				}
				data := buf.Bytes()
				for b.Loop() {
					res, err := Read(data)
					if err != nil {
						b.Fatal(err)
					}
					if res.Trace.Len() != t.Len() {
						b.Fatalf("read %d events, want %d", res.Trace.Len(), t.Len())
					}
				}
				reportEvents(b, t.Len(), len(data))
			})
		}
	}
}

// reportEvents reports throughput in events/s and the encoded size in
// bytes/event.
func reportEvents(b *testing.B, events, size int) {
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(size)/float64(events), "bytes/event")
}
