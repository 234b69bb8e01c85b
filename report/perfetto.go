package report

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/trace"
)

// Thread (track) ids of a rank's process in the Chrome trace. Overlapping
// ops of one kind go to extra lanes: lane k of a track has tid base + k.
const (
	tidCompute = 1    // F, B, W, OPT and other kinds
	tidSend    = 1001 // SEND_F, SEND_B
	tidRecv    = 2001 // RECV_F, RECV_B
	laneLimit  = 999
)

// WritePerfetto writes t as Chrome trace-event JSON (the JSON object
// format) that ui.perfetto.dev and chrome://tracing open: one process per
// rank (named with its stage, pipeline and TP rank), a compute track and
// send and receive tracks (ops that overlap on a track spill into extra
// lanes, so slices always nest), a flow arrow from each send to the
// receive NCCL matches it with (analyze.MatchP2P), and args with step,
// micro-batch, chunk, seq, peer, bytes, shape, dtype, tokens and FLOPs. An
// op that never ended is drawn up to the trace's last timestamp and marked
// pending. Timestamps are the trace's, in µs with ns precision.
func WritePerfetto(w io.Writer, t *trace.Trace) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	pw := &perfettoWriter{w: bw}
	pw.raw(`{"displayTimeUnit":"ms","otherData":`)
	other := map[string]string{"generator": "ppprof"}
	for k, v := range t.Meta.Map() {
		other[k] = v
	}
	pw.json(other)
	pw.raw(`,"traceEvents":[`)
	writePerfettoEvents(pw, t)
	pw.raw("]}\n")
	if pw.err != nil {
		return fmt.Errorf("writing Chrome trace: %w", pw.err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing Chrome trace: %w", err)
	}
	return nil
}

type perfettoWriter struct {
	w     *bufio.Writer
	err   error
	first bool // an event was written: the next needs a comma
}

func (pw *perfettoWriter) raw(s string) {
	if pw.err == nil {
		_, pw.err = pw.w.WriteString(s)
	}
}

func (pw *perfettoWriter) json(v any) {
	if pw.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		pw.err = err
		return
	}
	_, pw.err = pw.w.Write(b)
}

// event writes one trace event; fields are written in the order given.
func (pw *perfettoWriter) event(fields ...any) {
	if pw.first {
		pw.raw(",\n")
	} else {
		pw.raw("\n")
		pw.first = true
	}
	pw.raw("{")
	for i := 0; i+1 < len(fields); i += 2 {
		if i > 0 {
			pw.raw(",")
		}
		pw.raw(strconv.Quote(fields[i].(string)))
		pw.raw(":")
		switch v := fields[i+1].(type) {
		case usTime:
			pw.raw(v.String())
		default:
			pw.json(v)
		}
	}
	pw.raw("}")
}

// usTime is a time in ns written as µs with three decimals, exactly.
type usTime int64

func (u usTime) String() string {
	ns := int64(u)
	sign := ""
	if ns < 0 {
		if ns == math.MinInt64 {
			return "0"
		}
		sign, ns = "-", -ns
	}
	return fmt.Sprintf("%s%d.%03d", sign, ns/1000, ns%1000)
}

// lanes assigns ops of one (rank, track) to lanes so none overlap.
type lanes struct{ ends []int64 }

func (l *lanes) place(s, e int64) int {
	for k, end := range l.ends {
		if s >= end {
			l.ends[k] = e
			return k
		}
	}
	if len(l.ends) >= laneLimit {
		return laneLimit - 1
	}
	l.ends = append(l.ends, e)
	return len(l.ends) - 1
}

func writePerfettoEvents(pw *perfettoWriter, t *trace.Trace) {
	n := t.Len()
	// The dump time: pending ops run to it.
	var dump int64 = math.MinInt64
	for i := 0; i < n; i++ {
		for _, x := range [...]int64{t.IssueNs[i], t.StartNs[i], t.EndNs[i]} {
			if x != trace.NoTime {
				dump = max(dump, x)
			}
		}
	}
	// 1. Processes and their names, in rank order.
	type procInfo struct {
		stage    trace.Stage
		pipeline int32
		tp       int32
		lanes    map[int]*lanes // base tid -> lanes
		used     map[int]bool   // tids used
	}
	procs := map[trace.Rank]*procInfo{}
	var ranks []trace.Rank
	for i := 0; i < n; i++ {
		r := t.Rank[i]
		if procs[r] == nil {
			procs[r] = &procInfo{stage: t.Stage[i], pipeline: t.Pipeline[i], tp: t.TPRank[i], lanes: map[int]*lanes{}, used: map[int]bool{}}
			ranks = append(ranks, r)
		}
	}
	// 2. Slices. tid and the span of each row, for the flows.
	tid := make([]int, n)
	span := make([][2]int64, n)
	order := rowsByRankStart(t)
	for _, i := range order {
		s := t.StartNs[i]
		if s == trace.NoTime {
			s = t.IssueNs[i]
		}
		if s == trace.NoTime {
			tid[i] = -1
			continue
		}
		e, pending := t.EndNs[i], false
		if e == trace.NoTime {
			e, pending = max(dump, s), true
		}
		k := t.Kind[i]
		base := tidCompute
		switch {
		case k.IsSend():
			base = tidSend
		case k.IsRecv():
			base = tidRecv
		}
		pi := procs[t.Rank[i]]
		l := pi.lanes[base]
		if l == nil {
			l = &lanes{}
			pi.lanes[base] = l
		}
		tid[i] = base + l.place(s, e)
		pi.used[tid[i]] = true
		span[i] = [2]int64{s, e}
		name := k.String()
		if t.MicroBatch[i] >= 0 {
			name += " " + strconv.Itoa(int(t.MicroBatch[i]))
		}
		if pending {
			name += " (pending)"
		}
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
		cat := "compute"
		if k.IsP2P() {
			cat = "p2p"
		} else if !k.IsCompute() {
			cat = "other"
		}
		pw.event("name", name, "cat", cat, "ph", "X", "ts", usTime(s), "dur", usTime(e-s),
			"pid", int32(t.Rank[i]), "tid", tid[i], "args", args)
	}
	// 3. Flows: send -> matched receive, bound to the enclosing slices.
	id := 0
	for _, p := range analyze.MatchP2P(t) {
		if p.Send < 0 || p.Recv < 0 || tid[p.Send] < 0 || tid[p.Recv] < 0 {
			continue
		}
		id++
		ss, rs := span[p.Send], span[p.Recv]
		// Inside both slices: the send at its start, the receive at the
		// later of the two starts (clipped to the receive).
		ts := min(max(ss[0], rs[0]), rs[1])
		name := t.Kind[p.Send].String() + " -> " + t.Kind[p.Recv].String()
		pw.event("name", name, "cat", "p2p", "ph", "s", "id", id, "ts", usTime(ss[0]), "pid", int32(t.Rank[p.Send]), "tid", tid[p.Send])
		pw.event("name", name, "cat", "p2p", "ph", "f", "bp", "e", "id", id, "ts", usTime(ts), "pid", int32(t.Rank[p.Recv]), "tid", tid[p.Recv])
	}
	// 4. Names and order of processes and threads.
	for _, r := range ranks {
		pi := procs[r]
		pname := fmt.Sprintf("rank %d (stage %d", r, pi.stage)
		if pi.pipeline != 0 {
			pname += fmt.Sprintf(", pipeline %d", pi.pipeline)
		}
		if pi.tp != 0 {
			pname += fmt.Sprintf(", tp %d", pi.tp)
		}
		pname += ")"
		pw.event("name", "process_name", "ph", "M", "pid", int32(r), "args", map[string]any{"name": pname})
		pw.event("name", "process_sort_index", "ph", "M", "pid", int32(r), "args", map[string]any{"sort_index": int32(r)})
		for _, base := range []int{tidCompute, tidSend, tidRecv} {
			for k := 0; k < laneLimit; k++ {
				if !pi.used[base+k] {
					break
				}
				tname := map[int]string{tidCompute: "compute", tidSend: "send", tidRecv: "recv"}[base]
				if k > 0 {
					tname += fmt.Sprintf(" %d", k+1)
				}
				pw.event("name", "thread_name", "ph", "M", "pid", int32(r), "tid", base+k, "args", map[string]any{"name": tname})
				pw.event("name", "thread_sort_index", "ph", "M", "pid", int32(r), "tid", base+k, "args", map[string]any{"sort_index": base + k})
			}
		}
	}
}

// rowsByRankStart returns the rows ordered by rank, then start (issue for
// an op that never started), then seq: the order lanes are assigned in.
func rowsByRankStart(t *trace.Trace) []int {
	idx := make([]int, t.Len())
	for i := range idx {
		idx[i] = i
	}
	at := func(i int) int64 {
		if t.StartNs[i] != trace.NoTime {
			return t.StartNs[i]
		}
		return t.IssueNs[i]
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Or(cmp.Compare(t.Rank[a], t.Rank[b]), cmp.Compare(at(a), at(b)), cmp.Compare(t.Seq[a], t.Seq[b]))
	})
	return idx
}
