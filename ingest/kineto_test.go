package ingest

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// kev builds one Chrome-trace event; times in microseconds.
func kev(cat, name string, tid int, ts, dur float64, args map[string]any) map[string]any {
	e := map[string]any{"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}
	if args != nil {
		e["args"] = args
	}
	return e
}

// ppRank returns a 2-stage Kineto trace of one rank with one micro-batch:
// rank 0 runs F and sends activations, rank 1 receives them and runs F;
// both then all-reduce (group "0", Seq 0). skew (µs) is added to every
// timestamp: the rank's clock is ahead by that much. withColl false leaves
// the all-reduce out.
func ppRank(rank int, skew float64, withColl bool) []byte {
	var evs []map[string]any
	add := func(e map[string]any) { e["ts"] = e["ts"].(float64) + skew; evs = append(evs, e) }
	ext := 100 * (rank + 1)
	comm := func(coll string, ts, dur, kts, kdur float64, extra map[string]any) {
		ext++
		args := map[string]any{"External id": ext, "Collective name": coll, "Process Group Name": "0",
			"Process Group Ranks": "[0, 1]", "In msg nelems": 1024, "dtype": "BFloat16", "Group size": 2}
		for k, v := range extra {
			args[k] = v
		}
		add(kev("cpu_op", "record_param_comms", 1, ts, dur, args))
		add(kev("kernel", "ncclDevKernel_SendRecv(ncclDevComm*)", 7, kts, kdur, map[string]any{"External id": ext}))
	}
	if rank == 0 {
		add(kev("user_annotation", "PP:0F0", 1, 0, 100, map[string]any{"External id": 1}))
		add(kev("gpu_user_annotation", "PP:0F0", 7, 10, 90, map[string]any{"External id": 1}))
		add(kev("user_annotation", "PP:0SEND_F0", 1, 100, 10, map[string]any{"External id": 2}))
		comm("send", 101, 4, 105, 45, map[string]any{"Dst Rank": 1, "Rank": 1})
		add(kev("user_annotation", "PP:0RECV_B0", 1, 240, 10, map[string]any{"External id": 3}))
		comm("recv", 241, 4, 265, 35, map[string]any{"Src Rank": 1, "Rank": 1})
		if withColl {
			comm("allreduce", 300, 10, 310, 90, map[string]any{"Seq": 0})
		}
	} else {
		add(kev("user_annotation", "PP:1RECV_F0", 1, 50, 10, map[string]any{"External id": 1}))
		comm("recv", 51, 4, 105, 45, map[string]any{"Src Rank": 0, "Rank": 0})
		add(kev("user_annotation", "PP:1F0", 1, 150, 100, map[string]any{"External id": 2}))
		add(kev("user_annotation", "## forward ##", 1, 150, 100, nil))
		add(kev("user_annotation", "PP:1SEND_B0", 1, 259, 10, map[string]any{"External id": 3}))
		comm("send", 260, 4, 265, 35, map[string]any{"Dst Rank": 0, "Rank": 0})
		if withColl {
			comm("allreduce", 200, 10, 210, 190, map[string]any{"Seq": 0})
		}
	}
	doc := map[string]any{"schemaVersion": 1, "distributedInfo": map[string]any{"rank": rank, "world_size": 2},
		"baseTimeNanoseconds": 1700000000000000000, "traceEvents": evs}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return b
}

// TestKinetoPipelining reads the torch.distributed.pipelining profile:
// F from PP:0F0 on device time, the NCCL send inside PP:0SEND_F0 as SEND_F
// with its peer, bytes and group, unmapped annotations counted.
func TestKinetoPipelining(t *testing.T) {
	dir := t.TempDir()
	p0 := writeFile(t, dir, "r0.json", ppRank(0, 0, true))
	p1 := writeFile(t, dir, "r1.json", gzipBytes(t, ppRank(1, 0, true)))
	res, err := Open([]string{p0, p1}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Trace
	const base = 1700000000000000000
	var got []string
	for i := 0; i < tr.Len(); i++ {
		got = append(got, fmt.Sprintf("r%d s%d %s mb%d peer%d", tr.Rank[i], tr.Stage[i], tr.Kind[i], tr.MicroBatch[i], tr.Peer[i]))
	}
	want := []string{"r0 s0 F mb0 peer-1", "r0 s0 SEND_F mb0 peer1", "r0 s0 RECV_B mb0 peer1", "r0 s0 ALL_REDUCE mb-1 peer-1",
		"r1 s1 RECV_F mb0 peer0", "r1 s1 F mb0 peer-1", "r1 s1 ALL_REDUCE mb-1 peer-1", "r1 s1 SEND_B mb0 peer0"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	f := tr.At(0)
	if f.IssueNs != base || f.StartNs != base+10_000 || f.EndNs != base+100_000 {
		t.Errorf("F: issue %d start %d end %d: want the host start and the gpu_user_annotation span", f.IssueNs-base, f.StartNs-base, f.EndNs-base)
	}
	s := tr.At(1)
	if s.Bytes != 2048 || s.Dtype != "bf16" || s.Group != "0" || s.StartNs != base+105_000 || s.EndNs != base+150_000 {
		t.Errorf("SEND_F %+v", s)
	}
	ar := tr.At(3)
	if !ar.Kind.IsCollective() || ar.GroupSeq != 0 || ar.Group != "0" {
		t.Errorf("all-reduce %+v", ar)
	}
	var unmapped bool
	for _, w := range res.Warnings {
		if strings.Contains(w.Message, `"## forward ##" x1`) {
			unmapped = true
		}
	}
	if !unmapped {
		t.Errorf("no warning about the unmapped annotation: %v", res.Warnings)
	}
}

// TestClockAlignment: rank 1's clock runs 5 ms ahead. With a shared
// collective the offset is found exactly (ranks leave together); with P2P
// only, causality bounds it and the offset lands inside the bounds, which
// hold the truth.
func TestClockAlignment(t *testing.T) {
	const skewUs = 5000.0
	for _, withColl := range []bool{true, false} {
		t.Run(fmt.Sprintf("collectives=%v", withColl), func(t *testing.T) {
			dir := t.TempDir()
			p0 := writeFile(t, dir, "r0.json", ppRank(0, 0, withColl))
			p1 := writeFile(t, dir, "r1.json", ppRank(1, skewUs, withColl))
			res, err := Open([]string{p0, p1}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Clocks) != 2 || res.Clocks[0].OffsetNs != 0 || res.Clocks[0].Method != "reference" {
				t.Fatalf("clocks %+v", res.Clocks)
			}
			c := res.Clocks[1]
			truth := int64(-skewUs * 1e3)
			if withColl {
				if c.OffsetNs != truth || c.Collectives != 1 {
					t.Errorf("offset %d (%s), want %d from the collective", c.OffsetNs, c.Method, truth)
				}
			} else {
				if c.LowNs > truth || c.HighNs < truth || c.OffsetNs < c.LowNs || c.OffsetNs > c.HighNs || c.P2PPairs == 0 {
					t.Errorf("offset %d, bounds [%d, %d] (%d pairs), truth %d", c.OffsetNs, c.LowNs, c.HighNs, c.P2PPairs, truth)
				}
				if math.Abs(float64(c.OffsetNs-truth)) > 100e3 {
					t.Errorf("offset %d is %d ns off the truth", c.OffsetNs, c.OffsetNs-truth)
				}
			}
			// The shift was applied: rank 1's RECV now ends after rank 0's send was posted.
			tr := res.Trace
			var sendIssue, recvEnd int64
			for i := 0; i < tr.Len(); i++ {
				switch tr.Kind[i] {
				case trace.SendF:
					sendIssue = tr.IssueNs[i]
				case trace.RecvF:
					recvEnd = tr.EndNs[i]
				}
			}
			if recvEnd < sendIssue {
				t.Errorf("after alignment the receive ends %d ns before its send was posted", sendIssue-recvEnd)
			}
			shifted := false
			for _, w := range res.Warnings {
				shifted = shifted || strings.Contains(w.Message, "clock: times shifted")
			}
			if !shifted {
				t.Errorf("no warning about the shift")
			}
			res2, err := Open([]string{p0, p1}, Options{NoAlign: true})
			if err != nil || res2.Clocks != nil {
				t.Errorf("NoAlign: %v %v", err, res2.Clocks)
			}
		})
	}
}

// TestMapRules: user rules with named groups come before the built-in
// profiles; the stage comes from the rule.
func TestMapRules(t *testing.T) {
	evs := []map[string]any{
		kev("user_annotation", "fwd s1 mb3", 1, 0, 10, nil),
		kev("user_annotation", "bwd s1 mb3", 1, 20, 10, nil),
		kev("user_annotation", "Forward 2", 1, 40, 10, nil),
		kev("user_annotation", "opt", 1, 60, 10, nil),
	}
	b, _ := json.Marshal(map[string]any{"schemaVersion": 1, "distributedInfo": map[string]any{"rank": 5}, "traceEvents": evs})
	path := writeFile(t, t.TempDir(), "x.json", b)
	var rules []Rule
	for _, s := range []string{`F=^fwd s(?P<stage>\d+) mb(?P<mb>\d+)$`, `B=^bwd s(?P<stage>\d+) mb(?P<mb>\d+)$`, `OPT=^opt$`} {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	res, err := Open([]string{path}, Options{Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Trace
	var got []string
	for i := 0; i < tr.Len(); i++ {
		got = append(got, fmt.Sprintf("r%d s%d %s mb%d", tr.Rank[i], tr.Stage[i], tr.Kind[i], tr.MicroBatch[i]))
	}
	want := "r5 s1 F mb3,r5 s1 B mb3,r5 s1 F mb2,r5 s1 OPT mb-1"
	if strings.Join(got, ",") != want {
		t.Errorf("rows %v, want %s", got, want)
	}
	for _, bad := range []string{"F", "=x", "F=(", `F=(?P<foo>x)`, "bad kind=x"} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) accepted", bad)
		}
	}
}

// TestFlightRecorderJSON reads the JSON form of a dump and maps a
// group-local peer through pg_config.
func TestFlightRecorderJSON(t *testing.T) {
	dump := `{"version": "2.9", "pg_config": {"7": {"name": "7", "desc": "PIPELINE_MODEL_PARALLEL_GROUP", "ranks": "[1, 3, 5]"}},
	 "pg_status": {"7": {"last_enqueued_collective": 2, "last_started_collective": -1, "last_completed_collective": 1}},
	 "entries": [
	  {"record_id": 1, "process_group": ["7", "PIPELINE_MODEL_PARALLEL_GROUP"], "collective_seq_id": 1, "p2p_seq_id": 0, "profiling_name": "nccl:all_reduce", "time_created_ns": 100, "time_discovered_started_ns": 110, "time_discovered_completed_ns": 150, "state": "completed", "input_sizes": [[4, 2]], "input_dtypes": ["Float"], "is_p2p": false},
	  {"record_id": 2, "process_group": ["7", "PIPELINE_MODEL_PARALLEL_GROUP"], "collective_seq_id": 1, "p2p_seq_id": 5, "profiling_name": "nccl:send 1->0", "time_created_ns": 200, "time_discovered_started_ns": null, "time_discovered_completed_ns": null, "state": "scheduled", "input_sizes": [[8]], "input_dtypes": ["BFloat16"], "is_p2p": true}
	 ]}`
	path := writeFile(t, t.TempDir(), "nccl_trace_rank_3.json", []byte(dump))
	tr, info, _, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Format != FormatFRJSON || tr.Len() != 2 {
		t.Fatalf("format %s, %d rows", info.Format, tr.Len())
	}
	ar, send := tr.At(0), tr.At(1)
	if ar.Rank != 3 || ar.Stage != 1 || ar.Kind != trace.AllReduce || ar.StartNs != 110 || ar.EndNs != 150 || ar.Bytes != 32 || ar.GroupSeq != 1 || ar.Shape != "4x2" {
		t.Errorf("all-reduce %+v", ar)
	}
	if send.Kind != trace.SendB || send.Peer != 1 || send.StartNs != trace.NoTime || send.EndNs != trace.NoTime || send.GroupSeq != 5 {
		t.Errorf("send %+v", send)
	}
}

// TestPickleRefusesCode: a pickle that names a Python callable is refused
// before anything is built.
func TestPickleRefusesCode(t *testing.T) {
	evil := []byte("\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03.")
	if _, err := loadPickle(evil); err == nil || !strings.Contains(err.Error(), "GLOBAL") {
		t.Errorf("got %v, want a refusal naming GLOBAL", err)
	}
	huge := []byte("\x80\x02X\xff\xff\xff\x7f")
	if _, err := loadPickle(huge); err == nil {
		t.Error("a 2 GiB string in a 7-byte pickle was not refused")
	}
	ok := []byte("\x80\x02}q\x00X\x01\x00\x00\x00aq\x01]q\x02(K\x01K\x02es.")
	v, err := loadPickle(ok)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(v) != "map[a:[1 2]]" {
		t.Errorf("got %v", v)
	}
	_ = filepath.Base
}
