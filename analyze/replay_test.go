package analyze

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// op is one row of a hand-made trace: rank (= stage), kind, micro-batch,
// peer (-1 none), issue, start, end in ns.
type handOp struct {
	rank        trace.Rank
	kind        trace.Kind
	mb          trace.MicroBatch
	peer        trace.Rank
	issue, s, e int64
}

// handTrace builds a one-step, one-pipeline trace where rank = stage, rows
// in the order given (seq per rank in that order).
func handTrace(ops []handOp) *trace.Trace {
	tr := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	seq := map[trace.Rank]int64{}
	for _, o := range ops {
		tr.Append(trace.Event{Rank: o.rank, Stage: trace.Stage(o.rank), Kind: o.kind, MicroBatch: o.mb,
			Seq: seq[o.rank], IssueNs: o.issue, StartNs: o.s, EndNs: o.e, Peer: o.peer})
		seq[o.rank]++
	}
	tr.SortByRankSeq()
	return tr
}

// gpipe2P2P is a 2-stage GPipe step of 2 micro-batches with F 10, B 20 and
// transfers of 2 ns, timed by hand under the replay rules:
//
//	rank 0: F0 0-10, SEND_F0 post 10, F1 10-20, SEND_F1 post 20,
//	        RECV_B0 post 20 (send posted 54) 54-56, B0 56-76,
//	        RECV_B1 post 76 (send posted 74) 76-78, B1 78-98
//	rank 1: RECV_F0 post 0 (send posted 10) 10-12, F0 12-22,
//	        RECV_F1 post 22 (send posted 20) 22-24, F1 24-34, B0 34-54,
//	        SEND_B0 post 54, B1 54-74, SEND_B1 post 74
//
// Window 0-98, busy 60 on each stage.
func gpipe2P2P() *trace.Trace {
	return handTrace([]handOp{
		{0, trace.F, 0, -1, 0, 0, 10},
		{0, trace.SendF, 0, 1, 10, 10, 12},
		{0, trace.F, 1, -1, 10, 10, 20},
		{0, trace.SendF, 1, 1, 20, 22, 24},
		{0, trace.RecvB, 0, 1, 20, 54, 56},
		{0, trace.B, 0, -1, 56, 56, 76},
		{0, trace.RecvB, 1, 1, 76, 76, 78},
		{0, trace.B, 1, -1, 78, 78, 98},
		{1, trace.RecvF, 0, 0, 0, 10, 12},
		{1, trace.F, 0, -1, 12, 12, 22},
		{1, trace.RecvF, 1, 0, 22, 22, 24},
		{1, trace.F, 1, -1, 24, 24, 34},
		{1, trace.B, 0, -1, 34, 34, 54},
		{1, trace.SendB, 0, 0, 54, 54, 56},
		{1, trace.B, 1, -1, 54, 54, 74},
		{1, trace.SendB, 1, 0, 74, 76, 78},
	})
}

func onlyReplay(t *testing.T, tr *trace.Trace) *replay {
	t.Helper()
	ix := newIndex(tr, Options{Step: AllSteps})
	if len(ix.windows) != 1 {
		t.Fatalf("%d windows", len(ix.windows))
	}
	r, err := newReplay(tr, ix.windows[0], ix.p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReplayHand replays the hand-timed trace unchanged, then with F1 of
// stage 1 cut from 10 to 4 and free transfers, timed by hand:
//
//	rank 0: F0 0-10, F1 10-20, RECV_B0 44-44, B0 44-64, RECV_B1 64-64, B1 64-84
//	rank 1: RECV_F0 10-10, F0 10-20, RECV_F1 20-20, F1 20-24, B0 24-44,
//	        SEND_B0 at 44, B1 44-64, SEND_B1 at 64
//
// Window 0-84; busy 60 on stage 0, 10+4+20+20 = 54 on stage 1.
func TestReplayHand(t *testing.T) {
	tr := gpipe2P2P()
	r := onlyReplay(t, tr)
	res := r.run(r.measuredDur())
	for i := range r.numOps() {
		row := r.row(i)
		if res.OpStartNs[i] != tr.StartNs[row] || res.OpEndNs[i] != tr.EndNs[row] {
			t.Errorf("unchanged: rank %d %s%d replayed %d-%d, trace %d-%d", tr.Rank[row], tr.Kind[row], tr.MicroBatch[row],
				res.OpStartNs[i], res.OpEndNs[i], tr.StartNs[row], tr.EndNs[row])
		}
	}
	if res.StartNs != 0 || res.EndNs != 98 || res.BusyNs[0] != 60 || res.BusyNs[1] != 60 {
		t.Errorf("unchanged: window %d-%d busy %v, want 0-98 [60 60]", res.StartNs, res.EndNs, res.BusyNs)
	}

	dur := r.measuredDur()
	for i := range r.numOps() {
		row := r.row(i)
		switch {
		case tr.Kind[row].IsRecv():
			dur[i] = 0
		case tr.Rank[row] == 1 && tr.Kind[row] == trace.F && tr.MicroBatch[row] == 1:
			dur[i] = 4
		}
	}
	res = r.run(dur)
	if res.StartNs != 0 || res.EndNs != 84 || res.BusyNs[0] != 60 || res.BusyNs[1] != 54 {
		t.Errorf("changed: window %d-%d busy %v, want 0-84 [60 54]", res.StartNs, res.EndNs, res.BusyNs)
	}
	want := map[string][2]int64{"0B0": {44, 64}, "0B1": {64, 84}, "1F1": {20, 24}, "1SEND_B1": {64, 64}, "0RECV_B0": {44, 44}}
	for i := range r.numOps() {
		row := r.row(i)
		k := fmt.Sprintf("%d%s%d", tr.Rank[row], tr.Kind[row], tr.MicroBatch[row])
		if w, ok := want[k]; ok && (res.OpStartNs[i] != w[0] || res.OpEndNs[i] != w[1]) {
			t.Errorf("changed: %s at %d-%d, want %d-%d", k, res.OpStartNs[i], res.OpEndNs[i], w[0], w[1])
		}
	}
}

// replaySimConfig is a job of 4 stages, 8 micro-batches and steps steps
// of schedule sched, DP layout[0] and TP layout[1], with jitter, P2P
// latency and bandwidth, a straggler, a slow stage and overhead ops.
func replaySimConfig(sched string, layout [2]int, steps int) sim.Config {
	return sim.Config{Schedule: sched, Stages: 4, MicroBatches: 8, Steps: steps, DP: layout[0], TP: layout[1],
		Jitter: 0.2, Seed: 7, P2PLatencyUs: 30, P2PGbps: 50, OptMs: 0.5, EmbedMs: 0.3, LossMs: 0.4,
		SlowStage: 2, SlowFactor: 1.3, VarSeqLen: true,
		Stragglers: []sim.Straggler{{Step: 1, MicroBatch: 3, Stage: 1, Factor: 4}}}
}

// TestReplayReproducesSim: on simulated traces with jitter, P2P latency and
// bandwidth, stragglers, a slow stage, variable sequence lengths, DP and TP,
// and each schedule, replaying a window with its measured durations gives
// back every row's start and end (OPT aside: its barrier spans pipelines and
// steps, see replay), the window and busy time exactly.
func TestReplayReproducesSim(t *testing.T) {
	for _, sched := range []string{"gpipe", "1f1b", "interleaved", "zb-h1"} {
		for _, layout := range [][2]int{{1, 1}, {2, 2}} {
			tr, err := sim.Run(replaySimConfig(sched, layout, 2))
			if err != nil {
				t.Fatal(err)
			}
			ix := newIndex(tr, Options{Step: AllSteps})
			if len(ix.windows) != 2*layout[0] {
				t.Fatalf("%s: %d windows", sched, len(ix.windows))
			}
			for _, w := range ix.windows {
				r, err := newReplay(tr, w, ix.p)
				if err != nil {
					t.Fatalf("%s %v: %v", sched, layout, err)
				}
				res := r.run(r.measuredDur())
				bad := 0
				for i := range r.numOps() {
					row := r.row(i)
					if tr.Kind[row] == trace.Opt {
						continue // the optimizer barrier spans pipelines: not replayed
					}
					if res.OpStartNs[i] != tr.StartNs[row] || res.OpEndNs[i] != tr.EndNs[row] {
						bad++
					}
				}
				if bad > 0 {
					t.Errorf("%s %v step %d pipe %d: %d of %d rows re-timed differently", sched, layout, w.step, w.pipeline, bad, r.numOps())
				}
				m := w.measured
				if res.StartNs != m.StartNs || res.EndNs != m.EndNs {
					t.Errorf("%s %v step %d pipe %d: window %d-%d, measured %d-%d", sched, layout, w.step, w.pipeline, res.StartNs, res.EndNs, m.StartNs, m.EndNs)
				}
				for st := range m.BusyNs {
					if res.BusyNs[st] != m.BusyNs[st] {
						t.Errorf("%s %v stage %d: busy %d, measured %d", sched, layout, st, res.BusyNs[st], m.BusyNs[st])
					}
				}
			}
		}
	}
}

// TestReplayMonotone: lengthening one compute op never makes any op end
// earlier, and lengthening an op on the critical path of a 1-stage trace
// lengthens the window by exactly the added time.
func TestReplayMonotone(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 6, Jitter: 0.1, Seed: 3, P2PLatencyUs: 50})
	if err != nil {
		t.Fatal(err)
	}
	r := onlyReplay(t, tr)
	base := r.run(r.measuredDur())
	baseEnd := append([]int64(nil), base.OpEndNs...)
	for i := range r.numOps() {
		if !tr.Kind[r.row(i)].IsCompute() {
			continue
		}
		d := r.measuredDur()
		d[i] += 1e6
		res := r.run(d)
		for j := range r.numOps() {
			if res.OpEndNs[j] < baseEnd[j] {
				t.Fatalf("op %d +1 ms made op %d end earlier", i, j)
			}
		}
	}
	one, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 1, MicroBatches: 3})
	if err != nil {
		t.Fatal(err)
	}
	r = onlyReplay(t, one)
	d := r.measuredDur()
	d[0] += 5
	// Stage 0 alone: F 1 ms, B 2 ms, 3 micro-batches, window 9 ms; +5 ns.
	if got := r.run(d).WindowNs(); got != 9*ms+5 {
		t.Errorf("single stage window %d, want %d", got, 9*ms+5)
	}
}

// TestReplayRejects: windows the replay cannot re-time are errors, not
// panics.
func TestReplayRejects(t *testing.T) {
	cases := []struct {
		name string
		ops  []handOp
		want string
	}{
		{"unmatched send", []handOp{
			{0, trace.F, 0, -1, 0, 0, 10},
			{0, trace.SendF, 0, 1, 10, 10, 12},
			{1, trace.F, 0, -1, 12, 12, 22},
		}, "which receives 0"},
		{"peer absent", []handOp{
			{0, trace.SendF, 0, 5, 0, 0, 1},
		}, "no rows in the window"},
		{"orphan recv", []handOp{
			{0, trace.F, 0, -1, 0, 0, 1},
			{1, trace.RecvF, 0, 0, 0, 0, 1},
		}, "sends nothing"},
		{"deadlock", []handOp{
			{0, trace.RecvB, 0, 1, 0, 0, 1},
			{0, trace.SendF, 0, 1, 1, 1, 2},
			{1, trace.RecvF, 0, 0, 0, 1, 2},
			{1, trace.SendB, 0, 0, 2, 0, 1},
		}, "deadlock"},
		{"pending", []handOp{
			{0, trace.F, 0, -1, 0, 0, trace.NoTime},
		}, "never ended"},
	}
	for _, c := range cases {
		tr := handTrace(c.ops)
		ix := newIndex(tr, Options{Step: AllSteps})
		_, err := newReplay(tr, ix.windows[0], ix.p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestReplayUnsortedRows: rows out of (rank, seq) order in the trace are
// put back in order for the replay.
func TestReplayUnsortedRows(t *testing.T) {
	tr := gpipe2P2P()
	rev := &trace.Trace{Meta: tr.Meta}
	for i := tr.Len() - 1; i >= 0; i-- {
		rev.Append(tr.At(i))
	}
	r := onlyReplay(t, rev)
	if res := r.run(r.measuredDur()); res.EndNs != 98 || res.BusyNs[0] != 60 {
		t.Errorf("window end %d busy %v, want 98 [60 60]", res.EndNs, res.BusyNs)
	}
}

// BenchmarkReplay times one run of a 8-stage, 64-micro-batch 1F1B window
// with TP 2 (about 4k rows).
func BenchmarkReplay(b *testing.B) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 8, MicroBatches: 64, TP: 2, Jitter: 0.1, P2PLatencyUs: 20})
	if err != nil {
		b.Fatal(err)
	}
	ix := newIndex(tr, Options{Step: AllSteps})
	r, err := newReplay(tr, ix.windows[0], ix.p)
	if err != nil {
		b.Fatal(err)
	}
	d := r.measuredDur()
	b.ResetTimer()
	for range b.N {
		r.run(d)
	}
}

// TestReplayReusesTopology: a replay built in the memory of the window
// before (newReplayIn) reuses its matching and order of ops when the two
// have the same topology, and gives what a replay built afresh gives, with
// the measured durations and with others, whether it reused them or not.
func TestReplayReusesTopology(t *testing.T) {
	same := func(t *testing.T, name string, a, b *replay) {
		t.Helper()
		if a.baseWindowNs != b.baseWindowNs || a.baseMaxBusyNs != b.baseMaxBusyNs {
			t.Errorf("%s: base %d/%d, afresh %d/%d", name, a.baseWindowNs, a.baseMaxBusyNs, b.baseWindowNs, b.baseMaxBusyNs)
		}
		for scale := range 3 {
			d := a.measuredDur()
			for i := range d {
				d[i] = d[i] * int64(1+(i+scale)%4) / 2 // some ops shorter, some longer
			}
			ra := a.run(d)
			sa := []int64{ra.StartNs, ra.EndNs}
			sa = append(append(append(sa, ra.BusyNs...), ra.OpStartNs...), ra.OpEndNs...)
			rb := b.run(d)
			sb := []int64{rb.StartNs, rb.EndNs}
			sb = append(append(append(sb, rb.BusyNs...), rb.OpStartNs...), rb.OpEndNs...)
			if !slices.Equal(sa, sb) {
				t.Errorf("%s, durations %d: reused replay differs from one built afresh", name, scale)
			}
		}
	}
	for _, sched := range []string{"gpipe", "1f1b", "interleaved", "zb-h1"} {
		for _, layout := range [][2]int{{1, 1}, {2, 2}} {
			c := replaySimConfig(sched, layout, 4)
			tr, err := sim.Run(c)
			if err != nil {
				t.Fatal(err)
			}
			ix := newIndex(tr, Options{Step: AllSteps})
			// Pipeline by pipeline, then in step order, then every
			// pipeline in turn.
			var order []*window
			for pipe := range layout[0] {
				for _, w := range ix.windows {
					if int(w.pipeline) == pipe {
						order = append(order, w)
					}
				}
			}
			order = append(order, ix.windows...)
			r := &replay{}
			for _, w := range order {
				if r, err = newReplayIn(r, tr, w, ix.p); err != nil {
					t.Fatal(err)
				}
				fresh, err := newReplay(tr, w, ix.p)
				if err != nil {
					t.Fatal(err)
				}
				same(t, fmt.Sprintf("%s %v step %d pipeline %d", sched, layout, w.step, w.pipeline), r, fresh)
			}
			// Every window after the first: the simulator's steps are
			// alike, and so are its pipeline replicas (other ranks, the
			// same topology in local ranks).
			want := len(order) - 1
			if r.topoReused != want {
				t.Errorf("%s %v: %d builds reused the window before's topology, want %d", sched, layout, r.topoReused, want)
			}
		}
	}

	// Hand-made pairs of windows that differ in topology only where the
	// checks look: each replayed in the memory of the first must
	// reproduce its own times (timed by hand under the rules).
	//
	// Peers: rank 0 sends at 0 and at 10 (an F between) to ranks 1 and 2,
	// in one order, then in the other; each receiver then runs an F.
	peersA := []handOp{{0, trace.SendF, 0, 1, 0, 0, 3}, {0, trace.F, 1, -1, 0, 0, 10}, {0, trace.SendF, 1, 2, 10, 10, 13},
		{1, trace.RecvF, 0, 0, 0, 0, 3}, {1, trace.F, 0, -1, 3, 3, 13},
		{2, trace.RecvF, 1, 0, 0, 10, 13}, {2, trace.F, 1, -1, 13, 13, 23}}
	peersB := []handOp{{0, trace.SendF, 0, 2, 0, 0, 3}, {0, trace.F, 1, -1, 0, 0, 10}, {0, trace.SendF, 1, 1, 10, 10, 13},
		{2, trace.RecvF, 0, 0, 0, 0, 3}, {2, trace.F, 0, -1, 3, 3, 13},
		{1, trace.RecvF, 1, 0, 0, 10, 13}, {1, trace.F, 1, -1, 13, 13, 23}}
	// Ranks' first ops: the same kinds in the same order over the window,
	// cut between the ranks elsewhere.
	firstA := []handOp{{0, trace.F, 0, -1, 0, 0, 5}, {0, trace.F, 1, -1, 5, 5, 9}, {1, trace.F, 0, -1, 0, 0, 7}}
	firstB := []handOp{{0, trace.F, 0, -1, 0, 0, 5}, {1, trace.F, 0, -1, 0, 0, 4}, {1, trace.F, 1, -1, 4, 4, 11}}
	// Ranks: the same ops on other ranks (the same topology).
	ranksB := []handOp{{0, trace.F, 0, -1, 0, 0, 5}, {0, trace.F, 1, -1, 5, 5, 9}, {2, trace.F, 0, -1, 0, 0, 7}}
	// Far apart ranks (local ranks by search, not by table): 0, 2000, 4000.
	far := map[trace.Rank]trace.Rank{1: 2000, 2: 4000}
	// Kinds: a receive where the first had an F.
	kindsA := []handOp{{0, trace.SendF, 0, 1, 0, 0, 3}, {0, trace.F, 0, -1, 0, 0, 10}, {1, trace.RecvF, 0, 0, 0, 0, 3}, {1, trace.F, 0, -1, 3, 3, 13}}
	kindsB := []handOp{{0, trace.SendF, 0, 1, 0, 4, 7}, {0, trace.F, 0, -1, 0, 0, 10}, {1, trace.F, 0, -1, 0, 0, 4}, {1, trace.RecvF, 0, 0, 4, 4, 7}}
	// Fewer ranks: the same ops on one.
	fewerB := []handOp{{0, trace.F, 0, -1, 0, 0, 5}, {0, trace.F, 1, -1, 5, 5, 9}, {0, trace.F, 2, -1, 9, 9, 16}}
	for _, c := range []struct {
		name   string
		a, b   []handOp
		rename map[trace.Rank]trace.Rank // b's ranks and peers renamed (stages kept)
		reuse  bool
	}{{"peers", peersA, peersB, nil, false}, {"first ops", firstA, firstB, nil, false}, {"ranks", firstA, ranksB, nil, true},
		{"kinds", kindsA, kindsB, nil, false}, {"fewer ranks", firstA, fewerB, nil, false},
		{"far ranks", peersA, peersA, far, true}, {"far ranks, peers", peersA, peersB, far, false},
		{"same", peersA, peersA, nil, true}, {"same", firstA, firstA, nil, true}} {
		ta, tb := handTrace(c.a), handTrace(c.b)
		for i := range tb.Len() {
			if r, ok := c.rename[tb.Rank[i]]; ok {
				tb.Rank[i] = r
			}
			if r, ok := c.rename[tb.Peer[i]]; ok {
				tb.Peer[i] = r
			}
		}
		tb.Meta.PP = 3
		r := onlyReplay(t, ta)
		ix := newIndex(tb, Options{Step: AllSteps})
		r, err := newReplayIn(r, tb, ix.windows[0], 3)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := r.topoReused == 1; got != c.reuse {
			t.Errorf("%s: reused %v, want %v", c.name, got, c.reuse)
		}
		res := r.run(r.measuredDur())
		for i := range r.numOps() {
			row := r.row(i)
			if res.OpStartNs[i] != tb.StartNs[row] || res.OpEndNs[i] != tb.EndNs[row] {
				t.Errorf("%s: rank %d %s%d replayed %d-%d, trace %d-%d", c.name, tb.Rank[row], tb.Kind[row], tb.MicroBatch[row],
					res.OpStartNs[i], res.OpEndNs[i], tb.StartNs[row], tb.EndNs[row])
			}
		}
	}
}

// BenchmarkReplayBuild times building the replay of every window of a
// 1F1B trace of 8 stages, 64 micro-batches, 16 steps, DP 2, TP 2 (181k
// rows) as a worker of the replay visit does: each in the memory of
// the window before, a pipeline's steps in a row.
func BenchmarkReplayBuild(b *testing.B) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 8, MicroBatches: 64, Steps: 16, DP: 2, TP: 2, Jitter: 0.1, P2PLatencyUs: 20})
	if err != nil {
		b.Fatal(err)
	}
	ix := newIndex(tr, Options{Step: AllSteps})
	order := slices.Clone(ix.windows)
	slices.SortStableFunc(order, func(a, b *window) int { return int(a.pipeline) - int(b.pipeline) })
	r := &replay{}
	b.ResetTimer()
	for range b.N {
		for _, w := range order {
			if r, err = newReplayIn(r, tr, w, ix.p); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(tr.Len())*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
}
