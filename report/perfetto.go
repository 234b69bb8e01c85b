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
	first bool   // an event was written: the next needs a comma
	buf   []byte // the event slice and flow write
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

func (u usTime) String() string { return string(appendUs(nil, int64(u))) }

// appendUs appends ns as µs with three decimals, exactly ("0" for the
// least int64, which has no opposite).
func appendUs(b []byte, ns int64) []byte {
	if ns < 0 {
		if ns == math.MinInt64 {
			return append(b, '0')
		}
		b, ns = append(b, '-'), -ns
	}
	b = strconv.AppendInt(b, ns/1000, 10)
	f := ns % 1000
	return append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
}

// The events of the trace's rows are most of a Chrome trace: they are
// written straight into a buffer, byte for byte as event would write them
// (TestPerfettoSliceAsEvent), without an interface or a map per row.

// next starts an event in pw.buf.
func (pw *perfettoWriter) next() {
	if pw.first {
		pw.buf = append(pw.buf[:0], ",\n{"...)
	} else {
		pw.buf = append(pw.buf[:0], "\n{"...)
		pw.first = true
	}
}

// flush writes the event in pw.buf.
func (pw *perfettoWriter) flush() {
	if pw.err == nil {
		_, pw.err = pw.w.Write(pw.buf)
	}
}

// slice writes the complete ("X") event of row i: event("name", name,
// "cat", cat, "ph", "X", "ts", usTime(s), "dur", usTime(e-s), "pid",
// rank, "tid", tid, "args", {step, microbatch, chunk, stage, seq, and
// those of issue_ns, peer, bytes, shape, dtype, tokens, flops, mem_bytes,
// started, pending that the row has}), the args' keys sorted as
// encoding/json sorts a map's.
func (pw *perfettoWriter) slice(t *trace.Trace, i int, name, cat string, s, e int64, tid int, pending bool) {
	pw.next()
	b := append(pw.buf, `"name":`...)
	b = appendJSONString(b, name)
	b = append(b, `,"cat":`...)
	b = appendJSONString(b, cat)
	b = append(b, `,"ph":"X","ts":`...)
	b = appendUs(b, s)
	b = append(b, `,"dur":`...)
	b = appendUs(b, e-s)
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(t.Rank[i]), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendInt(b, int64(tid), 10)
	b = append(b, `,"args":{`...)
	sep := false
	key := func(k string) {
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = append(b, '"')
		b = append(b, k...)
		b = append(b, '"', ':')
	}
	num := func(k string, v int64) {
		key(k)
		b = strconv.AppendInt(b, v, 10)
	}
	str := func(k string, v string) {
		key(k)
		b = appendJSONString(b, v)
	}
	if t.Bytes[i] != 0 {
		num("bytes", t.Bytes[i])
	}
	num("chunk", int64(t.Chunk[i]))
	if t.Dtype[i] != 0 {
		str("dtype", t.Dtype[i].String())
	}
	if f := t.Flops[i]; f != 0 && !math.IsInf(f, 0) && !math.IsNaN(f) {
		key("flops")
		b = appendJSONFloat(b, f)
	}
	if t.IssueNs[i] != trace.NoTime {
		num("issue_ns", t.IssueNs[i])
	}
	if t.MemBytes[i] != 0 {
		num("mem_bytes", t.MemBytes[i])
	}
	num("microbatch", int64(t.MicroBatch[i]))
	if t.Peer[i] != trace.NoRank {
		num("peer", int64(t.Peer[i]))
	}
	if pending {
		key("pending")
		b = append(b, "true"...)
	}
	num("seq", t.Seq[i])
	if t.Shape[i] != 0 {
		str("shape", t.Shape[i].String())
	}
	num("stage", int64(t.Stage[i]))
	if t.StartNs[i] == trace.NoTime {
		key("started")
		b = append(b, "false"...)
	}
	num("step", t.Step[i])
	if t.Tokens[i] != 0 {
		num("tokens", t.Tokens[i])
	}
	pw.buf = append(b, "}}"...)
	pw.flush()
}

// flow writes the start ("s") or, end set, the end ("f", bound to the
// enclosing slice) of flow id: what event("name", name, "cat", "p2p",
// "ph", "s", "id", id, "ts", usTime(ts), "pid", pid, "tid", tid) writes,
// with "ph", "f", "bp", "e" for an end.
func (pw *perfettoWriter) flow(name string, end bool, id int, ts int64, pid int32, tid int) {
	pw.next()
	b := append(pw.buf, `"name":`...)
	b = appendJSONString(b, name)
	if end {
		b = append(b, `,"cat":"p2p","ph":"f","bp":"e","id":`...)
	} else {
		b = append(b, `,"cat":"p2p","ph":"s","id":`...)
	}
	b = strconv.AppendInt(b, int64(id), 10)
	b = append(b, `,"ts":`...)
	b = appendUs(b, ts)
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(pid), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendInt(b, int64(tid), 10)
	pw.buf = append(b, '}')
	pw.flush()
}

// appendJSONString appends s as encoding/json writes a string: printable
// ASCII other than the quote, the backslash and <, > and & (which it
// escapes for HTML) as is; anything else through encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for k := 0; k < len(s); k++ {
		if c := s[k]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONFloat appends f (finite) as encoding/json writes a float64:
// the shortest decimal that reads back as f, in exponent form below 1e-6
// and from 1e21 on, with a one-digit negative exponent written as such
// (1e-7, not 1e-07).
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
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
		cat := "compute"
		if k.IsP2P() {
			cat = "p2p"
		} else if !k.IsCompute() {
			cat = "other"
		}
		pw.slice(t, i, name, cat, s, e, tid[i], pending)
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
		pw.flow(name, false, id, ss[0], int32(t.Rank[p.Send]), tid[p.Send])
		pw.flow(name, true, id, ts, int32(t.Rank[p.Recv]), tid[p.Recv])
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
