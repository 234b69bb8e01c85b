package schedule

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// clone deep-copies s so a test can break it.
func clone(s *Schedule) *Schedule {
	c := *s
	c.Actions = make([][]Action, len(s.Actions))
	for st, acts := range s.Actions {
		c.Actions[st] = append([]Action(nil), acts...)
	}
	return &c
}

// index returns the position of the action rendered as str on stage st.
func index(t *testing.T, s *Schedule, st int, str string) int {
	t.Helper()
	for i, a := range s.Actions[st] {
		if a.String() == str {
			return i
		}
	}
	t.Fatalf("stage %d has no %s", st, str)
	return -1
}

func remove(acts []Action, i int) []Action {
	return append(acts[:i:i], acts[i+1:]...)
}

func wantErr(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one saying %q", subs)
	}
	for _, sub := range subs {
		if !strings.Contains(err.Error(), sub) {
			t.Errorf("error %q\ndoes not say %q", err, sub)
		}
	}
}

// Two sends swapped: stage 0 of 1F1B p=2 m=3 issues SEND_F1 where SEND_F0
// was and the other way round. Stage 1's first receive (RECV_F0) matches the
// first send (SEND_F1), as NCCL would; and SEND_F1 now precedes F1.
func TestValidateSwappedSends(t *testing.T) {
	s := clone(OneFOneB(2, 3))
	i, j := index(t, s, 0, "SEND_F0@1"), index(t, s, 0, "SEND_F1@1")
	s.Actions[0][i], s.Actions[0][j] = s.Actions[0][j], s.Actions[0][i]
	err := s.Validate()
	wantErr(t, err, "schedule 1f1b: order mismatch: send 1 from stage 0 to stage 1 is action 1 SEND_F1@1",
		"receive 1 on stage 1 is action 0 RECV_F0@0",
		"stage 0: micro-batch 1 chunk 0: F (action 2) after SEND_F (action 1)")
	var me *MismatchError
	if !errors.As(err, &me) {
		t.Fatalf("%v is not a *MismatchError", err)
	}
	if me.From != 0 || me.To != 1 || me.N != 0 || me.Send.MicroBatch != 1 || me.Recv.MicroBatch != 0 {
		t.Errorf("MismatchError %+v", me)
	}
}

// Swapped labels that keep each stage causal: stage 0 of GPipe p=2 m=2 runs
// F0 F1 and then sends F1 before F0. Only the NCCL matching can catch it.
func TestValidateSwappedSendLabels(t *testing.T) {
	s := clone(GPipe(2, 2))
	a := s.Actions[0]
	// F0 SEND_F0@1 F1 SEND_F1@1 ... -> F0 F1 SEND_F1@1 SEND_F0@1 ...
	a[1], a[2], a[3] = a[2], a[3], a[1]
	err := s.Validate()
	wantErr(t, err, "order mismatch: send 1 from stage 0 to stage 1 is action 2 SEND_F1@1 (chunk 0), but receive 1 on stage 1 is action 0 RECV_F0@0 (chunk 0)")
	if strings.Contains(err.Error(), "after") {
		t.Errorf("causal order reported broken: %v", err)
	}
}

// A dropped receive: stage 1 of 1F1B p=2 m=3 never receives F2. Stage 0's
// SEND_F2 is left unmatched and stage 1's program misses a RECV_F.
func TestValidateDroppedRecv(t *testing.T) {
	s := clone(OneFOneB(2, 3))
	s.Actions[1] = remove(s.Actions[1], index(t, s, 1, "RECV_F2@0"))
	err := s.Validate()
	wantErr(t, err, "unmatched sends (never received): stage 0 action 7 SEND_F2@1",
		"stage 1: micro-batch 2 chunk 0 has 0 RECV_F (want 1)")
	var ue *UnmatchedError
	if !errors.As(err, &ue) || len(ue.Sends) != 1 || ue.Sends[0].From != 0 || ue.Sends[0].To != 1 {
		t.Errorf("%v: want an *UnmatchedError for one send 0 -> 1", err)
	}
}

// A dropped send: stage 1 of 1F1B p=2 m=3 never sends B2's gradient, so
// stage 0 waits at RECV_B2 for a peer that has finished.
func TestValidateDroppedSend(t *testing.T) {
	s := clone(OneFOneB(2, 3))
	s.Actions[1] = remove(s.Actions[1], index(t, s, 1, "SEND_B2@0"))
	err := s.Validate()
	wantErr(t, err, "deadlock: stage 0 stuck at action 10 RECV_B2@1 (receive 3 from stage 1, which finished after 2 sends to it: missing send)",
		"stage 1: micro-batch 2 chunk 0 has 0 SEND_B (want 1)")
	var de *DeadlockError
	if !errors.As(err, &de) {
		t.Fatalf("%v is not a *DeadlockError", err)
	}
	if de.Cycle != nil || len(de.Blocked) != 1 || !de.Blocked[0].PeerDone {
		t.Errorf("DeadlockError %+v", de)
	}
}

// A receive ordered before the send it depends on, in a cycle: stage 0 of
// 1F1B p=2 m=1 waits for B0's gradient before it sends F0's activations,
// while stage 1 waits for those activations before it can send the
// gradient.
func TestValidateCycle(t *testing.T) {
	s := clone(OneFOneB(2, 1))
	// F0 SEND_F0@1 RECV_B0@1 B0 -> RECV_B0@1 F0 SEND_F0@1 B0
	a := s.Actions[0]
	a[0], a[1], a[2] = a[2], a[0], a[1]
	err := s.Validate()
	wantErr(t, err, "deadlock: wait-for cycle 0 -> 1 -> 0",
		"stage 0 stuck at action 0 RECV_B0@1 (receive 1 from stage 1, which has issued 0 sends to it)",
		"stage 1 stuck at action 0 RECV_F0@0 (receive 1 from stage 0, which has issued 0 sends to it)")
	var de *DeadlockError
	if !errors.As(err, &de) || !reflect.DeepEqual(de.Cycle, []int{0, 1}) || len(de.Blocked) != 2 {
		t.Errorf("%v: want a *DeadlockError with cycle [0 1]", err)
	}
}

// A longer cycle: in GPipe p=3 m=1 stage 0 waits for the gradient before
// sending activations; stages 1 and 2 wait on the activations.
func TestValidateCycleThreeStages(t *testing.T) {
	s := clone(GPipe(3, 1))
	a := s.Actions[0] // F0 SEND_F0@1 RECV_B0@1 B0
	a[0], a[1], a[2] = a[2], a[0], a[1]
	err := s.Validate()
	var de *DeadlockError
	if !errors.As(err, &de) {
		t.Fatalf("%v is not a *DeadlockError", err)
	}
	if !reflect.DeepEqual(de.Cycle, []int{0, 1}) || len(de.Blocked) != 3 {
		t.Errorf("cycle %v, blocked %+v", de.Cycle, de.Blocked)
	}
}

func TestValidateShape(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(s *Schedule)
		want   string
	}{
		{"too few lists", func(s *Schedule) { s.Actions = s.Actions[:1] }, "1 action lists for 2 stages"},
		{"no stages", func(s *Schedule) { s.Stages = 0 }, "0 stages"},
		{"no micro-batches", func(s *Schedule) { s.MicroBatches = 0 }, "0 micro-batches"},
		{"no chunks", func(s *Schedule) { s.Virtual = 0 }, "0 chunks per stage"},
		{"micro-batch range", func(s *Schedule) { s.Actions[0][0].MicroBatch = 3 }, "stage 0 action 0 F3: micro-batch 3 out of [0, 3)"},
		{"chunk range", func(s *Schedule) { s.Actions[0][0].Chunk = 1 }, "chunk 1 out of [0, 1)"},
		{"compute peer", func(s *Schedule) { s.Actions[0][0].Peer = 1 }, "compute with peer 1 (want -1)"},
		{"wrong peer", func(s *Schedule) { s.Actions[0][1].Peer = 0 }, "stage 0 action 1 SEND_F0@0: peer 0 (want 1, the next virtual stage's)"},
		{"peer out of range", func(s *Schedule) { s.Actions[1][0].Peer = 7 }, "peer 7 (want 0, the previous virtual stage's)"},
		{"recv on first", func(s *Schedule) { s.Actions[0][0].Kind = trace.RecvF }, "RECV_F on the first virtual stage"},
		{"send on last", func(s *Schedule) { s.Actions[1][1].Kind = trace.SendF; s.Actions[1][1].Peer = 0 }, "SEND_F on the last virtual stage"},
		{"W unsplit", func(s *Schedule) { s.Actions[0][0].Kind = trace.W }, "W in a schedule without SplitBackward"},
		{"OPT", func(s *Schedule) { s.Actions[0][0].Kind = trace.Opt }, "kind OPT not allowed"},
		{"invalid kind", func(s *Schedule) { s.Actions[0][0].Kind = trace.KindInvalid }, "not allowed"},
	}
	for _, tt := range tests {
		s := clone(OneFOneB(2, 3))
		tt.mutate(s)
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want it to say %q", tt.name, err, tt.want)
		}
	}
	var nilSchedule *Schedule
	wantErr(t, nilSchedule.Validate(), "nil")
}

func TestValidatePrograms(t *testing.T) {
	// A duplicated forward on the last stage (no P2P involved).
	s := clone(OneFOneB(2, 2))
	s.Actions[1] = append(s.Actions[1], s.Actions[1][1])
	wantErr(t, s.Validate(), "stage 1: micro-batch 0 chunk 0 has 2 F (want 1)")

	// W before its B in ZB-H1.
	z, _ := ZBH1(2, 2)
	z = clone(z)
	i, j := index(t, z, 0, "B0"), index(t, z, 0, "W0")
	z.Actions[0][i], z.Actions[0][j] = z.Actions[0][j], z.Actions[0][i]
	wantErr(t, z.Validate(), "stage 0: micro-batch 0 chunk 0: B (action 6) after W (action 5)")

	// A missing W in ZB-H1.
	z, _ = ZBH1(2, 2)
	z = clone(z)
	z.Actions[1] = remove(z.Actions[1], index(t, z, 1, "W1"))
	wantErr(t, z.Validate(), "stage 1: micro-batch 1 chunk 0 has 0 W (want 1)")

	// Backward before forward on the last stage.
	s = clone(OneFOneB(1, 2))
	a := s.Actions[0] // F0 B0 F1 B1
	a[0], a[1] = a[1], a[0]
	wantErr(t, s.Validate(), "stage 0: micro-batch 0 chunk 0: F (action 1) after B (action 0)")

	// Many problems are capped.
	s = clone(GPipe(1, 16))
	s.Actions[0] = nil
	err := s.Validate()
	wantErr(t, err, "and 24 more")
}

// A chunk-transition mismatch: the receive names the right micro-batch but
// the wrong chunk.
func TestValidateChunkMismatch(t *testing.T) {
	s, err := Interleaved(2, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	s = clone(s)
	// Stage 1 receives F0 for chunk 1 (from stage 0's chunk 1, virtual
	// stage 2); relabel stage 0's SEND_F0c1 as a send from chunk 0.
	i := index(t, s, 0, "SEND_F0c1@1")
	s.Actions[0][i].Chunk = 0
	err = s.Validate()
	var me *MismatchError
	if !errors.As(err, &me) {
		t.Fatalf("%v: want a *MismatchError", err)
	}
	wantErr(t, err, "SEND_F0@1 (chunk 0)", "RECV_F0c1@0 (chunk 1)")
}
