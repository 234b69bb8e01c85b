package schedule

import "github.com/ppprof/ppprof/trace"

// LiveBound is the most micro-batches live at once on stage (0 <= stage <
// Stages) under s, from the schedule's formula. A micro-batch is live on a
// stage from the end of its F to the end of its last backward pass there (B,
// or W when SplitBackward), as in DESIGN.md; in an interleaved schedule
// each (micro-batch, chunk) pair counts once, and holds about 1/v of a
// stage's activations.
//
//	gpipe        m
//	1f1b         min(p - stage, m)
//	interleaved  min(2*(p-stage-1) + (v-1)*N + 1, v*m), N the group size
//	             (p when m % p == 0; see Interleaved); min(p - stage, m) for v == 1
//	zb-h1        min(p, m): B-pending micro-batches peak at p - stage as in
//	             1F1B, but stage r keeps r more waiting for their W
//
// It is -1 for a stage out of range or a name of no schedule here. PeakLive
// measures the same quantity on the action lists.
func (s *Schedule) LiveBound(stage int) int {
	p, m, v := s.Stages, s.MicroBatches, s.Virtual
	if stage < 0 || stage >= p {
		return -1
	}
	switch s.Name {
	case GPipeName:
		return m
	case OneFOneBName:
		return min(p-stage, m)
	case InterleavedName:
		if v == 1 {
			return min(p-stage, m)
		}
		n := interleavedGroup(p, m)
		return min(interleavedWarmup(p, m, v, n, stage)+1, v*m)
	case ZBH1Name:
		return min(p, m)
	}
	return -1
}

// PeakLive walks stage's actions in order and returns the most (micro-batch,
// chunk) pairs live at once: +1 at each F, -1 at each pair's last backward
// pass (B, or W when SplitBackward). It is -1 for a stage out of range.
func (s *Schedule) PeakLive(stage int) int {
	if stage < 0 || stage >= len(s.Actions) {
		return -1
	}
	last := trace.B
	if s.SplitBackward {
		last = trace.W
	}
	live, peak := 0, 0
	for _, a := range s.Actions[stage] {
		switch a.Kind {
		case trace.F:
			live++
			peak = max(peak, live)
		case last:
			live--
		}
	}
	return peak
}
