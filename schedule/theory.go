package schedule

import (
	"math"

	"github.com/ppprof/ppprof/trace"
)

// TheoreticalBubble is the bubble fraction (idle share of the step on the
// busiest stage, 1 - max(busy)/T as in DESIGN.md) of s for uniform stages
// and free communication. Where a closed form is exact it returns it:
//
//	gpipe, 1f1b                  (p-1)/(m+p-1)       any p, m
//	interleaved                  (p-1)/(v*m+p-1)     any p, m, v Interleaved builds
//	zb-h1 (T_F = T_B = T_W)      (p-1)/(3*m+p-1)     m >= p
//
// The first two hold for any ratio of forward to backward time (the tests
// check them against Replay, for interleaved also with ragged m); the ZB-H1
// form is the paper's assumption of equal F, B and W times. Elsewhere (ZB-H1
// with m < p, or a name of no schedule here) it returns
// ReplayBubble(1, 1, 1): F, B and W one unit each, so a backward that is not
// split costs 2. The closed forms are keyed on Name, Stages, MicroBatches
// and Virtual: they hold for the schedules this package builds. It is NaN
// when Stages, MicroBatches or Virtual is < 1, or when the replay fails (s
// does not validate).
func (s *Schedule) TheoreticalBubble() float64 {
	p, m, v := float64(s.Stages), float64(s.MicroBatches), float64(s.Virtual)
	if s.Stages < 1 || s.MicroBatches < 1 || s.Virtual < 1 {
		return math.NaN()
	}
	switch s.Name {
	case GPipeName, OneFOneBName:
		return (p - 1) / (m + p - 1)
	case InterleavedName:
		return (p - 1) / (v*m + p - 1)
	case ZBH1Name:
		if s.MicroBatches >= s.Stages {
			return (p - 1) / (3*m + p - 1)
		}
	}
	return s.ReplayBubble(1, 1, 1)
}

// Timeline is a schedule replayed with given compute costs: when each
// action started and ended, in the cost's unit (ms if costs are ms), with
// time 0 the start of the step.
type Timeline struct {
	// Start and End are indexed like Schedule.Actions: [stage][action]. A
	// send takes no time; a receive starts when its stage reaches it and
	// ends when its data is there (End - Start is its wait).
	Start, End [][]float64
	// Busy is each stage's compute time, the sum of its F, B, W costs.
	Busy []float64
	// StepTime is the makespan: the latest End of any action.
	StepTime float64
}

// Bubble is 1 - max(Busy)/StepTime, the idle share of the step on the
// busiest stage; 0 for an empty step.
func (t *Timeline) Bubble() float64 {
	if t.StepTime <= 0 {
		return 0
	}
	hi := 0.0
	for _, b := range t.Busy {
		hi = max(hi, b)
	}
	return 1 - hi/t.StepTime
}

// Replay runs the action lists of s with compute costs given by cost and
// free, instantaneous communication: each stage runs its actions in order, a
// compute action takes cost(stage, action), a send takes no time and never
// blocks, and a receive waits until its matched send (NCCL order) has been
// issued, that is until the compute producing its data has ended. cost is
// called once per F, B and W action and must return a finite value >= 0.
// Replay returns Validate's error for a schedule that does not validate.
func (s *Schedule) Replay(cost func(stage int, a Action) float64) (*Timeline, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	e := newExecution(s, cost)
	if err := e.run(); err != nil {
		return nil, err
	}
	t := &Timeline{Start: e.start, End: e.end, Busy: make([]float64, s.Stages)}
	for st, acts := range s.Actions {
		for i, a := range acts {
			if a.Kind.IsCompute() {
				t.Busy[st] += e.end[st][i] - e.start[st][i]
			}
			t.StepTime = max(t.StepTime, e.end[st][i])
		}
	}
	return t, nil
}

// ReplayBubble is the bubble fraction (Timeline.Bubble) of s replayed with
// uniform stages and free communication, where fwd, bwd and wgt are the
// times of one micro-batch's forward, backward-input and backward-weight
// pass over a whole stage (all its chunks). Each chunk's pass costs 1/v of
// that. When SplitBackward is false, B is the whole backward and costs
// (bwd+wgt)/v, so every schedule does the same work for the same model.
// It is NaN when s does not validate or a cost is negative or not finite.
func (s *Schedule) ReplayBubble(fwd, bwd, wgt float64) float64 {
	v := float64(max(s.Virtual, 1))
	b := bwd
	if !s.SplitBackward {
		b += wgt
	}
	costs := map[trace.Kind]float64{trace.F: fwd / v, trace.B: b / v, trace.W: wgt / v}
	t, err := s.Replay(func(_ int, a Action) float64 { return costs[a.Kind] })
	if err != nil {
		return math.NaN()
	}
	return t.Bubble()
}
