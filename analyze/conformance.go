package analyze

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/trace"
)

// Conformance is the schedule ppprof recognised from each stage's op order
// and how the trace departs from it and from synchronous training.
//
// Identification. For every (step, pipeline) window and every rank in it,
// the rank's compute order T (its F, B and W rows with a micro-batch >= 0,
// in seq order; P2P and other kinds are ignored) is compared with S, the
// compute actions of the rank's stage in each candidate schedule built by
// schedule.New for the trace's p (stages), the window's m and, for
// interleaved, v = 1 + the largest chunk of any compute row. An op is the
// label (kind, micro-batch, chunk). Per rank and step:
//
//   - matched ops are in both T and S (a label's first occurrence in T);
//   - extra ops are in T only: repeats of a label, or labels S lacks;
//   - missing ops are in S only, counted where the rank is accountable for
//     them: the rank finished the step (see Violation), or it ran an op
//     that S places after the missing one;
//   - out-of-order ops are the matched ops outside a longest subsequence
//     of T that follows S's order: the fewest ops that, moved, restore the
//     schedule's order (a swap of two ops counts 1).
//
// A candidate's deviating fraction is (extra + missing + out-of-order) /
// (matched + extra + missing), summed over every rank and step
// (ScheduleMatch). The candidate with the smallest fraction wins; on a tie
// the one the metadata names, then the first in schedule.Names order
// (gpipe, 1f1b, interleaved, zb-h1: with one micro-batch GPipe and 1F1B
// are the same order). It is Identified when its fraction is at most
// MaxDeviatingFraction (25%); otherwise Identified is "" and no Deviations
// are listed. Interleaved is a candidate only when v > 1 (with v = 1 it is
// 1F1B, identified as "1f1b"). Job.Schedule keeps what the metadata says.
type Conformance struct {
	Identified string // gpipe, 1f1b, interleaved, zb-h1, or "" when none fits
	Virtual    int    // chunks per stage of the identified schedule; 0 when none
	// Candidates lists every schedule compared, best first (the order the
	// tie-break gives); Candidates[0] is the identified one when there is
	// one. Empty when the trace has no compute ops to compare.
	Candidates []ScheduleMatch
	// DeviationCount is the number of out-of-order ops against the
	// identified schedule over all ranks and steps (missing and extra ops
	// are Violations, not deviations).
	DeviationCount int
	// Deviations lists the first MaxDeviationsPerRank out-of-order ops of
	// each rank (earliest steps first), sorted by step, rank and index.
	Deviations []Deviation
	// ViolationCount is the number of violations found; ViolationCounts
	// splits it by Violation.Code.
	ViolationCount  int
	ViolationCounts map[string]int
	// Violations lists the first MaxViolationsPerCode violations of each
	// code (in step, pipeline, rank order), sorted by step, rank, code,
	// micro-batch and op.
	Violations []Violation
}

// ScheduleMatch is how well one candidate schedule fits the trace's compute
// order (see Conformance for the definitions).
type ScheduleMatch struct {
	Name      string  // the schedule (schedule.Names)
	Virtual   int     // chunks per stage it was built with
	Ops       int     // ops compared: matched + extra + missing
	Deviating int     // extra + missing + out of order
	Fraction  float64 // Deviating / Ops, in [0, 1]; 0 when Ops is 0
}

// Deviation is one out-of-order op: a compute op the rank ran at another
// place than the identified schedule puts it.
type Deviation struct {
	Step  int64
	Rank  int
	Stage int
	// Index is the op's position (from 0) in the rank's compute order (F,
	// B, W) within the step.
	Index int
	// Want is the op the schedule runs at this position once ops missing
	// from the trace and extra ops are set aside, and Got the op the trace
	// has there, both in schedule.Action notation ("F3", "B2c1"). For two
	// swapped ops the earlier one is the deviation: want B0, got F2 for F2
	// run before B0.
	Want string
	Got  string
}

// Violation is a break of synchronous training's rules.
//
// A rank finished a step when it recorded an OPT or OPT_SKIP row in it, a
// row in a later step, or when every event of the step's window ended.
// A rank that did not finish (blocked in a hang, crashed) is only held to
// the ops before its last recorded one: ops the identified schedule puts
// after everything the rank ran never got to run and are not missing. A
// rank with no row in a window is not checked there (its absence is the
// hang analysis' rank_absent).
type Violation struct {
	// Code is one of the Violation codes: f_before_opt, missing_op,
	// duplicate_op, optimizer_skip_mismatch, microbatch_count.
	Code       string
	Step       int64
	Pipeline   int
	Stage      int    // -1 when the violation is not one stage's
	Rank       int    // the rank concerned, the first of Ranks; -1 when none
	Ranks      []int  // optimizer_skip_mismatch: the odd ranks, ascending
	MicroBatch int    // -1 when none
	Op         string // the op concerned in schedule.Action notation ("F3", "B2c1"); "" when none
	Message    string // one sentence
}

// Violation codes (Violation.Code).
const (
	// ViolationFBeforeOpt: an F of step s+1 started on a rank before that
	// rank's OPT (or OPT_SKIP) of step s ended. An OPT that never ended
	// is left to the hang analysis; only consecutive analysed steps are
	// compared.
	ViolationFBeforeOpt = "f_before_opt"
	// ViolationMissingOp: a rank did not run the F or B (or W, when the
	// trace records W) of a micro-batch for one of its chunks, where it
	// is accountable for it (see Violation). The step's micro-batches are
	// 0 .. m-1 with m = 1 + the largest micro-batch of the window's
	// compute rows; for a window with a pending event, at least the
	// metadata's micro-batches and the largest m of a complete window.
	ViolationMissingOp = "missing_op"
	// ViolationDuplicateOp: a rank ran the same (kind, micro-batch, chunk)
	// more than once in a step.
	ViolationDuplicateOp = "duplicate_op"
	// ViolationOptimizerSkipMismatch: in one step some ranks recorded
	// OPT_SKIP and others OPT; the odd ranks (the smaller group, the
	// skipping ones on a tie) are named.
	ViolationOptimizerSkipMismatch = "optimizer_skip_mismatch"
	// ViolationMicroBatchCount: a stage whose ranks all finished the step
	// ran F for fewer distinct micro-batches than the step's m; or (Stage
	// -1) in a window where every event ended, m differs from the
	// metadata's microbatches.
	ViolationMicroBatchCount = "microbatch_count"
)

// Limits of the conformance pass.
const (
	// MaxDeviatingFraction is the largest deviating fraction (see
	// Conformance) at which a schedule is still identified.
	MaxDeviatingFraction = 0.25
	// MaxDeviationsPerRank bounds Conformance.Deviations per rank.
	MaxDeviationsPerRank = 8
	// MaxViolationsPerCode bounds Conformance.Violations per code.
	MaxViolationsPerCode = 32
)

// conformanceOptSkip is the kind a rank records when it skips its optimizer
// step (sim.KindOptSkip).
var conformanceOptSkip = trace.MustKind("OPT_SKIP")

// conformanceMaxActions bounds p*m*v of a candidate schedule (see sizeOK).
const conformanceMaxActions = 1 << 21

// conformanceRank is one rank's rows in one window.
//
// The state keeps each window's ranks without their rows (rows nil, opt a
// row of a chunk no longer at hand: only opt < 0 means anything); the
// passes that need rows group them again (conformanceState.group).
type conformanceRank struct {
	rank     trace.Rank
	stage    int
	rows     []int // the rank's rows in the window, in seq order
	lo, hi   int   // rows is the window's rows[lo:hi] when the window's rows are grouped by rank (conformanceWindow.sliced)
	opt      int   // its last OPT or OPT_SKIP row; -1 when none
	optKind  trace.Kind
	optEnd   int64 // the end of that row (NoTime when none)
	finished bool
}

// conformanceWindow is one window's rows grouped by rank.
type conformanceWindow struct {
	g      *window
	ranks  []conformanceRank // by rank
	sliced bool              // the window's rows are grouped by rank: each rank's rows are g.rows[lo:hi]
	mSeen  int               // 1 + the largest micro-batch of a compute row; 0 when none
	m      int               // micro-batches the window is compared with; 0: not compared
	labels int               // 3*v*m: size of a label table
}

// conformanceState is what the pass shares between its steps.
type conformanceState struct {
	ix      *index
	best    *conformanceCand // identify's result
	events  int              // rows of the whole trace
	p, v    int
	split   bool // the trace records W
	wins    []conformanceWindow
	byKey   map[[2]int64]int // (step, pipeline) -> index in wins
	metaM   int
	metaSch string
}

// analyzeConformance fills Report.Schedule:
//
//  1. group each window's rows by rank and size its micro-batches;
//  2. score every candidate schedule and pick the identified one, with its
//     deviations;
//  3. check the synchronous-training rules (Violation).
//
// Each step visits the windows once (Run visits them together with other
// passes' visits): conformanceCollect, identifyVisit, checkSyncVisit.
func analyzeConformance(ix *index, rep *Report) {
	cs, v := conformanceCollect(ix)
	ix.visit(v)
	ix.visit(cs.identifyVisit(&rep.Schedule))
	ix.visit(cs.checkSyncVisit(&rep.Schedule))
}

// conformanceCollect returns the state of step 1 and the visit that fills
// it.
func conformanceCollect(ix *index) (*conformanceState, visit) {
	cs := &conformanceState{ix: ix, events: ix.tot.events, p: ix.p, v: 1, byKey: map[[2]int64]int{},
		metaM: ix.tot.meta.MicroBatches, metaSch: ix.tot.meta.Schedule}
	cs.wins = make([]conformanceWindow, len(ix.windows))
	vs := make([]int, workers(len(ix.windows)))
	splits := make([]bool, len(vs))
	return cs, visit{window: func(w, wi int) {
		g := ix.windows[wi]
		cw := conformanceWindow{g: g}
		var v int
		var split bool
		cw.ranks, cw.mSeen, v, split = cs.group(g)
		cw.sliced = len(cw.ranks) == 0 || len(cw.ranks[0].rows) == 0 || &cw.ranks[0].rows[0] == &g.rows[cw.ranks[0].lo]
		for k := range cw.ranks {
			cw.ranks[k].rows = nil
		}
		cs.wins[wi] = cw
		vs[w] = max(vs[w], v)
		splits[w] = splits[w] || split
	}, finish: func() { cs.size(vs, splits) }}
}

// size ends step 1: v, whether W is recorded, and each window's m.
func (cs *conformanceState) size(vs []int, splits []bool) {
	for w := range vs {
		cs.v = max(cs.v, vs[w])
		cs.split = cs.split || splits[w]
	}
	mComplete := 0
	for wi, cw := range cs.wins {
		if cw.g.measured.Complete {
			mComplete = max(mComplete, cw.mSeen)
		}
		cs.byKey[[2]int64{cw.g.step, int64(cw.g.pipeline)}] = wi
	}
	// Size each window: what it ran when complete; otherwise at least what
	// the metadata and the complete windows say (the rest never got to run).
	for k := range cs.wins {
		cw := &cs.wins[k]
		m := cw.mSeen
		if !cw.g.measured.Complete && m > 0 {
			if m2 := max(m, cs.metaM, mComplete); cs.sizeOK(m2) {
				m = m2
			}
		}
		if m > 0 && cs.sizeOK(m) {
			cw.m = m
			cw.labels = 3 * cs.v * m
		}
	}
}

// group splits window g's rows (at hand) by rank, with each rank's last
// optimizer row and whether it finished the window; it also returns
// 1 + the largest micro-batch and chunk of its compute rows (0 when none)
// and whether it records W.
func (cs *conformanceState) group(g *window) (ranks []conformanceRank, mSeen, v int, split bool) {
	t := g.t
	ranks = conformanceGroup(t, g.rows, g.sorted, cs.p)
	for k := range ranks {
		r := &ranks[k]
		for _, i := range r.rows {
			switch kd := t.Kind[i]; {
			case kd == trace.Opt || kd == conformanceOptSkip:
				r.opt = i
			case kd.IsCompute() && t.MicroBatch[i] >= 0:
				mSeen = max(mSeen, int(t.MicroBatch[i])+1)
				v = max(v, int(t.Chunk[i])+1)
				if kd == trace.W {
					split = true
				}
			}
		}
		r.optEnd = trace.NoTime
		if r.opt >= 0 {
			r.optKind, r.optEnd = t.Kind[r.opt], t.EndNs[r.opt]
		}
		r.finished = r.opt >= 0 || g.measured.Complete || cs.ix.tot.lastStep[r.rank] > g.step
	}
	return ranks, mSeen, v, split
}

// ranksOf returns window wi's ranks with their rows (the window at hand),
// as group does: the ranks kept by step 1 with their rows sliced again
// when the window's rows are grouped by rank (no second grouping), else
// grouped anew. dst is reused.
func (cs *conformanceState) ranksOf(wi int, dst []conformanceRank) []conformanceRank {
	cw := &cs.wins[wi]
	if !cw.sliced {
		ranks, _, _, _ := cs.group(cw.g)
		return ranks
	}
	dst = append(dst[:0], cw.ranks...)
	for k := range dst {
		dst[k].rows = cw.g.rows[dst[k].lo:dst[k].hi:dst[k].hi]
	}
	return dst
}

// sizeOK reports whether a window can be compared with schedules of m
// micro-batches: p*m*v must stay within conformanceMaxActions and, above
// 1<<16, within the trace's row count (a complete step has about 6*p*m*v
// rows per replica); larger ids are taken for garbage.
func (cs *conformanceState) sizeOK(m int) bool {
	n := int64(cs.p) * int64(m) * int64(cs.v)
	return n <= conformanceMaxActions && (n <= 1<<16 || n <= int64(cs.events))
}

// conformanceGroup splits a window's rows by rank, keeping each rank's rows
// in trace (seq) order. Rows already grouped by rank (a trace sorted by
// rank and seq) are sliced without copying. A rank whose stage is outside
// [0, p) (a trace that skipped validation) is left out. sorted says the
// rows are known to be in (rank, seq) order (window.sorted).
func conformanceGroup(t *trace.Trace, rows []int, sorted bool, p int) []conformanceRank {
	if !sorted { // not known: check
		sorted = true
		for k := 1; k < len(rows); k++ {
			if t.Rank[rows[k]] < t.Rank[rows[k-1]] {
				sorted = false
				break
			}
		}
	}
	if !sorted {
		rows = slices.Clone(rows)
		slices.SortStableFunc(rows, func(a, b int) int { return cmp.Compare(t.Rank[a], t.Rank[b]) })
	}
	var out []conformanceRank
	for lo := 0; lo < len(rows); {
		hi := lo + 1
		for hi < len(rows) && t.Rank[rows[hi]] == t.Rank[rows[lo]] {
			hi++
		}
		i := rows[lo]
		if st := int(t.Stage[i]); st >= 0 && st < p {
			out = append(out, conformanceRank{rank: t.Rank[i], stage: st, rows: rows[lo:hi:hi], lo: lo, hi: hi, opt: -1})
		}
		lo = hi
	}
	return out
}

// conformanceLabel numbers the op (kind, micro-batch, chunk) in a table of
// 3*v*m labels: -1 when it is not a compute op or out of range.
func conformanceLabel(k trace.Kind, mb, chunk, m, v int) int {
	var ki int
	switch k {
	case trace.F:
		ki = 0
	case trace.B:
		ki = 1
	case trace.W:
		ki = 2
	default:
		return -1
	}
	if mb < 0 || mb >= m || chunk < 0 || chunk >= v {
		return -1
	}
	return (ki*v+chunk)*m + mb
}

// conformanceOp renders row i in schedule.Action notation ("F3", "B2c1").
func conformanceOp(t *trace.Trace, i int) string {
	return schedule.Action{Kind: t.Kind[i], MicroBatch: int(t.MicroBatch[i]), Chunk: int(t.Chunk[i]), Peer: -1}.String()
}

// conformanceSched is one candidate schedule for one m, reduced to what the
// comparison needs.
type conformanceSched struct {
	m, v  int
	split bool
	acts  [][]schedule.Action // [stage]: its compute actions, in order
	pos   [][]int32           // [stage][label]: index in acts, -1 when absent
}

// posOf is the index in acts[stage] of the action (kind, micro-batch,
// chunk), -1 when the schedule has none: labels are numbered with the
// schedule's own v, which a trace's chunk ids need not respect (a chunk id
// of 1 in a trace identified as 1F1B).
func (s *conformanceSched) posOf(stage int, k trace.Kind, mb, chunk int) int32 {
	l := conformanceLabel(k, mb, chunk, s.m, s.v)
	if l < 0 || stage < 0 || stage >= len(s.pos) {
		return -1
	}
	return s.pos[stage][l]
}

func newConformanceSched(name string, p, m, v int) *conformanceSched {
	s, err := schedule.New(name, p, m, v)
	if err != nil {
		return nil
	}
	cs := &conformanceSched{m: m, v: v, split: s.SplitBackward, acts: make([][]schedule.Action, p), pos: make([][]int32, p)}
	for st, acts := range s.Actions {
		pos := make([]int32, 3*v*m)
		for k := range pos {
			pos[k] = -1
		}
		var ca []schedule.Action
		for _, a := range acts {
			if !a.Kind.IsCompute() {
				continue
			}
			if l := conformanceLabel(a.Kind, a.MicroBatch, a.Chunk, m, v); l >= 0 && pos[l] < 0 {
				pos[l] = int32(len(ca))
			}
			ca = append(ca, a)
		}
		cs.acts[st], cs.pos[st] = ca, pos
	}
	return cs
}

// conformanceCand accumulates one candidate's score over the trace.
type conformanceCand struct {
	name    string
	v       int
	scheds  map[int]*conformanceSched // by m
	invalid bool                      // cannot be built for some window's m
	order   int                       // tie-break rank

	matched, extra, missing, outOfOrder int

	devs    []pendingDeviation // the first MaxDeviationsPerRank of each rank
	devN    int
	perRank map[trace.Rank]int
}

func (c *conformanceCand) sched(p, m int) *conformanceSched {
	s, ok := c.scheds[m]
	if !ok {
		s = newConformanceSched(c.name, p, m, c.v)
		c.scheds[m] = s
	}
	return s
}

func (c *conformanceCand) match() ScheduleMatch {
	ops := c.matched + c.extra + c.missing
	dev := c.extra + c.missing + c.outOfOrder
	sm := ScheduleMatch{Name: c.name, Virtual: c.v, Ops: ops, Deviating: dev}
	if ops > 0 {
		sm.Fraction = float64(dev) / float64(ops)
	}
	return sm
}

// conformanceScratch holds the buffers compare reuses.
type conformanceScratch struct {
	used  []bool
	seq   []int32 // schedule positions of the matched ops, trace order
	at    []int32 // their index in the rank's compute order
	tails []int32
	prev  []int32
	keep  []bool
	want  []int32 // the matched positions in schedule order
}

// conformanceResult is one rank-step compared with one schedule.
type conformanceResult struct {
	matched, extra, missing, outOfOrder int
}

// rankLabels returns the labels (conformanceLabel with m, v) of rank r's
// compute rows with a micro-batch, in order, and those rows, appended to
// labs and lrows: what compare reads.
func rankLabels(t *trace.Trace, r *conformanceRank, m, v int, labs, lrows []int32) ([]int32, []int32) {
	return rowLabels(t, r.rows, m, v, labs, lrows)
}

// rowLabels is rankLabels of the rows given (a rank's rows, or only its
// compute rows).
func rowLabels(t *trace.Trace, rows []int, m, v int, labs, lrows []int32) ([]int32, []int32) {
	kinds, mbs, chunks := t.Kind, t.MicroBatch, t.Chunk
	for _, i := range rows {
		if !kinds[i].IsCompute() || mbs[i] < 0 {
			continue
		}
		labs = append(labs, int32(conformanceLabel(kinds[i], int(mbs[i]), int(chunks[i]), m, v)))
		lrows = append(lrows, int32(i))
	}
	return labs, lrows
}

// compare scores rank r (finished or not) against stage list cs and calls
// dev for each of the first maxDev out-of-order ops (dev nil: only count).
// labs and lrows are the rank's labels with cs's m and v and their rows
// (rankLabels). See Conformance.
func (sc *conformanceScratch) compare(r *conformanceRank, labs, lrows []int32, cs *conformanceSched, maxDev int, dev func(index, row int, want schedule.Action)) conformanceResult {
	var res conformanceResult
	acts, pos := cs.acts[r.stage], cs.pos[r.stage]
	if cap(sc.used) < len(acts) {
		sc.used = make([]bool, len(acts))
	}
	used := sc.used[:len(acts)]
	sc.seq, sc.at = sc.seq[:0], sc.at[:0]
	reach := int32(-1)
	for n, l := range labs {
		if l < 0 || pos[l] < 0 || used[pos[l]] {
			res.extra++
		} else {
			ps := pos[l]
			used[ps] = true
			reach = max(reach, ps)
			sc.seq = append(sc.seq, ps)
			sc.at = append(sc.at, int32(n))
		}
	}
	res.matched = len(sc.seq)
	sc.want = sc.want[:0]
	for ps := range used {
		if used[ps] {
			sc.want = append(sc.want, int32(ps))
			used[ps] = false
		} else if r.finished || int32(ps) < reach {
			res.missing++
		}
	}
	// Longest increasing subsequence of seq (positions are distinct):
	// tails[k] is the index in seq of the smallest tail of an increasing
	// run of length k+1; prev links each element to its predecessor.
	sc.tails, sc.prev = sc.tails[:0], sc.prev[:0]
	for k, x := range sc.seq {
		lo, hi := 0, len(sc.tails)
		if hi > 0 && sc.seq[sc.tails[hi-1]] < x {
			lo = hi // extends the longest run: ops in order, the common case
		}
		for lo < hi {
			mid := (lo + hi) / 2
			if sc.seq[sc.tails[mid]] < x {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		p := int32(-1)
		if lo > 0 {
			p = sc.tails[lo-1]
		}
		sc.prev = append(sc.prev, p)
		if lo == len(sc.tails) {
			sc.tails = append(sc.tails, int32(k))
		} else {
			sc.tails[lo] = int32(k)
		}
	}
	res.outOfOrder = len(sc.seq) - len(sc.tails)
	if res.outOfOrder == 0 || dev == nil {
		return res
	}
	if cap(sc.keep) < len(sc.seq) {
		sc.keep = make([]bool, len(sc.seq))
	}
	keep := sc.keep[:len(sc.seq)]
	clear(keep)
	for k := sc.tails[len(sc.tails)-1]; k >= 0; k = sc.prev[k] {
		keep[k] = true
	}
	for k := range sc.seq {
		if !keep[k] {
			if maxDev == 0 {
				break
			}
			maxDev--
			dev(int(sc.at[k]), int(lrows[sc.at[k]]), acts[sc.want[k]])
		}
	}
	return res
}

// identifyVisit is step 2: it fills Identified, Virtual, Candidates and
// the deviations (resetting out first), and sets cs.best to the identified
// candidate (nil when none).
func (cs *conformanceState) identifyVisit(out *Conformance) visit {
	*out = Conformance{ViolationCounts: map[string]int{}}
	var cands []*conformanceCand
	for k, name := range schedule.Names {
		v := 1
		if name == schedule.InterleavedName {
			if cs.v < 2 {
				continue
			}
			v = cs.v
		}
		c := &conformanceCand{name: name, v: v, scheds: map[int]*conformanceSched{}, perRank: map[trace.Rank]int{}, order: k + 1}
		if name == cs.metaSch {
			c.order = 0
		}
		cands = append(cands, c)
	}
	// Build every candidate's schedules first (the windows' m values), so
	// the windows can be compared in parallel against read-only tables.
	compared := false
	for _, cw := range cs.wins {
		if cw.m == 0 {
			continue
		}
		compared = true
		for _, c := range cands {
			if !c.invalid && c.sched(cs.p, cw.m) == nil {
				c.invalid = true
			}
		}
	}
	// Per window and candidate: counts, and the first deviations of each
	// rank (a rank appears once in a window). They are added up in window
	// order, so the per-rank cap keeps the same deviations as a serial pass.
	per := make([][]candWindow, len(cs.wins))
	scs := make([]conformanceScratch, workers(len(cs.wins)))
	// Labels depend on the window's m and the candidate's v: computed
	// once per rank and v.
	var vs []int
	for _, c := range cands {
		if !slices.Contains(vs, c.v) {
			vs = append(vs, c.v)
		}
	}
	type labelScratch struct {
		ranks []conformanceRank
		labs  [][]int32 // per v in vs
		rows  []int32
		off   []int // per rank: first label
		// The worker's window before: compare reads only a rank's labels,
		// stage and whether it finished, and the window's m, so a window
		// whose ranks have the same (the next step of the same pipeline,
		// as a rule: forWindows hands windows out pipeline by pipeline)
		// has the same results, which it takes where it keeps no
		// deviations (only counts).
		prevOK   bool
		prevM    int
		prevLabs [][]int32
		prevOff  []int
		prevRank [][2]int              // stage, finished
		prevRes  [][]conformanceResult // [candidate][rank]
	}
	lscs := make([]labelScratch, len(scs))
	full := fullWindows(cs.ix.tot, len(cands))
	window := func(w, wi int) {
		cw := &cs.wins[wi]
		t := cw.g.t
		ls := &lscs[w]
		ls.ranks = cs.ranksOf(wi, ls.ranks)
		ranks := ls.ranks
		if len(ls.labs) < len(vs) {
			ls.labs, ls.prevLabs = make([][]int32, len(vs)), make([][]int32, len(vs))
			ls.prevRes = make([][]conformanceResult, len(cands))
		}
		// This window's labels go where the window before's before it were.
		ls.labs, ls.prevLabs = ls.prevLabs, ls.labs
		ls.off, ls.prevOff = ls.prevOff, ls.off
		// When the window's rows are grouped by rank, its compute rows
		// (in the same order) are too: each rank's are read from them.
		var comp []int
		if cw.sliced {
			comp = cs.ix.computeRows(w, wi)
		}
		ls.off = ls.off[:0]
		for x, v := range vs {
			ls.labs[x], ls.rows = ls.labs[x][:0], ls.rows[:0]
			c := 0
			for k := range ranks {
				if x == 0 {
					ls.off = append(ls.off, len(ls.labs[x]))
				}
				if comp == nil {
					ls.labs[x], ls.rows = rankLabels(t, &ranks[k], cw.m, v, ls.labs[x], ls.rows)
					continue
				}
				rk := ranks[k].rank
				for c < len(comp) && t.Rank[comp[c]] < rk {
					c++ // a rank left out (stage out of range)
				}
				lo := c
				for c < len(comp) && t.Rank[comp[c]] == rk {
					c++
				}
				ls.labs[x], ls.rows = rowLabels(t, comp[lo:c], cw.m, v, ls.labs[x], ls.rows)
			}
		}
		ls.off = append(ls.off, len(ls.rows))
		same := identifyReuse && ls.prevOK && ls.prevM == cw.m && len(ls.prevRank) == len(ranks) && slices.Equal(ls.off, ls.prevOff)
		for k := 0; same && k < len(ranks); k++ {
			same = ls.prevRank[k] == [2]int{ranks[k].stage, b2i(ranks[k].finished)}
		}
		for x := 0; same && x < len(vs); x++ {
			same = slices.Equal(ls.labs[x], ls.prevLabs[x])
		}
		if same {
			identifyReused.Add(1)
		}
		ls.prevOK, ls.prevM, ls.prevRank = true, cw.m, ls.prevRank[:0]
		for k := range ranks {
			ls.prevRank = append(ls.prevRank, [2]int{ranks[k].stage, b2i(ranks[k].finished)})
		}
		out := make([]candWindow, len(cands))
		for ci, c := range cands {
			if c.invalid {
				continue
			}
			s := c.scheds[cw.m]
			labs := ls.labs[slices.Index(vs, c.v)]
			cr := &out[ci]
			if !same {
				ls.prevRes[ci] = grow(ls.prevRes[ci], len(ranks))
			}
			prev := ls.prevRes[ci]
			for k := range ranks {
				r := &ranks[k]
				dev := func(index, row int, want schedule.Action) {
					cr.devs = append(cr.devs, pendingDeviation{step: cw.g.step, rank: int32(r.rank), stage: int32(r.stage), index: int32(index),
						want: compactOf(want), got: compactAction{kind: t.Kind[row], mb: int32(t.MicroBatch[row]), chunk: int32(t.Chunk[row]), peer: -1}})
				}
				if full.before(ci, r.rank, wi) {
					dev = nil // an earlier window kept all of r's deviations: count only
				}
				var res conformanceResult
				if same && dev == nil {
					res = prev[k]
				} else {
					lo, hi := ls.off[k], ls.off[k+1]
					res = scs[w].compare(r, labs[lo:hi], ls.rows[lo:hi], s, MaxDeviationsPerRank, dev)
					prev[k] = res
				}
				if dev != nil && res.outOfOrder >= MaxDeviationsPerRank {
					full.set(ci, r.rank, wi)
				}
				cr.devN += res.outOfOrder // one deviation per out-of-order op, the first few kept
				cr.res.matched += res.matched
				cr.res.extra += res.extra
				cr.res.missing += res.missing
				cr.res.outOfOrder += res.outOfOrder
			}
		}
		per[wi] = out
	}
	return visit{want: func(wi int) bool { return cs.wins[wi].m != 0 }, window: window, finish: func() {
		cs.best = cs.rank(out, cands, per, compared)
	}}
}

// identifyReuse lets identifyVisit reuse the window before's comparisons
// (tests turn it off to compare); identifyReused counts the windows that
// did.
var (
	identifyReuse  = true
	identifyReused atomic.Int64
)

// fullWindowSet records, per candidate and rank, the first window (index
// into conformanceState.wins) whose comparison alone kept
// MaxDeviationsPerRank deviations of the rank. rank keeps a rank's first
// MaxDeviationsPerRank deviations in window order, so a later window's
// would never be kept: identifyVisit only counts them. Without it, a
// fleet job keeps a list for every window, rank and candidate it does not
// run (most ranks deviate from those in every window): on the 302M-event
// fleet trace, 1.26 GB more at the peak, to report 8 per rank. Windows
// are compared in parallel; the record is the least window that filled a
// rank, whatever the order they finish in.
type fullWindowSet [][]atomic.Int32 // [candidate][rank]: window + 1; 0 none

// fullWindowsMaxRank bounds the ranks a fullWindowSet has room for (4 bytes
// per rank and candidate); a trace of larger rank numbers keeps every
// window's deviations, as before.
var fullWindowsMaxRank trace.Rank = 1 << 20 // a variable for the tests

// fullWindows has room for the ranks of tot, for cands candidates
// (none, and nothing recorded, past fullWindowsMaxRank).
func fullWindows(tot *scanTotals, cands int) fullWindowSet {
	top := trace.Rank(-1)
	for r := range tot.ranks {
		top = max(top, r)
	}
	if top < 0 || top >= fullWindowsMaxRank {
		return nil
	}
	f := make(fullWindowSet, cands)
	for ci := range f {
		f[ci] = make([]atomic.Int32, top+1)
	}
	return f
}

// before reports whether a window before wi kept all of rank r's
// deviations from candidate ci.
func (f fullWindowSet) before(ci int, r trace.Rank, wi int) bool {
	if f == nil || int(r) >= len(f[ci]) || r < 0 {
		return false
	}
	w := f[ci][r].Load()
	return w != 0 && int(w-1) < wi
}

// set records that window wi kept all of rank r's deviations from ci.
func (f fullWindowSet) set(ci int, r trace.Rank, wi int) {
	if f == nil || int(r) >= len(f[ci]) || r < 0 {
		return
	}
	a := &f[ci][r]
	for {
		old := a.Load()
		if old != 0 && int(old-1) <= wi || a.CompareAndSwap(old, int32(wi+1)) {
			return
		}
	}
}

// candWindow is one window's comparison with one candidate.
type candWindow struct {
	res  conformanceResult
	devN int
	devs []pendingDeviation
}

// pendingDeviation is a Deviation whose Want and Got are not rendered yet
// (most are never reported: every candidate schedule keeps up to
// MaxDeviationsPerRank of every rank, and only the identified one's are),
// in 56 bytes instead of the 128 of a Deviation and two Actions: the
// fresh memory a 4096-rank trace's comparisons fill.
type pendingDeviation struct {
	step               int64
	rank, stage, index int32
	want, got          compactAction
}

// deviation is pd as reported.
func (pd pendingDeviation) deviation() Deviation {
	return Deviation{Step: pd.step, Rank: int(pd.rank), Stage: int(pd.stage), Index: int(pd.index),
		Want: pd.want.action().String(), Got: pd.got.action().String()}
}

// compactAction is a schedule.Action in 16 bytes (a schedule's
// micro-batches, chunks and stages are bounded by conformanceMaxActions;
// a trace's are int32).
type compactAction struct {
	kind            trace.Kind
	mb, chunk, peer int32
}

func compactOf(a schedule.Action) compactAction {
	return compactAction{kind: a.Kind, mb: int32(a.MicroBatch), chunk: int32(a.Chunk), peer: int32(a.Peer)}
}

func (a compactAction) action() schedule.Action {
	return schedule.Action{Kind: a.kind, MicroBatch: int(a.mb), Chunk: int(a.chunk), Peer: int(a.peer)}
}

// rank adds up the windows' comparisons (per, in window order) and picks
// the identified candidate.
func (cs *conformanceState) rank(out *Conformance, cands []*conformanceCand, per [][]candWindow, compared bool) *conformanceCand {
	for _, out := range per {
		for ci, cr := range out {
			c := cands[ci]
			if c.invalid {
				continue
			}
			c.matched += cr.res.matched
			c.extra += cr.res.extra
			c.missing += cr.res.missing
			c.outOfOrder += cr.res.outOfOrder
			c.devN += cr.devN
		}
	}
	if !compared {
		return nil
	}
	order := make(map[*conformanceCand]int, len(cands)) // index in per's lists
	for ci, c := range cands {
		order[c] = ci
	}
	cands = slices.DeleteFunc(slices.Clone(cands), func(c *conformanceCand) bool { return c.invalid })
	slices.SortStableFunc(cands, func(a, b *conformanceCand) int {
		ma, mb := a.match(), b.match()
		// Compare fractions exactly: dev_a/ops_a vs dev_b/ops_b.
		x, y := int64(ma.Deviating)*int64(max(mb.Ops, 1)), int64(mb.Deviating)*int64(max(ma.Ops, 1))
		return cmp.Or(cmp.Compare(x, y), cmp.Compare(a.order, b.order))
	})
	for _, c := range cands {
		out.Candidates = append(out.Candidates, c.match())
	}
	if len(cands) == 0 || cands[0].match().Fraction > MaxDeviatingFraction || cands[0].match().Ops == 0 {
		return nil
	}
	best := cands[0]
	out.Identified, out.Virtual = best.name, best.v
	out.DeviationCount = best.outOfOrder
	// Only the identified candidate's deviations are kept, in window
	// order, up to MaxDeviationsPerRank a rank: the other candidates'
	// were 0.2 s of appending on the 4096-rank trace, never read.
	bi := order[best]
	for _, out := range per {
		if bi >= len(out) {
			continue
		}
		for _, pd := range out[bi].devs {
			if best.perRank[trace.Rank(pd.rank)] >= MaxDeviationsPerRank {
				continue
			}
			best.perRank[trace.Rank(pd.rank)]++
			best.devs = append(best.devs, pd)
		}
	}
	// Only the identified candidate's deviations are reported: only
	// theirs are written out.
	for _, pd := range best.devs {
		out.Deviations = append(out.Deviations, pd.deviation())
	}
	slices.SortStableFunc(out.Deviations, func(a, b Deviation) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.Index, b.Index))
	})
	return best
}

// conformanceViolations collects violations with the per-code cap.
type conformanceViolations struct {
	count  int
	counts map[string]int
	kept   []Violation // the first MaxViolationsPerCode of each code, in the order added
	shown  map[string]int
}

func newConformanceViolations() *conformanceViolations {
	return &conformanceViolations{counts: map[string]int{}, shown: map[string]int{}}
}

func (cv *conformanceViolations) add(v Violation) {
	cv.count++
	cv.counts[v.Code]++
	if cv.shown[v.Code] >= MaxViolationsPerCode {
		return
	}
	cv.shown[v.Code]++
	cv.kept = append(cv.kept, v)
}

// tally is add of a violation of code that cv would not keep (full):
// counted, and its message never made. A window whose ranks miss most of
// a large schedule's ops (a chunk id past the others, bad input) made
// thousands of messages a rank, for the few the report shows.
func (cv *conformanceViolations) tally(code string) {
	cv.count++
	cv.counts[code]++
}

// full reports whether cv keeps no more violations of code.
func (cv *conformanceViolations) full(code string) bool {
	return cv.shown[code] >= MaxViolationsPerCode
}

// merge adds the violations of o after those of cv, as if they had been
// added to cv one by one.
func (cv *conformanceViolations) merge(o *conformanceViolations) {
	cv.count += o.count
	for code, n := range o.counts {
		cv.counts[code] += n
	}
	for _, v := range o.kept {
		if cv.shown[v.Code] < MaxViolationsPerCode {
			cv.shown[v.Code]++
			cv.kept = append(cv.kept, v)
		}
	}
}

// checkSyncVisit is step 3: the synchronous-training rules of Violation
// (against cs.best, the identified schedule), window by window, then the
// optimizer decision step by step.
func (cs *conformanceState) checkSyncVisit(out *Conformance) visit {
	// Windows are checked in parallel, each into its own list; the lists
	// are merged in window order, so the per-code cap keeps what a serial
	// pass keeps.
	per := make([]*conformanceViolations, len(cs.wins))
	scs := make([]syncScratch, workers(len(cs.wins)))
	return visit{window: func(w, k int) {
		per[k] = newConformanceViolations()
		scs[w].ranks = cs.ranksOf(k, scs[w].ranks)
		ranks := scs[w].ranks
		cs.checkWindow(per[k], cs.wins[k], ranks, cs.best, &scs[w])
	}, finish: func() { cs.syncFinish(out, per) }}
}

func (cs *conformanceState) syncFinish(out *Conformance, per []*conformanceViolations) {
	cv := newConformanceViolations()
	for _, o := range per {
		cv.merge(o)
	}
	cs.checkOptSkip(cv)
	out.ViolationCount = cv.count
	for code, n := range cv.counts {
		out.ViolationCounts[code] += n
	}
	out.Violations = cv.kept
	slices.SortStableFunc(out.Violations, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.Rank, b.Rank), strings.Compare(a.Code, b.Code),
			cmp.Compare(a.MicroBatch, b.MicroBatch), strings.Compare(a.Op, b.Op))
	})
}

// syncScratch holds the buffers checkWindow reuses.
type syncScratch struct {
	ranks []conformanceRank
	cnt   []int32
	seenF []bool
}

// checkWindow checks the synchronous-training rules of Violation on one
// window.
// ranks are cw's ranks with their rows.
func (cs *conformanceState) checkWindow(cv *conformanceViolations, cw conformanceWindow, ranks []conformanceRank, best *conformanceCand, sc *syncScratch) {
	t := cw.g.t
	cnt, seenF := sc.cnt, sc.seenF
	defer func() { sc.cnt, sc.seenF = cnt, seenF }()
	g := cw.g
	cs.checkFBeforeOpt(cv, cw, ranks)
	if cw.m == 0 {
		return
	}
	var sched *conformanceSched
	if best != nil {
		sched = best.scheds[cw.m]
	}
	if cap(cnt) < cw.labels {
		cnt = make([]int32, cw.labels)
	}
	cnt = cnt[:cw.labels]
	if n := cs.p * cw.m; cap(seenF) < n {
		seenF = make([]bool, n)
	}
	seenF = seenF[:cs.p*cw.m]
	clear(seenF)
	stageState := make([]int8, cs.p) // 0: no rank, 1: all finished, -1: some did not
	kinds := []trace.Kind{trace.F, trace.B}
	if cs.split || sched != nil && sched.split {
		kinds = append(kinds, trace.W)
	}
	for k := range ranks {
		r := &ranks[k]
		if r.finished && stageState[r.stage] >= 0 {
			stageState[r.stage] = 1
		} else if !r.finished {
			stageState[r.stage] = -1
		}
		reach := int32(-1)
		for _, i := range r.rows {
			if !t.Kind[i].IsCompute() || t.MicroBatch[i] < 0 {
				continue
			}
			mb := int(t.MicroBatch[i])
			l := conformanceLabel(t.Kind[i], mb, int(t.Chunk[i]), cw.m, cs.v)
			if l < 0 {
				continue
			}
			cnt[l]++
			if cnt[l] == 2 {
				cv.add(Violation{Code: ViolationDuplicateOp, Step: g.step, Pipeline: int(g.pipeline), Stage: r.stage,
					Rank: int(r.rank), MicroBatch: mb, Op: conformanceOp(t, i),
					Message: fmt.Sprintf("rank %d ran %s of step %d more than once", r.rank, conformanceOp(t, i), g.step)})
			}
			if t.Kind[i] == trace.F {
				seenF[r.stage*cw.m+mb] = true
			}
			if sched != nil {
				if ps := sched.posOf(r.stage, t.Kind[i], mb, int(t.Chunk[i])); ps > reach {
					reach = ps
				}
			}
		}
		for _, kd := range kinds {
			for c := 0; c < cs.v; c++ {
				for mb := 0; mb < cw.m; mb++ {
					l := conformanceLabel(kd, mb, c, cw.m, cs.v)
					if cnt[l] > 0 {
						continue
					}
					ps := int32(-1)
					if sched != nil {
						ps = sched.posOf(r.stage, kd, mb, c)
					}
					passed := ps >= 0 && ps < reach
					if !r.finished && !passed {
						continue
					}
					if cv.full(ViolationMissingOp) {
						cv.tally(ViolationMissingOp)
						continue
					}
					op := schedule.Action{Kind: kd, MicroBatch: mb, Chunk: c, Peer: -1}.String()
					cv.add(Violation{Code: ViolationMissingOp, Step: g.step, Pipeline: int(g.pipeline), Stage: r.stage,
						Rank: int(r.rank), MicroBatch: mb, Op: op,
						Message: fmt.Sprintf("rank %d (stage %d) never ran %s of step %d", r.rank, r.stage, op, g.step)})
				}
			}
		}
		clear(cnt) // a table of 3*v*m labels: less than the rank's rows
	}
	for st := 0; st < cs.p; st++ {
		if stageState[st] != 1 {
			continue
		}
		n := 0
		for _, ok := range seenF[st*cw.m : (st+1)*cw.m] {
			if ok {
				n++
			}
		}
		if n < cw.m {
			cv.add(Violation{Code: ViolationMicroBatchCount, Step: g.step, Pipeline: int(g.pipeline), Stage: st, Rank: -1, MicroBatch: -1,
				Message: fmt.Sprintf("stage %d ran the forward of %d micro-batches in step %d (pipeline %d), the step has %d", st, n, g.step, g.pipeline, cw.m)})
		}
	}
	if g.measured.Complete && cs.metaM > 0 && cw.mSeen != cs.metaM {
		cv.add(Violation{Code: ViolationMicroBatchCount, Step: g.step, Pipeline: int(g.pipeline), Stage: -1, Rank: -1, MicroBatch: -1,
			Message: fmt.Sprintf("step %d (pipeline %d) ran %d micro-batches, the metadata says %d", g.step, g.pipeline, cw.mSeen, cs.metaM)})
	}
}

// checkFBeforeOpt adds an f_before_opt violation for each rank of cw whose
// earliest F started before its OPT of the previous step ended.
func (cs *conformanceState) checkFBeforeOpt(cv *conformanceViolations, cw conformanceWindow, ranks []conformanceRank) {
	t, g := cw.g.t, cw.g
	pi, ok := cs.byKey[[2]int64{g.step - 1, int64(g.pipeline)}]
	if !ok {
		return
	}
	prev := cs.wins[pi].ranks
	for k := range ranks {
		r := &ranks[k]
		j, found := slices.BinarySearchFunc(prev, r.rank, func(a conformanceRank, x trace.Rank) int { return cmp.Compare(a.rank, x) })
		if !found || prev[j].opt < 0 || prev[j].optEnd == trace.NoTime {
			continue
		}
		optKind, optEnd := prev[j].optKind, prev[j].optEnd
		first := -1
		for _, i := range r.rows {
			if t.Kind[i] == trace.F && t.StartNs[i] != trace.NoTime && (first < 0 || t.StartNs[i] < t.StartNs[first]) {
				first = i
			}
		}
		if first < 0 || t.StartNs[first] >= optEnd {
			continue
		}
		early := float64(optEnd-t.StartNs[first]) / 1e6
		cv.add(Violation{Code: ViolationFBeforeOpt, Step: g.step, Pipeline: int(g.pipeline), Stage: r.stage, Rank: int(r.rank),
			MicroBatch: int(t.MicroBatch[first]), Op: conformanceOp(t, first),
			Message: fmt.Sprintf("rank %d started %s of step %d %.4g ms before its %s of step %d ended", r.rank, conformanceOp(t, first), g.step, early, optKind, g.step-1)})
	}
}

// checkOptSkip adds an optimizer_skip_mismatch violation for each step in
// which some ranks' last optimizer row is OPT_SKIP and others' OPT.
func (cs *conformanceState) checkOptSkip(cv *conformanceViolations) {
	for lo := 0; lo < len(cs.wins); {
		step := cs.wins[lo].g.step
		hi := lo
		var skip, ran []int
		stageOf := map[int]int{}
		pipeOf := map[int]int{}
		for ; hi < len(cs.wins) && cs.wins[hi].g.step == step; hi++ {
			for _, r := range cs.wins[hi].ranks {
				if r.opt < 0 {
					continue
				}
				if r.optKind == conformanceOptSkip {
					skip = append(skip, int(r.rank))
				} else {
					ran = append(ran, int(r.rank))
				}
				stageOf[int(r.rank)], pipeOf[int(r.rank)] = r.stage, int(cs.wins[hi].g.pipeline)
			}
		}
		lo = hi
		if len(skip) == 0 || len(ran) == 0 {
			continue
		}
		odd, others, form := skip, ran, "in step %d %s skipped %s optimizer step (OPT_SKIP) while %s ran it"
		if len(ran) < len(skip) {
			odd, others, form = ran, skip, "in step %d %s ran %s optimizer step while %s skipped it (OPT_SKIP)"
		}
		slices.Sort(odd)
		first := odd[0]
		its := "its"
		if len(odd) > 1 {
			its = "their"
		}
		cv.add(Violation{Code: ViolationOptimizerSkipMismatch, Step: step, Pipeline: pipeOf[first], Stage: stageOf[first],
			Rank: first, Ranks: odd, MicroBatch: -1,
			Message: fmt.Sprintf(form, step, conformanceRanks(odd), its, conformancePlural(len(others), "rank"))})
	}
}

// conformanceRanks renders ranks as "rank 3" or "ranks 3, 5, 7" (the first
// eight, then how many more).
func conformanceRanks(rs []int) string {
	if len(rs) == 1 {
		return fmt.Sprintf("rank %d", rs[0])
	}
	var b strings.Builder
	b.WriteString("ranks ")
	for k, r := range rs {
		if k == 8 {
			fmt.Fprintf(&b, " and %d more", len(rs)-8)
			break
		}
		if k > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, r)
	}
	return b.String()
}

// conformancePlural renders "1 rank", "2 ranks".
func conformancePlural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// conformanceFindings reports, from Report.Schedule:
//
//   - SCHEDULE_DEVIATION (warning) when ops ran out of the identified
//     schedule's order, naming the first and the count;
//   - OPTIMIZER_SKIP_MISMATCH (error) when ranks disagreed on skipping the
//     optimizer step, naming the first step's odd ranks;
//   - SYNC_VIOLATION (error), one per violation code among f_before_opt,
//     missing_op, duplicate_op and microbatch_count, naming the first and
//     the count.
//
// ImpactMs is 0: these are correctness problems, and what an order change
// costs is not estimated.
func conformanceFindings(_ *index, rep *Report) []Finding {
	c := &rep.Schedule
	var out []Finding
	if c.DeviationCount > 0 && len(c.Deviations) > 0 {
		d := c.Deviations[0]
		out = append(out, Finding{Severity: "warning", Code: CodeScheduleDeviation,
			Message: fmt.Sprintf("%s ran out of the %s order; first: rank %d, step %d, compute op %d is %s where %s runs %s",
				conformancePlural(c.DeviationCount, "compute op"), c.Identified, d.Rank, d.Step, d.Index, d.Got, c.Identified, d.Want)})
	}
	firsts := map[string]Violation{}
	for _, v := range c.Violations {
		if _, ok := firsts[v.Code]; !ok {
			firsts[v.Code] = v
		}
	}
	codes := []string{ViolationOptimizerSkipMismatch, ViolationFBeforeOpt, ViolationMissingOp, ViolationDuplicateOp, ViolationMicroBatchCount}
	for _, code := range codes {
		v, ok := firsts[code]
		if !ok {
			continue
		}
		n := c.ViolationCounts[code]
		f := Finding{Severity: "error", Code: CodeSyncViolation}
		if code == ViolationOptimizerSkipMismatch {
			f.Code = CodeOptimizerSkipMismatch
			f.Message = fmt.Sprintf("%s, so the replicas' weights diverge (%s with a mismatch)", v.Message, conformancePlural(n, "step"))
		} else {
			f.Message = fmt.Sprintf("%s (%s in all)", v.Message, conformancePlural(n, code+" violation"))
		}
		out = append(out, f)
	}
	return out
}
