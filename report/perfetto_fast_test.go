package report

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// sliceAsEvent is how WritePerfetto wrote a row's slice before
// perfettoWriter.slice: event with an args map, which encoding/json
// writes with its keys sorted. It is the reference slice is checked
// against.
func sliceAsEvent(pw *perfettoWriter, t *trace.Trace, i int, name, cat string, s, e int64, tid int, pending bool) {
	args := map[string]any{"step": t.Step[i], "microbatch": t.MicroBatch[i], "chunk": t.Chunk[i], "stage": t.Stage[i],
		"seq": t.Seq[i]}
	if t.IssueNs[i] != trace.NoTime {
		args["issue_ns"] = t.IssueNs[i]
	}
	if t.Peer[i] != trace.NoRank {
		args["peer"] = t.Peer[i]
	}
	if t.Bytes[i] != 0 {
		args["bytes"] = t.Bytes[i]
	}
	if t.Shape[i] != 0 {
		args["shape"] = t.Shape[i].String()
	}
	if t.Dtype[i] != 0 {
		args["dtype"] = t.Dtype[i].String()
	}
	if t.Tokens[i] != 0 {
		args["tokens"] = t.Tokens[i]
	}
	if t.Flops[i] != 0 && !math.IsInf(t.Flops[i], 0) && !math.IsNaN(t.Flops[i]) {
		args["flops"] = t.Flops[i]
	}
	if t.MemBytes[i] != 0 {
		args["mem_bytes"] = t.MemBytes[i]
	}
	if t.StartNs[i] == trace.NoTime {
		args["started"] = false
	}
	if pending {
		args["pending"] = true
	}
	pw.event("name", name, "cat", cat, "ph", "X", "ts", usTime(s), "dur", usTime(e-s),
		"pid", int32(t.Rank[i]), "tid", tid, "args", args)
}

// usReference is usTime as first written, with fmt.
func usReference(ns int64) string {
	sign := ""
	if ns < 0 {
		if ns == math.MinInt64 {
			return "0"
		}
		sign, ns = "-", -ns
	}
	return fmt.Sprintf("%s%d.%03d", sign, ns/1000, ns%1000)
}

// TestPerfettoSliceAsEvent: the rows' slices and the flows are written
// byte for byte as the generic event writer writes them, for rows with
// and without each optional arg, strings that encoding/json escapes,
// FLOPs in both of its float forms, negative and extreme times.
func TestPerfettoSliceAsEvent(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	strs := []string{"", "bf16", "4x2048x4096", `a"b`, `back\slash`, "<tag>&", "tab\there", "µs", "\x01", "\u2028", "\xff\xfe", "F 3 (pending)"}
	floats := []float64{0, 1, -1, 1e-7, 1e-6, 9.99e-7, 1e20, 1e21, 1e22, -3.5e-9, 123.456, 6.02e23, math.SmallestNonzeroFloat64, math.MaxFloat64, math.Inf(1), math.NaN()}
	times := []int64{0, 1, 999, 1000, 1001, -1, -999, -1000, -1001, 1234567890123, math.MaxInt64, math.MinInt64, math.MinInt64 + 1, trace.NoTime}
	pick64 := func(xs []int64) int64 { return xs[rng.IntN(len(xs))] }
	tr := &trace.Trace{}
	for range 3000 {
		tr.Rank = append(tr.Rank, trace.Rank(rng.IntN(5000)))
		tr.Pipeline = append(tr.Pipeline, int32(rng.IntN(4)))
		tr.Stage = append(tr.Stage, trace.Stage(rng.IntN(16)-1))
		tr.TPRank = append(tr.TPRank, int32(rng.IntN(8)))
		tr.Chunk = append(tr.Chunk, int32(rng.IntN(3)))
		tr.Step = append(tr.Step, rng.Int64N(1<<40)-5)
		tr.MicroBatch = append(tr.MicroBatch, trace.MicroBatch(rng.IntN(70)-1))
		tr.Kind = append(tr.Kind, trace.F)
		tr.Seq = append(tr.Seq, rng.Int64())
		tr.IssueNs = append(tr.IssueNs, pick64(times))
		tr.StartNs = append(tr.StartNs, pick64(times))
		tr.EndNs = append(tr.EndNs, pick64(times))
		peer := trace.NoRank
		if rng.IntN(2) == 0 {
			peer = trace.Rank(rng.IntN(5000))
		}
		tr.Peer = append(tr.Peer, peer)
		tr.Bytes = append(tr.Bytes, []int64{0, 1, -7, 1 << 40}[rng.IntN(4)])
		tr.Shape = append(tr.Shape, trace.Intern(strs[rng.IntN(len(strs))]))
		tr.Dtype = append(tr.Dtype, trace.Intern(strs[rng.IntN(len(strs))]))
		tr.Tokens = append(tr.Tokens, []int64{0, 4096, -1}[rng.IntN(3)])
		tr.Flops = append(tr.Flops, floats[rng.IntN(len(floats))])
		tr.MemBytes = append(tr.MemBytes, []int64{0, 1 << 33}[rng.IntN(2)])
		tr.Group = append(tr.Group, 0)
		tr.GroupSeq = append(tr.GroupSeq, trace.NoGroupSeq)
	}
	write := func(fn func(pw *perfettoWriter)) string {
		var buf bytes.Buffer
		bw := bufio.NewWriter(&buf)
		pw := &perfettoWriter{w: bw}
		fn(pw)
		if err := bw.Flush(); err != nil || pw.err != nil {
			t.Fatal(err, pw.err)
		}
		return buf.String()
	}
	for i := range tr.Len() {
		name, cat := strs[rng.IntN(len(strs))], []string{"compute", "p2p", "other", "a<b"}[rng.IntN(4)]
		s, e, tid, pending := pick64(times), pick64(times), rng.IntN(3000), rng.IntN(2) == 0
		// Two events each: the comma between events too.
		want := write(func(pw *perfettoWriter) {
			sliceAsEvent(pw, tr, i, name, cat, s, e, tid, pending)
			pw.event("name", name, "cat", "p2p", "ph", "s", "id", i, "ts", usTime(s), "pid", int32(tr.Rank[i]), "tid", tid)
			pw.event("name", name, "cat", "p2p", "ph", "f", "bp", "e", "id", i, "ts", usTime(e), "pid", int32(tr.Rank[i]), "tid", tid)
		})
		got := write(func(pw *perfettoWriter) {
			pw.slice(tr, i, name, cat, s, e, tid, pending)
			pw.flow(name, false, i, s, int32(tr.Rank[i]), tid)
			pw.flow(name, true, i, e, int32(tr.Rank[i]), tid)
		})
		if got != want {
			t.Fatalf("row %d:\ngot  %s\nwant %s", i, got, want)
		}
	}
	for _, ns := range append(times, 5, 50, 500, -5, -50, 1e18) {
		if got, want := usTime(ns).String(), usReference(ns); got != want {
			t.Errorf("usTime(%d) = %s, want %s", ns, got, want)
		}
	}
}
