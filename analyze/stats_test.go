package analyze

import (
	"maps"
	"math"
	"math/rand"
	"reflect"
	"slices"
	"testing"

	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// statsRun simulates c and analyses every step.
func statsRun(t *testing.T, c sim.Config) (*trace.Trace, *Report) {
	t.Helper()
	tr, err := sim.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	return tr, rep
}

func statsNear(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// TestStatsP2PWaitByHand: GPipe, p = 2, m = 2, F 1 ms, B 2 ms, P2P latency
// L = 0.1 ms, infinite bandwidth (a transfer takes exactly L). Times in ms
// (sim timing: a RECV's transfer starts when both sides posted):
//
//	stage 0: F0 0-1, F1 1-2, RECV_B0 posted 2, transfer 5+2L..5+3L,
//	         B0 5+3L..7+3L, RECV_B1 transfer 7+3L..7+4L, B1 7+4L..9+4L
//	stage 1: RECV_F0 1..1+L, F0 1+L..2+L, RECV_F1 2+L..2+2L,
//	         F1 2+2L..3+2L, B0 3+2L..5+2L, B1 5+2L..7+2L
//	window 0..9+4L = 9.4
//
// Stage 0: no warmup or cooldown; steady gaps 2..5+3L and 7+3L..7+4L =
// 3+4L = 3.4; receive phases inside them: L (RECV_B0) + L (RECV_B1) = 0.2;
// other 3+2L = 3.2. Stage 1: warmup 1+L = 1.1 (RECV_F0 falls in it, so it is
// not steady wait); steady gap 2+L..2+2L = L, all of it RECV_F1's transfer;
// cooldown 9+4L - (7+2L) = 2.2. Boundary 1->0 gradient exposes 0.2 ms, 0->1
// activation 0.1 ms; the steady P2P share is 3L / (2 x 9.4).
func TestStatsP2PWaitByHand(t *testing.T) {
	_, rep := statsRun(t, sim.Config{Schedule: "gpipe", Stages: 2, MicroBatches: 2, FwdMs: 1, BwdMs: 2, P2PLatencyUs: 100})
	const L = 0.1
	s0, s1 := rep.Stages[0], rep.Stages[1]
	checks := []struct {
		name      string
		got, want float64
	}{
		{"window", rep.Steps[0].WindowMs(), 9 + 4*L},
		{"s0 warmup", s0.WarmupMs, 0}, {"s0 cooldown", s0.CooldownMs, 0},
		{"s0 steady", s0.SteadyMs, 3 + 4*L}, {"s0 p2p", s0.P2PWaitMs, 2 * L}, {"s0 other", s0.OtherWaitMs, 3 + 2*L},
		{"s1 warmup", s1.WarmupMs, 1 + L}, {"s1 cooldown", s1.CooldownMs, 2 + 2*L},
		{"s1 steady", s1.SteadyMs, L}, {"s1 p2p", s1.P2PWaitMs, L}, {"s1 other", s1.OtherWaitMs, 0},
		{"steady p2p share", rep.Bubble.SteadyP2P, 3 * L / (2 * (9 + 4*L))},
		{"steady other share", rep.Bubble.SteadyOther, (3 + 2*L) / (2 * (9 + 4*L))},
		{"p2p exposed", rep.P2P.ExposedMs, 3 * L},
	}
	for _, c := range checks {
		if !statsNear(c.got, c.want, 1e-9) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	exp := map[[2]int]float64{{1, 0}: 2 * L, {0, 1}: L}
	for _, b := range rep.P2P.Boundaries {
		if !statsNear(b.ExposedMs, exp[[2]int{b.From, b.To}], 1e-9) {
			t.Errorf("boundary %d->%d %s exposed %v ms, want %v", b.From, b.To, b.Kind, b.ExposedMs, exp[[2]int{b.From, b.To}])
		}
	}
}

// TestStatsHandTraceWaitIsPeerCompute uses ingest/testdata/gpipe2.csv, whose
// RECV_B0 on stage 0 starts when it is posted (2 ms) and ends at 5 ms, while
// the matched SEND_B0 starts (and ends) at 5 ms: the bytes moved in no
// time, so the 3 ms steady gap of stage 0 is all waiting for stage 1's
// compute, none of it P2P.
func TestStatsHandTraceWaitIsPeerCompute(t *testing.T) {
	tr, _, _, err := ingest.ReadFile("../ingest/testdata/gpipe2.csv")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	s0, s1 := rep.Stages[0], rep.Stages[1]
	if s0.SteadyMs != 3 || s0.P2PWaitMs != 0 || s0.OtherWaitMs != 3 || s0.WarmupMs != 0 || s0.CooldownMs != 0 {
		t.Errorf("stage 0 idle split %+v, want steady 3 = other 3", s0)
	}
	if s1.WarmupMs != 1 || s1.CooldownMs != 2 || s1.SteadyMs != 0 || s1.P2PWaitMs != 0 {
		t.Errorf("stage 1 idle split %+v, want warmup 1, cooldown 2", s1)
	}
	if rep.Bubble.SteadyP2P != 0 || !near(rep.Bubble.SteadyOther, 3.0/18) {
		t.Errorf("steady p2p %v other %v, want 0 and 3/18", rep.Bubble.SteadyP2P, rep.Bubble.SteadyOther)
	}
	// F: 4 ops of 1 ms; B: 4 of 2 ms. OPT 0.5 ms on both ranks.
	if d := s0.F; d.N != 2 || d.MeanMs != 1 || d.P95Ms != 1 || s1.B.N != 2 || s1.B.MedianMs != 2 {
		t.Errorf("dists F %+v B %+v", s0.F, s1.B)
	}
	if len(rep.Overhead) != 1 || rep.Overhead[0].Kind != "OPT" || rep.Overhead[0].MeanMs != 0.5 || rep.Overhead[0].Steps != 1 {
		t.Errorf("overhead %+v, want OPT 0.5 ms in 1 step", rep.Overhead)
	}
}

// TestStatsRecvOverlappingCompute: an asynchronous receive that runs
// during compute exposes only the part outside it. Stage 1 (rank 1) posts
// RECV_F1 at 2 ms while computing F0 2-4; the sender's SEND_F1 starts at 1
// ms, so the transfer runs 2-5. F1 runs 5-6. Steady gap 4-5 (1 ms) is all
// transfer: P2P wait 1 ms, not 3.
func TestStatsRecvOverlappingCompute(t *testing.T) {
	tr := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	add(tr, 0, 0, 0, 0, trace.F, 0, 0, 1*ms)
	add(tr, 0, 0, 0, 0, trace.F, 1, 1*ms, 2*ms)
	statsP2P(tr, 0, 0, trace.SendF, 1, 1, 1*ms, 5*ms)
	add(tr, 1, 1, 0, 0, trace.F, 0, 2*ms, 4*ms)
	statsP2P(tr, 1, 1, trace.RecvF, 0, 1, 2*ms, 5*ms)
	add(tr, 1, 1, 0, 0, trace.F, 1, 5*ms, 6*ms)
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Stages[1]; s.SteadyMs != 1 || s.P2PWaitMs != 1 || s.WarmupMs != 2 {
		t.Errorf("stage 1 %+v, want steady 1 = p2p 1, warmup 2", s)
	}
	// Stage 0 computes 0-2 and is idle 2-6: cooldown, not steady.
	if s := rep.Stages[0]; s.CooldownMs != 4 || s.P2PWaitMs != 0 {
		t.Errorf("stage 0 %+v, want cooldown 4 and no p2p wait", s)
	}
}

// statsP2P appends a P2P row of rank (on stage) with peer, as add does.
func statsP2P(tr *trace.Trace, rank trace.Rank, stage trace.Stage, k trace.Kind, peer trace.Rank, mb trace.MicroBatch, s, e int64) {
	add(tr, rank, stage, 0, 0, k, mb, s, e)
	tr.Peer[tr.Len()-1] = peer
	tr.Bytes[tr.Len()-1] = 1024
}

// TestStatsFreeP2PNoWait: with free communication no receive has a transfer
// phase, so no steady idle is P2P wait, whatever the schedule, jitter or
// slow stage; the steady idle is still there (other wait).
func TestStatsFreeP2PNoWait(t *testing.T) {
	for _, sch := range []string{"gpipe", "1f1b", "interleaved", "zb-h1"} {
		_, rep := statsRun(t, sim.Config{Schedule: sch, Stages: 4, MicroBatches: 8, Steps: 2, DP: 2, TP: 2,
			Jitter: 0.2, Seed: 3, SlowStage: 2, SlowFactor: 1.5})
		var steady float64
		for _, s := range rep.Stages {
			if s.P2PWaitMs != 0 {
				t.Errorf("%s stage %d: p2p wait %v with free P2P", sch, s.Stage, s.P2PWaitMs)
			}
			steady += s.SteadyMs
		}
		if steady <= 0 || rep.Bubble.SteadyP2P != 0 || rep.Bubble.SteadyOther != rep.Bubble.Steady || rep.P2P.ExposedMs != 0 {
			t.Errorf("%s: steady %v, shares %+v, exposed %v", sch, steady, rep.Bubble, rep.P2P.ExposedMs)
		}
	}
}

// TestStatsIdleSplitAddsUp: on seeded sims with latency, bandwidth, jitter
// and a slow stage, per stage warmup + cooldown + steady = idle and p2p +
// other = steady; summed over stages and windows, the stage splits give the
// Bubble shares that measureFactors computes on its own, and SteadyP2P +
// SteadyOther = Steady.
func TestStatsIdleSplitAddsUp(t *testing.T) {
	for seed := int64(1); seed <= 24; seed++ {
		scheds := []string{"gpipe", "1f1b", "interleaved", "zb-h1"}
		c := sim.Config{Schedule: scheds[seed%4], Stages: 2 + int(seed%4), MicroBatches: 4 + int(seed%5),
			Steps: 2, DP: 1 + int(seed%2), TP: 1 + int(seed/2%2), Jitter: 0.3, Seed: seed,
			SlowStage: int(seed % 2), SlowFactor: 1.5, P2PLatencyUs: 50, P2PGbps: 200, OptMs: 1, Hidden: 512}
		if c.Schedule == "interleaved" {
			c.MicroBatches = c.Stages * 2
		}
		_, rep := statsRun(t, c)
		var sumT float64
		n := 0
		for _, w := range rep.Steps {
			if w.Complete {
				sumT += w.WindowMs()
				n++
			}
		}
		p := float64(len(rep.Stages))
		var warm, cool, steady, wait float64
		for _, s := range rep.Stages {
			if math.Abs(s.WarmupMs+s.CooldownMs+s.SteadyMs-s.IdleMs) > 1e-9 {
				t.Errorf("seed %d stage %d: %v + %v + %v != idle %v", seed, s.Stage, s.WarmupMs, s.CooldownMs, s.SteadyMs, s.IdleMs)
			}
			if s.P2PWaitMs < 0 || s.P2PWaitMs > s.SteadyMs+1e-12 || math.Abs(s.P2PWaitMs+s.OtherWaitMs-s.SteadyMs) > 1e-12 {
				t.Errorf("seed %d stage %d: p2p %v other %v steady %v", seed, s.Stage, s.P2PWaitMs, s.OtherWaitMs, s.SteadyMs)
			}
			warm += s.WarmupMs * float64(n)
			cool += s.CooldownMs * float64(n)
			steady += s.SteadyMs * float64(n)
			wait += s.P2PWaitMs * float64(n)
		}
		b := rep.Bubble
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"warmup", warm / (p * sumT), b.Warmup}, {"cooldown", cool / (p * sumT), b.Cooldown},
			{"steady", steady / (p * sumT), b.Steady}, {"steady p2p", wait / (p * sumT), b.SteadyP2P},
			{"p2p exposed", wait / float64(n), rep.P2P.ExposedMs},
		} {
			if math.Abs(c.got-c.want) > 1e-9 {
				t.Errorf("seed %d: %s from stages %v, report %v", seed, c.name, c.got, c.want)
			}
		}
		if b.SteadyP2P+b.SteadyOther != b.Steady {
			t.Errorf("seed %d: steady p2p %v + other %v != steady %v", seed, b.SteadyP2P, b.SteadyOther, b.Steady)
		}
		if b.SteadyP2P <= 0 {
			t.Errorf("seed %d: no steady P2P wait with 50 us latency", seed)
		}
	}
}

// TestStatsJitteredDist: compute durations are nominal x a factor drawn in
// [1-J, 1+J] (sim), so every statistic lies within the bounds; N is one op
// per micro-batch per window per TP rank.
func TestStatsJitteredDist(t *testing.T) {
	const J = 0.2
	for _, sch := range []string{"1f1b", "zb-h1"} {
		c := sim.Config{Schedule: sch, Stages: 4, MicroBatches: 8, Steps: 3, DP: 2, TP: 2, FwdMs: 1, BwdMs: 2,
			Jitter: J, Seed: 11, P2PLatencyUs: 5}
		_, rep := statsRun(t, c)
		windows := c.Steps * c.DP
		// zb-h1 splits the 2 ms backward into B 1 ms and W 1 ms.
		nominal := map[string][3]float64{"1f1b": {1, 2, 0}, "zb-h1": {1, 1, 1}}[sch]
		for _, s := range rep.Stages {
			for k, d := range [3]Dist{s.F, s.B, s.W} {
				nom := nominal[k]
				wantN := c.MicroBatches * windows * c.TP
				if nom == 0 {
					wantN = 0
				}
				if d.N != wantN {
					t.Errorf("%s stage %d kind %d: N %d, want %d", sch, s.Stage, k, d.N, wantN)
					continue
				}
				if nom == 0 {
					continue
				}
				lo, hi := nom*(1-J)-1e-6, nom*(1+J)+1e-6
				if d.MinMs < lo || d.MaxMs > hi || d.MinMs > d.MedianMs || d.MedianMs > d.P95Ms || d.P95Ms > d.MaxMs || d.MeanMs < d.MinMs || d.MeanMs > d.MaxMs {
					t.Errorf("%s stage %d kind %d: %+v outside [%v, %v] or out of order", sch, s.Stage, k, d, lo, hi)
				}
				// 48 distinct draws (TP ranks share them) of a uniform
				// spread J (sd J/sqrt(3)): the p95 is near the top, the
				// median within about 5 standard errors of the middle.
				if d.P95Ms < nom*(1+0.6*J) || math.Abs(d.MedianMs-nom) > 0.5*J*nom {
					t.Errorf("%s stage %d kind %d: p95 %v median %v for nominal %v", sch, s.Stage, k, d.P95Ms, d.MedianMs, nom)
				}
			}
		}
	}
}

// TestStatsDistByHand: one stage runs F of 1, 2, ..., 20 ms back to back.
// Mean = median = 10.5; p95 by nearest rank is the ceil(0.95*20) = 19th
// smallest, 19 ms; min 1, max 20.
func TestStatsDistByHand(t *testing.T) {
	tr := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	at := int64(0)
	for d := int64(1); d <= 20; d++ {
		add(tr, 0, 0, 0, 0, trace.F, trace.MicroBatch(d-1), at, at+d*ms)
		at += d * ms
	}
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	want := Dist{N: 20, MeanMs: 10.5, MedianMs: 10.5, P95Ms: 19, MinMs: 1, MaxMs: 20}
	if got := rep.Stages[0].F; got != want {
		t.Errorf("F dist %+v, want %+v", got, want)
	}
	if got := rep.Stages[0].B; got != (Dist{}) {
		t.Errorf("B dist %+v, want zero: no B ops", got)
	}
	// Small counts: n = 1 (p95 is the one value), n = 21 (ceil(19.95) = 20th).
	if d := dist([]int64{5 * ms}); d != (Dist{N: 1, MeanMs: 5, MedianMs: 5, P95Ms: 5, MinMs: 5, MaxMs: 5}) {
		t.Errorf("dist of one: %+v", d)
	}
	var xs []int64
	for i := int64(21); i >= 1; i-- {
		xs = append(xs, i*ms)
	}
	if d := dist(xs); d.P95Ms != 20 || d.MedianMs != 11 || d.N != 21 {
		t.Errorf("dist of 21: %+v, want p95 20, median 11", d)
	}
}

// TestStatsOverhead: the simulator runs OPT for OptMs on every rank after
// each step's barrier, so OPT costs OptMs per step; an optskip fault makes
// one rank record a zero-length OPT_SKIP in one step while the others still
// run OPT.
func TestStatsOverhead(t *testing.T) {
	_, rep := statsRun(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 4, Steps: 3, OptMs: 3, DP: 2,
		Faults: []sim.Fault{{Kind: sim.FaultOptSkip, Rank: 1, Step: 1, MicroBatch: -1}}})
	want := []Overhead{{Kind: "OPT", MeanMs: 3, MaxMs: 3, Steps: 3}, {Kind: "OPT_SKIP", MeanMs: 0, MaxMs: 0, Steps: 1}}
	if len(rep.Overhead) != len(want) {
		t.Fatalf("overhead %+v, want %+v", rep.Overhead, want)
	}
	for i := range want {
		if got := rep.Overhead[i]; got.Kind != want[i].Kind || !statsNear(got.MeanMs, want[i].MeanMs, 1e-9) || !statsNear(got.MaxMs, want[i].MaxMs, 1e-9) || got.Steps != want[i].Steps {
			t.Errorf("overhead[%d] = %+v, want %+v", i, got, want[i])
		}
	}
}

// TestStatsOverheadUnionAndMax: in step 0, rank 0 runs DATA 0-2 and 1-3
// (union 3 ms), rank 1 DATA 0-1; step 1 has no DATA. Per step the cost is
// the slowest rank's union: 3 ms, then 0, so the mean is 1.5 ms over the
// two steps, the max 3, in one step.
func TestStatsOverheadUnionAndMax(t *testing.T) {
	data := trace.MustKind("DATA")
	tr := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	add(tr, 0, 0, 0, 0, data, -1, 0, 2*ms)
	add(tr, 0, 0, 0, 0, data, -1, 1*ms, 3*ms)
	add(tr, 0, 0, 0, 0, trace.F, 0, 3*ms, 4*ms)
	add(tr, 0, 0, 0, 1, trace.F, 0, 10*ms, 11*ms)
	add(tr, 1, 1, 0, 0, data, -1, 0, 1*ms)
	add(tr, 1, 1, 0, 0, trace.F, 0, 4*ms, 5*ms)
	add(tr, 1, 1, 0, 1, trace.F, 0, 11*ms, 12*ms)
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	want := []Overhead{{Kind: "DATA", MeanMs: 1.5, MaxMs: 3, Steps: 1}}
	if len(rep.Overhead) != 1 || rep.Overhead[0] != want[0] {
		t.Errorf("overhead %+v, want %+v", rep.Overhead, want)
	}
}

// TestStatsOverheadAcrossPipelines: a step's cost per kind is its busiest
// rank's, whichever pipeline replica (window) the rank is in. Step 0:
// replica 0's rank 0 runs DATA 0-4 and 3-5 ms (union 5 ms); replica 1's
// rank 1 runs DATA 0-1 ms and OPT 2-2.5 ms. Step 1 has none: DATA costs
// 5 ms in one of two steps (mean 2.5 ms), OPT 0.5 ms (mean 0.25 ms).
func TestStatsOverheadAcrossPipelines(t *testing.T) {
	data := trace.MustKind("DATA")
	tr := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	add(tr, 0, 0, 0, 0, data, -1, 0, 4*ms)
	add(tr, 0, 0, 0, 0, data, -1, 3*ms, 5*ms)
	add(tr, 0, 0, 0, 0, trace.F, 0, 5*ms, 6*ms)
	add(tr, 0, 0, 0, 1, trace.F, 0, 10*ms, 11*ms)
	first := tr.Len()
	add(tr, 1, 0, 0, 0, data, -1, 0, 1*ms)
	add(tr, 1, 0, 0, 0, trace.F, 0, 1*ms, 2*ms)
	add(tr, 1, 0, 0, 0, trace.Opt, -1, 2*ms, 2*ms+ms/2)
	add(tr, 1, 0, 0, 1, trace.F, 0, 10*ms, 11*ms)
	for i := first; i < tr.Len(); i++ {
		tr.Pipeline[i] = 1
	}
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	want := []Overhead{{Kind: "DATA", MeanMs: 2.5, MaxMs: 5, Steps: 1}, {Kind: "OPT", MeanMs: 0.25, MaxMs: 0.5, Steps: 1}}
	if !reflect.DeepEqual(rep.Overhead, want) {
		t.Errorf("overhead %+v, want %+v", rep.Overhead, want)
	}
}

// TestStatsMemoryP2PWeirdTraces: odd traces degrade, they do not panic:
// one stage, pending ops, zero durations, a receive from a rank that
// recorded nothing, P2P with garbage shapes, a trace with only OPT.
func TestStatsMemoryP2PWeirdTraces(t *testing.T) {
	one := &trace.Trace{Meta: trace.Meta{Schema: 1, Schedule: "1f1b", PP: 1, MicroBatches: 2}}
	add(one, 0, 0, 0, 0, trace.F, 0, 0, ms)
	add(one, 0, 0, 0, 0, trace.F, 1, ms, ms) // zero duration
	add(one, 0, 0, 0, 0, trace.B, 0, ms, 3*ms)
	add(one, 0, 0, 0, 0, trace.B, 1, 3*ms, trace.NoTime) // pending

	stray := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	add(stray, 0, 0, 0, 0, trace.F, 0, 0, ms)
	statsP2P(stray, 0, 0, trace.RecvB, 99, 0, ms, 2*ms) // peer 99 never recorded anything
	stray.Shape[stray.Len()-1], stray.Dtype[stray.Len()-1] = trace.Intern("12xbanana"), trace.Intern("bf16")
	add(stray, 0, 0, 0, 0, trace.B, 0, 2*ms, 2*ms)
	statsP2P(stray, 0, 0, trace.SendF, 98, 3, 2*ms, trace.NoTime)
	stray.Shape[stray.Len()-1], stray.Dtype[stray.Len()-1] = trace.Intern("99999999999x99999999999x99999999999"), trace.Intern("fp32")
	add(stray, 2, 2, 0, 0, trace.W, 7, 5*ms, 4*ms) // ends before it starts

	optOnly := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	add(optOnly, 0, 0, 0, 0, trace.Opt, -1, 0, ms)

	noTimes := &trace.Trace{Meta: trace.Meta{Schema: 1, Schedule: "nonesuch", PP: 3, MicroBatches: 1}}
	add(noTimes, 0, 0, 0, 0, trace.F, 0, trace.NoTime, trace.NoTime)
	statsP2P(noTimes, 0, 0, trace.SendF, 1, 0, trace.NoTime, trace.NoTime)

	for name, tr := range map[string]*trace.Trace{"one stage": one, "stray": stray, "opt only": optOnly, "no times": noTimes} {
		rep, err := Run(tr, Options{Step: AllSteps})
		if err != nil {
			continue // refusing is fine; panicking is not
		}
		for _, s := range rep.Stages {
			for _, x := range []float64{s.WarmupMs, s.CooldownMs, s.SteadyMs, s.P2PWaitMs, s.F.MeanMs, s.B.P95Ms} {
				if math.IsNaN(x) || x < 0 {
					t.Errorf("%s stage %d: bad number %v in %+v", name, s.Stage, x, s)
				}
			}
		}
		for _, b := range rep.P2P.Boundaries {
			if math.IsNaN(b.GBps) || math.IsNaN(b.ModelBytesPerStep) || b.ModelBytesPerStep < 0 {
				t.Errorf("%s: boundary %+v", name, b)
			}
		}
		_ = memoryFindings(nil, rep)
		_ = p2pFindings(nil, rep)
	}
	rep, err := Run(one, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	// The pending B keeps micro-batch 1 live; micro-batch 0 ended at 3 ms.
	if m := rep.Memory.Stages[0]; m.Peak != 2 || m.Bound != 1 {
		t.Errorf("one stage memory %+v, want peak 2 (pending B), bound 1", m)
	}
}

// BenchmarkStatsMemoryP2P times the three passes on a 16-stage, 64
// micro-batch, 4-replica, 5-step 1F1B trace with latency and jitter.
func BenchmarkStatsMemoryP2P(b *testing.B) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 16, MicroBatches: 64, Steps: 5, DP: 4,
		Jitter: 0.1, P2PLatencyUs: 20, P2PGbps: 100, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	ix := newIndex(tr, Options{Step: AllSteps})
	base := &Report{Job: jobOf(ix)}
	measureFactors(ix, base)
	base.Stages = stageSummaries(ix, base)
	b.ResetTimer()
	for range b.N {
		rep := *base
		rep.Stages = append([]StageSummary(nil), base.Stages...)
		analyzeStats(ix, &rep)
		analyzeMemory(ix, &rep)
		analyzeP2P(ix, &rep)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tr.Len()), "ns/event")
}

// TestOverheadBusy: per kind, the busiest rank's union of its intervals,
// the same whether a window's ops come rank by rank (each rank's run
// sorted alone) or in any order (all sorted), against a count of each
// rank's busy nanoseconds on a grid.
func TestOverheadBusy(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	kinds := []trace.Kind{trace.Opt, trace.MustKind("DATA"), trace.AllReduce}
	for iter := range 300 {
		var ops []overheadOp
		want := map[trace.Kind]int64{}
		for r := range trace.Rank(1 + rng.Intn(5)) {
			covered := map[trace.Kind]map[int64]bool{}
			for range rng.Intn(12) {
				k := kinds[rng.Intn(len(kinds))]
				s := int64(rng.Intn(40))
				e := s + int64(rng.Intn(10))
				ops = append(ops, overheadOp{k, r, interval{s, e}})
				if covered[k] == nil {
					covered[k] = map[int64]bool{}
				}
				for x := s; x < e; x++ {
					covered[k][x] = true
				}
			}
			for k, c := range covered {
				want[k] = max(want[k], int64(len(c)))
			}
		}
		check := func(how string, got []kindBusy) {
			m := map[trace.Kind]int64{}
			for _, kb := range got {
				if _, dup := m[kb.kind]; dup {
					t.Fatalf("iteration %d, %s: kind %v twice in %v", iter, how, kb.kind, got)
				}
				m[kb.kind] = kb.worst
			}
			if !reflect.DeepEqual(m, want) {
				t.Fatalf("iteration %d, %s: %v, want %v", iter, how, m, want)
			}
		}
		check("rank by rank", overheadBusy(slices.Clone(ops), nil))
		rng.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
		check("any order", overheadBusy(ops, nil))
	}
}

// TestStatsShareGroups: the statistics' F, B and W made from the op
// groups' lists and their own (statsVisitSharing) are those they make
// from their own lists alone, as is the whole report, on the chunk
// corpus, on its traces with token counts that vary within groups, and
// on traces whose durations the groups hold wide (over 4.3 s) or past
// what a float64 holds exactly (2^53 ns, kept by the statistics), and
// whose chunks lie past maxChunks (in no group).
func TestStatsShareGroups(t *testing.T) {
	base := chunkCorpus(t)
	corpus := map[string]*trace.Trace{}
	for _, name := range slices.Sorted(maps.Keys(base))[:4] {
		corpus[name] = base[name] // as simulated: narrow lists, one token count a group
	}
	for name, tr := range base {
		u := tr.Slice(0, tr.Len())
		u.Tokens = slices.Clone(u.Tokens)
		u.EndNs = slices.Clone(u.EndNs)
		u.Chunk = slices.Clone(u.Chunk)
		long, huge, far := false, false, false
		for i := range u.Tokens {
			if u.Tokens[i] > 0 {
				u.Tokens[i] += int64(i % 3)
			}
			if !u.Kind[i].IsCompute() || u.EndNs[i] == trace.NoTime {
				continue
			}
			switch {
			case !long && u.Kind[i] == trace.B:
				u.EndNs[i] += 5e9 // wide: over 4.3 s
				long = true
			case !huge && long && u.Kind[i] == trace.F:
				u.EndNs[i] += 1 << 53
				huge = true
			case !far && huge && u.Kind[i] == trace.B:
				u.Chunk[i] = maxChunks + 5
				far = true
			}
		}
		if err := u.Validate(); err != nil {
			t.Fatalf("%s changed: %v", name, err)
		}
		corpus[name+", changed"] = u
	}
	shared0 := statsShared.Load()
	for name, tr := range corpus {
		statsShareGroups = false
		own, err := Run(tr, Options{Step: AllSteps})
		statsShareGroups = true
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := Run(tr, Options{Step: AllSteps})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, own) {
			for st := range got.Stages {
				if g, o := got.Stages[st], own.Stages[st]; !reflect.DeepEqual(g, o) {
					t.Errorf("%s: stage %d shared %+v\nown %+v", name, st, g, o)
				}
			}
			t.Fatalf("%s: the reports differ", name)
		}
	}
	if statsShared.Load()-shared0 < int64(len(corpus)/2) {
		t.Errorf("only %d of %d analyses shared the op groups' lists", statsShared.Load()-shared0, len(corpus))
	}
}
