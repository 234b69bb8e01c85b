package schedule

import (
	"math"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

func closedForm(s *Schedule) float64 {
	p, m, v := float64(s.Stages), float64(s.MicroBatches), float64(s.Virtual)
	if s.Name == ZBH1Name {
		return (p - 1) / (3*m + p - 1)
	}
	return (p - 1) / (v*m + p - 1)
}

// TestReplayMatchesClosedForm: the replayed bubble equals the closed form of
// DESIGN.md for GPipe, 1F1B and interleaved (any ratio of forward to
// backward time), and for ZB-H1 with T_F = T_B = T_W and m >= p.
func TestReplayMatchesClosedForm(t *testing.T) {
	costs := [][3]float64{{1, 1, 0}, {1, 2, 0}, {1, 1, 1}, {2, 3, 0.5}}
	grid(t, func(s *Schedule) {
		want := closedForm(s)
		for _, c := range costs {
			if s.Name == ZBH1Name && (c != [3]float64{1, 1, 1} || s.MicroBatches < s.Stages) {
				continue
			}
			if got := s.ReplayBubble(c[0], c[1], c[2]); math.Abs(got-want) > 1e-9 {
				t.Errorf("%s p=%d m=%d v=%d costs %v: replay %.12f, closed form %.12f",
					s.Name, s.Stages, s.MicroBatches, s.Virtual, c, got, want)
			}
		}
		if got := s.TheoreticalBubble(); math.Abs(got-s.ReplayBubble(1, 1, 1)) > 1e-9 {
			t.Errorf("%s p=%d m=%d v=%d: TheoreticalBubble %v, ReplayBubble(1,1,1) %v",
				s.Name, s.Stages, s.MicroBatches, s.Virtual, got, s.ReplayBubble(1, 1, 1))
		}
	})
}

func TestTheoreticalBubble(t *testing.T) {
	tests := []struct {
		name    string
		p, m, v int
		want    float64
	}{
		{GPipeName, 4, 8, 1, 3.0 / 11},
		{OneFOneBName, 4, 8, 1, 3.0 / 11},
		{OneFOneBName, 1, 8, 1, 0},
		{InterleavedName, 4, 8, 2, 3.0 / 19},
		{InterleavedName, 4, 8, 1, 3.0 / 11},
		{InterleavedName, 3, 7, 2, 2.0 / 16}, // ragged m, group size 4
		{ZBH1Name, 4, 8, 1, 3.0 / 27},
		{ZBH1Name, 2, 2, 1, 1.0 / 7},
		// ZB-H1 with m < p has no closed form: p=2 m=1 replayed with unit
		// F, B, W: F0 on stage 0 [0,1], on stage 1 [1,2], B0 on stage 1
		// [2,3], on stage 0 [3,4], W0 on stage 0 [4,5]; busy 3 of 5.
		{ZBH1Name, 2, 1, 1, 0.4},
	}
	for _, tt := range tests {
		s, err := New(tt.name, tt.p, tt.m, tt.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.TheoreticalBubble(); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s p=%d m=%d v=%d: %v, want %v", tt.name, tt.p, tt.m, tt.v, got, tt.want)
		}
	}
	if b := (&Schedule{Name: GPipeName}).TheoreticalBubble(); !math.IsNaN(b) {
		t.Errorf("empty schedule: %v, want NaN", b)
	}
	custom := clone(OneFOneB(2, 2))
	custom.Name = "custom"
	if got := custom.TheoreticalBubble(); math.Abs(got-1.0/3) > 1e-12 {
		t.Errorf("custom 1F1B p=2 m=2: %v, want the replayed 1/3", got)
	}
}

// TestReplayTimeline checks 1F1B p=2 m=2 with F = 1 and B = 2 by hand:
//
//	stage 0: F0 [0,1]  F1 [1,2]  (wait)  B0 [4,6]  (wait)  B1 [7,9]
//	stage 1: (wait) F0 [1,2]  B0 [2,4]  F1 [4,5]  B1 [5,7]
//
// Stage 0's RECV_B0 waits from 2 to 4, stage 1's RECV_F1 is there at 2 but
// reached only at 4. Makespan 9, busy 6 each, bubble 1/3 = (p-1)/(m+p-1).
func TestReplayTimeline(t *testing.T) {
	s := OneFOneB(2, 2)
	tl, err := s.Replay(func(_ int, a Action) float64 {
		if a.Kind == trace.F {
			return 1
		}
		return 2
	})
	if err != nil {
		t.Fatal(err)
	}
	type span struct {
		act        string
		start, end float64
	}
	want := [][]span{
		{{"F0", 0, 1}, {"SEND_F0@1", 1, 1}, {"F1", 1, 2}, {"SEND_F1@1", 2, 2}, {"RECV_B0@1", 2, 4}, {"B0", 4, 6}, {"RECV_B1@1", 6, 7}, {"B1", 7, 9}},
		{{"RECV_F0@0", 0, 1}, {"F0", 1, 2}, {"B0", 2, 4}, {"SEND_B0@0", 4, 4}, {"RECV_F1@0", 4, 4}, {"F1", 4, 5}, {"B1", 5, 7}, {"SEND_B1@0", 7, 7}},
	}
	for st, spans := range want {
		for i, w := range spans {
			a := s.Actions[st][i]
			if a.String() != w.act || tl.Start[st][i] != w.start || tl.End[st][i] != w.end {
				t.Errorf("stage %d action %d: %v [%v,%v], want %s [%v,%v]", st, i, a, tl.Start[st][i], tl.End[st][i], w.act, w.start, w.end)
			}
		}
	}
	if tl.StepTime != 9 || tl.Busy[0] != 6 || tl.Busy[1] != 6 {
		t.Errorf("step %v busy %v, want 9 and [6 6]", tl.StepTime, tl.Busy)
	}
	if b := tl.Bubble(); math.Abs(b-1.0/3) > 1e-12 {
		t.Errorf("bubble %v, want 1/3", b)
	}
}

// TestReplayZBH1 checks ZB-H1 p=2 m=2 with unit F, B, W by hand:
//
//	stage 0: F0 [0,1] F1 [1,2] B0 [3,4] W0 [4,5] B1 [5,6] W1 [6,7]
//	stage 1: F0 [1,2] B0 [2,3] F1 [3,4] B1 [4,5] W0 [5,6] W1 [6,7]
//
// Makespan 7, busy 6: bubble 1/7 = (p-1)/(3m+p-1).
func TestReplayZBH1(t *testing.T) {
	s, _ := ZBH1(2, 2)
	tl, err := s.Replay(func(int, Action) float64 { return 1 })
	if err != nil {
		t.Fatal(err)
	}
	ends := map[string]float64{}
	for st, acts := range s.Actions {
		for i, a := range acts {
			if a.Kind.IsCompute() {
				ends[string(rune('0'+st))+":"+a.String()] = tl.End[st][i]
			}
		}
	}
	want := map[string]float64{"0:F0": 1, "0:F1": 2, "0:B0": 4, "0:W0": 5, "0:B1": 6, "0:W1": 7,
		"1:F0": 2, "1:B0": 3, "1:F1": 4, "1:B1": 5, "1:W0": 6, "1:W1": 7}
	for k, v := range want {
		if ends[k] != v {
			t.Errorf("%s ends at %v, want %v", k, ends[k], v)
		}
	}
	if tl.StepTime != 7 || math.Abs(tl.Bubble()-1.0/7) > 1e-12 {
		t.Errorf("step %v bubble %v, want 7 and 1/7", tl.StepTime, tl.Bubble())
	}
}

func TestReplayErrors(t *testing.T) {
	s := OneFOneB(2, 2)
	for _, c := range []float64{-1, math.NaN(), math.Inf(1)} {
		_, err := s.Replay(func(int, Action) float64 { return c })
		if err == nil || !strings.Contains(err.Error(), "want finite, >= 0") {
			t.Errorf("cost %v: %v", c, err)
		}
		if b := s.ReplayBubble(c, 1, 1); !math.IsNaN(b) {
			t.Errorf("ReplayBubble(%v, 1, 1) = %v, want NaN", c, b)
		}
	}
	broken := clone(s)
	broken.Actions[1] = broken.Actions[1][1:]
	if _, err := broken.Replay(func(int, Action) float64 { return 1 }); err == nil {
		t.Error("replay of a broken schedule: no error")
	}
	if b := broken.ReplayBubble(1, 1, 1); !math.IsNaN(b) {
		t.Errorf("ReplayBubble of a broken schedule = %v, want NaN", b)
	}
	if b := s.ReplayBubble(0, 0, 0); b != 0 {
		t.Errorf("ReplayBubble(0, 0, 0) = %v, want 0", b)
	}
}

// TestReplayProperties: over the grid, the bubble is in [0, 1), no action
// ends before it starts, and busy + idle = step time on every stage.
func TestReplayProperties(t *testing.T) {
	grid(t, func(s *Schedule) {
		tl, err := s.Replay(func(st int, a Action) float64 { return 1 + float64(st%3) + float64(a.Kind) })
		if err != nil {
			t.Fatalf("%s p=%d m=%d v=%d: %v", s.Name, s.Stages, s.MicroBatches, s.Virtual, err)
		}
		if b := tl.Bubble(); b < 0 || b >= 1 {
			t.Errorf("%s p=%d m=%d v=%d: bubble %v", s.Name, s.Stages, s.MicroBatches, s.Virtual, b)
		}
		for st := range tl.Start {
			idle, prev := 0.0, 0.0
			for i := range tl.Start[st] {
				if tl.End[st][i] < tl.Start[st][i] || tl.Start[st][i] < prev {
					t.Fatalf("%s stage %d action %d: [%v, %v] after %v", s.Name, st, i, tl.Start[st][i], tl.End[st][i], prev)
				}
				if !s.Actions[st][i].Kind.IsCompute() {
					idle += tl.End[st][i] - tl.Start[st][i]
				}
				prev = tl.End[st][i]
			}
			idle += tl.StepTime - prev
			if math.Abs(idle+tl.Busy[st]-tl.StepTime) > 1e-9 {
				t.Errorf("%s stage %d: busy %v + idle %v != step %v", s.Name, st, tl.Busy[st], idle, tl.StepTime)
			}
		}
	})
}

func TestLiveBound(t *testing.T) {
	tests := []struct {
		name    string
		p, m, v int
		want    []int
	}{
		{GPipeName, 3, 5, 1, []int{5, 5, 5}},
		{OneFOneBName, 4, 8, 1, []int{4, 3, 2, 1}},
		{OneFOneBName, 4, 2, 1, []int{2, 2, 2, 1}},
		// 2*(p-r-1) + (v-1)*p + 1 (mb, chunk) pairs: 6+4+1, 4+4+1, 2+4+1, 0+4+1.
		{InterleavedName, 4, 8, 2, []int{11, 9, 7, 5}},
		// Ragged m=7 on 3 stages uses group size 4: 4+4+1, 2+4+1, 0+4+1.
		{InterleavedName, 3, 7, 2, []int{9, 7, 5}},
		// All warm-up: capped at v*m = 4.
		{InterleavedName, 2, 2, 2, []int{4, 3}},
		{ZBH1Name, 4, 8, 1, []int{4, 4, 4, 4}},
		{ZBH1Name, 4, 3, 1, []int{3, 3, 3, 3}},
	}
	for _, tt := range tests {
		s, err := New(tt.name, tt.p, tt.m, tt.v)
		if err != nil {
			t.Fatal(err)
		}
		for st, want := range tt.want {
			if got := s.LiveBound(st); got != want {
				t.Errorf("%s p=%d m=%d v=%d stage %d: LiveBound %d, want %d", tt.name, tt.p, tt.m, tt.v, st, got, want)
			}
		}
		if s.LiveBound(-1) != -1 || s.LiveBound(tt.p) != -1 || s.PeakLive(tt.p) != -1 {
			t.Errorf("%s: out-of-range stage not -1", tt.name)
		}
	}
	custom := clone(OneFOneB(2, 2))
	custom.Name = "custom"
	if custom.LiveBound(0) != -1 || custom.PeakLive(0) != 2 {
		t.Errorf("custom: LiveBound %d PeakLive %d, want -1 and 2", custom.LiveBound(0), custom.PeakLive(0))
	}
}

// TestLiveBoundMatchesPeakLive: the formula equals the walk of the actions.
func TestLiveBoundMatchesPeakLive(t *testing.T) {
	grid(t, func(s *Schedule) {
		for st := 0; st < s.Stages; st++ {
			if b, p := s.LiveBound(st), s.PeakLive(st); b != p {
				t.Errorf("%s p=%d m=%d v=%d stage %d: LiveBound %d, PeakLive %d", s.Name, s.Stages, s.MicroBatches, s.Virtual, st, b, p)
			}
		}
	})
}

// TestZBH1BPendingLikeOneFOneB: counting a micro-batch live only until its
// B (the activation memory the paper's M_B measures), ZB-H1 peaks at
// min(p - stage, m) like 1F1B.
func TestZBH1BPendingLikeOneFOneB(t *testing.T) {
	for p := 1; p <= 8; p++ {
		for m := 1; m <= 16; m++ {
			s, _ := ZBH1(p, m)
			u := clone(s)
			u.SplitBackward = false // PeakLive then ends a micro-batch at B
			for st := 0; st < p; st++ {
				if got, want := u.PeakLive(st), min(p-st, m); got != want {
					t.Errorf("ZB-H1 p=%d m=%d stage %d: %d B-pending, want %d", p, m, st, got, want)
				}
			}
		}
	}
}
