package hang_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

const none = trace.NoTime

// op builds one row: rank r (stage = r) does kind k of micro-batch mb with
// peer (or -1) as its seq-th op; times in ms, none for null.
func op(r trace.Rank, seq int64, k trace.Kind, mb trace.MicroBatch, peer trace.Rank, issue, start, end int64) trace.Event {
	ms := func(x int64) int64 {
		if x == none {
			return none
		}
		return x * 1e6
	}
	e := trace.Event{Rank: r, Stage: trace.Stage(r), Kind: k, MicroBatch: mb, Seq: seq, Peer: peer,
		IssueNs: ms(issue), StartNs: ms(start), EndNs: ms(end)}
	if k.IsP2P() {
		e.Bytes, e.Shape, e.Dtype = 8192, "4x1024", "bf16"
	}
	return e
}

func build(meta trace.Meta, evs ...trace.Event) *trace.Trace {
	t := &trace.Trace{Meta: meta}
	for _, e := range evs {
		t.Append(e)
	}
	return t
}

// TestHandDeadlock is ingest/testdata/hang2.csv: rank 0 sent mb 0 and its
// send of mb 1 is pending; rank 1 ran mb 0 forward and backward and its
// send of the gradient is pending. Each posted a send the other never
// receives: with only sends pending, each waits for the other: a cycle.
func TestHandDeadlock(t *testing.T) {
	tr := build(trace.Meta{Schema: 1},
		op(0, 0, trace.F, 0, -1, 0, 0, 1),
		op(0, 1, trace.SendF, 0, 1, 1, 1, 1),
		op(0, 2, trace.F, 1, -1, 1, 1, 2),
		op(0, 3, trace.SendF, 1, 1, 2, 2, none),
		op(1, 0, trace.RecvF, 0, 0, 0, 0, 1),
		op(1, 1, trace.F, 0, -1, 1, 1, 2),
		op(1, 2, trace.B, 0, -1, 2, 2, 4),
		op(1, 3, trace.SendB, 0, 0, 4, none, none),
	)
	rep := run(t, tr, hang.Options{})
	if rep.Verdict != hang.VerdictDeadlock || !slices.Equal(rep.Cycle, []trace.Rank{0, 1}) {
		t.Fatalf("verdict %s cycle %v, want deadlock [0 1]\n%s", rep.Verdict, rep.Cycle, dump(rep))
	}
	if rep.Matched != 1 || len(rep.Blocked) != 2 {
		t.Errorf("matched %d, blocked %d; want 1, 2", rep.Matched, len(rep.Blocked))
	}
	kinds := map[hang.MismatchKind]int{}
	for _, m := range rep.Mismatches {
		kinds[m.Kind]++
	}
	if kinds[hang.MissingRecv] != 2 || len(rep.Mismatches) != 2 {
		t.Errorf("mismatches %v, want two missing_recv", rep.Mismatches)
	}
	rc := rep.RootCause
	if rc.Reason != "deadlock" || !strings.Contains(rc.Summary, "wait for each other") {
		t.Errorf("root cause %+v", rc)
	}
	// Dump time defaults to the latest timestamp (4 ms): rank 0's pending
	// send, issued at 2 ms, has waited 2 ms.
	if rep.DumpNs != 4e6 || rep.DumpGiven || rep.Blocked[0].WaitNs != 2e6 {
		t.Errorf("dump %d given %v, first blocked waited %d", rep.DumpNs, rep.DumpGiven, rep.Blocked[0].WaitNs)
	}
	rep = run(t, tr, hang.Options{DumpNs: 10e6})
	if !rep.DumpGiven || rep.Blocked[0].WaitNs != 8e6 || rep.Blocked[1].WaitNs != 6e6 {
		t.Errorf("given dump: waits %d, %d; want 8 ms, 6 ms", rep.Blocked[0].WaitNs, rep.Blocked[1].WaitNs)
	}
}

// TestNCCLOrder checks that pairs match by issue order per rank pair, not
// by label, and that each label is checked.
func TestNCCLOrder(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(send, recv *trace.Event)
		want   hang.MismatchKind
		detail string
	}{
		{"micro-batch", func(s, r *trace.Event) { s.MicroBatch = 1 }, hang.OrderMismatch, "micro-batch 1 vs 0"},
		{"kind", func(s, r *trace.Event) { s.Kind = trace.SendB }, hang.OrderMismatch, "kind SEND_B vs RECV_F"},
		{"step", func(s, r *trace.Event) { s.Step = 3 }, hang.OrderMismatch, "step 3 vs 0"},
		{"shape", func(s, r *trace.Event) { s.Shape = "8x512" }, hang.ShapeMismatch, "shape 8x512 vs 4x1024"},
		{"dtype", func(s, r *trace.Event) { s.Dtype, s.Bytes = "fp32", 16384 }, hang.DtypeMismatch, "dtype fp32 vs bf16"},
		{"bytes", func(s, r *trace.Event) { s.Shape, r.Shape, s.Dtype, s.Bytes = "", "", "", 100 }, hang.BytesMismatch, "bytes 100 vs 8192"},
		{"unknown agrees", func(s, r *trace.Event) { s.Shape, s.Dtype, s.Bytes = "", "", 0 }, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			send := op(0, 1, trace.SendF, 0, 1, 1, 1, 2)
			recv := op(1, 0, trace.RecvF, 0, 0, 0, 1, 2)
			c.mutate(&send, &recv)
			tr := build(trace.Meta{Schema: 1}, op(0, 0, trace.F, 0, -1, 0, 0, 1), send, recv)
			rep := run(t, tr, hang.Options{})
			if c.want == "" {
				if rep.Verdict != hang.VerdictOK || len(rep.Mismatches) != 0 {
					t.Fatalf("verdict %s, mismatches %v", rep.Verdict, rep.Mismatches)
				}
				return
			}
			if rep.Verdict != hang.VerdictMismatch || len(rep.Mismatches) != 1 {
				t.Fatalf("verdict %s, mismatches %v", rep.Verdict, rep.Mismatches)
			}
			m := rep.Mismatches[0]
			if m.Kind != c.want || !slices.Equal(m.Ranks, []trace.Rank{0, 1}) || !strings.Contains(m.Detail, c.detail) || m.Send == nil || m.Recv == nil {
				t.Errorf("mismatch %+v, want %s with %q", m, c.want, c.detail)
			}
		})
	}

	// Two sends and two receives whose labels are swapped on one side:
	// they pair first with first, so both pairs disagree (one entry, count
	// 2), and the sender, whose sends are not in micro-batch order, is the
	// suspect; the label its peer expected first is mb 0.
	tr := build(trace.Meta{Schema: 1},
		op(0, 0, trace.SendF, 1, 1, 0, 0, 1),
		op(0, 1, trace.SendF, 0, 1, 0, 1, 2),
		op(1, 0, trace.RecvF, 0, 0, 0, 0, 1),
		op(1, 1, trace.RecvF, 1, 0, 0, 1, 2),
	)
	rep := run(t, tr, hang.Options{})
	if len(rep.Mismatches) != 1 {
		t.Fatalf("mismatches %v", rep.Mismatches)
	}
	m := rep.Mismatches[0]
	if m.Kind != hang.OrderMismatch || m.Count != 2 || m.Suspect != 0 || m.MicroBatch != 0 || m.Send.Seq != 0 || m.Recv.Seq != 0 {
		t.Errorf("swapped sends: %+v", m)
	}
	if rep.RootCause.Rank != 0 || rep.RootCause.Reason != "reordered_ops" {
		t.Errorf("root cause %+v", rep.RootCause)
	}
}

// TestIncomplete cuts the tail of one rank's events from a clean run: its
// peers completed ops it has no record of, and when the file says bytes
// were lost the rank is named as well. Either way the verdict is
// incomplete, naming that rank, not a deadlock.
func TestIncomplete(t *testing.T) {
	c := sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, DP: 2}
	full := mustRun(t, c)
	const victim = 4 // stage 2, pipeline 0
	cut := dropTail(full, victim, 30)
	for _, files := range [][]hang.File{nil, {{Path: "rank-00004.arrows", Ranks: []trace.Rank{victim}, Truncated: true, BytesLost: 1234}}} {
		rep := run(t, cut, hang.Options{Files: files})
		if rep.Verdict != hang.VerdictIncomplete || rep.RootCause.Rank != victim || rep.RootCause.Reason != "lost_data" {
			t.Errorf("files %v: verdict %s root %d %s\n%s", files, rep.Verdict, rep.RootCause.Rank, rep.RootCause.Reason, dump(rep))
		}
		if !rep.Ranks[victim].Lost || rep.Ranks[victim].LostReason == "" {
			t.Errorf("rank %d not marked lost: %+v", victim, rep.Ranks[victim])
		}
		if files != nil && !strings.Contains(rep.RootCause.Summary, "rank-00004.arrows") {
			t.Errorf("summary does not name the file: %s", rep.RootCause.Summary)
		}
	}

	// A hung job whose blocked chain ends at a rank that lost its tail is
	// incomplete too: the lost events may hold what the others wait for.
	hung := mustRun(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2,
		Faults: []sim.Fault{{Kind: sim.FaultCrash, Rank: 3, Step: 1, MicroBatch: 2}}})
	cut = dropTail(hung, 1, 12)
	rep := run(t, cut, hang.Options{Files: []hang.File{{Path: "r1", Ranks: []trace.Rank{1}, Truncated: true, BytesLost: 99}}})
	if rep.Verdict != hang.VerdictIncomplete || rep.RootCause.Rank != 1 {
		t.Errorf("hung and cut: verdict %s root %d\n%s", rep.Verdict, rep.RootCause.Rank, dump(rep))
	}

	// A file that was only not closed (every file of a hung job) loses
	// nothing: the crash is still found.
	rep = run(t, hung, hang.Options{Files: []hang.File{{Path: "r1", Ranks: []trace.Rank{0, 1, 2, 3}, Truncated: true}}})
	if rep.Verdict != hang.VerdictStalled || rep.RootCause.Rank != 3 {
		t.Errorf("unclosed files: verdict %s root %d\n%s", rep.Verdict, rep.RootCause.Rank, dump(rep))
	}

	// A rank file missing from a complete run: the others completed
	// optimizer steps it never posted.
	gone := dropTail(full, victim, full.Len())
	rep = run(t, gone, hang.Options{})
	if rep.Verdict != hang.VerdictIncomplete || rep.RootCause.Rank != victim || rep.Ranks[victim].State != hang.StateAbsent {
		t.Errorf("missing file: verdict %s root %d state %s\n%s", rep.Verdict, rep.RootCause.Rank, rep.Ranks[victim].State, dump(rep))
	}
}

// dropTail returns tr without the last n rows of rank r.
func dropTail(tr *trace.Trace, r trace.Rank, n int) *trace.Trace {
	last := -1
	for i := 0; i < tr.Len(); i++ {
		if tr.Rank[i] == r {
			last = i
		}
	}
	var keep []int
	for i := 0; i < tr.Len(); i++ {
		if tr.Rank[i] != r || i <= last-n {
			keep = append(keep, i)
		}
	}
	return tr.Permute(keep)
}

// TestAbsent checks world size from Options and from metadata: ranks with
// no events the job should have.
func TestAbsent(t *testing.T) {
	// A 2-stage job where rank 1 wrote nothing: rank 0's send and receive
	// wait for it.
	tr := build(trace.Meta{Schema: 1},
		op(0, 0, trace.F, 0, -1, 0, 0, 1),
		op(0, 1, trace.SendF, 0, 1, 1, none, none),
		op(0, 2, trace.RecvB, 0, 1, 1, none, none),
	)
	rep := run(t, tr, hang.Options{})
	if rep.Verdict != hang.VerdictStalled || rep.RootCause.Rank != 1 || rep.RootCause.Reason != "absent" {
		t.Fatalf("peer-only absent rank: %s\n%s", rep.Verdict, dump(rep))
	}
	// World size 4 adds ranks 2 and 3 to the absent list; rank 1 stays the
	// root (it is the one waited for).
	rep = run(t, tr, hang.Options{WorldSize: 4})
	var absent []trace.Rank
	for _, m := range rep.Mismatches {
		if m.Kind == hang.RankAbsent {
			absent = m.Ranks
		}
	}
	if !slices.Equal(absent, []trace.Rank{1, 2, 3}) || rep.RootCause.Rank != 1 || len(rep.Ranks) != 4 {
		t.Errorf("world 4: absent %v root %d ranks %d", absent, rep.RootCause.Rank, len(rep.Ranks))
	}
}

// TestOrderAndErrors checks that row order does not matter, that the input
// is not modified, and the errors.
func TestOrderAndErrors(t *testing.T) {
	tr := mustRun(t, sim.Config{Schedule: "zb-h1", Stages: 3, MicroBatches: 6, DP: 2,
		Faults: []sim.Fault{{Kind: sim.FaultSkip, Rank: 2, Step: 0, MicroBatch: 3}}})
	want := run(t, tr, hang.Options{})
	idx := make([]int, tr.Len())
	for i := range idx {
		idx[i] = tr.Len() - 1 - i
	}
	rev := tr.Permute(idx)
	before := rev.Permute(identity(rev.Len()))
	got := run(t, rev, hang.Options{})
	if got.Verdict != want.Verdict || got.RootCause.Summary != want.RootCause.Summary || len(got.Mismatches) != len(want.Mismatches) {
		t.Errorf("reversed rows: %s / %s, want %s / %s", got.Verdict, got.RootCause.Summary, want.Verdict, want.RootCause.Summary)
	}
	if d := trace.Diff(before, rev); d != "" {
		t.Errorf("Run modified its input: %s", d)
	}

	if _, err := hang.Run(&trace.Trace{}, hang.Options{}); err == nil {
		t.Error("empty trace accepted")
	}
	big := build(trace.Meta{Schema: 1}, op(hang.MaxRanks, 0, trace.F, 0, -1, 0, 0, 1))
	if _, err := hang.Run(big, hang.Options{}); err == nil || !strings.Contains(err.Error(), "rank") {
		t.Errorf("huge rank id: %v", err)
	}
	if _, err := hang.Run(nil, hang.Options{}); err == nil {
		t.Error("nil trace accepted")
	}
}

func identity(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// TestScheduleDistrust labels a GPipe trace as 1F1B: every stage but the
// last departs from the 1F1B order, so the schedule check is dropped with a
// note instead of blaming every rank, and the clean run is still ok.
func TestScheduleDistrust(t *testing.T) {
	tr := mustRun(t, sim.Config{Schedule: "gpipe", Stages: 4, MicroBatches: 8})
	tr.Meta.Schedule = "1f1b"
	rep := run(t, tr, hang.Options{})
	if rep.Verdict != hang.VerdictOK || rep.Divergence != nil {
		t.Fatalf("verdict %s divergence %+v", rep.Verdict, rep.Divergence)
	}
	if len(rep.Notes) == 0 || !strings.Contains(rep.Notes[0], "do not follow the 1f1b schedule") {
		t.Errorf("notes %v", rep.Notes)
	}
	// Unknown schedules are noted, not checked.
	tr.Meta.Schedule = "megatron-vpp"
	if rep := run(t, tr, hang.Options{}); rep.Verdict != hang.VerdictOK || len(rep.Notes) == 0 {
		t.Errorf("unknown schedule: %s %v", rep.Verdict, rep.Notes)
	}
}

// TestStuckTransferCandidates: two ranks stuck in transfers with each other
// that started together cannot be told apart; both are named.
func TestStuckTransferCandidates(t *testing.T) {
	tr := mustRun(t, sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 3, P2PLatencyUs: 100,
		Faults: []sim.Fault{{Kind: sim.FaultCrash, Rank: 1, Step: 0, MicroBatch: 2}}})
	rep := run(t, tr, hang.Options{})
	rc := rep.RootCause
	if rep.Verdict != hang.VerdictStalled || rc.Reason != "stopped_in_transfer" || !slices.Equal(rc.Candidates, []trace.Rank{0, 1}) ||
		!strings.Contains(rc.Summary, "cannot tell") {
		t.Errorf("verdict %s root %+v", rep.Verdict, rc)
	}
}

// TestOptSkipAll: every rank skipping the optimizer step together (an AMP
// overflow) is not a mismatch.
func TestOptSkipAll(t *testing.T) {
	var fs []sim.Fault
	for r := 0; r < 3; r++ {
		fs = append(fs, sim.Fault{Kind: sim.FaultOptSkip, Rank: r, Step: 0, MicroBatch: -1})
	}
	rep := run(t, mustRun(t, sim.Config{Schedule: "1f1b", Stages: 3, MicroBatches: 3, Faults: fs}), hang.Options{})
	if rep.Verdict != hang.VerdictOK {
		t.Errorf("verdict %s\n%s", rep.Verdict, dump(rep))
	}
	// Two of three skipping: the one that stepped is named.
	rep = run(t, mustRun(t, sim.Config{Schedule: "1f1b", Stages: 3, MicroBatches: 3, Faults: fs[:2]}), hang.Options{})
	if rep.Verdict != hang.VerdictMismatch || len(rep.Mismatches) != 1 || !slices.Equal(rep.Mismatches[0].Ranks, []trace.Rank{2}) {
		t.Errorf("verdict %s\n%s", rep.Verdict, dump(rep))
	}
}

// TestBadRows: rows Run cannot index are errors, not panics.
func TestBadRows(t *testing.T) {
	for _, e := range []trace.Event{
		op(-1, 0, trace.F, 0, -1, 0, 0, 1),
		op(0, 0, trace.SendF, 0, -1, 0, 0, 1),
		op(0, 0, trace.RecvB, 0, 0, 0, 0, 1),
	} {
		if _, err := hang.Run(build(trace.Meta{Schema: 1}, e), hang.Options{}); err == nil || !strings.Contains(err.Error(), "row 0") {
			t.Errorf("%+v: %v", e, err)
		}
	}
	// A one-stage job whose only rank skips a micro-batch completes: no
	// pair disagrees, so the verdict stays ok, with the departure noted.
	tr := mustRun(t, sim.Config{Schedule: "1f1b", Stages: 1, MicroBatches: 4,
		Faults: []sim.Fault{{Kind: sim.FaultSkip, Rank: 0, Step: 0, MicroBatch: 1}}})
	rep := run(t, tr, hang.Options{})
	if rep.Verdict != hang.VerdictOK || rep.Divergence == nil || !rep.Divergence.Skipped || len(rep.Notes) == 0 {
		t.Errorf("verdict %s divergence %+v notes %v", rep.Verdict, rep.Divergence, rep.Notes)
	}
}

// TestBadRowsUnordered: rows out of (rank, seq) order are ordered before
// they are checked, so an error names the row of the ordered copy; rows
// with one (rank, seq) twice are ordered once and analysed.
func TestBadRowsUnordered(t *testing.T) {
	tr := build(trace.Meta{Schema: 1},
		op(1, 0, trace.F, 0, -1, 0, 0, 1),
		op(0, 0, trace.SendF, 0, -1, 0, 0, 1))
	if _, err := hang.Run(tr, hang.Options{}); err == nil || !strings.Contains(err.Error(), "row 0 (rank 0, seq 0)") {
		t.Errorf("unordered bad row: %v", err)
	}
	tr = build(trace.Meta{Schema: 1},
		op(0, 1, trace.F, 0, -1, 0, 0, 1),
		op(1, 0, trace.RecvF, 0, 0, 0, none, none),
		op(0, 0, trace.F, 0, -1, 0, 0, 1),
		op(0, 1, trace.SendF, 0, 1, 2, none, none))
	rep, err := hang.Run(tr, hang.Options{})
	if err != nil || rep.Matched != 1 || rep.Ranks[0].Events != 3 {
		t.Errorf("repeated (rank, seq): %v %+v", err, rep)
	}
}

// TestLostElsewhere: a rank that lost its tail but that no blocked rank
// waits for does not make a found crash incomplete; it is noted.
func TestLostElsewhere(t *testing.T) {
	tr := mustRun(t, sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 4, Steps: 2, DP: 2,
		Faults: []sim.Fault{{Kind: sim.FaultCrash, Rank: 1, Step: 1, MicroBatch: 1}}})
	// Rank 0 (stage 0, pipeline 0) completed step 0; its file lost bytes,
	// but the rows that were lost were all complete before the crash.
	rep := run(t, tr, hang.Options{Files: []hang.File{{Path: "x", Ranks: []trace.Rank{2}, BytesLost: 10}}})
	if rep.Verdict != hang.VerdictStalled || rep.RootCause.Rank != 1 {
		t.Fatalf("verdict %s root %d\n%s", rep.Verdict, rep.RootCause.Rank, dump(rep))
	}
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "rank 2's events are missing") }) {
		t.Errorf("notes %v", rep.Notes)
	}
}

// TestNoOptOnSomeRanks: a runtime that records OPT on some ranks only does
// not make a clean trace incomplete.
func TestNoOptOnSomeRanks(t *testing.T) {
	tr := mustRun(t, sim.Config{Schedule: "gpipe", Stages: 3, MicroBatches: 4, Steps: 2})
	var keep []int
	for i := 0; i < tr.Len(); i++ {
		if tr.Rank[i] == 0 || tr.Kind[i] != trace.Opt {
			keep = append(keep, i)
		}
	}
	if rep := run(t, tr.Permute(keep), hang.Options{}); rep.Verdict != hang.VerdictOK {
		t.Errorf("verdict %s\n%s", rep.Verdict, dump(rep))
	}
}

// TestComputeGroup: a TP group stuck in compute (a hung all-reduce inside
// F) names the rank stuck longest and the others as candidates.
func TestComputeGroup(t *testing.T) {
	tr := build(trace.Meta{Schema: 1},
		op(0, 0, trace.F, 0, -1, 0, 0, 1),
		op(0, 1, trace.SendF, 0, 2, 1, 1, 1),
		op(0, 2, trace.F, 1, -1, 1, 2, none),
		op(1, 0, trace.F, 0, -1, 0, 0, 1),
		op(1, 1, trace.SendF, 0, 3, 1, 1, 1),
		op(1, 2, trace.F, 1, -1, 1, 1, none),
		op(2, 0, trace.RecvF, 0, 0, 0, 1, 1),
		op(2, 1, trace.RecvF, 1, 0, 1, none, none),
		op(3, 0, trace.RecvF, 0, 1, 0, 1, 1),
		op(3, 1, trace.RecvF, 1, 1, 1, none, none),
	)
	rep := run(t, tr, hang.Options{})
	rc := rep.RootCause
	if rep.Verdict != hang.VerdictStalled || rc.Rank != 1 || rc.Reason != "stopped_in_compute" || !slices.Equal(rc.Candidates, []trace.Rank{0, 1}) {
		t.Errorf("verdict %s root %+v", rep.Verdict, rc)
	}
}

// TestRunProgress: Run reports its phases in order, then the end, and
// the report is the one made without a callback.
func TestRunProgress(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 4, DP: 2, TP: 2, MicroBatches: 8, Steps: 2,
		Faults: []sim.Fault{{Kind: sim.FaultSkip, Rank: 9, Step: 1, MicroBatch: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	var got [][2]int
	rep, err := hang.Run(tr, hang.Options{Progress: func(done, total int) { got = append(got, [2]int{done, total}) }})
	if err != nil {
		t.Fatal(err)
	}
	var want [][2]int
	for k := range hang.RunPhases + 1 {
		want = append(want, [2]int{k, hang.RunPhases})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("progress calls %v, want %v", got, want)
	}
	plain, err := hang.Run(tr, hang.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep, plain) {
		t.Error("the report with progress differs from the one without")
	}
}
