package schedule

import (
	"reflect"
	"strings"
	"testing"
)

// programs renders each stage's actions with Action.String, space separated.
func programs(s *Schedule) []string {
	out := make([]string, len(s.Actions))
	for st, acts := range s.Actions {
		parts := make([]string, len(acts))
		for i, a := range acts {
			parts[i] = a.String()
		}
		out[st] = strings.Join(parts, " ")
	}
	return out
}

// TestGolden checks small schedules against action lists derived by hand.
func TestGolden(t *testing.T) {
	tests := []struct {
		name    string
		p, m, v int
		want    []string
	}{
		// GPipe p=2 m=2: every F, then every B. Stage 0 is the first virtual
		// stage (no RECV_F, no SEND_B), stage 1 the last (no SEND_F, no RECV_B).
		{GPipeName, 2, 2, 1, []string{
			"F0 SEND_F0@1 F1 SEND_F1@1 RECV_B0@1 B0 RECV_B1@1 B1",
			"RECV_F0@0 F0 RECV_F1@0 F1 B0 SEND_B0@0 B1 SEND_B1@0",
		}},
		// 1F1B p=2 m=3. Stage 0 warms up with p-0-1 = 1 forward (F0), then
		// m-1 = 2 pairs (F1 B0) (F2 B1), then drains B2. Stage 1 warms up
		// with 0 and alternates F B for all three. A receive comes right
		// before its compute, a send right after.
		{OneFOneBName, 2, 3, 1, []string{
			"F0 SEND_F0@1 F1 SEND_F1@1 RECV_B0@1 B0 F2 SEND_F2@1 RECV_B1@1 B1 RECV_B2@1 B2",
			"RECV_F0@0 F0 B0 SEND_B0@0 RECV_F1@0 F1 B1 SEND_B1@0 RECV_F2@0 F2 B2 SEND_B2@0",
		}},
		// ZB-H1 p=3 m=4: 1F1B order of F and B (warm-up 2, 1, 0 forwards),
		// and stage r runs W of micro-batch k-r after its k-th B when k >= r,
		// then the r remaining W at the end.
		//   stage 0: F0 F1 | F2 B0 W0 | F3 B1 W1 | B2 W2 | B3 W3
		//   stage 1: F0 | F1 B0 | F2 B1 W0 | F3 B2 W1 | B3 W2 | W3
		//   stage 2: F0 B0 | F1 B1 | F2 B2 W0 | F3 B3 W1 | W2 W3
		// W has no communication.
		{ZBH1Name, 3, 4, 1, []string{
			"F0 SEND_F0@1 F1 SEND_F1@1 F2 SEND_F2@1 RECV_B0@1 B0 W0 F3 SEND_F3@1 RECV_B1@1 B1 W1 RECV_B2@1 B2 W2 RECV_B3@1 B3 W3",
			"RECV_F0@0 F0 SEND_F0@2 RECV_F1@0 F1 SEND_F1@2 RECV_B0@2 B0 SEND_B0@0 RECV_F2@0 F2 SEND_F2@2 RECV_B1@2 B1 SEND_B1@0 W0 RECV_F3@0 F3 SEND_F3@2 RECV_B2@2 B2 SEND_B2@0 W1 RECV_B3@2 B3 SEND_B3@0 W2 W3",
			"RECV_F0@1 F0 B0 SEND_B0@1 RECV_F1@1 F1 B1 SEND_B1@1 RECV_F2@1 F2 B2 SEND_B2@1 W0 RECV_F3@1 F3 B3 SEND_B3@1 W1 W2 W3",
		}},
		// Interleaved p=2 m=4 v=2, group size N = p = 2. Forward table
		// (micro-batch, chunk): (0,0) (1,0) (0,1) (1,1) (2,0) (3,0) (2,1) (3,1);
		// the k-th backward is table[k] with the chunk reversed.
		// Warm-up: stage 0 2*(2-0-1)+(2-1)*2 = 4, stage 1 0+2 = 2.
		//   stage 0: F0 F1 F0c1 F1c1 | F2 B0c1 | F3 B1c1 | F2c1 B0 | F3c1 B1 | B2c1 B3c1 B2 B3
		//   stage 1: F0 F1 | F0c1 B0c1 | F1c1 B1c1 | F2 B0 | F3 B1 | F2c1 B2c1 | F3c1 B3c1 | B2 B3
		// Virtual stages: chunk 0 of stage 0 is 0, of stage 1 is 1; chunk 1
		// of stage 0 is 2, of stage 1 is 3. Only virtual stage 0 has no
		// RECV_F, only 3 has no SEND_F, and all traffic is between 0 and 1.
		{InterleavedName, 2, 4, 2, []string{
			"F0 SEND_F0@1 F1 SEND_F1@1 RECV_F0c1@1 F0c1 SEND_F0c1@1 RECV_F1c1@1 F1c1 SEND_F1c1@1 " +
				"F2 SEND_F2@1 RECV_B0c1@1 B0c1 SEND_B0c1@1 F3 SEND_F3@1 RECV_B1c1@1 B1c1 SEND_B1c1@1 " +
				"RECV_F2c1@1 F2c1 SEND_F2c1@1 RECV_B0@1 B0 RECV_F3c1@1 F3c1 SEND_F3c1@1 RECV_B1@1 B1 " +
				"RECV_B2c1@1 B2c1 SEND_B2c1@1 RECV_B3c1@1 B3c1 SEND_B3c1@1 RECV_B2@1 B2 RECV_B3@1 B3",
			"RECV_F0@0 F0 SEND_F0@0 RECV_F1@0 F1 SEND_F1@0 RECV_F0c1@0 F0c1 B0c1 SEND_B0c1@0 " +
				"RECV_F1c1@0 F1c1 B1c1 SEND_B1c1@0 RECV_F2@0 F2 SEND_F2@0 RECV_B0@0 B0 SEND_B0@0 " +
				"RECV_F3@0 F3 SEND_F3@0 RECV_B1@0 B1 SEND_B1@0 RECV_F2c1@0 F2c1 B2c1 SEND_B2c1@0 " +
				"RECV_F3c1@0 F3c1 B3c1 SEND_B3c1@0 RECV_B2@0 B2 SEND_B2@0 RECV_B3@0 B3 SEND_B3@0",
		}},
	}
	for _, tt := range tests {
		s, err := New(tt.name, tt.p, tt.m, tt.v)
		if err != nil {
			t.Fatalf("New(%s, %d, %d, %d): %v", tt.name, tt.p, tt.m, tt.v, err)
		}
		got := programs(s)
		for st := range tt.want {
			if st >= len(got) || got[st] != tt.want[st] {
				t.Errorf("%s p=%d m=%d v=%d stage %d:\n got  %s\n want %s", tt.name, tt.p, tt.m, tt.v, st, got[st], tt.want[st])
			}
		}
		if len(got) != len(tt.want) {
			t.Errorf("%s: %d stages, want %d", tt.name, len(got), len(tt.want))
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestNewEveryName(t *testing.T) {
	for _, name := range Names {
		s, err := New(name, 4, 8, 2)
		if err != nil {
			t.Fatalf("New(%s): %v", name, err)
		}
		if s.Name != name || s.Stages != 4 || s.MicroBatches != 8 || len(s.Actions) != 4 {
			t.Errorf("New(%s) = %+v", name, s)
		}
		wantV := 1
		if name == InterleavedName {
			wantV = 2
		}
		if s.Virtual != wantV {
			t.Errorf("New(%s): Virtual %d, want %d", name, s.Virtual, wantV)
		}
		if s.SplitBackward != (name == ZBH1Name) {
			t.Errorf("New(%s): SplitBackward %v", name, s.SplitBackward)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("New(%s): %v", name, err)
		}
	}
	// v is ignored, and may be 0, except for interleaved.
	for _, name := range []string{GPipeName, OneFOneBName, ZBH1Name} {
		if _, err := New(name, 2, 2, 0); err != nil {
			t.Errorf("New(%s, v=0): %v", name, err)
		}
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name    string
		p, m, v int
		want    string
	}{
		{GPipeName, 0, 4, 1, "0 stages"},
		{OneFOneBName, -1, 4, 1, "-1 stages"},
		{ZBH1Name, 2, 0, 1, "0 micro-batches"},
		{InterleavedName, 2, -3, 2, "-3 micro-batches"},
		{InterleavedName, 2, 4, 0, "0 chunks per stage"},
		{InterleavedName, 2, 4, -1, "-1 chunks per stage"},
		{InterleavedName, 1, 4, 2, "need >= 2 stages"},
		{InterleavedName, 4, 3, 2, "micro-batches >= stages"},
		{InterleavedName, 2, 5, 2, "even number"},
		{"pipedream", 2, 4, 1, `unknown schedule "pipedream"`},
	}
	for _, tt := range tests {
		s, err := New(tt.name, tt.p, tt.m, tt.v)
		if err == nil {
			t.Errorf("New(%s, %d, %d, %d) = %v, want error", tt.name, tt.p, tt.m, tt.v, programs(s))
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%s, %d, %d, %d): %q, want it to say %q", tt.name, tt.p, tt.m, tt.v, err, tt.want)
		}
	}
}

// TestInterleavedV1IsOneFOneB: with one chunk per stage interleaved is 1F1B.
func TestInterleavedV1IsOneFOneB(t *testing.T) {
	for p := 1; p <= 8; p++ {
		for m := 1; m <= 12; m++ {
			s, err := Interleaved(p, m, 1)
			if err != nil {
				t.Fatalf("Interleaved(%d, %d, 1): %v", p, m, err)
			}
			if want := OneFOneB(p, m); !reflect.DeepEqual(s.Actions, want.Actions) || s.Virtual != 1 {
				t.Errorf("Interleaved(%d, %d, 1) differs from OneFOneB", p, m)
			}
		}
	}
}

// grid calls f for every schedule of the test grid: p in {1,2,3,4,8}, m in
// 1..16, v in 1..4 for interleaved (1 otherwise), where New accepts them.
func grid(t *testing.T, f func(s *Schedule)) {
	t.Helper()
	built := 0
	for _, name := range Names {
		for _, p := range []int{1, 2, 3, 4, 8} {
			for m := 1; m <= 16; m++ {
				for v := 1; v <= 4; v++ {
					if v > 1 && name != InterleavedName {
						continue
					}
					s, err := New(name, p, m, v)
					if err != nil {
						if name != InterleavedName || v == 1 {
							t.Fatalf("New(%s, %d, %d, %d): %v", name, p, m, v, err)
						}
						continue
					}
					built++
					f(s)
				}
			}
		}
	}
	if built < 400 {
		t.Fatalf("grid built only %d schedules", built)
	}
}

func TestGridValidates(t *testing.T) {
	grid(t, func(s *Schedule) {
		if err := s.Validate(); err != nil {
			t.Errorf("%s p=%d m=%d v=%d: %v", s.Name, s.Stages, s.MicroBatches, s.Virtual, err)
		}
	})
}

// TestInterleavedAccepted pins which (p, m) interleaved accepts for v > 1.
func TestInterleavedAccepted(t *testing.T) {
	for _, p := range []int{1, 2, 3, 4, 8} {
		for m := 1; m <= 16; m++ {
			_, err := Interleaved(p, m, 2)
			want := p >= 2 && m >= p && (p != 2 || m%2 == 0)
			if (err == nil) != want {
				t.Errorf("Interleaved(%d, %d, 2): err %v, want accepted %v", p, m, err, want)
			}
		}
	}
}

// TestInterleavedGroup pins Megatron's group-size rule.
func TestInterleavedGroup(t *testing.T) {
	tests := []struct{ p, m, want int }{
		{4, 8, 4}, {4, 4, 4}, {3, 9, 3}, // m % p == 0: N = p
		{3, 5, 5},  // 5%3 = 2 < 3, 5%4 = 1 < 3: one group
		{3, 7, 4},  // 7%3 = 1 < 3; 7%4 = 3 >= 3
		{4, 10, 5}, // 10%4 = 2; 10%5 = 0
		{4, 7, 7},
	}
	for _, tt := range tests {
		if got := interleavedGroup(tt.p, tt.m); got != tt.want {
			t.Errorf("interleavedGroup(%d, %d) = %d, want %d", tt.p, tt.m, got, tt.want)
		}
	}
	// Megatron's docstring example: PP2 N3 M5 VP2.
	got := interleavedTable(5, 2, 3)
	want := []mbChunk{{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {2, 1}, {3, 0}, {4, 0}, {3, 1}, {4, 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("interleavedTable(5, 2, 3) = %v, want %v", got, want)
	}
}
