package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/trace"
)

// needSchedule skips the test while schedule name is still being written.
func needSchedule(t *testing.T, name string) {
	t.Helper()
	if _, err := schedule.New(name, 4, 8, 2); err != nil && strings.Contains(err.Error(), "not implemented") {
		t.Skipf("schedule %s: %v", name, err)
	}
}

func TestBubbleMatchesTheory(t *testing.T) {
	type tc struct {
		sched           string
		p, m, v, dp, tp int
		steps           int
	}
	var cases []tc
	for _, sched := range []string{"gpipe", "1f1b"} {
		for _, pm := range [][2]int{{1, 1}, {1, 4}, {2, 1}, {2, 2}, {3, 5}, {4, 4}, {4, 8}, {4, 3}, {8, 16}, {5, 17}} {
			cases = append(cases, tc{sched, pm[0], pm[1], 1, 1, 1, 2})
		}
		cases = append(cases, tc{sched, 4, 8, 1, 2, 1, 2}, tc{sched, 3, 6, 1, 1, 2, 1}, tc{sched, 4, 8, 1, 2, 2, 3})
	}
	for _, pmv := range [][3]int{{2, 4, 2}, {4, 8, 2}, {4, 4, 2}, {4, 8, 3}, {3, 6, 4}, {8, 16, 2}} {
		cases = append(cases, tc{"interleaved", pmv[0], pmv[1], pmv[2], 1, 1, 2})
	}
	cases = append(cases, tc{"interleaved", 4, 8, 2, 2, 2, 2})
	// ZB-H1 with F = B = W (BwdMs split in half) and m >= p: (p-1)/(3m+p-1).
	for _, pm := range [][2]int{{1, 3}, {2, 2}, {3, 4}, {4, 4}, {4, 9}, {8, 16}} {
		cases = append(cases, tc{"zb-h1", pm[0], pm[1], 1, 1, 1, 2})
	}
	cases = append(cases, tc{"zb-h1", 4, 8, 1, 2, 2, 2})
	for _, c := range cases {
		name := fmt.Sprintf("%s/p%d_m%d_v%d_dp%d_tp%d", c.sched, c.p, c.m, c.v, c.dp, c.tp)
		t.Run(name, func(t *testing.T) {
			needSchedule(t, c.sched)
			costs := [][2]float64{{1, 2}, {1.5, 1.5}, {0.3, 0.7}}
			want := float64(c.p-1) / float64(c.v*c.m+c.p-1)
			if c.sched == schedule.ZBH1Name {
				costs = costs[:1]
				want = float64(c.p-1) / float64(3*c.m+c.p-1)
			}
			for _, costs := range costs {
				tr := mustRun(t, Config{Schedule: c.sched, Stages: c.p, MicroBatches: c.m, Virtual: c.v,
					DP: c.dp, TP: c.tp, Steps: c.steps, FwdMs: costs[0], BwdMs: costs[1], OptMs: 0.25})
				for step := 0; step < c.steps; step++ {
					for pipe := 0; pipe < c.dp; pipe++ {
						got := measuredBubble(tr, int64(step), int32(pipe), c.p)
						if math.Abs(got-want) > 1e-9*math.Max(want, 1e-300) && !(want == 0 && math.Abs(got) < 1e-12) {
							t.Errorf("F=%v B=%v step %d pipeline %d: bubble %.12f, want %.12f", costs[0], costs[1], step, pipe, got, want)
						}
					}
				}
			}
		})
	}
}

// TestBubbleMatchesReplay compares the simulator's measured bubble with the
// schedule package's own replay (an independent executor) for costs and
// shapes without a closed form: ragged m, unequal F, B, W.
func TestBubbleMatchesReplay(t *testing.T) {
	for _, sched := range schedule.Names {
		for _, pmv := range [][3]int{{2, 3, 2}, {3, 5, 2}, {4, 6, 2}, {4, 10, 3}, {5, 7, 2}, {3, 2, 2}} {
			for _, fbw := range [][3]float64{{1, 2, 0.5}, {0.7, 1.1, 0.9}, {2, 1, 0.25}} {
				p, m, v := pmv[0], pmv[1], pmv[2]
				if sched != schedule.InterleavedName {
					v = 1
				}
				name := fmt.Sprintf("%s/p%d_m%d_v%d_F%v_B%v_W%v", sched, p, m, v, fbw[0], fbw[1], fbw[2])
				t.Run(name, func(t *testing.T) {
					needSchedule(t, sched)
					s, err := schedule.New(sched, p, m, v)
					if err != nil {
						t.Skipf("schedule: %v", err)
					}
					want := s.ReplayBubble(fbw[0], fbw[1], fbw[2])
					tr := mustRun(t, Config{Schedule: sched, Stages: p, MicroBatches: m, Virtual: v, DP: 2,
						FwdMs: fbw[0], BwdMs: fbw[1], WgradMs: fbw[2]})
					for pipe := int32(0); pipe < 2; pipe++ {
						// Durations are whole ns: allow their rounding.
						if got := measuredBubble(tr, 0, pipe, p); math.Abs(got-want) > 1e-6 {
							t.Errorf("pipeline %d: bubble %.9f, replay says %.9f", pipe, got, want)
						}
					}
				})
			}
		}
	}
}

// TestFaultFree checks every schedule with several layouts: nothing is
// pending, every send met a receive with the same labels and times, every
// rank ran every action of its schedule each step, and OPT is a barrier.
func TestFaultFree(t *testing.T) {
	for _, sched := range schedule.Names {
		for _, lay := range [][5]int{{1, 3, 1, 1, 2}, {2, 4, 1, 1, 2}, {4, 8, 1, 2, 2}, {3, 6, 1, 1, 3}, {4, 8, 2, 2, 1}} {
			p, m, dp, tp, steps := lay[0], lay[1], lay[2], lay[3], lay[4]
			t.Run(fmt.Sprintf("%s/p%d_m%d_dp%d_tp%d", sched, p, m, dp, tp), func(t *testing.T) {
				needSchedule(t, sched)
				c := Config{Schedule: sched, Stages: p, MicroBatches: m, DP: dp, TP: tp, Steps: steps,
					OptMs: 0.5, P2PLatencyUs: 7, P2PGbps: 400, Jitter: 0.1, Seed: 3, VarSeqLen: true, PeakFlops: 1e15}
				if sched == schedule.InterleavedName {
					if p == 1 {
						t.Skip("interleaved needs 2 stages")
					}
					c.MicroBatches = p * 2
				}
				tr := mustRun(t, c)
				checkFaultFree(t, c, tr)
			})
		}
	}
}

func checkFaultFree(t *testing.T, c Config, tr *trace.Trace) {
	t.Helper()
	c = c.WithDefaults()
	s, err := schedule.New(c.Schedule, c.Stages, c.MicroBatches, c.Virtual)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < tr.Len(); i++ {
		if !tr.Completed(i) {
			t.Fatalf("row %d: %+v: pending in a fault-free run", i, tr.At(i))
		}
	}
	pairs, unmatched := matchP2P(tr)
	if len(unmatched) > 0 {
		t.Fatalf("%d P2P ops without a partner, first %+v", len(unmatched), unmatched[0])
	}
	for _, p := range pairs {
		if !labelsAgree(p) || p.send.StartNs != p.recv.StartNs || p.send.EndNs != p.recv.EndNs {
			t.Fatalf("matched pair disagrees:\n send %+v\n recv %+v", p.send, p.recv)
		}
	}
	// Every rank ran its stage's actions in order, then OPT, each step.
	perRank := map[trace.Rank][]trace.Event{}
	for _, e := range events(tr) {
		perRank[e.Rank] = append(perRank[e.Rank], e)
	}
	if len(perRank) != c.WorldSize() || tr.Meta.WorldSize != c.WorldSize() {
		t.Fatalf("%d ranks, meta world %d, want %d", len(perRank), tr.Meta.WorldSize, c.WorldSize())
	}
	optStart := map[int64]int64{}
	for rank, evs := range perRank {
		stage := int(evs[0].Stage)
		if want := c.Rank(stage, int(evs[0].Pipeline), int(evs[0].TPRank)); want != int(rank) {
			t.Fatalf("rank %d has stage %d pipeline %d tp %d: Megatron numbering gives %d", rank, stage, evs[0].Pipeline, evs[0].TPRank, want)
		}
		acts := s.Actions[stage]
		if len(evs) != c.Steps*(len(acts)+1) {
			t.Fatalf("rank %d: %d rows, want %d", rank, len(evs), c.Steps*(len(acts)+1))
		}
		for step := 0; step < c.Steps; step++ {
			for i, a := range acts {
				e := evs[step*(len(acts)+1)+i]
				wantPeer := trace.NoRank
				if a.Peer >= 0 {
					wantPeer = trace.Rank(c.Rank(a.Peer, int(e.Pipeline), int(e.TPRank)))
				}
				if e.Kind != a.Kind || int(e.MicroBatch) != a.MicroBatch || int(e.Chunk) != a.Chunk || e.Peer != wantPeer || e.Step != int64(step) {
					t.Fatalf("rank %d step %d action %d: got %+v, want %v", rank, step, i, e, a)
				}
				if e.Kind.IsCompute() && (e.Tokens <= 0 || e.Flops <= 0) {
					t.Fatalf("rank %d: compute row without tokens or flops: %+v", rank, e)
				}
				if e.Kind.IsP2P() && (e.Bytes <= 0 || e.Shape == "" || e.Dtype == "") {
					t.Fatalf("rank %d: P2P row without bytes, shape or dtype: %+v", rank, e)
				}
			}
			o := evs[(step+1)*(len(acts)+1)-1]
			if o.Kind != trace.Opt || o.MicroBatch != trace.NoMicroBatch || o.Peer != trace.NoRank {
				t.Fatalf("rank %d step %d: last row %+v, want OPT", rank, step, o)
			}
			if s, ok := optStart[o.Step]; ok && s != o.StartNs {
				t.Fatalf("step %d: OPT starts at %d on one rank and %d on rank %d", step, s, o.StartNs, rank)
			}
			optStart[o.Step] = o.StartNs
			if o.EndNs-o.StartNs != int64(math.Round(c.OptMs*1e6)) {
				t.Fatalf("rank %d: OPT lasts %d ns", rank, o.EndNs-o.StartNs)
			}
		}
	}
	// Nothing of a step starts before the previous OPT ended; every row of
	// a step other than OPT ends by its OPT's start.
	for i := 0; i < tr.Len(); i++ {
		if tr.Kind[i] == trace.Opt {
			continue
		}
		st := tr.Step[i]
		if st > 0 && tr.IssueNs[i] < optStart[st-1]+int64(math.Round(c.OptMs*1e6)) {
			t.Fatalf("row %d %+v: issued before step %d's OPT ended", i, tr.At(i), st-1)
		}
		if tr.EndNs[i] > optStart[st] {
			t.Fatalf("row %d %+v: ends after its step's OPT started at %d", i, tr.At(i), optStart[st])
		}
	}
}

func TestDeterministic(t *testing.T) {
	for _, sched := range schedule.Names {
		t.Run(sched, func(t *testing.T) {
			needSchedule(t, sched)
			c := Config{Schedule: sched, Stages: 4, MicroBatches: 8, DP: 2, TP: 2, Steps: 3,
				Jitter: 0.3, VarSeqLen: true, Seed: 42, P2PLatencyUs: 5, P2PGbps: 200,
				Stragglers: []Straggler{{Step: -1, MicroBatch: 3, Stage: -1, Factor: 2}},
				Faults:     []Fault{{Kind: FaultCrash, Rank: 9, Step: 2, MicroBatch: 5}}}
			a, b := mustRun(t, c), mustRun(t, c)
			if d := trace.Diff(a, b); d != "" {
				t.Fatalf("two runs of one config differ: %s", d)
			}
			c.Seed = 43
			if d := trace.Diff(a, mustRun(t, c)); d == "" {
				t.Fatalf("seeds 42 and 43 gave the same trace")
			}
		})
	}
}

func TestMeta(t *testing.T) {
	tr := mustRun(t, Config{Schedule: "1f1b", Stages: 4, MicroBatches: 6, DP: 2, TP: 3,
		Job: "llama", Device: "H100-SXM", PeakFlops: 989e12})
	want := trace.Meta{Schema: 1, Job: "llama", WorldSize: 24, PP: 4, TP: 3, DP: 2, Virtual: 1,
		MicroBatches: 6, Schedule: "1f1b", Device: "H100-SXM", PeakFlops: 989e12, Clock: trace.ClockVirtual}
	if fmt.Sprint(tr.Meta) != fmt.Sprint(want) {
		t.Fatalf("meta %+v, want %+v", tr.Meta, want)
	}
}

// TestScale: 64 stages x 256 micro-batches x 4 steps (about 400k rows) runs
// to completion with the right row count. Its speed is measured by
// BenchmarkRun64x256, not here: tests assert no timings.
func TestScale(t *testing.T) {
	tr := mustRun(t, Config{Schedule: "1f1b", Stages: 64, MicroBatches: 256, Steps: 4, Jitter: 0.1})
	if want := 4 * (256*(6*64-4) + 64); tr.Len() != want {
		t.Fatalf("%d rows, want %d", tr.Len(), want)
	}
}

func BenchmarkRun64x256(b *testing.B) {
	c := Config{Schedule: "1f1b", Stages: 64, MicroBatches: 256, Steps: 4, Jitter: 0.1}
	for b.Loop() {
		if _, err := Run(c); err != nil {
			b.Fatal(err)
		}
	}
}
