package analyze

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// graphsOf builds the step graph of every step of tr.
func graphsOf(t *testing.T, tr *trace.Trace) []*stepGraph {
	t.Helper()
	ix := newIndex(tr, Options{Step: AllSteps})
	var out []*stepGraph
	forSteps(ix, func(ws []int, _ int64) {
		g, err := buildStepGraph(ix, ws)
		if err != nil {
			t.Fatalf("step %d: %v", ix.windows[ws[0]].step, err)
		}
		out = append(out, g)
	})
	return out
}

// TestGraphReproducesSim: re-timed with the measured durations, the graph
// of every step reproduces every row's start and end of simulated traces
// exactly (every schedule, replicas, TP, P2P cost, OPT, jitter,
// stragglers, a slow rank), and the critical path's parts add up to the
// step.
func TestGraphReproducesSim(t *testing.T) {
	for _, sched := range []string{"gpipe", "1f1b", "interleaved", "zb-h1"} {
		for _, c := range []sim.Config{
			{Stages: 4, MicroBatches: 8, Steps: 2},
			{Stages: 4, MicroBatches: 8, Steps: 3, DP: 2, TP: 2, P2PLatencyUs: 30, P2PGbps: 200, OptMs: 0.7,
				Jitter: 0.1, Seed: 5, Stragglers: []sim.Straggler{{Step: 1, MicroBatch: 3, Stage: 2, Factor: 3}},
				SlowRanks: []sim.SlowRank{{Pipeline: 1, Stage: 1, Factor: 1.3}}},
			{Stages: 2, MicroBatches: 4, Steps: 2, P2PLatencyUs: 100, OptMs: 1, EmbedMs: 0.3, LossMs: 0.4},
		} {
			c.Schedule = sched
			name := fmt.Sprintf("%s/p%d/dp%d", sched, c.Stages, c.DP)
			tr, err := sim.Run(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range graphsOf(t, tr) {
				s, e := g.run(g.meas, g.delay)
				lo, hi := int64(1<<62), int64(-1<<62)
				for v := range int32(g.numNodes()) {
					if g.delay[v] != 0 {
						t.Fatalf("%s step %d: node %d (%s) has launch delay %d on a simulated trace", name, g.step, v, g.kind[v], g.delay[v])
					}
					rs, re, ok := g.rowTimes(v)
					if !ok {
						continue
					}
					row := g.row[v]
					if rs != tr.StartNs[row] || re != tr.EndNs[row] {
						t.Fatalf("%s step %d: row %d (rank %d %s mb %d) replayed [%d, %d], trace [%d, %d]", name, g.step, row,
							tr.Rank[row], tr.Kind[row], tr.MicroBatch[row], rs, re, tr.StartNs[row], tr.EndNs[row])
					}
					lo, hi = min(lo, tr.StartNs[row]), max(hi, tr.EndNs[row])
				}
				if s != lo || e != hi {
					t.Fatalf("%s step %d: span [%d, %d], rows [%d, %d]", name, g.step, s, e, lo, hi)
				}
				ps := g.criticalPath(s, g.delay, c.Stages)
				sum := ps.compute + ps.p2p + ps.collective + ps.other + ps.wait
				if ps.lengthNs != e-s || sum != ps.lengthNs {
					t.Fatalf("%s step %d: path %d ns, parts %d, span %d", name, g.step, ps.lengthNs, sum, e-s)
				}
				if ps.wait != 0 {
					t.Errorf("%s step %d: %d ns of waits on a simulated path", name, g.step, ps.wait)
				}
			}
		}
	}
}

// TestCriticalPathUniform: 1F1B, p = 4, m = 8, F 1 ms, B 2 ms, free P2P,
// no OPT: the path is (m + p - 1)(F + B) = 33 ms of compute, every stage
// on it, and the straggling micro-batch of a second run leads the
// critical micro-batches.
func TestCriticalPathUniform(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 1})
	if err != nil {
		t.Fatal(err)
	}
	wi, err := RunWhatIf(tr, WhatIfOptions{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	cp := wi.CriticalPath
	if !near(cp.LengthMs, 33) || !near(cp.ComputeMs, 33) || cp.P2PMs != 0 || cp.WaitMs != 0 || cp.Steps != 1 {
		t.Errorf("path %+v", cp)
	}
	for _, s := range cp.Stages {
		if s.ComputeMs <= 0 {
			t.Errorf("stage %d not on the path: %+v", s.Stage, cp.Stages)
		}
	}
	var sum float64
	for _, op := range cp.Path {
		sum += op.EndMs - op.StartMs + op.WaitMs
	}
	if !near(sum, 33) || cp.Path[0].StartMs != 0 || !near(cp.Path[len(cp.Path)-1].EndMs, 33) {
		t.Errorf("path ops sum to %v ms: %+v", sum, cp.Path)
	}

	tr, err = sim.Run(sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 1,
		Stragglers: []sim.Straggler{{Step: -1, MicroBatch: 5, Stage: -1, Factor: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	wi, err = RunWhatIf(tr, WhatIfOptions{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	if mbs := wi.CriticalPath.MicroBatches; len(mbs) == 0 || mbs[0].MicroBatch != 5 {
		t.Errorf("critical micro-batches %+v, want 5 first", mbs)
	}
}

// TestGraphErrors: steps that cannot be re-timed are refused with a reason.
func TestGraphErrors(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, Steps: 1})
	if err != nil {
		t.Fatal(err)
	}
	drop := func(pred func(i int) bool) *trace.Trace {
		out := &trace.Trace{Meta: tr.Meta}
		for i := 0; i < tr.Len(); i++ {
			if !pred(i) {
				out.Append(tr.At(i))
			}
		}
		return out
	}
	firstSend := -1
	for i := 0; i < tr.Len(); i++ {
		if tr.Kind[i].IsSend() {
			firstSend = i
			break
		}
	}
	for _, tc := range []struct {
		name string
		tr   *trace.Trace
	}{
		{"missing send", drop(func(i int) bool { return i == firstSend })},
		{"missing rank", drop(func(i int) bool { return tr.Rank[i] == 2 })},
	} {
		ix := newIndex(tc.tr, Options{Step: AllSteps})
		forSteps(ix, func(ws []int, _ int64) {
			if _, err := buildStepGraph(ix, ws); err == nil {
				t.Errorf("%s: no error", tc.name)
			}
		})
	}
}

// TestGraphJoins: collectives join their group. Two replicas of one stage
// each run F then an ALL_REDUCE of group "dp" (by group_seq) and a
// Megatron grads-reduce-scatter (no group: the DP group is implied); rank
// 1's F is 4 ms longer, so rank 0 waits for it. The trace is reproduced
// (rows of the real collectives start at the rank's arrival), and re-timed
// with rank 1's F 4 ms shorter, rank 0 ends at 4 ms instead of 8. Without
// its group the ALL_REDUCE occupies its rank alone (rank 0 runs it at once)
// and the reduce-scatter still waits.
func TestGraphJoins(t *testing.T) {
	rs := trace.MustKind("grads-reduce-scatter")
	build := func(group string) *trace.Trace {
		tr := &trace.Trace{Meta: trace.Meta{Schema: 1}}
		for r := range 2 {
			fEnd := int64(1+4*r) * ms
			rows := []trace.Event{
				{Kind: trace.F, StartNs: 0, EndNs: fEnd},
				{Kind: trace.AllReduce, StartNs: fEnd, EndNs: 5*ms + 2*ms, Group: group, GroupSeq: 0},
				{Kind: rs, StartNs: 7 * ms, EndNs: 8 * ms, GroupSeq: trace.NoGroupSeq},
			}
			if group == "" { // the ALL_REDUCE alone; the reduce-scatter still joins
				rows[1].EndNs = fEnd + 2*ms
				rows[2].StartNs = fEnd + 2*ms
				rows[1].GroupSeq = trace.NoGroupSeq
			}
			for k, e := range rows {
				e.Rank, e.Pipeline, e.Seq, e.IssueNs, e.Peer = trace.Rank(r), int32(r), int64(k), e.StartNs, trace.NoRank
				e.MicroBatch = -1
				if e.Kind == trace.F {
					e.MicroBatch = 0
				}
				tr.Append(e)
			}
		}
		return tr
	}
	for _, tc := range []struct {
		group string
		end0  int64 // rank 0's last end after the change, ns
	}{{"dp", 4 * ms}, {"", 4 * ms}} {
		tr := build(tc.group)
		g := graphsOf(t, tr)[0]
		s, e := g.run(g.meas, g.delay)
		for v := range int32(g.numNodes()) {
			if rs, re, ok := g.rowTimes(v); ok && (rs != tr.StartNs[g.row[v]] || re != tr.EndNs[g.row[v]]) {
				t.Fatalf("group %q: row %d replayed [%d, %d], trace [%d, %d]", tc.group, g.row[v], rs, re, tr.StartNs[g.row[v]], tr.EndNs[g.row[v]])
			}
		}
		if s != 0 || e != 8*ms {
			t.Fatalf("group %q: span [%d, %d]", tc.group, s, e)
		}
		dur := slices.Clone(g.meas)
		var end0 int64
		for v := range dur {
			if g.kind[v] == trace.F && g.ranks[g.owner[v]].rank == 1 {
				dur[v] -= 4 * ms
			}
		}
		g.run(dur, g.delay)
		for v := range int32(g.numNodes()) {
			if _, re, ok := g.rowTimes(v); ok && g.ranks[g.owner[v]].rank == 0 {
				end0 = max(end0, re)
			}
		}
		if end0 != tc.end0 {
			t.Errorf("group %q: rank 0 ends at %d ns, want %d", tc.group, end0, tc.end0)
		}
	}
}

// TestByRankSeqIsStableSort: byRankSeq orders rows as a stable sort by
// (rank, seq) does, whether the rows come as windows of (rank, seq) runs,
// as runs of one rank that overlap in seq, with equal (rank, seq) rows, or
// shuffled.
func TestByRankSeqIsStableSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 400 {
		ranks, per := 1+rng.IntN(12), 1+rng.IntN(20)
		tr := &trace.Trace{}
		for r := range ranks {
			seq := int64(0)
			for range per {
				if trial%4 != 3 || rng.IntN(4) > 0 {
					seq++ // the fourth trial of four repeats seqs
				}
				tr.Rank = append(tr.Rank, trace.Rank(r*3))
				tr.Seq = append(tr.Seq, seq)
			}
		}
		n := len(tr.Rank)
		rows := make([]int, n)
		for i := range rows {
			rows[i] = i
		}
		switch trial % 5 {
		case 0: // sorted already
		case 1: // windows: ranks by pipeline (r mod 3), each rank's rows in order
			rows = rows[:0]
			for p := range 3 {
				for r := p; r < ranks; r += 3 {
					for k := range per {
						rows = append(rows, r*per+k)
					}
				}
			}
		case 2: // one rank's rows in two runs that overlap in seq
			r := rng.IntN(ranks)
			mine := slices.Clone(rows[r*per : (r+1)*per])
			rest := slices.Delete(slices.Clone(rows), r*per, (r+1)*per)
			var a, b []int
			for k, i := range mine {
				if k%2 == 0 {
					a = append(a, i)
				} else {
					b = append(b, i)
				}
			}
			rows = append(append(append(rest[:0:0], a...), rest...), b...)
		default:
			rng.Shuffle(n, func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		}
		want := slices.Clone(rows)
		sort.SliceStable(want, func(a, b int) bool {
			i, j := want[a], want[b]
			if tr.Rank[i] != tr.Rank[j] {
				return tr.Rank[i] < tr.Rank[j]
			}
			return tr.Seq[i] < tr.Seq[j]
		})
		in := slices.Clone(rows)
		var buf []int
		if trial%2 == 0 {
			buf = make([]int, 3, 5) // memory to reuse, not to read
		}
		got := byRankSeq(tr, rows, &buf)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: byRankSeq\n%v\nwant\n%v", trial, got, want)
		}
		if !slices.Equal(rows, in) {
			t.Fatalf("trial %d: byRankSeq changed its input", trial)
		}
	}
}

// TestGraphAnyTopologicalOrder: re-timing a graph in breadth-first
// topological order (Kahn's queue, built here from the graph's in-edges)
// gives the same times and binding edges as in the order topo chose, on
// jobs with replicas, TP, joins and jitter.
func TestGraphAnyTopologicalOrder(t *testing.T) {
	for _, sched := range []string{"1f1b", "interleaved", "zb-h1"} {
		tr, err := sim.Run(sim.Config{Schedule: sched, Stages: 4, MicroBatches: 8, Steps: 2, DP: 2, TP: 2,
			P2PLatencyUs: 30, P2PGbps: 200, OptMs: 0.7, EmbedMs: 0.2, Jitter: 0.1, Seed: 11})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range graphsOf(t, tr) {
			s0, e0 := g.run(g.meas, g.delay)
			s, e, crit := slices.Clone(g.s), slices.Clone(g.e), slices.Clone(g.crit)
			n := g.numNodes()
			in := make([][]int32, n)
			for v := range int32(n) {
				if u := g.prev[v]; u >= 0 {
					in[v] = append(in[v], u)
				}
				if c := g.class[v]; c == ncRecv || c == ncJoin {
					in[v] = append(in[v], g.other[v])
				}
				in[v] = append(in[v], g.extras(v)...)
			}
			out := make([][]int32, n)
			indeg := make([]int, n)
			for v := range int32(n) {
				for _, u := range in[v] {
					out[u] = append(out[u], v)
					indeg[v]++
				}
			}
			var bfs []int32
			for v := range int32(n) {
				if indeg[v] == 0 {
					bfs = append(bfs, v)
				}
			}
			for k := 0; k < len(bfs); k++ {
				for _, v := range out[bfs[k]] {
					if indeg[v]--; indeg[v] == 0 {
						bfs = append(bfs, v)
					}
				}
			}
			if len(bfs) != n {
				t.Fatalf("%s step %d: breadth-first order has %d of %d nodes", sched, g.step, len(bfs), n)
			}
			if slices.Equal(bfs, g.order) {
				t.Fatalf("%s step %d: topo's order is breadth-first: nothing compared", sched, g.step)
			}
			g.order = bfs
			s1, e1 := g.run(g.meas, g.delay)
			if s1 != s0 || e1 != e0 || !slices.Equal(g.s, s) || !slices.Equal(g.e, e) || !slices.Equal(g.crit, crit) {
				t.Fatalf("%s step %d: re-timed in breadth-first order: span [%d, %d], topo's [%d, %d]", sched, g.step, s1, e1, s0, e0)
			}
		}
	}
}

// TestGraphMemReuse: a graph built in a graphMem that built other graphs
// before (larger ones, whose arrays it reuses without clearing all of
// them) is the graph built in fresh memory: every node array, the order,
// the extra edges, and the re-timed times.
func TestGraphMemReuse(t *testing.T) {
	big, err := sim.Run(sim.Config{Schedule: "interleaved", Stages: 4, MicroBatches: 16, Steps: 1, DP: 3, TP: 2,
		P2PLatencyUs: 30, OptMs: 0.7, EmbedMs: 0.2, Jitter: 0.2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := sim.Run(sim.Config{Schedule: "zb-h1", Stages: 4, MicroBatches: 8, Steps: 3, DP: 2, TP: 2,
		P2PLatencyUs: 30, OptMs: 0.7, LossMs: 0.3, Jitter: 0.1, Seed: 8})
	if err != nil {
		t.Fatal(err)
	}
	var m graphMem
	built := func(tr *trace.Trace, mem *graphMem) []*stepGraph {
		ix := newIndex(tr, Options{Step: AllSteps})
		var out []*stepGraph
		forSteps(ix, func(ws []int, _ int64) {
			g, err := mem.buildStepGraph(ix, ws)
			if err != nil {
				t.Fatal(err)
			}
			g.run(g.meas, g.delay)
			if mem != nil {
				g = snapshotGraph(g) // the arrays, before the next build reuses them
			}
			out = append(out, g)
		})
		return out
	}
	built(big, &m)
	// Garbage in every array m reuses (a simulated trace leaves delays
	// and the like zero: poison them).
	g := &m.g
	for _, a := range [][]int32{g.row, g.owner, g.stage, g.chunk, g.mb, g.opIdx, g.prev, g.other, g.extraOff, g.extra, g.order, g.crit,
		g.scratch32[0], g.scratch32[1], g.scratch32[2], g.scratch32[3], m.opNode} {
		for i := range a[:cap(a)] {
			a[:cap(a)][i] = -7
		}
	}
	for _, a := range [][]int64{g.base, g.meas, g.delay, g.s, g.e, g.scratch64[0], g.scratch64[1]} {
		for i := range a[:cap(a)] {
			a[:cap(a)][i] = 1 << 40
		}
	}
	for i := range g.class[:cap(g.class)] {
		g.class[:cap(g.class)][i] = ncBarrier
	}
	for i := range g.kind[:cap(g.kind)] {
		g.kind[:cap(g.kind)][i] = trace.Opt
	}
	for i := range g.fromArrival[:cap(g.fromArrival)] {
		g.fromArrival[:cap(g.fromArrival)][i] = true
	}
	for i := range m.sorted[:cap(m.sorted)] {
		m.sorted[:cap(m.sorted)][i] = -1
	}
	want, got := built(tr, nil), built(tr, &m)
	if len(got) != len(want) || len(want) != 3 {
		t.Fatalf("%d graphs, want %d (3 steps)", len(got), len(want))
	}
	for k := range want {
		if !sameGraph(want[k], got[k]) {
			t.Errorf("step %d: the graph built in reused memory differs from the one built fresh", want[k].step)
		}
	}
}

// snapshotGraph copies g's arrays (a graph built in a graphMem is
// overwritten by the next build there).
func snapshotGraph(g *stepGraph) *stepGraph {
	c := *g
	for _, a := range []*[]int32{&c.row, &c.owner, &c.stage, &c.chunk, &c.mb, &c.opIdx, &c.prev, &c.other, &c.extraOff, &c.extra, &c.order, &c.crit} {
		*a = slices.Clone(*a)
	}
	for _, a := range []*[]int64{&c.base, &c.meas, &c.delay, &c.s, &c.e} {
		*a = slices.Clone(*a)
	}
	c.class, c.kind, c.fromArrival = slices.Clone(c.class), slices.Clone(c.kind), slices.Clone(c.fromArrival)
	return &c
}

// sameGraph compares two graphs' arrays, and their last runs' results.
func sameGraph(w, g *stepGraph) bool {
	return w.step == g.step && slices.Equal(w.class, g.class) && slices.Equal(w.kind, g.kind) && slices.Equal(w.row, g.row) &&
		slices.Equal(w.owner, g.owner) && slices.Equal(w.stage, g.stage) && slices.Equal(w.chunk, g.chunk) &&
		slices.Equal(w.mb, g.mb) && slices.Equal(w.opIdx, g.opIdx) && slices.Equal(w.prev, g.prev) &&
		slices.Equal(w.other, g.other) && slices.Equal(w.base, g.base) && slices.Equal(w.meas, g.meas) &&
		slices.Equal(w.delay, g.delay) && slices.Equal(w.fromArrival, g.fromArrival) &&
		slices.Equal(w.extraOff, g.extraOff) && slices.Equal(w.extra, g.extra) && slices.Equal(w.order, g.order) &&
		slices.Equal(w.s, g.s) && slices.Equal(w.e, g.e) && slices.Equal(w.crit, g.crit)
}

// stepGraphsIn builds the graph of every step of tr that has one, in the
// order of steps (reversed when back), in mem (nil: fresh memory each),
// runs it with its measured durations and delays, and returns copies;
// steps whose graph fails are nil.
func stepGraphsIn(t *testing.T, tr *trace.Trace, mem *graphMem, back bool) []*stepGraph {
	t.Helper()
	ix := newIndex(tr, Options{Step: AllSteps})
	var steps [][]int
	forSteps(ix, func(ws []int, _ int64) { steps = append(steps, ws) })
	if back {
		slices.Reverse(steps)
	}
	var out []*stepGraph
	for _, ws := range steps {
		g, err := mem.buildStepGraph(ix, ws)
		if err != nil {
			out = append(out, nil)
			continue
		}
		g.run(g.meas, g.delay)
		out = append(out, snapshotGraph(g))
	}
	return out
}

// TestGraphReuse: graphs of every step of many jobs (every schedule,
// faults that change a step's programs, skipped and reordered ops,
// collectives with process groups), built one after another in one
// graphMem, where a step with the programs of the one before keeps its
// structure (reshape), are the graphs built afresh, whatever the order
// of the steps and of the jobs.
func TestGraphReuse(t *testing.T) {
	corpus := chunkCorpus(t)
	names := slices.Sorted(maps.Keys(corpus))
	var m graphMem
	compared := 0
	for _, back := range []bool{false, true} {
		for _, name := range names {
			tr := corpus[name]
			want, got := stepGraphsIn(t, tr, nil, back), stepGraphsIn(t, tr, &m, back)
			for k := range want {
				if (want[k] == nil) != (got[k] == nil) {
					t.Fatalf("%s: step %d of %d: built fresh %v, in reused memory %v", name, k, len(want), want[k] != nil, got[k] != nil)
				}
				if want[k] != nil && !sameGraph(want[k], got[k]) {
					t.Errorf("%s: step %d of %d (backwards %v): the graph differs from the one built fresh", name, k, len(want), back)
				}
				compared++
			}
		}
	}
	if m.reshaped < compared/3 {
		t.Errorf("%d of %d graphs reshaped: reuse not exercised", m.reshaped, compared)
	}
	t.Logf("%d graphs compared, %d reshaped", compared, m.reshaped)
}

// FuzzGraphReuse: whatever a (valid) trace's steps hold, their graphs
// built one after another in one graphMem (each step's structure kept
// from the step before when its programs have the same shape) are the
// graphs built afresh, and a step that fails fails both ways.
func FuzzGraphReuse(f *testing.F) {
	// Steps of the same programs, then edits that may change one step's
	// programs and not another's (peers, kinds, steps).
	fuzzSeeds(f, []byte{5, 0, 9, 1, 0, 0}, []byte{9, 0, 2, 9, 0, 0, 30, 0, 9, 1, 0, 0}, []byte{1, 0, 3, 1, 0, 0, 2, 0, 16, 7, 7, 0})
	f.Fuzz(func(t *testing.T, sel byte, script []byte) {
		tr, ok := fuzzTrace(t, sel, script)
		if !ok {
			return
		}
		var m graphMem
		for _, back := range []bool{false, true} {
			want, got := stepGraphsIn(t, tr, nil, back), stepGraphsIn(t, tr, &m, back)
			for k := range want {
				if (want[k] == nil) != (got[k] == nil) || want[k] != nil && !sameGraph(want[k], got[k]) {
					t.Fatalf("step %d of %d (backwards %v): the graph in reused memory differs from the one built fresh", k, len(want), back)
				}
			}
		}
	})
}
