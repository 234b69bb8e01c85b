package hang_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/trace"
)

// collOp builds a collective row: rank r's seq-th op is kind k, number
// gseq of group g, of bytes bytes (bf16); times in ms, none for null.
func collOp(r trace.Rank, seq int64, k trace.Kind, g string, gseq int64, bytes int64, issue, start, end int64) trace.Event {
	e := op(r, seq, k, -1, -1, issue, start, end)
	e.Group, e.GroupSeq, e.Bytes, e.Dtype = g, gseq, bytes, "bf16"
	return e
}

func ranks(rs ...trace.Rank) []trace.Rank { return rs }

func findMismatch(rep *hang.Report, k hang.MismatchKind) *hang.Mismatch {
	for i := range rep.Mismatches {
		if rep.Mismatches[i].Kind == k {
			return &rep.Mismatches[i]
		}
	}
	return nil
}

// TestCollectiveChain: a 4-rank all-reduce (#5 of group dp) that ranks 0
// and 3 posted. Rank 2 never joins: it is blocked in a receive from rank
// 1, and rank 1 never joins either: it is computing (its F never ended).
// Ranks 0 and 3 wait in the all-reduce for ranks 1 and 2; rank 2 waits for
// rank 1; rank 1 waits for nobody: the root, reached through the chain.
func TestCollectiveChain(t *testing.T) {
	dp := map[string]hang.Group{"dp": {Desc: "DATA_PARALLEL_GROUP", Ranks: ranks(0, 1, 2, 3)}}
	tr := build(trace.Meta{Schema: 1, WorldSize: 4},
		collOp(0, 0, trace.AllReduce, "dp", 4, 1024, 0, 0, 1),
		collOp(0, 1, trace.AllReduce, "dp", 5, 1024, 2, 2, none),
		collOp(1, 0, trace.AllReduce, "dp", 4, 1024, 0, 0, 1),
		op(1, 1, trace.F, 0, -1, 2, 2, none),
		collOp(2, 0, trace.AllReduce, "dp", 4, 1024, 0, 0, 1),
		op(2, 1, trace.RecvF, 0, 1, 2, none, none),
		collOp(3, 0, trace.AllReduce, "dp", 4, 1024, 0, 0, 1),
		collOp(3, 1, trace.AllReduce, "dp", 5, 1024, 3, 3, none),
	)
	for _, groups := range []map[string]hang.Group{dp, nil} {
		rep := run(t, tr, hang.Options{Groups: groups})
		rc := rep.RootCause
		if rep.Verdict != hang.VerdictStalled || rc.Rank != 1 || rc.Reason != "stopped_in_compute" {
			t.Fatalf("groups %v: verdict %s, root %d %s; want stalled, rank 1 stopped_in_compute\n%s", groups != nil, rep.Verdict, rc.Rank, rc.Reason, dump(rep))
		}
		for _, want := range []string{"ranks 1, 2 never joined ALL_REDUCE #5 of group dp", "which ranks 0, 3 posted", "rank 2 waits in RECV_F"} {
			if !strings.Contains(rc.Summary, want) {
				t.Errorf("root cause %q lacks %q", rc.Summary, want)
			}
		}
		if len(rep.Path) < 3 || rep.Path[len(rep.Path)-1] != (hang.Node{Rank: 1, Step: -1}) {
			t.Errorf("path %v: want a chain ending at rank 1", rep.Path)
		}
		viaColl := false
		for _, n := range rep.Path {
			viaColl = viaColl || n.Group == "dp" && n.GroupSeq == 5 && n.Kind == trace.AllReduce
		}
		if !viaColl {
			t.Errorf("path %v does not go through the all-reduce", rep.Path)
		}
		if len(rep.Collectives) != 1 {
			t.Fatalf("collectives %+v, want the pending all-reduce only", rep.Collectives)
		}
		c := rep.Collectives[0]
		if c.Group != "dp" || c.Seq != 5 || c.Kind != trace.AllReduce || !slices.Equal(c.Pending, ranks(0, 3)) ||
			!slices.Equal(c.Missing, ranks(1, 2)) || len(c.Completed) != 0 || len(c.Behind) != 0 || !slices.Equal(c.Members, ranks(0, 1, 2, 3)) {
			t.Errorf("collective %+v", c)
		}
		for _, r := range []trace.Rank{0, 3} {
			rs := rep.Ranks[r]
			if rs.State != hang.StateCollective || rs.WaitsCollective == nil || !slices.Equal(rs.WaitsOn, ranks(1, 2)) {
				t.Errorf("rank %d: state %s, waits in %v on %v; want collective, on 1, 2", r, rs.State, rs.WaitsCollective, rs.WaitsOn)
			}
		}
		if rep.Ranks[2].WaitsFor != 1 || rep.Ranks[1].State != hang.StateCompute {
			t.Errorf("rank 2 waits for %d, rank 1 is %s; want 1, compute", rep.Ranks[2].WaitsFor, rep.Ranks[1].State)
		}
		m := findMismatch(rep, hang.MissingCollective)
		if m == nil || !slices.Equal(m.Ranks, ranks(1, 2)) || m.Collective == nil || m.Collective.Seq != 5 {
			t.Errorf("missing_collective %+v\n%s", m, dump(rep))
		}
	}
}

// TestCollectiveSizeMismatch: the members of all-reduce #3 of group tp
// give it different sizes; rank 2 is the odd one out. Completed, it is a
// mismatch (the job ran on wrong data); pending, the hang ends there.
func TestCollectiveSizeMismatch(t *testing.T) {
	for _, hung := range []bool{false, true} {
		end := int64(2)
		if hung {
			end = none
		}
		var evs []trace.Event
		for r := trace.Rank(0); r < 4; r++ {
			bytes := int64(4096)
			if r == 2 {
				bytes = 8192
			}
			evs = append(evs, collOp(r, 0, trace.AllReduce, "tp", 3, bytes, 1, 1, end))
		}
		rep := run(t, build(trace.Meta{Schema: 1}, evs...), hang.Options{})
		rc := rep.RootCause
		if rep.Verdict != hang.VerdictMismatch || rc.Rank != 2 || rc.Reason != "collective_size_mismatch" {
			t.Fatalf("hung %v: verdict %s root %d %s; want mismatch, rank 2 collective_size_mismatch\n%s", hung, rep.Verdict, rc.Rank, rc.Reason, dump(rep))
		}
		m := findMismatch(rep, hang.CollectiveSizeMismatch)
		if m == nil || !slices.Equal(m.Ranks, ranks(2)) || m.Suspect != 2 || m.Collective == nil || m.Collective.Seq != 3 ||
			!strings.Contains(m.Detail, "ranks 0, 1, 3 4096 bytes, rank 2 8192 bytes") {
			t.Errorf("hung %v: size mismatch %+v", hung, m)
		}
		if !strings.Contains(rc.Summary, "rank 2") || !strings.Contains(rc.Summary, "ALL_REDUCE #3 of group tp") {
			t.Errorf("root cause %q", rc.Summary)
		}
	}
}

// TestCollectiveDisagreement: members that posted different collectives,
// or different dtypes, under one number; all-to-all sizes may differ.
func TestCollectiveDisagreement(t *testing.T) {
	kinds := build(trace.Meta{Schema: 1},
		collOp(0, 0, trace.AllGather, "g", 1, 64, 0, 0, none),
		collOp(1, 0, trace.AllGather, "g", 1, 64, 0, 0, none),
		collOp(2, 0, trace.ReduceScatter, "g", 1, 64, 0, 0, none),
	)
	rep := run(t, kinds, hang.Options{})
	if m := findMismatch(rep, hang.CollectiveMismatch); m == nil || m.Suspect != 2 || rep.RootCause.Rank != 2 || rep.Verdict != hang.VerdictMismatch {
		t.Errorf("kind mismatch: %+v\n%s", m, dump(rep))
	}
	dtypes := build(trace.Meta{Schema: 1},
		collOp(0, 0, trace.Broadcast, "g", 1, 64, 0, 0, 1),
		collOp(1, 0, trace.Broadcast, "g", 1, 64, 0, 0, 1),
	)
	dtypes.Dtype[1] = trace.Intern("fp32")
	rep = run(t, dtypes, hang.Options{})
	m := findMismatch(rep, hang.CollectiveDtypeMismatch)
	if m == nil || m.Suspect != trace.NoRank || !slices.Equal(rep.RootCause.Candidates, ranks(0, 1)) {
		t.Errorf("dtype mismatch of two (no majority): %+v, root %+v", m, rep.RootCause)
	}
	a2a := build(trace.Meta{Schema: 1},
		collOp(0, 0, trace.AllToAll, "ep", 1, 64, 0, 0, 1),
		collOp(1, 0, trace.AllToAll, "ep", 1, 96, 0, 0, 1),
	)
	if rep := run(t, a2a, hang.Options{}); rep.Verdict != hang.VerdictOK || len(rep.Mismatches) != 0 {
		t.Errorf("all-to-all with uneven splits: verdict %s\n%s", rep.Verdict, dump(rep))
	}
}

// TestCollectiveAllCompleted: collectives every member completed, sizes
// agreeing: no finding.
func TestCollectiveAllCompleted(t *testing.T) {
	var evs []trace.Event
	for r := trace.Rank(0); r < 4; r++ {
		evs = append(evs,
			collOp(r, 0, trace.AllReduce, "dp", 1, 4096, 0, 0, 1),
			collOp(r, 1, trace.AllGather, "dp", 2, 2048, 1, 1, 2),
			collOp(r, 2, trace.AllToAll, "ep", 7, 1000+int64(r), 2, 2, 3))
	}
	rep := run(t, build(trace.Meta{Schema: 1, WorldSize: 4}, evs...), hang.Options{Groups: map[string]hang.Group{"dp": {Ranks: ranks(0, 1, 2, 3)}}})
	if rep.Verdict != hang.VerdictOK || len(rep.Mismatches) != 0 || len(rep.Collectives) != 0 || rep.RootCause.Rank != trace.NoRank {
		t.Errorf("verdict %s, %d mismatches, %d collectives\n%s", rep.Verdict, len(rep.Mismatches), len(rep.Collectives), dump(rep))
	}
}

// TestCollectiveStuckHere is what a GPU error looks like in Flight Recorder
// dumps (which hold only what is in flight): rank 1 went on to #8 of group
// tp, so it completed #7, which rank 0 still shows pending. The collective
// is over for the group: rank 0 stopped making progress itself. Rank 1
// waits in #8, which rank 0 never posted.
func TestCollectiveStuckHere(t *testing.T) {
	tr := build(trace.Meta{Schema: 1, WorldSize: 2},
		collOp(0, 0, trace.AllGather, "tp", 7, 64, 1, none, none),
		collOp(1, 0, trace.ReduceScatter, "tp", 8, 64, 2, none, none),
	)
	rep := run(t, tr, hang.Options{})
	rc := rep.RootCause
	if rep.Verdict != hang.VerdictStalled || rc.Rank != 0 || rc.Reason != "stuck_in_collective" ||
		!strings.Contains(rc.Summary, "which rank 1 completed") || !strings.Contains(rc.Summary, "rank 0 never joined REDUCE_SCATTER #8 of group tp") {
		t.Fatalf("verdict %s root %+v\n%s", rep.Verdict, rc, dump(rep))
	}
	if rep.Ranks[0].Terminal == "" || !slices.Equal(rep.Ranks[1].WaitsOn, ranks(0)) {
		t.Errorf("rank 0 terminal %q, rank 1 waits on %v", rep.Ranks[0].Terminal, rep.Ranks[1].WaitsOn)
	}
}

// TestCollectiveIdle is what a rank stuck on the CPU side looks like in
// Flight Recorder dumps: rank 2 wrote a dump with nothing in flight and
// never posted the all-to-all ranks 0 and 1 wait in.
func TestCollectiveIdle(t *testing.T) {
	tr := build(trace.Meta{Schema: 1, WorldSize: 3},
		collOp(0, 0, trace.AllToAll, "ep", 10, 64, 1, none, none),
		collOp(1, 0, trace.AllToAll, "ep", 10, 64, 1, none, none),
	)
	opt := hang.Options{Groups: map[string]hang.Group{"ep": {Desc: "EXPERT_MODEL_PARALLEL_GROUP", Ranks: ranks(0, 1, 2)}},
		Dumps: map[trace.Rank]hang.Dump{0: {Entries: 1}, 1: {Entries: 1}, 2: {Entries: 0}}}
	rep := run(t, tr, opt)
	rc := rep.RootCause
	if rep.Verdict != hang.VerdictStalled || rc.Rank != 2 || rc.Reason != "never_joined" || rep.Ranks[2].State != hang.StateIdle ||
		!strings.Contains(rc.Summary, "never joined ALL_TO_ALL #10 of group ep (EXPERT_MODEL_PARALLEL_GROUP)") {
		t.Fatalf("verdict %s root %+v, rank 2 %s\n%s", rep.Verdict, rc, rep.Ranks[2].State, dump(rep))
	}
	if findMismatch(rep, hang.RankAbsent) != nil {
		t.Errorf("a rank that wrote a dump is not absent\n%s", dump(rep))
	}
	// Without the dump, the rank is absent.
	rep = run(t, tr, hang.Options{Groups: opt.Groups})
	if rep.RootCause.Rank != 2 || rep.RootCause.Reason != "absent" || !strings.Contains(rep.RootCause.Summary, "never joined ALL_TO_ALL #10") {
		t.Errorf("no dump: root %+v", rep.RootCause)
	}
}

// TestCollectiveProgressKeys: a Flight Recorder dump keys its progress
// (pg_status) by the rank's local group ids. Rank 1's key "2" counts to 3,
// the highest number of its rows in group 9: evidence that keys are ids in
// creation order (groups 0, 5, 9 -> keys 0, 1, 2). Read so, key "1" says
// rank 1 completed #7 of group 5, which rank 0 shows pending.
func TestCollectiveProgressKeys(t *testing.T) {
	tr := build(trace.Meta{Schema: 1, WorldSize: 2},
		collOp(0, 0, trace.AllReduce, "5", 7, 64, 1, none, none),
		collOp(0, 1, trace.AllToAll, "9", 3, 64, 2, none, none),
		collOp(1, 0, trace.AllToAll, "9", 3, 64, 1, none, none),
	)
	groups := map[string]hang.Group{"0": {Ranks: ranks(0, 1)}, "5": {Ranks: ranks(0, 1)}, "9": {Ranks: ranks(0, 1)}}
	dumps := map[trace.Rank]hang.Dump{
		0: {Entries: 2, Progress: map[string]hang.GroupProgress{"0": {2, -1, 2}, "1": {7, -1, 6}, "2": {3, -1, 2}}},
		1: {Entries: 1, Progress: map[string]hang.GroupProgress{"0": {2, -1, 2}, "1": {7, -1, 7}, "2": {3, -1, 2}}},
	}
	rep := run(t, tr, hang.Options{Groups: groups, Dumps: dumps})
	rc := rep.RootCause
	if rc.Rank != 0 || rc.Reason != "stuck_in_collective" {
		t.Fatalf("root %+v\n%s", rc, dump(rep))
	}
	var c *hang.Collective
	for i := range rep.Collectives {
		if rep.Collectives[i].Group == "5" {
			c = &rep.Collectives[i]
		}
	}
	if c == nil || !slices.Equal(c.Completed, ranks(1)) || len(c.Missing) != 0 {
		t.Errorf("group 5 #7: %+v", c)
	}
	if len(rep.Notes) == 0 || !strings.Contains(strings.Join(rep.Notes, "\n"), "creation order") {
		t.Errorf("notes %q", rep.Notes)
	}
	// Without the dumps, rank 1 has no row of group 5: it never posted #7.
	rep = run(t, tr, hang.Options{Groups: groups})
	if m := findMismatch(rep, hang.MissingCollective); m == nil || !slices.Equal(m.Ranks, ranks(1)) {
		t.Errorf("without progress: %+v\n%s", m, dump(rep))
	}
}

// TestP2PChannelPerGroup: when every P2P op names its group, sends and
// receives of different communicators do not match.
func TestP2PChannelPerGroup(t *testing.T) {
	mk := func(sendGroup, recvGroup string) *trace.Trace {
		s := op(0, 0, trace.SendF, 0, 1, 0, none, none)
		r := op(1, 0, trace.RecvF, 0, 0, 0, none, none)
		s.Group, r.Group = sendGroup, recvGroup
		s.GroupSeq, r.GroupSeq = 11, 4 // P2P numbers differ between sides and are not used
		return build(trace.Meta{Schema: 1}, s, r)
	}
	if rep := run(t, mk("pp", "pp"), hang.Options{}); rep.Matched != 1 {
		t.Errorf("same group: matched %d, want 1", rep.Matched)
	}
	rep := run(t, mk("pp", "default"), hang.Options{})
	if rep.Matched != 0 || findMismatch(rep, hang.MissingSend) == nil || findMismatch(rep, hang.MissingRecv) == nil {
		t.Errorf("different groups: matched %d\n%s", rep.Matched, dump(rep))
	}
}
