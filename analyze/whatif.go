package analyze

import (
	"fmt"
	"math"
	"slices"

	"github.com/ppprof/ppprof/internal/hugepage"
	"github.com/ppprof/ppprof/trace"
)

// WhatIfSchema is the value of the "schema" key of the JSON what-if.
const WhatIfSchema = "ppprof.whatif/v1"

// The what-if scenarios (DESIGN.md "Contracts"), in report order.
const (
	// ScenarioBalanced: every stage as fast as the median stage. Per kind
	// (F, B, W), a stage's typical duration is the median of its ops over
	// the replayed steps (all chunks, replicas and TP ranks); the target is
	// the median over stages of those. Every op of a stage slower than the
	// target is scaled by target / typical, so the op keeps its own jitter
	// and straggling; stages at or below the median keep their speed (a
	// what-if never slows anything down). It bounds what moving layers off
	// the slow stages can buy. Report.Imbalance.BalancedStepMs differs: it
	// scales every stage to the cross-stage mean, both ways (work
	// conserved, as a perfect repartition of the same model would).
	ScenarioBalanced = "balanced"
	// ScenarioNoStragglers: every compute op the straggler test flags (see
	// Straggler: median and MAD per (stage, chunk, kind), per token when
	// tokens are known) at its expected duration (a long sequence at its
	// group's typical duration); every other op as measured.
	ScenarioNoStragglers = "no_stragglers"
	// ScenarioFreeP2P: every point-to-point transfer takes no time; sends
	// and receives still order the ranks.
	ScenarioFreeP2P = "free_p2p"
	// ScenarioSlowWorkerFixed: the slowest worker (the ranks of one stage
	// in one pipeline replica: a slow GPU holds its TP peers back) restored
	// to its peers: the same stage in the other replicas. Per (chunk,
	// kind), F, B, W and the transfers it receives, its median is compared
	// with the median over its peers of theirs; the worker whose total (the
	// medians weighted by its op counts) exceeds its peers' by the largest
	// factor is the slowest, and each of its ops is scaled by peer median /
	// its median where that is below 1. Needs two replicas or more.
	ScenarioSlowWorkerFixed = "slow_worker_fixed"
	// ScenarioDoubleMicroBatches: twice the micro-batches at the same
	// global batch, so each micro-batch is half as large: the identified
	// schedule rebuilt with 2m micro-batches, every compute op at half the
	// median of its (stage, chunk, kind) and every transfer at half its
	// payload under the fitted P2P model (see p2pModel).
	ScenarioDoubleMicroBatches = "double_microbatches"
	// ScenarioInterleaveV2: interleaved 1F1B with two chunks per stage, each
	// chunk costing half of the stage's per-kind median (W folded into B),
	// transfers as measured per payload (chunks pass the same
	// activations).
	ScenarioInterleaveV2 = "interleave_v2"
	// ScenarioZBH1: ZB-H1, the backward split into B (input gradient) and W
	// (weight gradient). From a trace that records W, B and W are their
	// medians; otherwise B = W = half the measured backward (the zero-bubble
	// paper's T_B = T_W).
	ScenarioZBH1 = "zb_h1"
)

// ScenarioNames lists every scenario, in report order.
var ScenarioNames = []string{ScenarioBalanced, ScenarioNoStragglers, ScenarioFreeP2P, ScenarioSlowWorkerFixed,
	ScenarioDoubleMicroBatches, ScenarioInterleaveV2, ScenarioZBH1}

// WhatIfOptions selects what RunWhatIf predicts.
type WhatIfOptions struct {
	// Step is the one step to analyse; AllSteps (any value < 0) every step.
	Step int64
	// Scenarios lists the scenarios to report, by name; nil or empty means
	// every one (ScenarioNames). The verdict and the critical path are
	// always computed.
	Scenarios []string
	// NoLaunchDelays re-times every replay, the baseline included, with
	// the launch delays (gaps between an op's readiness and its start)
	// removed, as a study that simulates only the dependencies does.
	NoLaunchDelays bool
	// Analysis is Run's report of the same trace and Step, when the caller
	// has one (report renders both): RunWhatIf then takes the schedule
	// and the job's shape from it instead of analysing the trace again.
	// Nil: RunWhatIf runs the analysis.
	Analysis *Report
	// GraphMemory is the memory the steps' graphs may take at once, in
	// bytes (0: no limit). Steps are re-timed on every core, a graph of
	// the whole step (every rank) per core, about GraphNodeBytes an event
	// of the step: a step too large for one per core beside the others
	// (a 32768-rank job's step of 24.6M events: 5.7 GB) is re-timed on
	// fewer at a time, at least one. It does not change the result.
	GraphMemory int64
	// Progress, when set, is called from the goroutine that called
	// RunWhatIf as each phase starts (WhatIfPhases: the analysis, the
	// baseline replays, the statistics, the scenarios' replays, the new
	// schedules): done of total phases are finished and phase names the
	// next ("" after the last). For a progress bar; it does not change the
	// result.
	Progress func(done, total int, phase string)
}

// WhatIfPhases are the phases RunWhatIf reports to WhatIfOptions.Progress,
// in order.
var WhatIfPhases = []string{"analysis", "baseline replays", "statistics", "scenario replays", "new schedules"}

// WhatIf is the result of RunWhatIf. Times are ms.
type WhatIf struct {
	// StepMs is the measured step time (first start to last end of every
	// event of the step, OPT included, as Report.StepMs): the median over
	// the replayed steps.
	StepMs float64
	// ReplayStepMs is the median of the same steps re-timed through their
	// dependency graphs with measured durations (and launch delays unless
	// NoLaunchDelays): StepMs exactly on a trace that follows the replay's
	// rules, such as a simulated one; the gap says how well the graph
	// models a real trace.
	ReplayStepMs float64
	Steps        int    // steps replayed
	SkippedSteps int    // steps that could not be (incomplete, unmatched P2P...)
	SkipReason   string // why the first skipped step was skipped

	// The job as the predictions see it.
	Schedule     string // identified schedule (or the metadata's when none is identified)
	Virtual      int
	Stages       int
	MicroBatches int
	Replicas     int // pipeline replicas (DP)

	Scenarios    []Scenario // in ScenarioNames order, those selected
	Verdict      SlowVerdict
	CriticalPath CriticalPath
}

// Scenario is one what-if prediction.
type Scenario struct {
	Name string
	// Available is false when the scenario cannot be predicted for this
	// trace (Detail says why); StepMs and Speedup are then 0.
	Available bool
	StepMs    float64 // predicted step time: the median over the replayed steps
	// Speedup is WhatIf.ReplayStepMs / StepMs and SavedMs
	// WhatIf.ReplayStepMs - StepMs: against the replay of the measured
	// durations, so that the model's own error cancels (on a simulated
	// trace the replay is the measurement).
	Speedup float64
	SavedMs float64
	Detail  string // what was changed, in one sentence
}

// RunWhatIf predicts the step time of each scenario (ScenarioNames) by
// re-timing each step's dependency graph (stepGraph) with changed
// durations, or, for the scenarios that change the schedule, by building
// the new schedule's action lists with the measured costs and re-timing
// them the same way. It also separates a slow worker from a slow stage
// (Verdict) and finds the critical path. t is not modified.
//
//  1. analyse t (Run up to the schedule identification, unless
//     opt.Analysis is its report) for the schedule and the job's shape;
//  2. re-time each step whose events all ended with measured durations:
//     baseline, critical path, samples of every compute and transfer;
//  3. derive each scenario's changes from the samples (medians);
//  4. re-time each step again per scenario that keeps the order; build and
//     time the new schedules for the others;
//  5. medians over steps, the verdict.
func RunWhatIf(t *trace.Trace, opt WhatIfOptions) (*WhatIf, error) {
	if _, err := selectScenarios(opt.Scenarios); err != nil {
		return nil, err
	}
	if t.Len() == 0 {
		return nil, fmt.Errorf("trace has no events")
	}
	step := opt.Step
	if step < 0 {
		step = AllSteps
	}
	return whatIfOn(newIndex(t, Options{Step: step}), opt)
}

// RunWhatIfChunks is RunWhatIf of a trace delivered in chunks, one chunk
// held at a time besides those packed (aopt.PackBytes; aopt.KeepRows
// keeps some whole): the what-if of every step of a trace too large to
// read whole. Every row of one step must be in the same chunk (every
// window of a step, of every pipeline replica: a step's graph joins them
// at its optimizer step), which chunks of whole steps of every rank
// satisfy (ingest.Chunks opened as one group, then cut between steps:
// CutSteps); a step found in two chunks is an error. Chunks are packed
// with every column (the graphs read the process groups). Its result is
// RunWhatIf's of the whole trace, to the bit: every step is re-timed
// alone, and the medians and op groups pool every step's values
// whichever chunk held them. aopt.Step is opt.Step; aopt's progress
// functions are not called (opt.Progress is, per phase, and per chunk
// within the phases that read chunks, the first read of each included).
func RunWhatIfChunks(src Chunks, opt WhatIfOptions, aopt Options) (*WhatIf, error) {
	if _, err := selectScenarios(opt.Scenarios); err != nil {
		return nil, err
	}
	if src.NumChunks() == 0 {
		return nil, fmt.Errorf("trace has no events")
	}
	aopt.Step = opt.Step
	if aopt.Step < 0 {
		aopt.Step = AllSteps
	}
	aopt.Progress, aopt.ChunkProgress = nil, nil
	if opt.Progress != nil && src.NumChunks() > 1 {
		// The first read of every chunk (and its packing) is part of
		// the analysis phase, and most of it for a large trace.
		aopt.ChunkProgress = func(c, n int) {
			opt.Progress(0, len(WhatIfPhases), fmt.Sprintf("%s (chunk %d/%d)", WhatIfPhases[0], c+1, n))
		}
	}
	aopt.packAll = true
	ix, err := newChunkedIndex(src, nil, aopt)
	if err != nil {
		return nil, err
	}
	return whatIfOn(ix, opt)
}

// whatIfOn is RunWhatIf on ix, a whole trace's index or a chunked one
// whose steps each lie in one chunk.
func whatIfOn(ix *index, opt WhatIfOptions) (wi *WhatIf, err error) {
	if err := catchChunkError(func() { wi, err = whatIfPhases(ix, opt) }); err != nil {
		return nil, err
	}
	return wi, err
}

func whatIfPhases(ix *index, opt WhatIfOptions) (*WhatIf, error) {
	want, err := selectScenarios(opt.Scenarios)
	if err != nil {
		return nil, err
	}
	step := ix.opt.Step
	phase := 0
	next := func() {
		if opt.Progress != nil {
			name := ""
			if phase < len(WhatIfPhases) {
				name = WhatIfPhases[phase]
			}
			opt.Progress(phase, len(WhatIfPhases), name)
		}
		phase++
	}
	// A phase that reads a chunked trace's chunks tells which it is at.
	if opt.Progress != nil && len(ix.chunks) > 1 {
		ix.onChunk = func(c, n int) {
			opt.Progress(phase-1, len(WhatIfPhases), fmt.Sprintf("%s (chunk %d/%d)", WhatIfPhases[phase-1], c+1, n))
		}
		defer func() { ix.onChunk = nil }()
	}
	next()
	rep := opt.Analysis
	if rep == nil {
		// The analysis up to the schedule, on the same index: its windows
		// and op groups serve the what-if.
		if rep, err = run(ix, Options{Step: step, untilSchedule: true}); err != nil {
			return nil, err
		}
	}
	wi := &WhatIf{Stages: ix.p, MicroBatches: rep.Job.MicroBatches, Replicas: replicas(ix)}
	wi.Schedule, wi.Virtual = rep.Schedule.Identified, rep.Schedule.Virtual
	if wi.Schedule == "" {
		wi.Schedule, wi.Virtual = rep.Job.Schedule, rep.Job.Virtual
	}
	wi.Virtual = max(wi.Virtual, 1)
	// The straggler test's typical durations, over every replayable
	// window (the analysis made them; with opt.Analysis given, made
	// here): the baseline pass counts each step's stragglers.
	og := newOpGroups(ix)

	// 2. Baseline pass.
	// The graphs' memory, per worker, serves both passes that build them.
	next()
	var mem []graphMem
	graphs := graphWorkers(ix, opt.GraphMemory)
	base, ranksOf, err := baselinePass(ix, og, opt.NoLaunchDelays, graphs, &mem)
	if err != nil {
		return nil, err
	}
	for _, s := range base {
		if s.err != nil {
			if wi.SkippedSteps == 0 {
				wi.SkipReason = s.err.Error()
			}
			wi.SkippedSteps++
		}
	}
	ok := slices.DeleteFunc(slices.Clone(base), func(s *stepBase) bool { return s.err != nil })
	wi.Steps = len(ok)
	if len(ok) == 0 {
		if wi.SkipReason == "" {
			return nil, fmt.Errorf("what-if: no step whose events all ended")
		}
		return nil, fmt.Errorf("what-if: no step could be replayed: %s", wi.SkipReason)
	}
	meas, repl := make([]float64, len(ok)), make([]float64, len(ok))
	for k, s := range ok {
		meas[k], repl[k] = float64(s.measNs)/1e6, float64(s.replayNs)/1e6
	}
	wi.StepMs, wi.ReplayStepMs = median(meas), median(repl)
	wi.CriticalPath = pathSummary(ok, ix.p)

	// 3. Changes.
	next()
	st := newWhatIfStats(ix, ok, og, ranksOf)
	plans := st.plans()

	// 4. Replays that keep the order, then new schedules.
	next()
	pred := replayPlans(ix, ok, plans, opt.NoLaunchDelays, graphs, mem)
	results := map[string]Scenario{}
	for k, pl := range plans {
		sc := Scenario{Name: pl.name, Detail: pl.detail}
		if pl.unavailable == "" {
			sc.Available, sc.StepMs = true, median(pred[k])
		} else {
			sc.Detail = pl.unavailable
		}
		results[pl.name] = sc
	}
	next()
	for _, sc := range st.schedules(wi) {
		results[sc.Name] = sc
	}

	// 5. Speedups, verdict.
	for _, name := range ScenarioNames {
		sc := results[name]
		if sc.Available && sc.StepMs > 0 {
			sc.Speedup, sc.SavedMs = wi.ReplayStepMs/sc.StepMs, wi.ReplayStepMs-sc.StepMs
		}
		results[name] = sc
		if want[name] {
			wi.Scenarios = append(wi.Scenarios, sc)
		}
	}
	wi.Verdict = st.verdict(wi.ReplayStepMs, results[ScenarioBalanced], results[ScenarioSlowWorkerFixed])
	next()
	return wi, nil
}

// CheckScenarios reports the first of names that is not a scenario
// (ScenarioNames), as RunWhatIf would.
func CheckScenarios(names []string) error {
	_, err := selectScenarios(names)
	return err
}

// selectScenarios checks names against ScenarioNames; none selects all.
func selectScenarios(names []string) (map[string]bool, error) {
	want := map[string]bool{}
	for _, n := range names {
		if !slices.Contains(ScenarioNames, n) {
			return nil, fmt.Errorf("unknown scenario %q (want one of %v)", n, ScenarioNames)
		}
		want[n] = true
	}
	if len(want) == 0 {
		for _, n := range ScenarioNames {
			want[n] = true
		}
	}
	return want, nil
}

// replicas counts the pipeline replicas of ix's windows.
func replicas(ix *index) int {
	seen := map[int32]bool{}
	for _, w := range ix.windows {
		seen[w.pipeline] = true
	}
	return len(seen)
}

// stepBase is one step of the baseline pass.
type stepBase struct {
	step     int64
	ws       []int // its windows in ix
	err      error
	measNs   int64 // measured span: first start to last end of its rows
	replayNs int64 // replayed span with measured durations
	windowNs int64 // the longest measured window of its pipelines
	path     pathSum
	// stragglers: the step's ops the straggler test flags.
	stragglers int
	samples    stepSamples
	xfers      stepXfers
}

// stepSamples is the measured durations of one step's compute ops and
// receives, grouped by key: keys[i]'s are durs[off[i]:off[i+1]], in graph
// order; keys in the order they first appear. Ops whose chunk no schedule
// has (bad input) are left out.
type stepSamples struct {
	keys []sampleKey
	off  []int32
	// The durations: in 32 bits when every one of the step's is in
	// [0, 2^32) ns (4.3 s), as a rule (a fleet job's step has two
	// million), else in 64.
	durs32 []uint32
	durs   []int64
}

// appendOf appends the durations of keys[i] to buf.
func (s *stepSamples) appendOf(buf []int64, i int) []int64 {
	lo, hi := s.off[i], s.off[i+1]
	if s.durs == nil {
		for _, d := range s.durs32[lo:hi] {
			buf = append(buf, int64(d))
		}
		return buf
	}
	return append(buf, s.durs[lo:hi]...)
}

// sampleScratch is what a worker of baselinePass reuses from step to step
// to group a step's samples.
type sampleScratch struct {
	ids   map[sampleKey]int32
	id    []int32 // per node: its key's index, -1 when not a sample
	count []int32
}

// group sets sb.samples from g's compute ops and receives: each node's key
// found once (the last keys met are looked up before the map: a rank's
// program cycles through a few), counted, then its duration placed.
func (sc *sampleScratch) group(g *stepGraph, sb *stepBase) {
	if sc.ids == nil {
		sc.ids = map[sampleKey]int32{}
	}
	clear(sc.ids)
	var keys []sampleKey
	count := sc.count[:0]
	var cache [4]struct {
		k  sampleKey
		id int32
	}
	for c := range cache {
		cache[c].id = -1
	}
	slot := 0
	nn := g.numNodes()
	id := slices.Grow(sc.id[:0], nn)[:nn]
	for v := range int32(nn) {
		id[v] = -1
		switch g.class[v] {
		case ncCompute, ncRecv:
		default:
			continue
		}
		k := sampleKey{g.ranks[g.owner[v]].pipeline, g.stage[v], g.chunk[v], g.kind[v]}
		if k.chunk < 0 || k.chunk >= maxChunks {
			continue // bad input: no schedule has such a chunk
		}
		x := int32(-1)
		for _, c := range cache {
			if c.id >= 0 && c.k == k {
				x = c.id
				break
			}
		}
		if x < 0 {
			var found bool
			if x, found = sc.ids[k]; !found {
				x = int32(len(keys))
				sc.ids[k] = x
				keys, count = append(keys, k), append(count, 0)
			}
			cache[slot].k, cache[slot].id = k, x
			slot = (slot + 1) % len(cache)
		}
		id[v] = x
		count[x]++
	}
	off := make([]int32, len(keys)+1)
	for i, n := range count {
		off[i+1] = off[i] + n
		count[i] = off[i] // where the next duration of key i goes
	}
	// Kept per step: fresh memory (graph.go's grown).
	sb.samples = stepSamples{keys: keys, off: off}
	narrow := true
	for v, x := range id {
		if x >= 0 && uint64(g.meas[v]) > math.MaxUint32 {
			narrow = false
			break
		}
	}
	if narrow {
		durs := hugepage.Make[uint32](int(off[len(keys)]))
		for v, x := range id {
			if x >= 0 {
				durs[count[x]] = uint32(g.meas[v])
				count[x]++
			}
		}
		sb.samples.durs32 = durs
	} else {
		durs := hugepage.Make[int64](int(off[len(keys)]))
		for v, x := range id {
			if x >= 0 {
				durs[count[x]] = g.meas[v]
				count[x]++
			}
		}
		sb.samples.durs = durs
	}
	sc.id, sc.count = id, count
}

// sampleKey groups samples: one kind (F, B, W, RECV_F, RECV_B) of one
// chunk of one stage in one pipeline replica.
type sampleKey struct {
	pipeline, stage, chunk int32
	kind                   trace.Kind
}

// xferKind is what transfers share: the boundary crossed and the payload.
type xferKind struct {
	boundaryKey
	bytes int64
}

// stepXfers is one step's transfers, in graph order: each one's kind (an
// index into kinds, the step's distinct kinds in order of first
// appearance) and duration. 12 bytes a transfer where a sample of its own
// takes 32: a fleet job's step moves a million, and the what-if keeps
// every step's until the fit.
type stepXfers struct {
	kinds []xferKind
	kind  []uint32
	durNs []int64
}

func (sx *stepXfers) len() int { return len(sx.kind) }

// xferIndex finds the kinds of a step's transfers as stepXfers.add
// appends them: the latest kind of each boundary of stages below
// xferSlots, by an array, and the others by a map. It is reused from step
// to step (reset).
type xferIndex struct {
	slot  []int32 // 1 + the index of the latest kind of boundary (from, to, dir)
	other map[xferKind]uint32
}

const xferSlots = 128

// reset makes ix ready for a step after sx.
func (ix *xferIndex) reset(sx *stepXfers) {
	for _, k := range sx.kinds {
		if s, ok := xferSlot(k.boundaryKey); ok {
			ix.slot[s] = 0
		}
	}
	clear(ix.other)
}

func xferSlot(b boundaryKey) (int, bool) {
	if uint32(b.from) >= xferSlots || uint32(b.to) >= xferSlots || b.dir > 1 {
		return 0, false
	}
	return (int(b.from)*xferSlots+int(b.to))<<1 | int(b.dir), true
}

// add appends a transfer of kind k lasting durNs to sx (ix: sx's index).
func (sx *stepXfers) add(ix *xferIndex, k xferKind, durNs int64) {
	if ix.slot == nil {
		ix.slot = make([]int32, xferSlots*xferSlots*2)
	}
	s, inSlots := xferSlot(k.boundaryKey)
	var id uint32
	found := false
	if inSlots {
		if i := ix.slot[s] - 1; i >= 0 && sx.kinds[i] == k {
			id, found = uint32(i), true
		}
	}
	if !found {
		if ix.other == nil {
			ix.other = map[xferKind]uint32{}
		}
		var ok bool
		if id, ok = ix.other[k]; !ok {
			id = uint32(len(sx.kinds))
			sx.kinds = append(sx.kinds, k)
			ix.other[k] = id
		}
		if inSlots {
			ix.slot[s] = int32(id) + 1
		}
	}
	sx.kind = append(sx.kind, id)
	sx.durNs = append(sx.durNs, durNs)
}

// stepsByChunk groups steps (each step's windows) by the chunk of ix that
// holds them: an error when a step's windows are in two chunks.
func stepsByChunk(ix *index, steps []*stepBase) ([][]int, error) {
	by := make([][]int, len(ix.chunks))
	for k, sb := range steps {
		c := ix.windows[sb.ws[0]].chunk
		for _, w := range sb.ws {
			if c2 := ix.windows[w].chunk; c2 != c {
				return nil, fmt.Errorf("step %d has rows in chunks %d and %d: the what-if re-times a step whole, so a chunk must hold whole steps of every pipeline replica", sb.step, c, c2)
			}
		}
		by[c] = append(by[c], k)
	}
	return by, nil
}

// rankAt is a rank's pipeline and stage where a run of its rows starts.
type rankAt struct {
	rank     trace.Rank
	pipeline int32
	stage    int32
}

// GraphNodeBytes is about what a step graph takes per event of its step
// (its nodes' arrays and the worker's memory around them), measured: the
// what-if of a 16384-rank job's two steps of 12.3M events peaked 2.7 GB
// lower on one core than on two (~220 bytes an event).
const GraphNodeBytes = 230

// graphWorkers is how many step graphs the what-if builds at once: one
// per core, fewer when the largest step's graph takes more than a share
// of budget bytes (0: no limit), at least one.
func graphWorkers(ix *index, budget int64) int {
	n := workers(len(ix.windows))
	if budget <= 0 {
		return n
	}
	largest := 0
	forSteps(ix, func(ws []int, _ int64) {
		rows := 0
		for _, w := range ws {
			rows += ix.windows[w].size
		}
		largest = max(largest, rows)
	})
	return int(max(1, min(int64(n), budget/max(1, int64(largest)*GraphNodeBytes))))
}

// baselinePass re-times every step whose windows are all complete with
// measured durations, in step order, chunk by chunk, and counts each
// step's stragglers (og), on at most graphs goroutines. The memory its
// graphs were built in, one per worker, is left in *mems for
// replayPlans. It also returns the ranks of each (pipeline, stage),
// every rank where its first row in the windows' order puts it.
func baselinePass(ix *index, og *opGroups, noDelays bool, graphs int, mems *[]graphMem) ([]*stepBase, map[[2]int32][]int, error) {
	var out []*stepBase
	forSteps(ix, func(ws []int, spanNs int64) {
		sb := &stepBase{step: ix.windows[ws[0]].step, ws: ws, measNs: spanNs}
		for _, w := range ws {
			win := ix.windows[w]
			if !replayable(win) {
				sb.err = fmt.Errorf("step %d, pipeline %d: some events never ended", win.step, win.pipeline)
			}
			sb.windowNs = max(sb.windowNs, win.measured.EndNs-win.measured.StartNs)
		}
		out = append(out, sb)
	})
	byChunk, err := stepsByChunk(ix, out)
	if err != nil {
		return nil, nil, err
	}
	mem := make([]graphMem, max(1, min(workers(len(out)), graphs)))
	*mems = mem
	scratch := make([]sampleScratch, len(mem))
	xidx := make([]xferIndex, len(mem))
	firsts := make([][]rankAt, len(ix.windows)) // per window: where each run of a rank's rows starts
	ix.forChunks(nil, func(c int) {
		wins := ix.chunks[c].wins
		forEach(len(wins), func(_, i int) {
			k := wins[i]
			w := ix.windows[k]
			var last trace.Rank
			for j, r := range w.rows {
				if rk := w.t.Rank[r]; j == 0 || rk != last {
					last = rk
					firsts[k] = append(firsts[k], rankAt{rk, w.t.Pipeline[r], int32(w.t.Stage[r])})
				}
			}
		})
		forEachN(len(byChunk[c]), len(mem), func(w, i int) {
			sb := out[byChunk[c][i]]
			if sb.err != nil {
				return
			}
			mem[w].held = nil
			g, err := mem[w].buildStepGraph(ix, sb.ws)
			if err != nil {
				sb.err = err
				return
			}
			mem[w].held, mem[w].heldGraph = sb, g
			delay := g.delay
			if noDelays {
				delay = nil
			}
			s, e := g.run(g.meas, delay)
			sb.replayNs = e - s
			sb.path = g.criticalPath(s, delay, ix.p)
			t := ix.windows[sb.ws[0]].t
			scratch[w].group(g, sb)
			nRecv := 0
			for _, c := range g.class {
				nRecv += b2i(c == ncRecv)
			}
			sb.xfers.kind, sb.xfers.durNs = hugepage.Make[uint32](nRecv)[:0], hugepage.Make[int64](nRecv)[:0]
			xi := &xidx[w]
			for v := range int32(g.numNodes()) {
				if g.class[v] == ncRecv {
					snd := g.row[g.other[v]]
					b := t.Bytes[snd]
					if b <= 0 {
						b = t.Bytes[g.row[v]]
					}
					from := g.ranks[g.owner[g.other[v]]].stage
					sb.xfers.add(xi, xferKind{boundaryKey{from, g.stage[v], p2pDir(g.kind[v])}, max(b, 0)}, g.meas[v])
				}
			}
			xi.reset(&sb.xfers)
			for _, x := range sb.ws {
				for _, i := range ix.windows[x].rows {
					if gx := og.group(t, i); gx >= 0 {
						if c, _, _ := og.judge(t, i, gx); c != "" {
							sb.stragglers++
						}
					}
				}
			}
		})
		if ix.chunks[c].kept == nil {
			// The chunk's columns are let go: a graph held must be built
			// again from the next read.
			for w := range mem {
				mem[w].held, mem[w].heldGraph = nil, nil
			}
		}
	})
	ranksOf := map[[2]int32][]int{}
	seen := map[trace.Rank]bool{}
	for _, fs := range firsts {
		for _, f := range fs {
			if !seen[f.rank] {
				seen[f.rank] = true
				k := [2]int32{f.pipeline, f.stage}
				ranksOf[k] = append(ranksOf[k], int(f.rank))
			}
		}
	}
	for k := range ranksOf {
		slices.Sort(ranksOf[k])
	}
	return out, ranksOf, nil
}

// buildStepGraph builds the graph of the step made of windows ws.
func buildStepGraph(ix *index, ws []int) (*stepGraph, error) {
	var m *graphMem
	return m.buildStepGraph(ix, ws)
}

// buildStepGraph builds the graph of the step made of windows ws in m's
// memory (nil: fresh memory): the graph is m's until m builds another.
func (m *graphMem) buildStepGraph(ix *index, ws []int) (*stepGraph, error) {
	n := 0
	for _, w := range ws {
		n += len(ix.windows[w].rows)
	}
	var rows []int
	if m != nil {
		rows = m.rows[:0]
	}
	rows = slices.Grow(rows, n)
	for _, w := range ws {
		rows = append(rows, ix.windows[w].rows...)
	}
	if m != nil {
		m.rows = rows
	}
	w := ix.windows[ws[0]]
	return m.traceGraph(w.t, w.step, rows, ix.p)
}

// pathSummary averages the steps' critical paths and lists the path of the
// step with the median replayed time.
func pathSummary(ok []*stepBase, p int) CriticalPath {
	sums := make([]pathSum, len(ok))
	steps := make([]int64, len(ok))
	idx := make([]int, len(ok))
	for k, s := range ok {
		sums[k], steps[k], idx[k] = s.path, s.step, k
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if ok[a].replayNs != ok[b].replayNs {
			if ok[a].replayNs < ok[b].replayNs {
				return -1
			}
			return 1
		}
		return 0
	})
	return summarizePaths(sums, steps, idx[(len(idx)-1)/2], p)
}

// plan is one scenario that keeps each rank's order: a change of the
// measured durations of a step's graph.
type plan struct {
	name        string
	detail      string
	unavailable string // non-empty: cannot be predicted, and why
	// change rewrites dur (the graph's measured durations, a copy) in
	// place; t is the trace the graph was built from.
	change func(t *trace.Trace, g *stepGraph, dur []int64)
}

// replayPlans re-times every step of ok under every available plan and
// returns, per plan, each step's predicted time in ms. It builds the
// graphs again in mem, baselinePass's (no fresh memory to fault in),
// chunk by chunk, at most graphs at a time.
func replayPlans(ix *index, ok []*stepBase, plans []plan, noDelays bool, graphs int, mem []graphMem) [][]float64 {
	out := make([][]float64, len(plans))
	for k := range out {
		out[k] = make([]float64, len(ok))
	}
	if n := max(1, min(workers(len(ok)), graphs)); len(mem) < n {
		mem = append(mem, make([]graphMem, n-len(mem))...)
	}
	build := max(1, min(len(mem), graphs)) // graphs built at once
	replay := func(m *graphMem, g *stepGraph, k int) {
		delay := g.delay
		if noDelays {
			delay = nil
		}
		t := ix.windows[ok[k].ws[0]].t
		// The worker's durations, from step to step (fresh memory each
		// step was as many pages to fault in as the graph has nodes).
		m.dur = grown(m.dur, g.numNodes())
		dur := m.dur
		for x, pl := range plans {
			if pl.unavailable != "" {
				continue
			}
			copy(dur, g.meas)
			pl.change(t, g, dur)
			s, e := g.run(dur, delay)
			out[x][k] = float64(e-s) / 1e6
		}
	}
	byChunk, err := stepsByChunk(ix, ok)
	if err != nil {
		panic(err) // baselinePass grouped them first
	}
	ix.forChunks(func(c int) bool { return len(byChunk[c]) > 0 }, func(c int) {
		steps := byChunk[c]
		// Each worker's memory may still hold the graph of the last step
		// it built (a whole trace's: runs leave a graph as built): those
		// steps are replayed first, each in its own memory, without
		// building them again (the one step of a what-if of one step).
		held := make([]int, len(mem))
		at := make(map[*stepBase]int, len(steps))
		for _, k := range steps {
			at[ok[k]] = k
		}
		done := make(map[int]bool, len(mem))
		for w := range mem {
			held[w] = -1
			if k, found := at[mem[w].held]; found {
				held[w], done[k] = k, true
			}
		}
		forEach(len(mem), func(_, w int) {
			if k := held[w]; k >= 0 {
				replay(&mem[w], mem[w].heldGraph, k)
			}
		})
		var rest []int
		for _, k := range steps {
			if !done[k] {
				rest = append(rest, k)
			}
		}
		forEachN(len(rest), build, func(w, i int) {
			k := rest[i]
			mem[w].held = nil
			g, err := mem[w].buildStepGraph(ix, ok[k].ws)
			if err != nil {
				return // built once already: cannot happen
			}
			replay(&mem[w], g, k)
		})
	})
	return out
}

// roundNs rounds x ns to a whole, non-negative ns.
func roundNs(x float64) int64 { return max(int64(math.Round(x)), 0) }
