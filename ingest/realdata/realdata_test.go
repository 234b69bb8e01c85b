// Package realdata_test checks ingest against the public traces in
// ../shared/data (see its README): Kineto samples, the Megatron-style
// timeline, PiPPy's Chrome trace and Flight Recorder dumps. Every expected
// number is computed here from the raw files, independently of ingest.
// The tests skip when ../shared/data is missing.
package realdata_test

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/trace"
)

const data = "../../../shared/data"

func need(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(data); err != nil {
		t.Skip("../shared/data not present: the real-trace tests need it beside the repository")
	}
}

// rawJSON decodes a (gzipped) JSON file with encoding/json, numbers kept as
// json.Number.
func rawJSON(t *testing.T, path string) any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func events(v any) []map[string]any {
	var list []any
	switch x := v.(type) {
	case []any:
		list = x
	case map[string]any:
		list, _ = x["traceEvents"].([]any)
	}
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

func num(t *testing.T, m map[string]any, k string) float64 {
	switch x := m[k].(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		return f
	case string:
		var f float64
		if err := json.Unmarshal([]byte(x), &f); err == nil {
			return f
		}
	}
	return math.NaN()
}

// collectiveOf is the test's own naming of NCCL operations.
func collectiveOf(name string) string {
	n := strings.ToLower(strings.TrimPrefix(name, "nccl:"))
	switch {
	case strings.Contains(n, "all_reduce") || strings.Contains(n, "allreduce"):
		return "ALL_REDUCE"
	case strings.Contains(n, "all_to_all") || strings.Contains(n, "alltoall"):
		return "ALL_TO_ALL"
	case strings.Contains(n, "all_gather") || strings.Contains(n, "allgather"):
		return "ALL_GATHER"
	case strings.Contains(n, "reduce_scatter"):
		return "REDUCE_SCATTER"
	case strings.Contains(n, "broadcast"):
		return "BROADCAST"
	}
	return "?" + n
}

// expectedKineto counts the NCCL operations of a Kineto file: the
// record_param_comms ops that name a collective (newer PyTorch), else the
// "nccl:" user annotations (older).
func expectedKineto(t *testing.T, path string) (rank int, counts map[string]int) {
	v := rawJSON(t, path)
	counts = map[string]int{}
	rank = -1
	if di, ok := v.(map[string]any)["distributedInfo"].(map[string]any); ok {
		rank = int(num(t, di, "rank"))
	}
	evs := events(v)
	for _, e := range evs {
		args, _ := e["args"].(map[string]any)
		if str(e, "name") == "record_param_comms" && args != nil && str(args, "Collective name") != "" && str(args, "Collective name") != "wait" {
			counts[collectiveOf(str(args, "Collective name"))]++
		}
	}
	if len(counts) > 0 {
		return rank, counts
	}
	for _, e := range evs {
		if str(e, "cat") == "user_annotation" && strings.HasPrefix(str(e, "name"), "nccl:") {
			counts[collectiveOf(str(e, "name"))]++
		}
	}
	return rank, counts
}

func kindCounts(tr *trace.Trace, r trace.Rank) map[string]int {
	out := map[string]int{}
	for i := 0; i < tr.Len(); i++ {
		if tr.Rank[i] == r {
			out[tr.Kind[i].String()]++
		}
	}
	return out
}

func sameCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestKinetoSamples reads every Kineto sample: ranks and NCCL operation
// counts as the raw JSON says; all_to_all on SendRecv kernels is a
// collective, never P2P; device times come from the kernels.
func TestKinetoSamples(t *testing.T) {
	need(t)
	sets := [][]string{
		{data + "/kineto/ddp_2rank_rank0_nccl_metadata.json.gz"},
		{data + "/kineto/job128_sampled_rank0.json.gz", data + "/kineto/job128_sampled_rank1.json.gz"},
	}
	dlrm, _ := filepath.Glob(data + "/kineto/dlrm_8rank/rank*.pt.trace.json.gz")
	sort.Strings(dlrm)
	sets = append(sets, dlrm)
	for _, files := range sets {
		t.Run(filepath.Base(files[0]), func(t *testing.T) {
			res, err := ingest.Open(files, ingest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			tr := res.Trace
			if len(res.Files) != len(files) {
				t.Fatalf("%d files read, want %d", len(res.Files), len(files))
			}
			for i, f := range files {
				rank, want := expectedKineto(t, f)
				if rank < 0 { // dlrm: no distributedInfo.rank in some versions
					rank = i
				}
				info := res.Files[i]
				if info.Format != ingest.FormatKineto || len(info.Ranks) != 1 || int(info.Ranks[0]) != rank {
					t.Errorf("%s: format %s ranks %v, want kineto, [%d]", f, info.Format, info.Ranks, rank)
				}
				if got := kindCounts(tr, trace.Rank(rank)); !sameCounts(got, want) {
					t.Errorf("%s: kinds %v, want %v", f, got, want)
				}
			}
			for i := 0; i < tr.Len(); i++ {
				if tr.Kind[i].IsP2P() {
					t.Fatalf("row %d is P2P (%s): these jobs have none (all_to_all runs on SendRecv kernels)", i, tr.Kind[i])
				}
				if !tr.Kind[i].IsCollective() || tr.StartNs[i] < tr.IssueNs[i] || tr.EndNs[i] < tr.StartNs[i] {
					t.Fatalf("row %+v", tr.At(i))
				}
			}
		})
	}
}

// TestKinetoNCCLMetadata checks one operation of the DDP sample against its
// raw args: group, bytes (In msg nelems x dtype), device time from the
// kernel with the same External id, and the group's ranks.
func TestKinetoNCCLMetadata(t *testing.T) {
	need(t)
	path := data + "/kineto/ddp_2rank_rank0_nccl_metadata.json.gz"
	v := rawJSON(t, path)
	base := num(t, v.(map[string]any), "baseTimeNanoseconds")
	var first map[string]any
	kernels := map[string]map[string]any{}
	for _, e := range events(v) {
		args, _ := e["args"].(map[string]any)
		if args == nil {
			continue
		}
		if str(e, "cat") == "kernel" {
			kernels[string(args["External id"].(json.Number))] = e
		}
		if str(e, "name") == "record_param_comms" && str(args, "Collective name") == "allreduce" {
			if first == nil || num(t, e, "ts") < num(t, first, "ts") {
				first = e
			}
		}
	}
	res, err := ingest.Open([]string{path}, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Trace
	row := -1
	for i := 0; i < tr.Len(); i++ {
		if tr.Kind[i] == trace.AllReduce {
			row = i
			break
		}
	}
	if row < 0 {
		t.Fatal("no ALL_REDUCE")
	}
	args := first["args"].(map[string]any)
	wantBytes := int64(num(t, args, "In msg nelems")) * 4 // dtype Float
	k := kernels[string(args["External id"].(json.Number))]
	wantStart := base + num(t, k, "ts")*1e3
	if tr.Group[row].String() != "0" || tr.Bytes[row] != wantBytes || tr.Dtype[row].String() != "fp32" ||
		math.Abs(float64(tr.StartNs[row])-wantStart) > 2 || math.Abs(float64(tr.IssueNs[row])-(base+num(t, first, "ts")*1e3)) > 2 {
		t.Errorf("first all_reduce %+v; want group 0, %d bytes, start %.0f", tr.At(row), wantBytes, wantStart)
	}
	g, ok := res.Comms.Groups["0"]
	if !ok || len(g.Ranks) != 2 || g.Desc != "default_pg" {
		t.Errorf("group 0: %+v", g)
	}
}

// TestKinetoLargeInteger: a "Comms Id" past int64 must not break parsing.
func TestKinetoLargeInteger(t *testing.T) {
	need(t)
	tr, info, _, err := ingest.ReadFile(data + "/kineto/large_integer_comms_id_rank70.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	if info.Format != ingest.FormatKineto || tr == nil {
		t.Errorf("format %s", info.Format)
	}
}

// megatronRaw is the timeline's events with the place of their thread.
type megatronRaw struct {
	name          string
	pid, stage    int
	step          int64
	mb            int64
	start, end    float64 // microseconds
	thread        string
	compute, pipe bool
}

func readMegatronRaw(t *testing.T) []megatronRaw {
	v := rawJSON(t, data+"/megatron_timeline/timeline-ST.json.gz")
	thread := map[[2]string]string{}
	evs := events(v)
	for _, e := range evs {
		if str(e, "ph") == "M" && str(e, "name") == "thread_name" {
			args := e["args"].(map[string]any)
			thread[[2]string{string(e["pid"].(json.Number)), string(e["tid"].(json.Number))}] = str(args, "name")
		}
	}
	var out []megatronRaw
	for _, e := range evs {
		if str(e, "ph") != "X" {
			continue
		}
		args := e["args"].(map[string]any)
		th := thread[[2]string{string(e["pid"].(json.Number)), string(e["tid"].(json.Number))}]
		var stage int
		if _, rest, ok := strings.Cut(th, "PP rank "); ok {
			stage = int(rest[0] - '0')
		}
		pid, _ := e["pid"].(json.Number).Int64()
		step, _ := args["step"].(json.Number).Int64()
		mb, _ := args["mb_id"].(json.Number).Int64()
		n := str(e, "name")
		r := megatronRaw{name: n, pid: int(pid), stage: stage, step: step, mb: mb, thread: th,
			start: num(t, e, "ts"), compute: n == "forward-compute" || n == "backward-compute"}
		r.end = r.start + num(t, e, "dur")
		r.pipe = r.compute || strings.HasSuffix(n, "-send") || strings.HasSuffix(n, "-recv")
		out = append(out, r)
	}
	return out
}

// union returns the length of the union of intervals.
func union(iv [][2]float64) float64 {
	sort.Slice(iv, func(i, j int) bool { return iv[i][0] < iv[j][0] })
	var total, s, e float64
	started := false
	for _, x := range iv {
		if !started || x[0] > e {
			if started {
				total += e - s
			}
			s, e, started = x[0], x[1], true
			continue
		}
		e = math.Max(e, x[1])
	}
	if started {
		total += e - s
	}
	return total
}

// TestMegatronTimeline: PP 4 x DP 2, 4 micro-batches per step, the last
// stage slowest, and step time and per-stage bubble from analyze.Run equal
// to the numbers computed here from the raw events.
func TestMegatronTimeline(t *testing.T) {
	need(t)
	res, err := ingest.Open([]string{data + "/megatron_timeline/"}, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Trace
	m := tr.Meta
	if m.PP != 4 || m.DP != 2 || m.TP != 1 || m.WorldSize != 8 || m.MicroBatches != 4 {
		t.Errorf("meta %+v", m)
	}
	if got := tr.Ranks(); len(got) != 8 {
		t.Fatalf("ranks %v", got)
	}
	type sp struct {
		stage trace.Stage
		pipe  int32
	}
	places := map[sp]int{}
	fPerStep := map[[2]int64]map[trace.MicroBatch]bool{}
	for i := 0; i < tr.Len(); i++ {
		places[sp{tr.Stage[i], tr.Pipeline[i]}]++
		if tr.Kind[i] == trace.F {
			k := [2]int64{int64(tr.Rank[i]), tr.Step[i]}
			if fPerStep[k] == nil {
				fPerStep[k] = map[trace.MicroBatch]bool{}
			}
			fPerStep[k][tr.MicroBatch[i]] = true
		}
		if tr.Kind[i].IsP2P() && (tr.MicroBatch[i] < 0 || tr.Peer[i] < 0) {
			t.Fatalf("P2P row without micro-batch or peer: %+v", tr.At(i))
		}
	}
	if len(places) != 8 {
		t.Errorf("%d (stage, pipeline) places, want 4 x 2", len(places))
	}
	for k, mbs := range fPerStep {
		if len(mbs) != 4 {
			t.Errorf("rank %d step %d: %d micro-batches", k[0], k[1], len(mbs))
		}
	}
	warned := strings.Builder{}
	for _, w := range res.Warnings {
		warned.WriteString(w.Message + "\n")
	}
	for _, want := range []string{"inferred from order", "inferred from stage adjacency"} {
		if !strings.Contains(warned.String(), want) {
			t.Errorf("no warning saying %q:\n%s", want, warned.String())
		}
	}

	rep, err := analyze.Run(tr, analyze.Options{Step: analyze.AllSteps})
	if err != nil {
		t.Fatal(err)
	}

	// Independent numbers from the raw JSON.
	raw := readMegatronRaw(t)
	type win struct {
		step int64
		pid  int
	}
	type acc struct {
		s, e float64
		busy [4][][2]float64
	}
	wins := map[win]*acc{}
	steps := map[int64][2]float64{}
	for _, r := range raw {
		if st, ok := steps[r.step]; ok {
			steps[r.step] = [2]float64{math.Min(st[0], r.start), math.Max(st[1], r.end)}
		} else {
			steps[r.step] = [2]float64{r.start, r.end}
		}
		if !r.pipe {
			continue
		}
		k := win{r.step, r.pid}
		a := wins[k]
		if a == nil {
			a = &acc{s: r.start, e: r.end}
			wins[k] = a
		}
		a.s, a.e = math.Min(a.s, r.start), math.Max(a.e, r.end)
		if r.compute {
			a.busy[r.stage] = append(a.busy[r.stage], [2]float64{r.start, r.end})
		}
	}
	var busy [4]float64
	var window float64
	for _, a := range wins {
		window += a.e - a.s
		for s := range busy {
			busy[s] += union(a.busy[s])
		}
	}
	var stepMs []float64
	for _, st := range steps {
		stepMs = append(stepMs, (st[1]-st[0])/1e3)
	}
	sort.Float64s(stepMs)
	wantStep := (stepMs[len(stepMs)/2-1] + stepMs[len(stepMs)/2]) / 2
	if math.Abs(rep.StepMs-wantStep) > 1e-3 {
		t.Errorf("step time %.6f ms, want %.6f", rep.StepMs, wantStep)
	}
	if len(rep.Stages) != 4 {
		t.Fatalf("%d stages", len(rep.Stages))
	}
	slowest := 0
	for s := range busy {
		want := 1 - busy[s]/window
		if got := rep.Stages[s].Bubble; math.Abs(got-want) > 1e-6 {
			t.Errorf("stage %d bubble %.6f, want %.6f", s, got, want)
		}
		if busy[s] > busy[slowest] {
			slowest = s
		}
	}
	if slowest != 3 || rep.Imbalance.SlowestStage != 3 {
		t.Errorf("slowest stage %d (analysis: %d), want the last", slowest, rep.Imbalance.SlowestStage)
	}
	t.Logf("step %.1f ms (study: tori 2173 ms); bubbles %.3f %.3f %.3f %.3f", rep.StepMs,
		rep.Stages[0].Bubble, rep.Stages[1].Bubble, rep.Stages[2].Bubble, rep.Stages[3].Bubble)
}

// TestPiPPyTrace: PiPPy's 4-stage, 4-micro-batch trace; each stage's bubble
// is what its events say.
func TestPiPPyTrace(t *testing.T) {
	need(t)
	path := data + "/pippy/pipe_visualized_4stage_4mb.json"
	res, err := ingest.Open([]string{path}, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := analyze.Run(res.Trace, analyze.Options{Step: analyze.AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	var busy [4][][2]float64
	lo, hi := math.Inf(1), math.Inf(-1)
	n := 0
	for _, e := range events(rawJSON(t, path)) {
		name := str(e, "name")
		if !strings.HasPrefix(name, "F_") && !strings.HasPrefix(name, "B_") {
			continue
		}
		n++
		st := int(name[2] - '0')
		s := num(t, e, "ts")
		d := num(t, e, "dur")
		busy[st] = append(busy[st], [2]float64{s, s + d})
		lo, hi = math.Min(lo, s), math.Max(hi, s+d)
	}
	if res.Trace.Len() != n || len(rep.Stages) != 4 {
		t.Fatalf("%d rows (want %d), %d stages", res.Trace.Len(), n, len(rep.Stages))
	}
	for s := range busy {
		want := 1 - union(busy[s])/(hi-lo)
		if got := rep.Stages[s].Bubble; math.Abs(got-want) > 1e-6 {
			t.Errorf("stage %d bubble %.6f, want %.6f", s, got, want)
		}
	}
}

// frEntry is one dump entry as Python's pickle decoded it
// (testdata/fr_expected.py).
type frEntry struct {
	Name    string `json:"name"`
	Group   string `json:"group"`
	P2P     bool   `json:"p2p"`
	Seq     int64  `json:"seq"`
	State   string `json:"state"`
	Created int64  `json:"created"`
	Peer    int64  `json:"peer"`
}

// TestFlightRecorder: every rank of both hung jobs is read (dumps with no
// entries included), every entry is a row with its group, sequence number
// and creation time, pending ops have null start and end, and P2P peers
// are the global ranks pg_config maps the group-local ones to.
func TestFlightRecorder(t *testing.T) {
	need(t)
	b, err := os.ReadFile("testdata/fr_expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]map[string][]frEntry
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"gpu_error_1st", "lock_gil_1st"} {
		t.Run(c, func(t *testing.T) {
			res, err := ingest.Open([]string{data + "/flight_recorder/" + c}, ingest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Files) != 16 || res.Comms == nil || len(res.Comms.FlightRecorder) != 16 {
				t.Fatalf("%d files, comms %v", len(res.Files), res.Comms != nil)
			}
			tr := res.Trace
			byRank := map[trace.Rank][]int{}
			for i := 0; i < tr.Len(); i++ {
				byRank[tr.Rank[i]] = append(byRank[tr.Rank[i]], i)
			}
			for rs, entries := range want[c] {
				var r trace.Rank
				for _, ch := range rs {
					r = r*10 + trace.Rank(ch-'0')
				}
				if got := res.Comms.FlightRecorder[r].Entries; got != len(entries) {
					t.Errorf("rank %d: %d entries, want %d", r, got, len(entries))
				}
				rows := byRank[r]
				if len(rows) != len(entries) {
					t.Fatalf("rank %d: %d rows, want %d", r, len(rows), len(entries))
				}
				for k, e := range entries { // rows are in record order: seq
					i := rows[k]
					if tr.Group[i].String() != e.Group || tr.GroupSeq[i] != e.Seq || tr.IssueNs[i] != e.Created {
						t.Errorf("rank %d entry %d %+v: row %+v", r, k, e, tr.At(i))
					}
					if e.State == "scheduled" && (tr.StartNs[i] != trace.NoTime || tr.EndNs[i] != trace.NoTime) {
						t.Errorf("rank %d entry %d: pending op with times %+v", r, k, tr.At(i))
					}
					if e.P2P != (tr.Kind[i].IsP2P() || tr.Kind[i].String() == "SEND" || tr.Kind[i].String() == "RECV") {
						t.Errorf("rank %d entry %d %s: kind %s", r, k, e.Name, tr.Kind[i])
					}
					if e.P2P && int64(tr.Peer[i]) != e.Peer {
						t.Errorf("rank %d entry %d %s: peer %d, want global rank %d", r, k, e.Name, tr.Peer[i], e.Peer)
					}
					if e.P2P && strings.Contains(e.Name, "send") != (tr.Kind[i].IsSend() || tr.Kind[i].String() == "SEND") {
						t.Errorf("rank %d entry %d %s: kind %s", r, k, e.Name, tr.Kind[i])
					}
				}
			}
			// Stages come from the pipeline group: rank's index in it.
			for i := 0; i < tr.Len(); i++ {
				if tr.Kind[i].IsP2P() && tr.Stage[i] == stageOf(tr, tr.Peer[i]) {
					t.Errorf("P2P between ranks of one stage: %+v", tr.At(i))
				}
			}
		})
	}
}

func stageOf(tr *trace.Trace, r trace.Rank) trace.Stage {
	for i := 0; i < tr.Len(); i++ {
		if tr.Rank[i] == r {
			return tr.Stage[i]
		}
	}
	return -1
}

// TestTorchProfilerRun analyzes, with no flags, the traces of a real
// torch.profiler run of a 2-stage CPU pipeline (ingest/testdata/gen):
// every PP:{stage}{action}{mb} label becomes an event, the gloo P2P ops
// get their peers from the stage adjacency, and analyze.Run accepts it.
func TestTorchProfilerRun(t *testing.T) {
	files, _ := filepath.Glob("../testdata/torchprof/rank*.pt.trace.json.gz")
	if len(files) != 2 {
		t.Fatalf("fixtures: %v", files)
	}
	want := map[string]int{}
	for _, f := range files {
		for _, e := range events(rawJSON(t, f)) {
			if n := str(e, "name"); strings.HasPrefix(n, "PP:") {
				want[n[3:4]+":"+strings.TrimRight(n[4:], "0123456789")]++
			}
		}
	}
	res, err := ingest.Open(files, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Trace
	got := map[string]int{}
	for i := 0; i < tr.Len(); i++ {
		got[fmt.Sprint(tr.Stage[i])+":"+tr.Kind[i].String()]++
		if tr.Kind[i].IsP2P() && tr.Peer[i] != 1-tr.Rank[i] {
			t.Errorf("P2P row with peer %d: %+v", tr.Peer[i], tr.At(i))
		}
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d rows, want %d (all: %v)", k, got[k], n, got)
		}
	}
	rep, err := analyze.Run(tr, analyze.Options{Step: analyze.AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Job.PP != 2 || rep.Job.MicroBatches != 4 || rep.Job.Steps != 2 || len(rep.Stages) != 2 {
		t.Errorf("job %+v", rep.Job)
	}
	for _, s := range rep.Stages {
		if s.Bubble <= 0 || s.Bubble >= 1 || s.BusyMs <= 0 {
			t.Errorf("stage %+v", s)
		}
	}
}
