package hang

import (
	"fmt"
	"slices"

	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/trace"
)

// checkProgram compares each rank's F/B/W/P2P ops, step by step, with its
// stage's action list in the schedule the metadata names, and keeps each
// rank's first departure. A rank blocked part way through a step follows
// the schedule as far as it went; one that went on to its optimizer step
// (or a later step) with actions left has departed. When more ranks depart
// than follow (and more than one does), the runtime's schedule is not the
// one package schedule builds, and the check is dropped with a note.
func (a *analysis) checkProgram() {
	s := a.programSchedule(a.t.Len(), true)
	if s == nil {
		return
	}
	divs, follow := a.compareRanks(s)
	a.keepDivs(divs, follow)
}

// programSchedule returns the action lists of the schedule the metadata
// names, for a trace of events rows; nil when the metadata names none, or
// one ppprof does not model or cannot build (with a note, when notes),
// or one far larger than the trace.
func (a *analysis) programSchedule(events int, notes bool) *schedule.Schedule {
	note := a.progNote
	if !notes {
		note = func(string, ...any) {}
	}
	j := a.rep.Job
	if j.Schedule == "" || j.PP <= 0 || j.MicroBatches <= 0 {
		return nil
	}
	if !slices.Contains(schedule.Names, j.Schedule) {
		note("schedule %q is not one ppprof models: ops are not checked against a schedule", j.Schedule)
		return nil
	}
	v := max(j.Virtual, 1)
	// The action lists hold about 6*p*m*v actions; a metadata claim far
	// beyond the trace's size is not worth building.
	if int64(j.PP)*int64(j.MicroBatches)*int64(v) > 4*int64(events)+1<<16 {
		note("metadata pp=%d microbatches=%d virtual=%d is far larger than the trace: ops are not checked against the schedule", j.PP, j.MicroBatches, v)
		return nil
	}
	s, err := schedule.New(j.Schedule, j.PP, j.MicroBatches, v)
	if err != nil {
		note("cannot build the %s schedule from the metadata (%v): ops are not checked against it", j.Schedule, err)
		return nil
	}
	return s
}

// compareRanks compares every present rank's ops with its stage's action
// list in s: the first departure of each rank that departs (by rank), and
// how many ranks follow the schedule.
func (a *analysis) compareRanks(s *schedule.Schedule) (divs []Divergence, follow int) {
	t := a.t
	for r := range a.ranks {
		ri := &a.ranks[r]
		if !ri.present || ri.stage < 0 || int(ri.stage) >= s.Stages {
			continue
		}
		acts := s.Actions[ri.stage]
		var d *Divergence
		steps := t.Step[:ri.hi]
		for lo := ri.lo; lo < ri.hi && d == nil; {
			hi := lo
			for hi < len(steps) && steps[hi] == steps[lo] {
				hi++
			}
			d = a.compareStep(lo, hi, hi < ri.hi, acts)
			lo = hi
		}
		if d != nil {
			divs = append(divs, *d)
		} else {
			follow++
		}
	}
	return divs, follow
}

// keepDivs keeps the ranks' departures, unless more ranks depart than
// follow (and more than one does): then the runtime's schedule is not the
// one package schedule builds, and the check is dropped with a note.
func (a *analysis) keepDivs(divs []Divergence, follow int) {
	if len(divs) > follow && len(divs) > 1 {
		a.progNote("%d of %d ranks do not follow the %s schedule as ppprof builds it (the runtime orders its ops differently?): ops are not checked against it",
			len(divs), len(divs)+follow, a.rep.Job.Schedule)
		return
	}
	a.divs = divs
}

// compareStep compares rows [lo, hi), one step of one rank, with acts; more
// says the rank has rows of a later step. It returns the first departure,
// or nil.
func (a *analysis) compareStep(lo, hi int, more bool, acts []schedule.Action) *Divergence {
	t := a.t
	kinds, mbs, chunks := t.Kind[lo:hi], t.MicroBatch[lo:hi], t.Chunk[lo:hi]
	mbs, chunks = mbs[:len(kinds)], chunks[:len(kinds)]
	optSkip := KindOptSkip
	pos := 0
	wentOn := more
	for j, k := range kinds {
		if k == trace.Opt || k == optSkip {
			wentOn = true
		}
		// Compute and P2P kinds are F..RECV_B, 1..7.
		if uint16(k)-uint16(trace.F) >= 7 {
			continue
		}
		i := lo + j
		if pos == len(acts) {
			return &Divergence{Rank: t.Rank[i], Step: t.Step[i], Index: pos, Got: a.event(i),
				Want: "nothing (the step's actions are done)", MicroBatch: t.MicroBatch[i]}
		}
		want := acts[pos]
		if k != want.Kind || int(mbs[j]) != want.MicroBatch || int(chunks[j]) != want.Chunk {
			return a.departure(lo, hi, i, pos, want)
		}
		pos++
	}
	if pos < len(acts) && wentOn {
		return a.departure(lo, hi, -1, pos, acts[pos])
	}
	return nil
}

// departure describes a rank that did row i (-1: went on to its optimizer
// step or a later step) where its schedule has want, the pos-th action.
func (a *analysis) departure(lo, hi, i, pos int, want schedule.Action) *Divergence {
	t := a.t
	d := &Divergence{Rank: t.Rank[lo], Step: t.Step[lo], Index: pos, Got: a.event(i),
		Want: describeAction(want), MicroBatch: trace.MicroBatch(want.MicroBatch), Skipped: true}
	for j := lo; j < hi; j++ {
		if int(t.MicroBatch[j]) == want.MicroBatch {
			d.Skipped = false
			if j > i && t.Kind[j] == want.Kind && int(t.Chunk[j]) == want.Chunk {
				d.Late = true
			}
		}
	}
	return d
}

// progNote is note for checkProgram, which runs beside matching: its notes
// wait in progNotes for their place in the report's.
func (a *analysis) progNote(format string, args ...any) {
	a.progNotes = append(a.progNotes, fmt.Sprintf(format, args...))
}

// describeAction says "RECV_F mb 6" or "SEND_B mb 2 chunk 1".
func describeAction(x schedule.Action) string {
	s := fmt.Sprintf("%s mb %d", x.Kind, x.MicroBatch)
	if x.Chunk != 0 {
		s += fmt.Sprintf(" chunk %d", x.Chunk)
	}
	return s
}

// divergenceOf returns rank r's departure from the schedule, or nil.
func (a *analysis) divergenceOf(r trace.Rank) *Divergence {
	i, ok := slices.BinarySearchFunc(a.divs, r, func(d Divergence, r trace.Rank) int { return int(d.Rank) - int(r) })
	if !ok {
		return nil
	}
	return &a.divs[i]
}
