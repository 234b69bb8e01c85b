package schedule

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ppprof/ppprof/trace"
)

// maxProblems bounds how many program problems one error lists.
const maxProblems = 8

// Validate checks that s is a runnable schedule and returns nil, or an error
// naming the offending stage, action index and action.
//
//  1. Shape: Stages, MicroBatches and Virtual are >= 1 and Actions has one
//     list per stage; every action is F, B, W (only with SplitBackward) or
//     P2P, its micro-batch and chunk are in range, a compute action has Peer
//     -1, and a P2P action names the neighbour its virtual stage exchanges
//     with (SEND_F and RECV_B the next virtual stage, RECV_F and SEND_B the
//     previous one; none past either end). A shape error is returned alone.
//  2. Communication, run with NCCL semantics: between each ordered pair of
//     stages sends and receives match in issue order; a matched pair must
//     carry counterpart kinds, the same micro-batch and the same chunk
//     transition (*MismatchError); sends never block, a receive blocks its
//     stage until its matched send has been issued, compute needs nothing;
//     stages that cannot all finish give a *DeadlockError (blocked stages,
//     the wait-for cycle, sends in flight), sends never received an
//     *UnmatchedError.
//  3. Programs: each stage runs every micro-batch's F and B (and W when
//     SplitBackward) exactly once per chunk, with exactly the receives and
//     sends its virtual stage needs, each receive before the compute that
//     consumes it, each send after the compute that produced it, and F
//     before B before W.
//
// Errors of steps 2 and 3 are joined, so errors.As finds the typed ones.
func (s *Schedule) Validate() error {
	if s == nil {
		return errors.New("schedule: nil")
	}
	prefix := "schedule"
	if s.Name != "" {
		prefix += " " + s.Name
	}
	if err := s.checkShape(); err != nil {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	if err := errors.Join(newExecution(s, nil).run(), s.checkPrograms()); err != nil {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	return nil
}

// checkShape is step 1 of Validate.
func (s *Schedule) checkShape() error {
	p, m, v := s.Stages, s.MicroBatches, s.Virtual
	switch {
	case p < 1:
		return fmt.Errorf("%d stages (want >= 1)", p)
	case m < 1:
		return fmt.Errorf("%d micro-batches (want >= 1)", m)
	case v < 1:
		return fmt.Errorf("%d chunks per stage (want >= 1)", v)
	case len(s.Actions) != p:
		return fmt.Errorf("%d action lists for %d stages", len(s.Actions), p)
	}
	for st, acts := range s.Actions {
		for i, a := range acts {
			if err := s.checkAction(st, a); err != nil {
				return fmt.Errorf("stage %d action %d %v: %w", st, i, a, err)
			}
		}
	}
	return nil
}

// checkAction checks one action of stage st against the shape rules.
func (s *Schedule) checkAction(st int, a Action) error {
	p, v := s.Stages, s.Virtual
	if a.MicroBatch < 0 || a.MicroBatch >= s.MicroBatches {
		return fmt.Errorf("micro-batch %d out of [0, %d)", a.MicroBatch, s.MicroBatches)
	}
	if a.Chunk < 0 || a.Chunk >= v {
		return fmt.Errorf("chunk %d out of [0, %d)", a.Chunk, v)
	}
	vs, last := a.Chunk*p+st, p*v-1
	switch a.Kind {
	case trace.W:
		if !s.SplitBackward {
			return errors.New("W in a schedule without SplitBackward")
		}
		fallthrough
	case trace.F, trace.B:
		if a.Peer != -1 {
			return fmt.Errorf("compute with peer %d (want -1)", a.Peer)
		}
		return nil
	case trace.RecvF, trace.SendB:
		if vs == 0 {
			return fmt.Errorf("%v on the first virtual stage", a.Kind)
		}
		if want := (vs - 1) % p; a.Peer != want {
			return fmt.Errorf("peer %d (want %d, the previous virtual stage's)", a.Peer, want)
		}
		return nil
	case trace.SendF, trace.RecvB:
		if vs == last {
			return fmt.Errorf("%v on the last virtual stage", a.Kind)
		}
		if want := (vs + 1) % p; a.Peer != want {
			return fmt.Errorf("peer %d (want %d, the next virtual stage's)", a.Peer, want)
		}
		return nil
	}
	return fmt.Errorf("kind %v not allowed in a schedule", a.Kind)
}

// scheduleKinds are the kinds a schedule's programs use, in report order.
var scheduleKinds = []trace.Kind{trace.RecvF, trace.F, trace.SendF, trace.RecvB, trace.B, trace.SendB, trace.W}

// checkPrograms is step 3 of Validate.
func (s *Schedule) checkPrograms() error {
	p, v, m := s.Stages, s.Virtual, s.MicroBatches
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	for st, acts := range s.Actions {
		// pos[kind][chunk*m+mb]: index of the (last) such action; n counts.
		pos := map[trace.Kind][]int{}
		n := map[trace.Kind][]int{}
		for _, k := range scheduleKinds {
			pos[k] = make([]int, v*m)
			n[k] = make([]int, v*m)
		}
		for i, a := range acts {
			j := a.Chunk*m + a.MicroBatch
			pos[a.Kind][j] = i
			n[a.Kind][j]++
		}
		for c := 0; c < v; c++ {
			vs := c*p + st
			for mb := 0; mb < m; mb++ {
				j := c*m + mb
				ok := true
				for _, k := range scheduleKinds {
					if got, want := n[k][j], s.wantCount(k, vs); got != want {
						add("stage %d: micro-batch %d chunk %d has %d %v (want %d)", st, mb, c, got, k, want)
						ok = false
					}
				}
				if !ok {
					continue
				}
				for _, o := range s.precedences(vs) {
					if pos[o[0]][j] > pos[o[1]][j] {
						add("stage %d: micro-batch %d chunk %d: %v (action %d) after %v (action %d)",
							st, mb, c, o[0], pos[o[0]][j], o[1], pos[o[1]][j])
					}
				}
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	if len(problems) > maxProblems {
		problems = append(problems[:maxProblems], fmt.Sprintf("and %d more", len(problems)-maxProblems))
	}
	return errors.New(strings.Join(problems, "; "))
}

// wantCount is how many actions of kind k virtual stage vs runs per
// micro-batch.
func (s *Schedule) wantCount(k trace.Kind, vs int) int {
	first, last := vs == 0, vs == s.Stages*s.Virtual-1
	switch k {
	case trace.F, trace.B:
		return 1
	case trace.W:
		if s.SplitBackward {
			return 1
		}
	case trace.RecvF, trace.SendB:
		if !first {
			return 1
		}
	case trace.SendF, trace.RecvB:
		if !last {
			return 1
		}
	}
	return 0
}

// precedences lists the pairs (a, b) of kinds where a must come before b
// for one micro-batch on virtual stage vs.
func (s *Schedule) precedences(vs int) [][2]trace.Kind {
	out := [][2]trace.Kind{{trace.F, trace.B}}
	if vs > 0 {
		out = append(out, [2]trace.Kind{trace.RecvF, trace.F}, [2]trace.Kind{trace.B, trace.SendB})
	}
	if vs < s.Stages*s.Virtual-1 {
		out = append(out, [2]trace.Kind{trace.F, trace.SendF}, [2]trace.Kind{trace.RecvB, trace.B})
	}
	if s.SplitBackward {
		out = append(out, [2]trace.Kind{trace.B, trace.W})
	}
	return out
}
