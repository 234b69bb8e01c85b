package hang_test

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"testing"

	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/report"
	"github.com/ppprof/ppprof/trace"
)

// randomCollectiveTrace draws a small job of ranks that post collectives in
// a few groups (sequence numbers increasing per rank and group, some left
// out, some rows pending) among sends, receives and compute, with group
// lists and dumps that may or may not describe them.
func randomCollectiveTrace(rng *rand.Rand) (*trace.Trace, hang.Options) {
	n := 2 + rng.Intn(6)
	kinds := []trace.Kind{trace.AllReduce, trace.AllGather, trace.ReduceScatter, trace.AllToAll, trace.Broadcast, trace.Collective}
	groups := map[string]hang.Group{}
	names := []string{"0", "3", "7", "tp"}
	for _, g := range names {
		var rs []trace.Rank
		for r := 0; r < n+1; r++ { // may name a rank beyond the trace
			if rng.Intn(3) > 0 {
				rs = append(rs, trace.Rank(r))
			}
		}
		if rng.Intn(4) > 0 {
			groups[g] = hang.Group{Desc: "G" + g, Ranks: rs}
		}
	}
	tr := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	dumps := map[trace.Rank]hang.Dump{}
	for r := 0; r < n; r++ {
		seq := int64(0)
		next := map[string]int64{}
		stop := rng.Intn(12)
		prog := map[string]hang.GroupProgress{}
		for k := 0; k < stop; k++ {
			e := trace.Event{Rank: trace.Rank(r), Stage: trace.Stage(r), MicroBatch: -1, Seq: seq, Peer: trace.NoRank,
				IssueNs: int64(k) * 1000, StartNs: int64(k) * 1000, EndNs: int64(k)*1000 + 500, GroupSeq: trace.NoGroupSeq,
				Bytes: int64(64 * (1 + rng.Intn(2))), Dtype: []string{"bf16", "fp32", ""}[rng.Intn(3)]}
			switch x := rng.Intn(10); {
			case x < 6:
				g := names[rng.Intn(len(names))]
				next[g] += int64(1 + rng.Intn(2))
				e.Kind, e.Group, e.GroupSeq = kinds[rng.Intn(len(kinds))], g, next[g]
				if rng.Intn(8) == 0 {
					e.GroupSeq = trace.NoGroupSeq
				}
				p := prog[g]
				p.LastEnqueued = next[g]
				prog[g] = p
			case x < 8 && n > 1:
				peer := trace.Rank(rng.Intn(n - 1))
				if peer >= trace.Rank(r) {
					peer++
				}
				e.Kind, e.Peer = []trace.Kind{trace.SendF, trace.RecvF, trace.SendB, trace.RecvB}[rng.Intn(4)], peer
				if rng.Intn(2) == 0 {
					e.Group = names[rng.Intn(len(names))]
				}
			default:
				e.Kind, e.MicroBatch = trace.F, trace.MicroBatch(k)
			}
			if rng.Intn(3) == 0 || k == stop-1 && rng.Intn(2) == 0 {
				e.EndNs = trace.NoTime
				if rng.Intn(2) == 0 {
					e.StartNs = trace.NoTime
				}
			}
			tr.Append(e)
			seq++
		}
		if rng.Intn(2) == 0 {
			keyed := map[string]hang.GroupProgress{}
			i := 0
			for _, g := range slices.Sorted(maps.Keys(prog)) { // not map order: the same seed draws the same job
				p := prog[g]
				key := g
				if rng.Intn(2) == 0 {
					key = fmt.Sprint(i)
				}
				p.LastCompleted = p.LastEnqueued - int64(rng.Intn(3))
				keyed[key] = p
				i++
			}
			dumps[trace.Rank(r)] = hang.Dump{Entries: int(seq), Progress: keyed}
		}
	}
	if tr.Len() == 0 {
		tr.Append(trace.Event{Kind: trace.F, StartNs: 0, EndNs: 1, Peer: trace.NoRank, GroupSeq: trace.NoGroupSeq})
	}
	opt := hang.Options{WorldSize: n}
	if rng.Intn(3) > 0 {
		opt.Groups = groups
	}
	if rng.Intn(3) > 0 {
		opt.Dumps = dumps
	}
	return tr, opt
}

// collectiveInvariants checks the collective part of a report.
func collectiveInvariants(rep *hang.Report) string {
	for _, c := range rep.Collectives {
		var all []trace.Rank
		all = append(all, c.Completed...)
		all = append(all, c.Pending...)
		all = append(all, c.Missing...)
		slices.Sort(all)
		switch {
		case len(c.Pending) == 0:
			return fmt.Sprintf("collective %s #%d listed with nobody pending", c.Group, c.Seq)
		case !slices.Equal(all, c.Members):
			return fmt.Sprintf("collective %s #%d: completed %v + pending %v + missing %v != members %v", c.Group, c.Seq, c.Completed, c.Pending, c.Missing, c.Members)
		case len(c.Ops) == 0:
			return fmt.Sprintf("collective %s #%d without ops", c.Group, c.Seq)
		}
		for _, r := range c.Behind {
			if !slices.Contains(c.Pending, r) {
				return fmt.Sprintf("collective %s #%d: rank %d behind but not pending", c.Group, c.Seq, r)
			}
		}
	}
	for _, rs := range rep.Ranks {
		if rs.State == hang.StateCollective && (rs.Waiting == nil || !rs.Waiting.Kind.IsCollective()) {
			return fmt.Sprintf("rank %d in state collective waits in %v", rs.Rank, rs.Waiting)
		}
		if rs.WaitsCollective != nil && rs.State != hang.StateCollective {
			return fmt.Sprintf("rank %d waits in a collective in state %s", rs.Rank, rs.State)
		}
	}
	return ""
}

// TestCollectiveProperties runs random jobs with collectives: Run and both
// renderings never fail, and the report holds the invariants.
func TestCollectiveProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for i := 0; i < 3000; i++ {
		tr, opt := randomCollectiveTrace(rng)
		rep, err := hang.Run(tr, opt)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if s := invariants(tr, rep); s != "" {
			t.Fatalf("case %d: %s\n%s", i, s, dump(rep))
		}
		if s := collectiveInvariants(rep); s != "" {
			t.Fatalf("case %d: %s\n%s", i, s, dump(rep))
		}
		for _, f := range []report.Format{report.Text, report.JSON} {
			if err := report.WriteHang(&bytes.Buffer{}, rep, f); err != nil {
				t.Fatalf("case %d: %s: %v", i, f, err)
			}
		}
	}
}

// TestCollectiveDenseIndex: collective matching finds a group's
// collectives in an array by sequence number when the numbers are dense,
// and in a map otherwise; the reports must be the same either way, on
// the random jobs above and on the same jobs with sequence numbers spread
// apart (a group's numbers too sparse for the array).
func TestCollectiveDenseIndex(t *testing.T) {
	rng := rand.New(rand.NewSource(17))
	for i := 0; i < 1500; i++ {
		tr, opt := randomCollectiveTrace(rng)
		if i%2 == 1 {
			for r := range tr.GroupSeq {
				if tr.GroupSeq[r] >= 0 {
					tr.GroupSeq[r] *= 1000
				}
			}
		}
		var out [2]bytes.Buffer
		for k, dense := range []bool{true, false} {
			old := hang.SetDenseSeqs(dense)
			rep, err := hang.Run(tr, opt)
			hang.SetDenseSeqs(old)
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			if err := report.WriteHang(&out[k], rep, report.JSON); err != nil {
				t.Fatal(err)
			}
		}
		if out[0].String() != out[1].String() {
			t.Fatalf("case %d: the reports differ:\n%s\n%s", i, out[0].String(), out[1].String())
		}
	}
}
