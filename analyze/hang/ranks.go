package hang

import (
	"errors"
	"fmt"

	"github.com/ppprof/ppprof/trace"
)

// analysis is the state of one Run. Rows are ordered by (rank, seq); ranks
// are indexed densely by id.
type analysis struct {
	t   *trace.Trace
	opt Options
	rep *Report

	ranks []rankInfo // index: rank id; len: the job's ranks (world size, or highest id + 1)

	// Matching (match.go). partner(i) gives the matched row of a P2P op:
	// match keeps those of each rank's rows from tailFrom on (its pending
	// ops), at tail[i+tailBase]; with allPartners, of every row (tests; and
	// RunChunks, which knows those of the pending ops only, the others
	// -1).
	tail        []int32
	allPartners bool
	p2pByGroup  bool                 // channels are per process group
	p2pGroupOf  map[trace.Str]uint32 // then, 1 + each group's index
	chans       []channel
	extra       []int32        // the channels' unmatched rows (channel.extra)
	pairMM      []pairMismatch // per channel and kind, the first mismatched pair

	// Schedule check (program.go).
	divs      []Divergence // per diverging rank, its first departure; by rank
	progNotes []string     // its notes

	// Wait-for graph (graph.go).
	barriers  []barrier
	barrierOf map[int64]int32 // step -> index in barriers
	cycles    [][]int32       // node lists of the cycles found (SCCs of size > 1)
	reached   []bool          // per node: reachable from a blocked rank

	cs *collState // collective matching (collective.go); nil when the trace has no collective in a named group

	// RunChunks (chunks.go): what the chunks' rows answered, for a trace
	// that holds only the rows the chunks kept. nil for Run.
	opMemo   opMemo              // hasOp and ascending
	optSteps map[int64]*optSides // optSkips' input
}

// termKind says why a node of the wait-for graph waits for nobody.
type termKind uint8

const (
	termNone     termKind = iota // waits for another node, or is not blocked
	termCompute                  // in compute (or another non-P2P, non-OPT op) that never ended
	termStopped                  // nothing pending (exited, silent, or done)
	termAbsent                   // no events
	termStuck                    // in a matched pair that never completed, with the peer gone on
	termBadPair                  // in a matched pair whose byte counts differ: it can never complete
	termBarrier                  // an optimizer barrier every rank has reached (it never completed)
	termIdle                     // wrote a dump with nothing in flight
	termCollDone                 // in a collective another member completed: it stopped making progress itself
	termCollBad                  // in a collective whose members disagree: it can never complete
)

// rankInfo is what the analysis knows about one rank.
type rankInfo struct {
	present  bool
	lo, hi   int // its rows [lo, hi) (RunChunks: its rows the chunks kept)
	events   int // its rows in the trace
	stage    trace.Stage
	pipe, tp int32

	lastDone     int   // row of its last completed op (by seq), -1
	block        int   // row of the op it is blocked in, -1
	firstSend    int   // row of its first pending send, -1
	firstPending int   // row of its first pending op, -1
	pending      int   // ops with a null end
	maxIssue     int64 // latest issue time: its last sign of life
	maxStep      int64 // highest step of its rows, -1
	lastOptStep  int64 // highest step of its OPT/OPT_SKIP rows, -1
	optDone      int64 // highest step of its OPT/OPT_SKIP rows that completed, -1
	state        State

	truncated bool
	bytesLost int64
	lost      bool
	lostWhy   string

	waitsFor int32 // graph node it waits for, -1
	term     termKind

	tailFrom, tailBase int // partners kept: rows from tailFrom, at analysis.tail[row+tailBase]
}

// rankRun is one rank's run of rows, summed up by newAnalysis.
type rankRun struct {
	r    trace.Rank
	info rankInfo
}

// errUnsorted is newAnalysis's answer for rows not ordered by (rank, seq).
var errUnsorted = errors.New("hang: rows not ordered by (rank, seq)")

// rowError is indexRanks's error for row i, which Run cannot index; or,
// with ordered, errUnsorted when the rows are not ordered by (rank, seq)
// (Run orders them first: the error then names the row of the ordered
// copy).
func (a *analysis) rowError(i int, what string, ordered bool) error {
	if ordered && !sortedByRankSeq(a.t) {
		return errUnsorted
	}
	return rowError(a.t, i, what)
}

// newAnalysis indexes t's ranks, whose rows are ordered by (rank, seq),
// sums up each rank's rows (scanRanks classifies them) and fixes the dump
// time.
func newAnalysis(t *trace.Trace, opt Options) (*analysis, error) {
	return indexRanks(t, opt, false)
}

// indexRanks is newAnalysis; with ordered, it returns errUnsorted for rows
// not ordered by (rank, seq) (Run orders them then).
func indexRanks(t *trace.Trace, opt Options, ordered bool) (*analysis, error) {
	a := newReport(t, opt, t.Len())
	runs, maxRank, latest, err := a.scanRows(ordered)
	if err != nil {
		return nil, err
	}
	if err := a.finishIndex(runs, maxRank, latest); err != nil {
		return nil, err
	}
	return a, nil
}

// newReport starts the analysis of t, a trace of events rows (the whole
// trace's, when t holds only some of them: RunChunks).
func newReport(t *trace.Trace, opt Options, events int) *analysis {
	a := &analysis{t: t, opt: opt, rep: &Report{States: map[State]int{}}}
	m := t.Meta
	a.rep.Job = Job{WorldSize: m.WorldSize, PP: m.PP, DP: m.DP, TP: m.TP, Virtual: m.Virtual,
		MicroBatches: m.MicroBatches, Schedule: m.Schedule, Events: events}
	if opt.WorldSize > 0 {
		a.rep.Job.WorldSize = opt.WorldSize
	}
	return a
}

// scanRows checks a.t's rows and sums up each rank's run of rows, in one
// pass; it returns the runs, the highest rank or peer of any row (-1 when
// none) and the latest timestamp (issue, start or end).
func (a *analysis) scanRows(ordered bool) (runs []rankRun, maxRank, latest int64, err error) {
	t := a.t
	maxRank = -1
	latest = int64(trace.NoTime)
	// One run per rank: as many as the job's ranks when it says.
	runs = make([]rankRun, 0, min(max(a.rep.Job.WorldSize, 16), t.Len(), MaxRanks))
	n := t.Len()
	rank, kind, peer, seq := t.Rank[:n], t.Kind[:n], t.Peer[:n], t.Seq[:n]
	issue, start, end, step := t.IssueNs[:n], t.StartNs[:n], t.EndNs[:n], t.Step[:n]
	optSkip := KindOptSkip
	maxPeer := trace.Rank(-1)
	latestIssue, latestStart, latestEnd := latest, latest, latest
	for lo := 0; lo < n; {
		r := rank[lo]
		switch {
		case r < 0:
			return nil, 0, 0, a.rowError(lo, "negative rank", ordered)
		case ordered && lo > 0 && r < rank[lo-1]:
			return nil, 0, 0, errUnsorted
		}
		ri := rankInfo{lo: lo, lastDone: -1, block: -1, firstSend: -1, firstPending: -1}
		// The run's sums, on locals; pending ops are few.
		maxIssue, maxStep, lastOpt, optDone := int64(0), int64(-1), int64(-1), int64(-1)
		i := lo
		for ; i < n && rank[i] == r; i++ {
			k, p := kind[i], peer[i]
			switch {
			case k.IsP2P() && (p < 0 || p == r):
				return nil, 0, 0, a.rowError(i, fmt.Sprintf("%s with peer %d", k, p), ordered)
			case ordered && i > lo && seq[i] <= seq[i-1]:
				return nil, 0, 0, errUnsorted
			}
			maxPeer = max(maxPeer, p)
			is, e, st := issue[i], end[i], step[i]
			latestIssue, latestStart, latestEnd = max(latestIssue, is), max(latestStart, start[i]), max(latestEnd, e)
			maxIssue, maxStep = max(maxIssue, is), max(maxStep, st)
			done := e != trace.NoTime
			if k == trace.Opt || k == optSkip {
				lastOpt = max(lastOpt, st)
				if done {
					optDone = max(optDone, st)
				}
			}
			if done {
				ri.lastDone = i
				continue
			}
			if ri.pending == 0 {
				ri.firstPending = i
			}
			ri.pending++
			switch {
			case k.IsSend():
				if ri.firstSend < 0 {
					ri.firstSend = i
				}
			case ri.block < 0:
				ri.block = i
			}
		}
		ri.hi, ri.events = i, i-lo
		ri.maxIssue, ri.maxStep, ri.lastOptStep, ri.optDone = maxIssue, maxStep, lastOpt, optDone
		ri.stage, ri.pipe, ri.tp = t.Stage[lo], t.Pipeline[lo], t.TPRank[lo]
		maxRank = max(maxRank, int64(r))
		runs = append(runs, rankRun{r: r, info: ri})
		lo = i
	}
	maxRank = max(maxRank, int64(maxPeer))
	latest = max(latestIssue, latestStart, latestEnd)
	return runs, maxRank, latest, nil
}

// finishIndex sizes the job's ranks from the highest rank or peer seen
// (maxRank) and the world size, fills them from runs (each a rank's run of
// rows, in rank order), fixes the dump time from the latest timestamp and
// marks the ranks whose files lost bytes.
func (a *analysis) finishIndex(runs []rankRun, maxRank, latest int64) error {
	opt, m := a.opt, a.t.Meta
	if maxRank >= MaxRanks {
		return rankError(maxRank)
	}
	n := int(maxRank) + 1
	if w := a.rep.Job.WorldSize; w > 0 {
		if w > MaxRanks {
			a.note("world size %d is more than %d: ranks without events beyond %d are not listed", w, MaxRanks, n-1)
		} else {
			n = max(n, w)
		}
		if int64(w) <= maxRank {
			a.note("the trace has rank %d but world_size is %d", maxRank, w)
		}
	}
	if a.rep.Job.WorldSize <= 0 {
		a.rep.Job.WorldSize = n
		a.note("the trace does not say the world size: taken as the highest rank seen + 1 (%d); pass it to find absent ranks beyond", n)
	}
	a.rep.DumpNs = latest
	if opt.DumpNs != 0 {
		a.rep.DumpNs, a.rep.DumpGiven = opt.DumpNs, true
	}
	if m.DroppedEvents > 0 {
		a.note("the collector dropped %d events (buffer full): ops may be unmatched for that reason", m.DroppedEvents)
	}
	a.ranks = make([]rankInfo, n)
	for r := range a.ranks {
		ri := &a.ranks[r]
		ri.lastDone, ri.block, ri.firstSend, ri.firstPending, ri.maxStep, ri.lastOptStep, ri.optDone, ri.waitsFor = -1, -1, -1, -1, -1, -1, -1, -1
		ri.stage, ri.pipe, ri.tp = a.layout(trace.Rank(r))
	}
	for _, run := range runs {
		ri := &a.ranks[run.r]
		*ri = run.info
		ri.present, ri.waitsFor = true, -1
	}
	for _, f := range opt.Files {
		for _, r := range f.Ranks {
			if r < 0 || int(r) >= n {
				continue
			}
			ri := &a.ranks[r]
			ri.truncated = ri.truncated || f.Truncated
			ri.bytesLost += f.BytesLost
			if f.BytesLost > 0 && !ri.lost {
				ri.lost = true
				ri.lostWhy = fmt.Sprintf("its file %s was cut off: %d bytes after its last complete batch were lost", f.Path, f.BytesLost)
			}
		}
	}
	return nil
}

// note adds a line to the report's notes.
func (a *analysis) note(format string, args ...any) {
	a.rep.Notes = append(a.rep.Notes, fmt.Sprintf(format, args...))
}

// layout returns the stage, pipeline and TP rank of r from the metadata's
// Megatron numbering (rank = (stage*dp + pipeline)*tp + tp_rank), or -1s
// when pp is unknown. Ranks with events take theirs from their rows.
func (a *analysis) layout(r trace.Rank) (trace.Stage, int32, int32) {
	j := a.rep.Job
	if j.PP <= 0 {
		return -1, -1, -1
	}
	dp, tp := max(j.DP, 1), max(j.TP, 1)
	if int(r) >= j.PP*dp*tp {
		return -1, -1, -1
	}
	return trace.Stage(int(r) / (dp * tp)), int32(int(r) / tp % dp), int32(int(r) % tp)
}

// isOpt reports whether k is an optimizer step (OPT or OPT_SKIP).
func isOpt(k trace.Kind) bool { return k == trace.Opt || k == KindOptSkip }

// scanRanks fills each rank's row range, last completed op, pending ops and
// the op it is blocked in, and its state before the wait-for graph refines
// stopped ranks into done, exited or silent.
func (a *analysis) scanRanks() {
	t := a.t
	for r := range a.ranks {
		ri := &a.ranks[r]
		switch {
		case !ri.present:
			ri.state = StateAbsent
			continue
		case ri.block >= 0 && isOpt(t.Kind[ri.block]):
			ri.state = StateBarrier
		case ri.block >= 0 && t.Kind[ri.block].IsRecv():
			ri.state = StateRecv
		case ri.block >= 0:
			ri.state = StateCompute
		case ri.firstSend >= 0:
			ri.block, ri.state = ri.firstSend, StateSend
		default:
			ri.state = StateDone
		}
		a.rep.Job.RanksPresent++
	}
}

// event returns row i as an Event the report may keep.
func (a *analysis) event(i int) *trace.Event {
	if i < 0 {
		return nil
	}
	e := a.t.At(i)
	return &e
}

// describeRank says "rank 5 (stage 1)", or "rank 5" when the stage is
// unknown.
func (a *analysis) describeRank(r trace.Rank) string {
	if r < 0 || int(r) >= len(a.ranks) || a.ranks[r].stage < 0 {
		return fmt.Sprintf("rank %d", r)
	}
	return fmt.Sprintf("rank %d (stage %d)", r, a.ranks[r].stage)
}

// describeOp says "RECV_F mb 6 of step 12 from rank 4", or "ALL_REDUCE
// (group 35 #7) of step 12".
func describeOp(e *trace.Event) string {
	s := e.Kind.String()
	if e.Kind.IsCollective() && e.Group != "" {
		if e.GroupSeq >= 0 {
			s += fmt.Sprintf(" (group %s #%d)", e.Group, e.GroupSeq)
		} else {
			s += fmt.Sprintf(" (group %s)", e.Group)
		}
	}
	if e.MicroBatch != trace.NoMicroBatch {
		s += fmt.Sprintf(" mb %d", e.MicroBatch)
	}
	if e.Chunk != 0 {
		s += fmt.Sprintf(" chunk %d", e.Chunk)
	}
	s += fmt.Sprintf(" of step %d", e.Step)
	switch {
	case e.Kind.IsSend():
		s += fmt.Sprintf(" to rank %d", e.Peer)
	case e.Kind.IsRecv():
		s += fmt.Sprintf(" from rank %d", e.Peer)
	}
	return s
}

// ms formats ns as milliseconds.
func ms(ns int64) string { return fmt.Sprintf("%.3f ms", float64(ns)/1e6) }
