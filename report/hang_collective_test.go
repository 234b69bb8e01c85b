package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/trace"
)

// collectiveChain is a 4-rank job whose all-reduce #5 of group dp ranks 0
// and 3 posted: rank 2 never joins (blocked in a receive from rank 1), nor
// does rank 1 (its forward never ended). Times in ms.
func collectiveChain() (*trace.Trace, hang.Options) {
	t := &trace.Trace{Meta: trace.Meta{Schema: 1, WorldSize: 4}}
	add := func(r trace.Rank, seq int64, k trace.Kind, gseq int64, peer trace.Rank, issue, end int64) {
		e := trace.Event{Rank: r, Stage: trace.Stage(r), Kind: k, MicroBatch: -1, Seq: seq, Peer: peer, IssueNs: issue * 1e6,
			StartNs: issue * 1e6, EndNs: trace.NoTime, GroupSeq: trace.NoGroupSeq, Bytes: 1024, Dtype: "bf16"}
		if end >= 0 {
			e.EndNs = end * 1e6
		}
		if k.IsCollective() {
			e.Group, e.GroupSeq = "dp", gseq
		}
		if k.IsP2P() {
			e.StartNs, e.MicroBatch = trace.NoTime, 0
		}
		if k == trace.F {
			e.MicroBatch = 0
		}
		t.Append(e)
	}
	for r := trace.Rank(0); r < 4; r++ {
		add(r, 0, trace.AllReduce, 4, -1, 0, 1)
	}
	add(0, 1, trace.AllReduce, 5, -1, 2, -1)
	add(1, 1, trace.F, 0, -1, 2, -1)
	add(2, 1, trace.RecvF, 0, 1, 2, -1)
	add(3, 1, trace.AllReduce, 5, -1, 3, -1)
	return t, hang.Options{Groups: map[string]hang.Group{"dp": {Desc: "DATA_PARALLEL_GROUP", Ranks: []trace.Rank{0, 1, 2, 3}}}}
}

// TestHangCollectiveGolden renders the collective chain as text and JSON
// and compares with testdata/collective-chain.hang.{text,json}.
func TestHangCollectiveGolden(t *testing.T) {
	tr, opt := collectiveChain()
	rep, err := hang.Run(tr, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []Format{Text, JSON} {
		var b bytes.Buffer
		if err := WriteHang(&b, rep, f); err != nil {
			t.Fatal(err)
		}
		golden(t, "collective-chain.hang."+string(f), b.Bytes())
	}
}

// TestHangCollectiveJSON checks the collective extension of the JSON: the
// collectives list, a collective node on the path, the members a rank in a
// collective waits on, and the missing_collective mismatch.
func TestHangCollectiveJSON(t *testing.T) {
	tr, opt := collectiveChain()
	rep, err := hang.Run(tr, opt)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteHang(&b, rep, JSON); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		RootCause struct {
			Rank    int    `json:"rank"`
			Summary string `json:"summary"`
		} `json:"root_cause"`
		Path []struct {
			Rank     *int   `json:"rank"`
			Group    string `json:"group"`
			GroupSeq *int64 `json:"group_seq"`
			Kind     string `json:"kind"`
		} `json:"path"`
		Mismatches []struct {
			Kind       string `json:"kind"`
			Ranks      []int  `json:"ranks"`
			Collective *struct {
				Group string `json:"group"`
				Seq   int64  `json:"seq"`
			} `json:"collective"`
		} `json:"mismatches"`
		Collectives []struct {
			Group   string `json:"group"`
			Desc    string `json:"desc"`
			Seq     int64  `json:"seq"`
			Kind    string `json:"kind"`
			Members []int  `json:"members"`
			Pending []int  `json:"pending"`
			Missing []int  `json:"missing"`
			Ops     []struct {
				Rank     int    `json:"rank"`
				Group    string `json:"group"`
				GroupSeq *int64 `json:"group_seq"`
			} `json:"ops"`
		} `json:"collectives"`
		Ranks []struct {
			Rank    int    `json:"rank"`
			State   string `json:"state"`
			WaitsIn *struct {
				Group string `json:"group"`
			} `json:"waits_in_collective"`
			WaitsOn []int `json:"waits_on"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.RootCause.Rank != 1 || !strings.Contains(doc.RootCause.Summary, "ALL_REDUCE #5 of group dp (DATA_PARALLEL_GROUP)") {
		t.Errorf("root cause %+v", doc.RootCause)
	}
	onPath := false
	for _, n := range doc.Path {
		onPath = onPath || n.Group == "dp" && n.GroupSeq != nil && *n.GroupSeq == 5 && n.Kind == "ALL_REDUCE" && n.Rank == nil
	}
	if !onPath {
		t.Errorf("no collective node on the path: %s", b.String())
	}
	if len(doc.Collectives) != 1 {
		t.Fatalf("collectives %+v", doc.Collectives)
	}
	c := doc.Collectives[0]
	if c.Group != "dp" || c.Desc != "DATA_PARALLEL_GROUP" || c.Seq != 5 || c.Kind != "ALL_REDUCE" || len(c.Members) != 4 ||
		len(c.Pending) != 2 || len(c.Missing) != 2 || len(c.Ops) != 2 || c.Ops[0].GroupSeq == nil || *c.Ops[0].GroupSeq != 5 {
		t.Errorf("collective %+v", c)
	}
	missing := false
	for _, m := range doc.Mismatches {
		missing = missing || m.Kind == "missing_collective" && len(m.Ranks) == 2 && m.Collective != nil && m.Collective.Seq == 5
	}
	if !missing {
		t.Errorf("no missing_collective: %+v", doc.Mismatches)
	}
	if r := doc.Ranks[0]; r.State != "collective" || r.WaitsIn == nil || r.WaitsIn.Group != "dp" || len(r.WaitsOn) != 2 {
		t.Errorf("rank 0 %+v", r)
	}
}

// TestHangCollectiveHTMLGraph: the HTML wait-for graph labels a collective
// node with its kind, group and number, not as a rank.
func TestHangCollectiveHTMLGraph(t *testing.T) {
	tr, opt := collectiveChain()
	rep, err := hang.Run(tr, opt)
	if err != nil {
		t.Fatal(err)
	}
	g := hangSection(rep).Graph
	if g == nil {
		t.Fatal("no wait-for graph")
	}
	found := false
	for _, n := range g.Nodes {
		if strings.Contains(n.Label, "rank -1") {
			t.Errorf("collective node drawn as a rank: %+v", n)
		}
		found = found || n.Label == "ALL_REDUCE" && n.Sub == "group dp #5"
	}
	if !found {
		t.Errorf("no collective node in %+v", g.Nodes)
	}
}
