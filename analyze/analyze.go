// Package analyze turns a trace into numbers: step windows, per-stage busy
// and idle time, and the utilisation factors of DESIGN.md.
package analyze

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/ppprof/ppprof/internal/hugepage"
	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/trace"
)

// SchemaID is the value of the "schema" key of the JSON analysis.
const SchemaID = "ppprof.analysis/v1"

// Options selects what to analyse.
type Options struct {
	// Step is the one step to analyse; AllSteps (the default when Step < 0)
	// analyses every step.
	Step int64

	// Progress, when set, is called from the goroutine that called Run as
	// each pass starts: done of total passes are finished and pass names
	// the next ("" after the last). For a progress bar; it does not change
	// the report.
	Progress func(done, total int, pass string)

	// ChunkProgress, when set, is called by RunChunks from the same
	// goroutine as each pass (the first, which reads the chunks,
	// included) starts on chunk c of n, c from 0: for a progress bar that
	// moves within a pass, which on a fleet-sized trace takes minutes.
	// Progress is then called too, with the pass named "<pass> (chunk
	// c+1/n)". Not called by Run.
	ChunkProgress func(c, n int)

	// KeepRows, for RunChunks, is how many rows of chunks may stay in
	// memory between passes (the first chunks, whole, up to this many
	// rows); other chunks are read again by each pass that needs rows.
	// 0 keeps none. Run holds its trace anyway.
	KeepRows int

	// PackBytes, for RunChunks, is how many bytes of memory chunks not
	// kept whole may take packed (trace.Pack: about 17 bytes per event
	// instead of 122) between passes, together with what the analysis
	// keeps of every compute op of the trace for its medians (12 bytes
	// each, predicted from the chunks read so far). A chunk is packed
	// after its first read while these fit, and then unpacked by each
	// pass that needs its rows instead of read again: several times
	// faster than decoding files. 0 packs none.
	PackBytes int64

	// untilSchedule runs only what the schedule identification and the
	// op groups need, and stops after them: the job's shape and the
	// identified schedule, all RunWhatIf reads of the report it starts
	// from (and the op groups it uses), without the statistics, memory,
	// replays and stragglers the rest of the report costs.
	untilSchedule bool
	// packAll packs chunks with every column but the FLOPs
	// (packAllColumns), not only those the analysis' visits read
	// (RunWhatIfChunks: its graphs read the process groups too).
	packAll bool
}

// numPasses is the number of Progress steps of Run.
const numPasses = 6

// AllSteps is the Options.Step value that selects every step.
const AllSteps int64 = -1

// Report is the result of Run. Times are milliseconds, fractions in [0, 1].
type Report struct {
	Job         Job
	StepMs      float64 // median over analysed steps of the step time (first start to last end of every event of the step, OPT included)
	StepMsWorst float64 // the longest analysed step
	Utilization Utilization
	Bubble      Bubble
	Stages      []StageSummary
	Steps       []StepWindow // one per (step, pipeline), in step then pipeline order
	Overhead    []Overhead   // step overhead outside the pipeline window (OPT, DATA...), stats.go
	Memory      Memory       // memory.go
	P2P         P2P          // p2p.go
	Schedule    Conformance  // conformance.go
	Imbalance   Imbalance    // imbalance.go
	Stragglers  []Straggler  // stragglers.go
	Findings    []Finding    // ranked: most costly first
}

// Job is the shape of the job as the trace describes it.
type Job struct {
	WorldSize    int
	PP           int
	TP           int
	DP           int
	Virtual      int
	MicroBatches int
	Steps        int // steps analysed
	Schedule     string
	Events       int // events in the trace
}

// Utilization holds the factors of DESIGN.md over all analysed (step,
// pipeline) windows: Pipeline = (1 - Bubble) * Balance exactly. Compute and
// MFU are nil when the trace lacks FLOPs or peak FLOP/s.
type Utilization struct {
	Pipeline float64
	Bubble   float64
	Balance  float64
	Compute  *float64
	MFU      *float64
}

// Bubble is the measured bubble beside the schedule's theory. Warmup,
// Cooldown and Steady split all stages' idle time by where it falls, as
// fractions of total stage time (p x T summed over windows), so
// Warmup + Cooldown + Steady = 1 - Utilization.Pipeline.
type Bubble struct {
	Measured    float64
	Theoretical *float64 // nil when the schedule is unknown
	Warmup      float64
	Cooldown    float64
	Steady      float64
	SteadyP2P   float64         // the part of Steady spent in exposed P2P transfers (stats.go)
	SteadyOther float64         // Steady - SteadyP2P: waiting on a peer's compute and the like
	Gap         *GapAttribution // measured - theoretical, attributed; nil without theory (gap.go)
}

// StageSummary is one stage over every analysed window.
type StageSummary struct {
	Stage                trace.Stage
	Rank                 trace.Rank // lowest rank holding the stage
	FwdMs                float64    // mean duration of one F op
	BwdMs                float64    // mean duration of one B op
	BusyMs               float64    // mean busy time per window
	IdleMs               float64    // mean idle time per window (window - busy)
	Bubble               float64    // idle / window, over all windows
	PeakLiveMicroBatches int        // most micro-batches (x chunks) whose F ended and last B/W had not, on any rank of the stage

	// Filled by stats.go: durations of one op per kind, and the stage's idle
	// time per window split by where it falls (means over complete windows).
	F, B, W                        Dist
	WarmupMs, CooldownMs, SteadyMs float64 // WarmupMs + CooldownMs + SteadyMs = IdleMs
	P2PWaitMs, OtherWaitMs         float64 // SteadyMs split: exposed P2P transfer vs other waits

	// Filled by memory.go.
	LiveBound           int   // the schedule's bound on live micro-batches for this stage; 0 if unknown
	PeakActivationBytes int64 // peak bytes of live activations (from P2P shapes or mem_bytes); 0 if unknown
}

// StepWindow is one step of one pipeline replica.
type StepWindow struct {
	Step      int64
	Pipeline  int32
	StartNs   int64
	EndNs     int64
	Complete  bool    // every event of the window ended
	BusyNs    []int64 // per stage: union of F/B/W over the stage's ranks
	Bubble    float64 // 1 - max(busy)/T
	Balance   float64 // mean(busy)/max(busy)
	UPipeline float64 // sum(busy)/(p T)
}

// WindowMs returns the window length in milliseconds.
func (w StepWindow) WindowMs() float64 { return float64(w.EndNs-w.StartNs) / 1e6 }

// Finding is one observation worth a human's attention.
type Finding struct {
	Severity string  // "info", "warning", "error"
	Code     string  // stable identifier, one of the Code constants
	Message  string  // one sentence with the number that matters
	ImpactMs float64 // estimated step time the issue costs, ms per step; 0 when not a time cost
}

// Run analyses t. It never modifies t.
//
// The passes run in a fixed order, each reading the index and the parts of
// the report earlier passes filled:
//
//  1. windows: group rows by (step, pipeline), measure each window;
//  2. factors: utilisation, bubble and its idle split, compute and MFU;
//  3. stages: per-stage busy/idle and duration statistics, step overhead,
//     memory, P2P, the windows' schedule sizes, the op groups' counts;
//  4. schedule identification, the op groups' typical durations, then the
//     theoretical bubble;
//  5. synchronous-training checks, imbalance, the attribution of the
//     bubble gap, stragglers;
//  6. findings, ranked.
//
// Steps 3, 4 and 5 each visit every window once, for all their passes
// (index.visit): RunChunks reads each chunk once per step.
func Run(t *trace.Trace, opt Options) (*Report, error) {
	if t.Len() == 0 {
		return nil, fmt.Errorf("trace has no events")
	}
	if opt.Progress != nil {
		// Grouping a large trace's rows takes a fifth of the analysis:
		// said before it starts, not after.
		opt.Progress(0, numPasses, "windows")
	}
	ix := newIndex(t, opt)
	return run(ix, opt)
}

// run is Run and RunChunks on the index of their trace.
func run(ix *index, opt Options) (rep *Report, err error) {
	if err := catchChunkError(func() { rep, err = runPasses(ix, opt) }); err != nil {
		return nil, err
	}
	return rep, err
}

// reportChunk tells ChunkProgress and Progress that step done, the pass
// named pass, starts on chunk c of n.
func (opt Options) reportChunk(done int, pass string, c, n int) {
	if opt.ChunkProgress != nil {
		opt.ChunkProgress(c, n)
	}
	if opt.Progress != nil {
		opt.Progress(done, numPasses, fmt.Sprintf("%s (chunk %d/%d)", pass, c+1, n))
	}
}

func runPasses(ix *index, opt Options) (*Report, error) {
	done := 0
	current := ""
	pass := func(name string) {
		if opt.Progress != nil {
			opt.Progress(done, numPasses, name)
		}
		done++
		current = name
	}
	if (opt.Progress != nil || opt.ChunkProgress != nil) && len(ix.chunks) > 1 {
		// Passes that read chunks say which.
		ix.onChunk = func(c, n int) { opt.reportChunk(done-1, current, c, n) }
		defer func() { ix.onChunk = nil }()
	}
	pass("windows")
	if len(ix.windows) == 0 {
		return nil, fmt.Errorf("no events for step %d", opt.Step)
	}
	rep := &Report{Job: jobOf(ix)}
	rep.Job.Steps = countSteps(ix.windows)
	measureFactors(ix, rep)
	rep.StepMs, rep.StepMsWorst = stepTimes(ix.windows)
	rep.Stages = stageSummaries(ix, rep)
	// Each phase visits the windows once, for several passes (a trace read
	// in chunks reads each chunk once per phase): what only needs the
	// measured windows; then the schedule identification (which needs every
	// window's sizes) and the op groups' durations (which need their
	// layout); then what needs the schedule, the theory and the groups.
	pass("stages")
	ix.compCache, ix.compGen = make([]compCache, workers(len(ix.windows))), 1
	cs, collect := conformanceCollect(ix)
	og := newOpGroupsBuilder(ix)
	if opt.untilSchedule {
		// What the schedule identification and the op groups need only.
		ix.visitColumns(stagesColumns, collect, og.countVisit())
		ix.endVisit()
		pass("schedule")
		ix.visitColumns(scheduleColumns, cs.identifyVisit(&rep.Schedule), og.fillVisit())
		ix.endVisit()
		return rep, nil
	}
	imb, sums := imbalanceSums(ix)
	// The statistics' F, B and W durations are the op groups' (but for
	// ops in no group): made once the groups' lists are filled, in the
	// schedule visit (statsVisitSharing).
	ix.visitColumns(stagesColumns, statsVisitSharing(ix, rep, og), memoryVisit(ix, rep), collect, sums, og.countVisit())
	ix.endVisit()
	analyzeP2P(ix, rep)
	pass("schedule")
	ix.visitColumns(scheduleColumns, cs.identifyVisit(&rep.Schedule), og.fillVisit())
	ix.endVisit()
	for i := range rep.Stages {
		rep.Stages[i].FwdMs, rep.Stages[i].BwdMs = rep.Stages[i].F.MeanMs, rep.Stages[i].B.MeanMs
	}
	rep.Bubble.Theoretical = theoretical(ix, rep)
	// Imbalance and the gap attribution re-time every window: one replay
	// per window serves both.
	pass("replay")
	ix.visitColumns(replayColumns, cs.checkSyncVisit(&rep.Schedule), replayVisit(ix, imbalanceReplay(ix, rep, imb), gapPass(ix, rep)),
		stragglersVisit(ix, rep))
	ix.endVisit()
	pass("findings")
	rep.Findings = rankFindings(append(rep.Findings, collectFindings(ix, rep)...))
	pass("")
	return rep, nil
}

// The columns each of runPasses' visits reads of a window's rows (the step
// and pipeline, which windows are keyed by, kept in each): a packed chunk
// is unpacked with only these (trace.Packed.UnpackColumns; unpacking is
// memory-bound, and the strings are the dearest columns to write). A
// column left out is empty, so a pass that came to read one would fail
// at once (TestRunChunksIsRun packs its chunks), not read another chunk's
// rows. None of them needs the process groups (the what-if graphs do) or
// the FLOPs (measured by the scan), nor the step and pipeline: a packed
// chunk's windows take their rows from the runs found when it was read
// (index.attachRuns), not by grouping its rows again.
var (
	// stats (with P2P transfers: peers, shapes, dtypes, bytes), memory,
	// the conformance groups, imbalance sums, op group counts.
	stagesColumns = trace.AllColumns &^ trace.ColumnsOf(trace.ColIssueNs, trace.ColFlops, trace.ColGroup, trace.ColGroupSeq,
		trace.ColStep, trace.ColPipeline)
	// Schedule identification (labels of the compute rows by rank) and the
	// op groups' durations (per token).
	scheduleColumns = trace.ColumnsOf(trace.ColRank, trace.ColStage, trace.ColChunk,
		trace.ColMicroBatch, trace.ColKind, trace.ColStartNs, trace.ColEndNs, trace.ColTokens)
	// Synchronous-training checks, replays (issue order, P2P pairs by peer
	// and seq), the gap attribution, stragglers.
	// The issue times they read (each rank's post when its first row is a
	// P2P op) are kept with the windows when they are measured
	// (window.posts).
	replayColumns = scheduleColumns | trace.ColumnsOf(trace.ColSeq, trace.ColPeer)
	// What any visit reads: the columns a chunk is packed with
	// (trace.Packer.PackColumns), and the step and pipeline, for a chunk
	// whose windows must be grouped again (regroupColumns). The FLOPs are
	// measured, and the scan's totals made, when a chunk is read, with
	// every column.
	visitColumns = stagesColumns | scheduleColumns | replayColumns | regroupColumns
	// What grouping a chunk's rows into windows reads (groupWindowsIn).
	regroupColumns = trace.ColumnsOf(trace.ColStep, trace.ColPipeline)
	// What a chunk is packed with for the what-if (Options.packAll): its
	// step graphs read every column but the FLOPs (measured by the scan),
	// the process groups and every P2P op's post included.
	packAllColumns = trace.AllColumns &^ trace.ColumnsOf(trace.ColFlops)
)

// index is a trace grouped once for every pass. The rows of a window are
// at hand (window.t, window.rows) while forWindows visits it, and always
// for a trace held whole (Run: t is the trace, every window's t).
type index struct {
	t        *trace.Trace // the whole trace when held in memory; nil for RunChunks
	src      Chunks
	stepSrc  StepChunks // src, when it reads one step for less and one step is analysed; else nil
	opt      Options
	chunks   []chunkState
	tot      *scanTotals
	p        int            // stages
	windows  []*window      // (step, pipeline) groups in step, pipeline order
	complete int            // windows whose events all ended
	groups   *opGroups      // newOpGroups' result, made once
	onChunk  func(c, n int) // called before forWindows loads chunk c of n
	spare    *trace.Trace   // columns of a packed chunk done with, to unpack the next into
	// The row array of the chunk at hand's windows (rowsInUse), and one
	// done with, for the next chunk's (spareRows): recycled like spare,
	// so the visits of a streamed trace do not fault in fresh memory for
	// every chunk.
	rowsInUse, spareRows []int
	cols                 trace.ColumnSet // the columns attach unpacks of a packed chunk (0: all; visitColumns)

	// compCache and compGen: computeRows's per-worker lists (runPasses
	// makes them; without, nothing is cached for chunks not kept).
	compCache []compCache
	compGen   int
}

// newIndex is the index of a trace held whole.
func newIndex(t *trace.Trace, opt Options) *index {
	ix, err := newChunkedIndex(wholeTrace{t}, t, opt)
	if err != nil {
		panic(err) // a whole trace is one chunk, always at hand
	}
	return ix
}

// measureFactors fills Steps, Utilization and the measured Bubble from the
// windows (step 2 of Run).
func measureFactors(ix *index, rep *Report) {
	p := float64(ix.p)
	var sumBusy, sumMax, sumT, sumMean float64
	var warm, cool, steady float64
	for _, g := range ix.windows {
		w := g.measured
		rep.Steps = append(rep.Steps, w)
		if !w.Complete {
			rep.Findings = append(rep.Findings, Finding{Severity: "warning", Code: CodeIncompleteStep,
				Message: fmt.Sprintf("step %d, pipeline %d: some events never ended (a hung or killed job); left out of the factors", w.Step, w.Pipeline)})
			continue
		}
		T := float64(w.EndNs - w.StartNs)
		if T <= 0 {
			continue
		}
		var max, sum float64
		for _, b := range w.BusyNs {
			sum += float64(b)
			max = math.Max(max, float64(b))
		}
		sumBusy += sum
		sumMax += max
		sumMean += sum / p
		sumT += T
		warm += g.idle.warmup
		cool += g.idle.cooldown
		steady += g.idle.steady
	}
	if sumT <= 0 {
		return
	}
	u := &rep.Utilization
	u.Pipeline = sumBusy / (p * sumT)
	u.Bubble = 1 - sumMax/sumT
	if sumMax > 0 {
		u.Balance = sumMean / sumMax
	}
	rep.Bubble.Measured = u.Bubble
	total := p * sumT
	rep.Bubble.Warmup, rep.Bubble.Cooldown, rep.Bubble.Steady = warm/total, cool/total, steady/total
	computeFactors(ix, rep, sumBusy)
}

func jobOf(ix *index) Job {
	m := ix.tot.meta
	j := Job{WorldSize: m.WorldSize, PP: m.PP, TP: m.TP, DP: m.DP, Virtual: m.Virtual,
		MicroBatches: m.MicroBatches, Schedule: m.Schedule, Events: ix.tot.events}
	if j.WorldSize == 0 {
		j.WorldSize = len(ix.tot.ranks)
	}
	if j.PP == 0 {
		j.PP = ix.p
	}
	if j.Virtual == 0 {
		j.Virtual = 1
	}
	if j.MicroBatches == 0 {
		j.MicroBatches = ix.tot.fMBs.len()
	}
	return j
}

// maxScheduleActions bounds p x m x v of a schedule built from a trace's
// sizes (a schedule has about 6 actions per (stage, micro-batch, chunk)).
const maxScheduleActions = 1 << 22

// buildSchedule is schedule.New for sizes that come from a trace's metadata,
// which is untrusted: a claim of a billion micro-batches is refused rather
// than built.
func buildSchedule(name string, p, m, v int) (*schedule.Schedule, error) {
	if p <= 0 || m <= 0 || v <= 0 || p > maxScheduleActions || m > maxScheduleActions/p || v > maxScheduleActions/(p*m) {
		return nil, fmt.Errorf("schedule %s with p=%d m=%d v=%d: too large to build", name, p, m, v)
	}
	return schedule.New(name, p, m, v)
}

// theoretical is the bubble of the identified schedule (or, failing that,
// the one the metadata names) replayed with each kind's mean cost on every
// stage and free communication (DESIGN.md). For GPipe, 1F1B and interleaved
// this is the closed form whatever the costs; it also covers ZB-H1 with
// unequal F, B and W and ragged micro-batch counts.
func theoretical(ix *index, rep *Report) *float64 {
	name, v := rep.Schedule.Identified, rep.Schedule.Virtual
	if name == "" {
		name, v = rep.Job.Schedule, rep.Job.Virtual
	}
	v = max(v, 1)
	if name == "" || rep.Job.PP == 0 || rep.Job.MicroBatches == 0 {
		return nil
	}
	s, err := buildSchedule(name, rep.Job.PP, rep.Job.MicroBatches, v)
	if err != nil {
		return nil
	}
	// Mean op duration per kind over all stages; ReplayBubble takes a whole
	// stage's cost, of which one chunk is 1/v.
	mean := func(d func(StageSummary) Dist) float64 {
		var sum float64
		var n int
		for _, st := range rep.Stages {
			sum += d(st).MeanMs * float64(d(st).N)
			n += d(st).N
		}
		if n == 0 {
			return 0
		}
		return sum / float64(n) * float64(v)
	}
	f := mean(func(s StageSummary) Dist { return s.F })
	b := mean(func(s StageSummary) Dist { return s.B })
	w := mean(func(s StageSummary) Dist { return s.W })
	bubble := math.NaN()
	if f > 0 && b > 0 {
		bubble = s.ReplayBubble(f, b, w)
	}
	if math.IsNaN(bubble) {
		bubble = s.TheoreticalBubble()
	}
	return &bubble
}

// window is the rows of one (step, pipeline).
type window struct {
	step      int64
	pipeline  int32
	chunk     int          // the chunk holding its rows
	size      int          // its rows
	t         *trace.Trace // the trace (chunk) its rows index; nil when not at hand
	rows      []int        // row indices into t, in trace order (rank, seq); nil when not at hand
	vSeen     int          // 1 + the largest chunk (< maxChunks) of its compute rows; 0 when none
	flops     windowFlops  // FLOPs of its compute rows
	measuredP int          // the number of stages it was measured with
	measured  StepWindow
	idle      idleParts
	// spanS and spanE are the earliest start and latest end of any row of
	// the window, every kind included (MaxInt64 and MinInt64 when none).
	spanS, spanE int64
	// sorted: its rows are in (rank, seq) order (found by measureWindow;
	// a chunk read again has the same rows). Passes that need that order
	// skip checking it; false only means "not known".
	sorted bool
	// comp is its F, B and W rows, in trace order, once computeRows made
	// them, for a window whose chunk is kept (nil otherwise).
	comp []int
	// runs are its rows as runs of consecutive rows of its chunk, when the
	// chunk is packed (RunChunks); nil otherwise.
	runs []rowRun
	// posts are the posts (IssueNs) of the ranks whose first row (in
	// (rank, seq) order) is a send or a receive, by rank ascending: the
	// only issue times the analysis reads (a replay starts such a rank at
	// its post), kept when the window is measured with every column so
	// that a packed chunk need not hold the issue column (replayColumns).
	posts []rankPost
}

// rankPost is the post of a rank's first row in a window, when that row
// is a send or a receive.
type rankPost struct {
	rank trace.Rank
	row  int   // the row, in the window's chunk
	post int64 // its IssueNs (trace.NoTime when not recorded)
}

// compCache is one worker's F, B and W rows of the window it last
// visited (index.computeRows), for a window whose chunk is not kept.
type compCache struct {
	gen, k int
	rows   []int
}

// computeRows returns window k's F, B and W rows, in trace order: the rows
// the per-group passes read; the window must be at hand, on worker w. The
// list is made on first use: kept with the window when its chunk is kept,
// else in the worker's cache until its next window or the end of the
// visit (the passes of one visit see a window in turn on one worker), so
// memory stays bounded by the chunks at hand.
func (ix *index) computeRows(w, k int) []int {
	g := ix.windows[k]
	if g.comp != nil {
		return g.comp
	}
	if ix.chunks[g.chunk].kept != nil {
		g.comp = appendComputeRows(nil, g)
		return g.comp
	}
	if w >= len(ix.compCache) {
		return appendComputeRows(nil, g)
	}
	c := &ix.compCache[w]
	if c.gen != ix.compGen || c.k != k {
		c.rows, c.gen, c.k = appendComputeRows(c.rows[:0], g), ix.compGen, k
	}
	return c.rows
}

// appendComputeRows appends g's F, B and W rows to dst.
func appendComputeRows(dst []int, g *window) []int {
	kinds := g.t.Kind
	if dst == nil {
		n := 0
		for _, i := range g.rows {
			if kinds[i].IsCompute() {
				n++
			}
		}
		dst = make([]int, 0, n)
	}
	for _, i := range g.rows {
		if kinds[i].IsCompute() {
			dst = append(dst, i)
		}
	}
	return dst
}

// endVisit ends the workers' cached compute rows (computeRows): the
// next visit reads the chunks again.
func (ix *index) endVisit() { ix.compGen++ }

// groupWindows groups the rows of t by (step, pipeline), keeping only
// opt.Step unless it is AllSteps, and returns the groups in step, pipeline
// order, each with its rows in trace order.
//
// Rows come in runs of one (step, pipeline) (a trace in (rank, seq) order
// has one run per rank and step), so a group is looked up once per run, not
// once per row; every group's rows share one backing array.
func groupWindows(t *trace.Trace, opt Options) []*window {
	ws, _ := groupWindowsIn(t, opt, nil)
	return ws
}

// groupWindowsIn is groupWindows with the groups' rows in buf when it has
// the capacity (else in a new array); it returns the array used, for the
// next chunk once these groups are done with (index.spareRows).
func groupWindowsIn(t *trace.Trace, opt Options, buf []int) ([]*window, []int) {
	type key struct {
		step int64
		pipe int32
	}
	type run struct{ lo, hi, win int }
	byKey := map[key]int{}
	var wins []*window
	var runs []run
	var sizes []int
	total := 0
	n := t.Len()
	steps, pipes := t.Step[:n], t.Pipeline[:n]
	stepEnd := 0 // the end of the run of rows of steps[lo]'s step
	for lo := 0; lo < n; {
		// The run: its rows of the same step (found once per run of the
		// step, not once per run of a pipeline within it: rows of one step
		// ordered by rank would make that quadratic), then of the same
		// pipeline among those (two tight loops, one column each).
		st, pp := steps[lo], pipes[lo]
		if lo >= stepEnd {
			stepEnd = lo + 1
			for stepEnd < n && steps[stepEnd] == st {
				stepEnd++
			}
		}
		hi := stepEnd
		for j, x := range pipes[lo+1 : stepEnd] {
			if x != pp {
				hi = lo + 1 + j
				break
			}
		}
		if opt.Step < 0 || st == opt.Step {
			k := key{st, pp}
			id, ok := byKey[k]
			if !ok {
				id = len(wins)
				byKey[k] = id
				wins = append(wins, &window{step: st, pipeline: pp})
				sizes = append(sizes, 0)
			}
			runs = append(runs, run{lo, hi, id})
			sizes[id] += hi - lo
			total += hi - lo
		}
		lo = hi
	}
	all := rowsBuf(buf, total)
	off := 0
	for id, g := range wins {
		g.rows = all[off : off+sizes[id] : off+sizes[id]]
		sizes[id] = off // now where the window's next run goes
		off += len(g.rows)
	}
	for _, r := range runs {
		dst := all[sizes[r.win] : sizes[r.win]+r.hi-r.lo]
		for j := range dst {
			dst[j] = r.lo + j
		}
		sizes[r.win] += len(dst)
	}
	slices.SortFunc(wins, func(a, b *window) int {
		return cmp.Or(cmp.Compare(a.step, b.step), cmp.Compare(a.pipeline, b.pipeline))
	})
	return wins, all
}

// rowsBuf is buf with n rows when it has the capacity, else a new array.
// (Its rows are overwritten: they need not be zero.)
func rowsBuf(buf []int, n int) []int {
	if cap(buf) >= n {
		return buf[:n]
	}
	return hugepage.Make[int](n) // 8 bytes a row of the trace, fresh (internal/hugepage)
}

func countSteps(groups []*window) int {
	n := 0
	for i, g := range groups {
		if i == 0 || g.step != groups[i-1].step {
			n++
		}
	}
	return n
}

// inPipeline reports whether kind k counts toward the step window: F, B, W
// and P2P. OPT, DATA and the like are step overhead, reported beside it.
func inPipeline(k trace.Kind) bool { return k.IsCompute() || k.IsP2P() }

type idleParts struct{ warmup, cooldown, steady float64 }

// measureScratch holds the buffers measureWindow reuses between windows.
type measureScratch struct {
	compute [][]interval // per stage
	union   unionScratch
}

// measureWindow computes the window, per-stage busy time and the idle split
// of one (step, pipeline), and sets g.spanS, g.spanE, g.sorted, and g.flops
// and g.vSeen: the FLOPs of its compute rows, summed in row order (left as
// they are when t holds no FLOPs: a packed chunk measured again), and 1 +
// their largest chunk in [0, maxChunks) (0 when none).
func measureWindow(t *trace.Trace, g *window, p int, sc *measureScratch) (StepWindow, idleParts) {
	w := StepWindow{Step: g.step, Pipeline: g.pipeline, StartNs: math.MaxInt64, EndNs: math.MinInt64, Complete: true, BusyNs: make([]int64, p)}
	if len(sc.compute) < p {
		sc.compute = make([][]interval, p)
	}
	compute := sc.compute[:p]
	for st := range compute {
		compute[st] = compute[st][:0]
	}
	spanS, spanE := int64(math.MaxInt64), int64(math.MinInt64)
	kinds, starts, ends, stages, ranks, seqs := t.Kind, t.StartNs, t.EndNs, t.Stage, t.Rank, t.Seq
	// A packed chunk unpacked again (remeasure) holds no FLOPs
	// (visitColumns): the window keeps those measured when it was read.
	withFlops := len(t.Flops) > 0
	sorted := true
	prevRank, prevSeq := trace.Rank(math.MinInt32), int64(math.MinInt64)
	var flops windowFlops
	vSeen := 0
	for _, i := range g.rows {
		k := kinds[i]
		if k.IsCompute() {
			if c := t.Chunk[i]; c >= 0 && c < maxChunks {
				vSeen = max(vSeen, int(c)+1)
			}
			if withFlops {
				if t.Flops[i] == 0 {
					flops.missing = true
				}
				flops.sum += t.Flops[i]
			}
		}
		if r, sq := ranks[i], seqs[i]; r < prevRank || r == prevRank && sq < prevSeq {
			sorted = false
		} else {
			prevRank, prevSeq = r, sq
		}
		s, e := starts[i], ends[i]
		if s != trace.NoTime {
			spanS = min(spanS, s)
		}
		if e != trace.NoTime {
			spanE = max(spanE, e)
		}
		if !inPipeline(k) {
			if e == trace.NoTime {
				w.Complete = false
			}
			continue
		}
		if e == trace.NoTime {
			w.Complete = false
			continue
		}
		w.StartNs = min(w.StartNs, s)
		w.EndNs = max(w.EndNs, e)
		if k.IsCompute() {
			st := stages[i]
			compute[st] = append(compute[st], interval{s, e})
		}
	}
	g.spanS, g.spanE, g.sorted = spanS, spanE, sorted
	g.vSeen = vSeen
	if withFlops {
		g.flops = flops
	}
	if len(t.IssueNs) > 0 {
		// (An unpacked chunk's windows keep the posts found when it was
		// read: it holds no issue times.)
		g.posts = firstPosts(t, g.rows, sorted, g.posts[:0])
	}
	var parts idleParts
	if w.StartNs > w.EndNs {
		w.StartNs, w.EndNs, w.Complete = 0, 0, false
		return w, parts
	}
	T := float64(w.EndNs - w.StartNs)
	var max, sum float64
	for st := 0; st < p; st++ {
		u := unionRuns(compute[st], &sc.union)
		var busy int64
		for _, iv := range u {
			busy += iv.e - iv.s
		}
		w.BusyNs[st] = busy
		fb := float64(busy)
		sum += fb
		max = math.Max(max, fb)
		if len(u) == 0 {
			parts.steady += T
			continue
		}
		parts.warmup += float64(u[0].s - w.StartNs)
		parts.cooldown += float64(w.EndNs - u[len(u)-1].e)
		parts.steady += T - fb - float64(u[0].s-w.StartNs) - float64(w.EndNs-u[len(u)-1].e)
	}
	if T > 0 {
		w.Bubble = 1 - max/T
		w.UPipeline = sum / (float64(p) * T)
	}
	if max > 0 {
		w.Balance = sum / float64(p) / max
	}
	return w, parts
}

// firstPosts appends to dst the post of each rank's first row among rows
// (in (rank, seq) order: rows' own order when sorted), for the ranks whose
// first row is a send or a receive, by rank ascending.
func firstPosts(t *trace.Trace, rows []int, sorted bool, dst []rankPost) []rankPost {
	if !sorted {
		rows = slices.Clone(rows)
		slices.SortStableFunc(rows, func(i, j int) int {
			if c := cmp.Compare(t.Rank[i], t.Rank[j]); c != 0 {
				return c
			}
			return cmp.Compare(t.Seq[i], t.Seq[j])
		})
	}
	ranks, kinds, issue := t.Rank, t.Kind, t.IssueNs
	for x, i := range rows {
		if x > 0 && ranks[i] == ranks[rows[x-1]] {
			continue
		}
		if k := kinds[i]; k.IsSend() || k.IsRecv() {
			dst = append(dst, rankPost{rank: ranks[i], row: i, post: issue[i]})
		}
	}
	return dst
}

// stepTimes returns the median and the worst over steps of the time from the
// step's first start to its last end, every kind and pipeline included.
func stepTimes(groups []*window) (medianMs, worstMs float64) {
	var ms []float64
	for lo := 0; lo < len(groups); {
		s, e := int64(math.MaxInt64), int64(math.MinInt64)
		hi := lo
		for ; hi < len(groups) && groups[hi].step == groups[lo].step; hi++ {
			s, e = min(s, groups[hi].spanS), max(e, groups[hi].spanE)
		}
		lo = hi
		if e >= s {
			ms = append(ms, float64(e-s)/1e6)
		}
	}
	for _, x := range ms {
		worstMs = math.Max(worstMs, x)
	}
	return median(ms), worstMs
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
