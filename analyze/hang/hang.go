package hang

import (
	"errors"
	"fmt"

	"github.com/ppprof/ppprof/trace"
)

// SchemaID is the value of the "schema" key of `hang --format json`.
const SchemaID = "ppprof.hang/v1"

// Verdict is the one-word outcome of Run (DESIGN.md "Contracts").
type Verdict string

// The verdicts, from best to worst news; Incomplete means the dump cannot
// decide.
const (
	VerdictOK         Verdict = "ok"         // every op matched, labels agree, nothing pending
	VerdictDeadlock   Verdict = "deadlock"   // blocked ranks wait for each other in a cycle
	VerdictStalled    Verdict = "stalled"    // blocked ranks wait, through a chain, for a rank that does no P2P (computing, crashed, exited, absent)
	VerdictMismatch   Verdict = "mismatch"   // a matched pair disagrees (the job may have completed), or the hang ends at a pair that can never complete
	VerdictIncomplete Verdict = "incomplete" // the diagnosis needs events the dump lost (a truncated file, a missing rank file)
)

// Found reports whether v is a hang or mismatch the command must signal
// (exit code 4): deadlock, stalled or mismatch. ok and incomplete are not.
func (v Verdict) Found() bool {
	return v == VerdictDeadlock || v == VerdictStalled || v == VerdictMismatch
}

// MismatchKind names what disagrees (DESIGN.md "Contracts").
type MismatchKind string

// The mismatch kinds. Pair kinds (the first six) are about one send and one
// receive of an ordered rank pair; the others are about a whole rank.
const (
	MissingSend           MismatchKind = "missing_send"            // a pending receive that no send matches
	MissingRecv           MismatchKind = "missing_recv"            // a pending send that no receive matches
	ShapeMismatch         MismatchKind = "shape_mismatch"          // a matched pair with the same labels and different shapes
	DtypeMismatch         MismatchKind = "dtype_mismatch"          // same labels and shape, different dtypes
	BytesMismatch         MismatchKind = "bytes_mismatch"          // same labels, shape and dtype (or unknown), different byte counts
	OrderMismatch         MismatchKind = "order_mismatch"          // a pair matched by issue order carries different step, micro-batch or kind labels
	RankAbsent            MismatchKind = "rank_absent"             // no events from a rank the job has
	EarlyExit             MismatchKind = "early_exit"              // a rank stopped recording while others wait for it
	OptimizerSkipMismatch MismatchKind = "optimizer_skip_mismatch" // OPT_SKIP on some ranks, OPT on others, in one step

	// Collective kinds (an extension of DESIGN.md's list): about one
	// collective of a process group, by sequence number.
	CollectiveMismatch      MismatchKind = "collective_mismatch"       // members posted different collectives under one sequence number
	CollectiveDtypeMismatch MismatchKind = "collective_dtype_mismatch" // members of one collective give different dtypes
	CollectiveSizeMismatch  MismatchKind = "collective_size_mismatch"  // members of one all-reduce, all-gather, reduce-scatter, broadcast or reduce give different sizes
	MissingCollective       MismatchKind = "missing_collective"        // a pending collective some members of its group never posted
)

// State is what a rank was doing when the dump was written.
type State string

// The rank states.
const (
	StateDone    State = "done"    // nothing pending and nobody waits for it
	StateRecv    State = "recv"    // blocked in a receive
	StateSend    State = "send"    // only sends pending: waiting for them to complete before its optimizer step
	StateBarrier State = "barrier" // posted OPT (or OPT_SKIP): waiting for every rank to reach the optimizer step
	StateCompute State = "compute" // in an op that is not P2P and not OPT (F, B, W, DATA...) that never ended: stuck or died there
	// StateCollective: blocked in a collective of a known process group
	// (its first pending op that is not a send), which waits for the
	// members that have not joined it.
	StateCollective State = "collective"
	// StateIdle: wrote a dump (Options.Dumps) with nothing in flight: its
	// host stopped issuing work.
	StateIdle   State = "idle"
	StateExited State = "exited" // nothing pending, last op an optimizer step, and others wait for it: it left early
	StateSilent State = "silent" // nothing pending, last op mid-step, and others wait for it: it died without a record, or lost its last events
	StateAbsent State = "absent" // no events at all
)

// KindOptSkip is the free-form kind a rank records instead of OPT when it
// skips its optimizer step (as sim's optskip fault does).
var KindOptSkip = trace.MustKind("OPT_SKIP")

// MaxRanks bounds the rank ids Run accepts (ranks are indexed densely).
const MaxRanks = 1 << 22

// Options gives Run what the trace alone does not say.
type Options struct {
	// DumpNs is the time the dump was written, on the trace's time base.
	// 0 means the latest timestamp (issue, start or end) anywhere in the
	// trace. Waiting times (Blocked.WaitNs) are measured up to it.
	DumpNs int64
	// WorldSize is the number of ranks of the job; 0 means the trace's
	// world_size metadata. Ranks below it with no events are absent.
	WorldSize int
	// Files describes the files the trace was read from (one per rank for a
	// collector's dump). A file that lost data (BytesLost > 0) marks its
	// ranks as incomplete: a diagnosis that depends on them says so instead
	// of blaming them. Nil when unknown.
	Files []File
	// Groups describes the process groups of the trace's Group column, by
	// name: a collective's members are its group's ranks (for a group not
	// listed, the ranks that have collectives in it). Nil when unknown.
	Groups map[string]Group
	// Dumps holds, per rank, what its communicator dump (a PyTorch Flight
	// Recorder file) says beyond its rows: a rank with a dump and nothing
	// in flight is idle, not absent, and the dumps' progress tells which
	// collectives a member completed when its rows do not. Nil when the
	// trace does not come from such dumps.
	Dumps map[trace.Rank]Dump
	// Progress, when not nil, is called by RunChunks before it reads each
	// chunk (done chunks of total), and by Run as each of its phases starts
	// (done of RunPhases, then RunPhases of RunPhases at the end), from
	// the calling goroutine. For a progress bar; it does not change the
	// report.
	Progress func(done, total int)
}

// File is what the reader knows about one input file.
type File struct {
	Path      string
	Ranks     []trace.Rank // ranks whose events the file holds
	Truncated bool         // cut off, or never closed by its writer (normal for a hung or killed job)
	BytesLost int64        // bytes after the last complete batch or row: events that were written and lost
}

// Report is the result of Run. Times are ns on the trace's time base.
type Report struct {
	Verdict   Verdict
	RootCause RootCause
	Job       Job
	DumpNs    int64 // when the dump was written (Options.DumpNs, or the latest timestamp)
	DumpGiven bool  // DumpNs came from Options

	Ranks      []RankState   // every rank of the job, by rank
	Blocked    []Blocked     // every op with a null end, by (rank, seq)
	Cycle      []trace.Rank  // ranks of the first wait-for cycle, in wait order; nil when none
	Path       []Node        // the cycle (first node repeated at the end), or the stall chain from a waiting rank to the root; nil when neither
	Mismatches []Mismatch    // first divergences first (by step, then time), then rank-level kinds
	Divergence *Divergence   // the first op where a rank left its schedule; nil when none or the schedule is unknown
	Matched    int           // send/recv pairs matched by issue order
	Notes      []string      // what the analysis assumed or could not use
	Cycles     int           // wait-for cycles found (Cycle shows the first)
	States     map[State]int // number of ranks in each state
	// Collectives lists every collective pending on some member: its
	// groups in the order of their first such collective, each by seq.
	Collectives []Collective
}

// Job is the shape of the job as the trace and Options describe it.
type Job struct {
	WorldSize    int
	PP, DP, TP   int
	Virtual      int
	MicroBatches int
	Schedule     string
	Events       int
	RanksPresent int // ranks with at least one event
}

// RankState is one rank at dump time.
type RankState struct {
	Rank          trace.Rank
	Stage         trace.Stage // -1 when unknown (an absent rank without pp/dp/tp metadata)
	Pipeline      int32       // -1 when unknown
	TPRank        int32       // -1 when unknown
	State         State
	Events        int
	Pending       int          // ops with a null end
	LastCompleted *trace.Event // its last op (by seq) with an end; nil when none
	Waiting       *trace.Event // the op it is blocked in; nil when none
	// WaitsFor is the rank it waits for, NoRank when none or when it waits
	// in the optimizer barrier (WaitsBarrier) or in a collective
	// (WaitsCollective).
	WaitsFor     trace.Rank
	WaitsBarrier bool
	// WaitsCollective is the collective node it waits in (blocked in a
	// collective no member completed), and WaitsOn the members that node
	// waits for (never posted it, or blocked in an earlier op); nil when
	// none.
	WaitsCollective *Node
	WaitsOn         []trace.Rank
	// Terminal says why a blocked rank waits for no one: "pair can never
	// complete", "transfer never completed", "never ended", "stopped",
	// "no events"; "" when it waits for someone or is not blocked.
	Terminal   string
	Truncated  bool   // its file was cut off or not closed
	BytesLost  int64  // bytes its file lost
	Lost       bool   // events of this rank are evidently missing from the dump
	LostReason string // why Lost
}

// Blocked is one op with a null end: posted (or started) and never completed.
type Blocked struct {
	Op      trace.Event
	WaitNs  int64        // dump time - issue time: how long it had been waiting, >= 0
	Partner *trace.Event // the op it matched on the peer (NCCL order); nil when unmatched or not P2P
}

// Mismatch is one disagreement. Pair kinds describe the first pair (or
// unmatched op) of an ordered rank pair that shows the kind, and count the
// others of that pair; Ranks is then [sender, receiver].
type Mismatch struct {
	Kind       MismatchKind
	Ranks      []trace.Rank
	Step       int64            // -1 when no step applies
	MicroBatch trace.MicroBatch // -1 when none applies; for order_mismatch the label the suspect's peer expected (the smaller of the two when no suspect)
	Detail     string
	Count      int          // occurrences this entry stands for, >= 1
	Send, Recv *trace.Event // the pair's ops, when a pair kind (either may be nil for missing_*)
	Suspect    trace.Rank   // the rank that most likely diverged; NoRank when the trace cannot tell
	// Collective is the collective a collective kind is about (Ranks then
	// names the members that differ, or those that never posted it);
	// nil for the others.
	Collective *Collective
}

// Divergence is where a rank's ops first depart from its stage's action list
// in the schedule the metadata names.
type Divergence struct {
	Rank       trace.Rank
	Step       int64
	Index      int              // position of the op among the rank's F/B/W/P2P ops of the step, from 0
	Got        *trace.Event     // the op found there; nil when the rank went on to its optimizer step
	Want       string           // the schedule's action there, e.g. "RECV_F mb 6 chunk 0"
	Skipped    bool             // the rank has no op at all of the expected micro-batch in the step
	Late       bool             // the expected op comes later in the rank's ops (reordered)
	MicroBatch trace.MicroBatch // the expected action's micro-batch
}

// RootCause is the answer: the rank to look at and one sentence on why.
type RootCause struct {
	Rank       trace.Rank       // NoRank when the verdict is ok
	Stage      trace.Stage      // -1 when unknown
	Step       int64            // -1 when unknown
	MicroBatch trace.MicroBatch // -1 when none applies
	Reason     string           // a stable code: skipped_microbatch, reordered_sends, shape_mismatch, ...
	Summary    string
	Candidates []trace.Rank // set when the trace cannot decide between these ranks
}

// Node is one node of a wait-for path: a rank, the optimizer barrier of a
// step (which waits for every rank that has not reached it), or a
// collective (Group set: it waits for the members that have not joined it).
type Node struct {
	Rank    trace.Rank // NoRank for a barrier or collective node
	Barrier bool
	Step    int64 // the barrier's step

	Group    string     // a collective node's process group; "" otherwise
	GroupSeq int64      // its sequence number in the group
	Kind     trace.Kind // its kind
}

// IsRank reports whether n is a rank (not a barrier or a collective).
func (n Node) IsRank() bool { return !n.Barrier && n.Group == "" }

// Run diagnoses t, the events a job's ranks recorded before the dump. It
// never modifies t. t should have passed trace.Validate (ingest runs it);
// Run needs no particular row order (rows are ordered by (rank, seq) first
// when they are not) and returns an error for a trace it cannot index: no
// events, a negative rank, a P2P op without a peer or to itself, rank ids of
// MaxRanks or more.
//
// The algorithm, in the order Run applies it:
//
//  1. Per rank: row range, the last completed op, the ops with a null end,
//     and the op it is blocked in (its first pending op that is not a send;
//     or, with only sends pending, its first pending send).
//  2. Matching (NCCL semantics): per ordered pair (src, dst), the k-th send
//     of src to dst meets the k-th receive of dst from src, whatever their
//     labels. One pass over the ranks (each in seq order, batches of
//     ranks along their chains), with arrays indexed by rank (no
//     hashing): an op meets the first waiting op of its channel's other
//     side, or is listed to wait for it; linear in the ops. Each pair is
//     checked for step/micro-batch/kind labels (order_mismatch), then
//     shape, dtype and bytes. The partners of pending ops are kept.
//     2b. Collectives (collective.go): per process group and sequence
//     number, which members posted, completed, or never posted the
//     collective (a member whose last seq in the group is lower), and
//     whether they agree on its kind, dtype and size. A rank blocked in a
//     collective is in state collective; one whose dump holds nothing in
//     flight is idle.
//  3. Lost data: ranks whose file lost bytes, and ranks whose peers hold
//     completed ops that no op of theirs matches (their events are missing).
//  4. Schedule check: with a known schedule in the metadata, each rank's
//     F/B/W/P2P ops of a step are compared with its stage's action list;
//     the first departure names a skipped micro-batch or a reordered send.
//  5. Wait-for graph: a rank blocked in an unmatched receive (or send) waits
//     for the peer; one in OPT waits for the step's barrier node, which
//     waits for every rank that has not posted OPT of that step. A matched
//     pair that never completed waits for nobody when its byte counts
//     differ (it can never complete) or when the peer has moved on
//     (sends do not block it), and for the peer when the peer stopped or
//     posted first and never started, or is blocked in an op before its
//     side. A rank in a collective waits for the collective's node, which
//     waits for the members that never posted it and those blocked in an
//     earlier op; a collective some member completed, or whose members
//     disagree, waits for nobody. Ranks in compute, stopped, idle or absent
//     wait for nobody. Cycles are found with Tarjan's algorithm.
//  6. Verdict and root cause, see Verdict.
func Run(t *trace.Trace, opt Options) (*Report, error) {
	if t == nil || t.Len() == 0 {
		return nil, errors.New("hang: trace has no events")
	}
	phase := func(done int) {
		if opt.Progress != nil {
			opt.Progress(done, RunPhases)
		}
	}
	phase(0) // the ranks indexed
	a, err := indexRanks(t, opt, true)
	if err == errUnsorted {
		t = sortedCopy(t)
		a, err = newAnalysis(t, opt)
	}
	if err != nil {
		return nil, err
	}
	a.scanRanks() // 1
	// Matching sends and receives, then collectives.
	phase(1)
	// The schedule check reads only the rows and the ranks' row ranges,
	// and writes only its divergences: it runs beside matching, and its
	// notes take their place after.
	prog := make(chan struct{})
	var progPanic any
	go func() {
		defer func() {
			progPanic = recover() // raised again by Run's goroutine
			close(prog)
		}()
		a.checkProgram() // 4
	}()
	a.match()            // 2
	a.matchCollectives() // 2b
	a.markLost()         // 3
	<-prog
	if progPanic != nil {
		panic(progPanic)
	}
	a.rep.Notes = append(a.rep.Notes, a.progNotes...)
	// The wait-for graph, the verdict.
	phase(2)
	a.buildGraph()        // 5
	a.collectMismatches() // 2, 5: the list
	a.decide()            // 6
	phase(RunPhases)
	return a.rep, nil
}

// RunPhases is the number of phases Run reports to Options.Progress.
const RunPhases = 3

// sortedByRankSeq reports whether t's rows are ordered by (rank, seq).
func sortedByRankSeq(t *trace.Trace) bool {
	for i := 1; i < t.Len(); i++ {
		if t.Rank[i] < t.Rank[i-1] || t.Rank[i] == t.Rank[i-1] && t.Seq[i] <= t.Seq[i-1] {
			return false
		}
	}
	return true
}

// sortedCopy returns t's rows ordered by (rank, seq), leaving t alone:
// SortByRankSeq gives the copy new column slices.
func sortedCopy(t *trace.Trace) *trace.Trace {
	c := *t
	c.SortByRankSeq()
	return &c
}

// rankError is returned for rank ids Run cannot index.
func rankError(r int64) error {
	return fmt.Errorf("hang: rank %d: rank ids of %d or more are not supported", r, MaxRanks)
}

// rowError says what is wrong with row i, which Run cannot index.
func rowError(t *trace.Trace, i int, what string) error {
	return fmt.Errorf("hang: row %d (rank %d, seq %d): %s (run trace.Validate first)", i, t.Rank[i], t.Seq[i], what)
}
