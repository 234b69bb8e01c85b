package arrowv1

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/ppprof/ppprof/trace"
)

// testKinds are the kinds random traces draw from: all well-known ones and
// a few free-form names.
var testKinds = []trace.Kind{
	trace.F, trace.B, trace.W, trace.SendF, trace.RecvF, trace.SendB, trace.RecvB, trace.Opt,
	trace.AllReduce, trace.AllToAll, trace.Collective,
	trace.MustKind("DATA"), trace.MustKind("LOSS"), trace.MustKind("CKPT"), trace.MustKind("custom:x.y/z-1"),
}

// randomMeta returns metadata with every known key set and Extra keys.
func randomMeta(rng *rand.Rand) trace.Meta {
	return trace.Meta{
		Job:           fmt.Sprintf("job-%d", rng.Intn(1000)),
		WorldSize:     8,
		PP:            4,
		TP:            2,
		DP:            1,
		CP:            1,
		Virtual:       2,
		MicroBatches:  8,
		Schedule:      "1f1b",
		Device:        "H100-SXM",
		PeakFlops:     9.89e14,
		Clock:         trace.ClockCUDAEvent,
		ClockOffsetNs: -rng.Int63n(1e9),
		DroppedEvents: rng.Int63n(10),
		Extra:         map[string]string{"x.collector": "ppprof-test", "note": "héllo, wörld", "empty": ""},
	}
}

// randomTrace returns a trace of n rows that passes Validate: several ranks
// interleaved, seq increasing per rank, null start/end times, P2P rows with
// a peer, empty and repeated strings, and kinds both well-known and
// free-form. With onlyCompute set, rows use F and B only (so later batches
// can bring new kinds).
func randomTrace(rng *rand.Rand, n int, kinds []trace.Kind) *trace.Trace {
	t := &trace.Trace{Meta: randomMeta(rng)}
	ranks := []trace.Rank{0, 1, 3, 7}[:1+rng.Intn(4)]
	seq := map[trace.Rank]int64{}
	shapes := []string{"", "4096x2x8192", "1x1", "ünïcode"}
	dtypes := []string{"", "bf16", "fp32"}
	groups := []string{"", "0", "PIPELINE_MODEL_PARALLEL_GROUP:43", "ünï"}
	for i := 0; i < n; i++ {
		r := ranks[rng.Intn(len(ranks))]
		seq[r] += 1 + rng.Int63n(3)
		k := kinds[rng.Intn(len(kinds))]
		peer := trace.NoRank
		if k.IsP2P() {
			peer = r + 1 + trace.Rank(rng.Intn(5))
		}
		issue := rng.Int63n(1 << 50)
		start, end := issue+rng.Int63n(1000), trace.NoTime
		switch rng.Intn(10) {
		case 0:
			start = trace.NoTime
		case 1:
		default:
			end = start + rng.Int63n(1e6)
		}
		flops := 0.0
		if rng.Intn(2) == 0 {
			flops = rng.Float64() * 1e12
		}
		t.Append(trace.Event{
			Rank:       r,
			Pipeline:   int32(r % 2),
			Stage:      trace.Stage(r / 2),
			TPRank:     int32(r % 3),
			Chunk:      int32(rng.Intn(2)),
			Step:       rng.Int63n(5),
			MicroBatch: trace.MicroBatch(rng.Intn(9) - 1),
			Kind:       k,
			Seq:        seq[r],
			IssueNs:    issue,
			StartNs:    start,
			EndNs:      end,
			Peer:       peer,
			Bytes:      rng.Int63n(1 << 30),
			Shape:      shapes[rng.Intn(len(shapes))],
			Dtype:      dtypes[rng.Intn(len(dtypes))],
			Tokens:     rng.Int63n(1 << 20),
			Flops:      flops,
			MemBytes:   rng.Int63n(1 << 40),
			Group:      groups[rng.Intn(len(groups))],
			GroupSeq:   rng.Int63n(1<<40) - 1,
		})
	}
	if err := t.Validate(); err != nil {
		panic(err)
	}
	return t
}

// checked returns a checked allocator that fails t on leaks at cleanup.
func checked(t testing.TB) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// writer names one way of encoding a trace.
type writer struct {
	name   string
	format Format
	write  func(w io.Writer, t *trace.Trace, opt Options, mem memory.Allocator) error
}

// writers are every way the package writes a whole trace. "streamwriter"
// splits the trace into several Write calls of uneven sizes.
var writers = []writer{
	{"file", FormatFile, writeFile},
	{"stream", FormatStream, writeStream},
	{"streamwriter", FormatStream, writeInParts},
}

// writeInParts writes t through a StreamWriter in a few Write calls.
func writeInParts(w io.Writer, t *trace.Trace, opt Options, mem memory.Allocator) error {
	sw, err := newStreamWriter(w, t.Meta, opt, mem)
	if err != nil {
		return err
	}
	for _, p := range parts(t.Len()) {
		if err := sw.Write(t.Slice(p[0], p[1])); err != nil {
			return err
		}
	}
	return sw.Close()
}

// parts splits n rows into uneven consecutive ranges.
func parts(n int) [][2]int {
	var out [][2]int
	for from, size := 0, 1; from < n; size = size*3 + 1 {
		to := min(from+size, n)
		out = append(out, [2]int{from, to})
		from = to
	}
	return out
}

// batchesFor is the number of record batches w writes for n rows.
func batchesFor(w writer, n, batchRows int) int {
	ceil := func(n int) int { return (n + batchRows - 1) / batchRows }
	if w.name != "streamwriter" {
		return ceil(n)
	}
	total := 0
	for _, p := range parts(n) {
		total += ceil(p[1] - p[0])
	}
	return total
}

// encode writes t with w into a buffer, checking for leaks.
func encode(tb testing.TB, w writer, t *trace.Trace, opt Options) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if err := w.write(&buf, t, opt, checked(tb)); err != nil {
		tb.Fatalf("%s: %v", w.name, err)
	}
	return buf.Bytes()
}

// messageEnds lists the offsets just past each message of the IPC stream
// at data[start:] (the end-of-stream marker included), found by arrow-go's
// own message reader: an oracle independent of this package's framing.
// headers holds each message's type.
func messageEnds(tb testing.TB, data []byte, start int) (ends []int, types []ipc.MessageType) {
	tb.Helper()
	r := &countingReader{r: bytes.NewReader(data[start:])}
	mr := ipc.NewMessageReader(r)
	defer mr.Release()
	for {
		msg, err := mr.Message()
		if errors.Is(err, io.EOF) {
			ends = append(ends, start+r.n)
			types = append(types, ipc.MessageNone)
			return ends, types
		}
		if err != nil {
			tb.Fatalf("oracle message reader: %v", err)
		}
		ends = append(ends, start+r.n)
		types = append(types, msg.Type())
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func newRand(seed int64) *rand.Rand { return rand.New(rand.NewSource(seed)) }
