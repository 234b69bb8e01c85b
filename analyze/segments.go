package analyze

import (
	"cmp"
	"slices"

	"github.com/ppprof/ppprof/trace"
)

// Cause says what a stage was doing during a Segment: busy on a compute op,
// or idle for one of the reasons of the idle split (StageSummary).
type Cause uint8

// The causes. The zero Cause is invalid.
const (
	CauseInvalid  Cause = iota
	CauseBusy           // running F, B or W (the op is Segment.Row)
	CauseWarmup         // idle before the stage's first compute of the window
	CauseCooldown       // idle after its last compute
	CauseP2PWait        // idle in a steady gap while one of its receives' bytes were on the wire
	CauseOther          // idle in a steady gap otherwise: waiting for a peer's compute and the like
)

var causeNames = [...]string{
	CauseInvalid:  "",
	CauseBusy:     "busy",
	CauseWarmup:   "warmup",
	CauseCooldown: "cooldown",
	CauseP2PWait:  "p2p-wait",
	CauseOther:    "other",
}

// String returns "busy", "warmup", "cooldown", "p2p-wait" or "other".
func (c Cause) String() string {
	if int(c) < len(causeNames) && c != CauseInvalid {
		return causeNames[c]
	}
	return "invalid"
}

// Segment is a stretch [StartNs, EndNs) of one stage's time (trace time,
// ns), non-empty.
type Segment struct {
	StartNs, EndNs int64
	Cause          Cause
	// Row is the trace row of the compute op the busy time is charged to;
	// -1 for idle. Where ops of the stage overlap (its TP ranks run the
	// same op at the same time), each instant is charged to the op that
	// started first.
	Row int
}

// StageTime is one stage of one complete (step, pipeline) window, its time
// cut into segments that tile the window exactly: busy segments cover the
// union of the stage's F/B/W intervals over its ranks, idle segments the
// rest, split as StageSummary's idle split is. Summed over windows and
// divided by their number, the segments of each cause give the stage's
// BusyMs, WarmupMs, CooldownMs, P2PWaitMs and OtherWaitMs.
type StageTime struct {
	Step           int64
	Pipeline       int32
	Stage          int
	Rank           trace.Rank // the lowest rank of the stage in the window; NoRank when it has no rows there
	StartNs, EndNs int64      // the window
	Segments       []Segment  // in time order
}

// StageTimes returns the StageTime of every stage of every complete window
// Run with opt would analyse, in step, pipeline and stage order. Windows
// with a pending event are left out, as they are from the idle split. t is
// not modified.
//
// Per window and stage:
//
//  1. busy: the stage's compute ops sorted by start; each is charged the
//     part of [start, end) no earlier op covered;
//  2. warmup and cooldown: window start to first busy, last busy to
//     window end (a stage with no compute is all steady gap);
//  3. steady gaps: the rest, cut by the union of the stage's receive
//     transfer phases (from the later of the RECV's and its matched SEND's
//     start to the RECV's end, as analyzeStats measures them) into
//     p2p-wait and other.
func StageTimes(t *trace.Trace, opt Options) []StageTime {
	if t.Len() == 0 {
		return nil
	}
	ix := newIndex(t, opt)
	p := ix.p
	var wins []*window
	for _, g := range ix.windows {
		if w := g.measured; w.Complete && w.EndNs > w.StartNs {
			wins = append(wins, g)
		}
	}
	// Each window on some core, its stages in a block of out at its place.
	type scratch struct {
		sc     p2pScratch
		comp   [][]int
		recv   [][]interval
		lowest []trace.Rank
	}
	scs := make([]scratch, workers(len(wins)))
	for w := range scs {
		scs[w] = scratch{comp: make([][]int, p), recv: make([][]interval, p), lowest: make([]trace.Rank, p)}
	}
	out := make([]StageTime, len(wins)*p)
	forEach(len(wins), func(wk, k int) {
		g, sc := wins[k], &scs[wk]
		w := g.measured
		comp, recv, lowest := sc.comp, sc.recv, sc.lowest
		for st := 0; st < p; st++ {
			comp[st], recv[st], lowest[st] = comp[st][:0], recv[st][:0], trace.NoRank
		}
		for _, i := range g.rows {
			st := int(t.Stage[i])
			if st < 0 || st >= p {
				continue
			}
			if lowest[st] == trace.NoRank || t.Rank[i] < lowest[st] {
				lowest[st] = t.Rank[i]
			}
			s, e := t.StartNs[i], t.EndNs[i]
			if t.Kind[i].IsCompute() && s != trace.NoTime && e != trace.NoTime && e > s {
				comp[st] = append(comp[st], i)
			}
		}
		for _, tr := range matchTransfers(t, g.rows, &sc.sc) {
			if tr.recv < 0 || tr.durNs() <= 0 {
				continue
			}
			if st := int(t.Stage[tr.recv]); st >= 0 && st < p {
				recv[st] = append(recv[st], interval{tr.startNs, tr.endNs})
			}
		}
		for st := 0; st < p; st++ {
			out[k*p+st] = StageTime{Step: w.Step, Pipeline: w.Pipeline, Stage: st, Rank: lowest[st],
				StartNs: w.StartNs, EndNs: w.EndNs, Segments: stageSegments(t, w.StartNs, w.EndNs, comp[st], recv[st])}
		}
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// stageSegments cuts [ws, we) into segments (see StageTimes). ops are
// compute rows with start < end; recv are receive transfer phases. Both are
// reordered.
func stageSegments(t *trace.Trace, ws, we int64, ops []int, recv []interval) []Segment {
	slices.SortStableFunc(ops, func(a, b int) int {
		return cmp.Or(cmp.Compare(t.StartNs[a], t.StartNs[b]), cmp.Compare(a, b))
	})
	// 1. Busy.
	var busy []Segment
	cover := ws
	for _, i := range ops {
		s, e := max(t.StartNs[i], cover, ws), min(t.EndNs[i], we)
		if e <= s {
			continue
		}
		if n := len(busy); n > 0 && busy[n-1].Row == i {
			busy[n-1].EndNs = e
		} else {
			busy = append(busy, Segment{StartNs: s, EndNs: e, Cause: CauseBusy, Row: i})
		}
		cover = e
	}
	wait := union(recv)
	if len(busy) == 0 {
		out, _ := idleSegments(nil, ws, we, wait)
		return out
	}
	// 2. Warmup, cooldown; 3. the gaps between busy segments.
	out := make([]Segment, 0, 2*len(busy)+2)
	if first := busy[0].StartNs; first > ws {
		out = append(out, Segment{StartNs: ws, EndNs: first, Cause: CauseWarmup, Row: -1})
	}
	for k, b := range busy {
		if k > 0 && busy[k-1].EndNs < b.StartNs {
			out, wait = idleSegments(out, busy[k-1].EndNs, b.StartNs, wait)
		}
		out = append(out, b)
	}
	if last := busy[len(busy)-1].EndNs; last < we {
		out = append(out, Segment{StartNs: last, EndNs: we, Cause: CauseCooldown, Row: -1})
	}
	return out
}

// idleSegments appends the steady gap [s, e) cut into p2p-wait (inside the
// disjoint sorted intervals wait) and other segments. It returns wait less
// the intervals that end before e: gaps come in time order, so the next
// gap's search starts there.
func idleSegments(out []Segment, s, e int64, wait []interval) ([]Segment, []interval) {
	for len(wait) > 0 && wait[0].e <= s {
		wait = wait[1:]
	}
	cur := s
	for _, iv := range wait {
		if iv.s >= e {
			break
		}
		if iv.s > cur {
			out = append(out, Segment{StartNs: cur, EndNs: iv.s, Cause: CauseOther, Row: -1})
			cur = iv.s
		}
		b := min(iv.e, e)
		out = append(out, Segment{StartNs: cur, EndNs: b, Cause: CauseP2PWait, Row: -1})
		cur = b
	}
	if cur < e {
		out = append(out, Segment{StartNs: cur, EndNs: e, Cause: CauseOther, Row: -1})
	}
	return out, wait
}
