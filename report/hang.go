package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/trace"
)

// WriteHang renders a hang diagnosis to w as text or JSON (the contract of
// `hang --format json`: DESIGN.md "Contracts"). Markdown is not supported.
func WriteHang(w io.Writer, rep *hang.Report, f Format) error {
	switch f {
	case JSON:
		return writeHangJSON(w, rep)
	case Text, "":
		return writeHangText(w, rep)
	}
	return fmt.Errorf("hang: format %q not supported (want text or json)", f)
}

// The JSON of `hang --format json`. Keys of DESIGN.md are fixed; the others
// may grow.
type hangJSON struct {
	Schema          string              `json:"schema"`
	Verdict         string              `json:"verdict"`
	RootCause       hangJSONRootCause   `json:"root_cause"`
	Blocked         []hangJSONBlocked   `json:"blocked"`
	Cycle           []int32             `json:"cycle"`
	Mismatches      []hangJSONMismatch  `json:"mismatches"`
	Path            []hangJSONNode      `json:"path"`
	FirstDivergence *hangJSONMismatch   `json:"first_divergence"`
	Divergence      *hangJSONDivergence `json:"schedule_divergence"`
	Job             hangJSONJob         `json:"job"`
	DumpNs          int64               `json:"dump_ns"`
	DumpGiven       bool                `json:"dump_given"`
	MatchedPairs    int                 `json:"matched_pairs"`
	Cycles          int                 `json:"cycles"`
	States          map[string]int      `json:"states"`
	Ranks           []hangJSONRank      `json:"ranks"`
	Notes           []string            `json:"notes"`
	Collectives     []hangJSONColl      `json:"collectives"`
}

type hangJSONRootCause struct {
	Rank       int32   `json:"rank"`
	Stage      int32   `json:"stage"`
	Step       int64   `json:"step"`
	MicroBatch int32   `json:"microbatch"`
	Reason     string  `json:"reason"`
	Summary    string  `json:"summary"`
	Candidates []int32 `json:"candidates,omitempty"`
}

type hangJSONBlocked struct {
	Rank       int32  `json:"rank"`
	Kind       string `json:"kind"`
	Peer       int32  `json:"peer"`
	Step       int64  `json:"step"`
	MicroBatch int32  `json:"microbatch"`
	Seq        int64  `json:"seq"`
	SinceNs    int64  `json:"since_ns"`
	Chunk      int32  `json:"chunk"`
	IssueNs    int64  `json:"issue_ns"`
	Started    bool   `json:"started"`
	Matched    bool   `json:"matched"`
	PeerSeq    *int64 `json:"peer_seq,omitempty"`
	Group      string `json:"group,omitempty"`
	GroupSeq   *int64 `json:"group_seq,omitempty"`
}

type hangJSONOp struct {
	Rank       int32  `json:"rank"`
	Kind       string `json:"kind"`
	Peer       int32  `json:"peer"`
	Step       int64  `json:"step"`
	MicroBatch int32  `json:"microbatch"`
	Chunk      int32  `json:"chunk"`
	Seq        int64  `json:"seq"`
	Shape      string `json:"shape"`
	Dtype      string `json:"dtype"`
	Bytes      int64  `json:"bytes"`
	IssueNs    int64  `json:"issue_ns"`
	Started    bool   `json:"started"`
	Completed  bool   `json:"completed"`
	Group      string `json:"group,omitempty"`
	GroupSeq   *int64 `json:"group_seq,omitempty"`
}

type hangJSONMismatch struct {
	Kind       string        `json:"kind"`
	Ranks      []int32       `json:"ranks"`
	Step       int64         `json:"step"`
	MicroBatch int32         `json:"microbatch"`
	Detail     string        `json:"detail"`
	Count      int           `json:"count"`
	Suspect    int32         `json:"suspect"`
	Send       *hangJSONOp   `json:"send,omitempty"`
	Recv       *hangJSONOp   `json:"recv,omitempty"`
	Collective *hangJSONColl `json:"collective,omitempty"`
}

// hangJSONColl is one collective of a process group by sequence number
// (an extension of DESIGN.md's contract).
type hangJSONColl struct {
	Group     string       `json:"group"`
	Desc      string       `json:"desc,omitempty"`
	Seq       int64        `json:"seq"`
	Kind      string       `json:"kind"`
	Members   []int32      `json:"members"`
	Completed []int32      `json:"completed"`
	Pending   []int32      `json:"pending"`
	Missing   []int32      `json:"missing"`
	Behind    []int32      `json:"behind"`
	IssueNs   int64        `json:"issue_ns"`
	Ops       []hangJSONOp `json:"ops,omitempty"`
}

type hangJSONDivergence struct {
	Rank       int32       `json:"rank"`
	Step       int64       `json:"step"`
	Index      int         `json:"index"`
	Got        *hangJSONOp `json:"got"`
	Want       string      `json:"want"`
	Skipped    bool        `json:"skipped"`
	Late       bool        `json:"late"`
	MicroBatch int32       `json:"microbatch"`
}

type hangJSONNode struct {
	Rank        *int32 `json:"rank,omitempty"`
	BarrierStep *int64 `json:"barrier_step,omitempty"`
	Group       string `json:"group,omitempty"`
	GroupSeq    *int64 `json:"group_seq,omitempty"`
	Kind        string `json:"kind,omitempty"`
}

type hangJSONJob struct {
	WorldSize    int    `json:"world_size"`
	PP           int    `json:"pp"`
	DP           int    `json:"dp"`
	TP           int    `json:"tp"`
	Virtual      int    `json:"virtual"`
	MicroBatches int    `json:"microbatches"`
	Schedule     string `json:"schedule"`
	Events       int    `json:"events"`
	RanksPresent int    `json:"ranks_present"`
}

type hangJSONRank struct {
	Rank          int32         `json:"rank"`
	Stage         int32         `json:"stage"`
	Pipeline      int32         `json:"pipeline"`
	TPRank        int32         `json:"tp_rank"`
	State         string        `json:"state"`
	Events        int           `json:"events"`
	Pending       int           `json:"pending"`
	WaitsFor      *int32        `json:"waits_for"`
	WaitsBarrier  bool          `json:"waits_barrier"`
	WaitsIn       *hangJSONNode `json:"waits_in_collective,omitempty"`
	WaitsOn       []int32       `json:"waits_on,omitempty"`
	Terminal      string        `json:"terminal,omitempty"`
	LastCompleted *hangJSONOp   `json:"last_completed"`
	Waiting       *hangJSONOp   `json:"waiting"`
	Truncated     bool          `json:"truncated"`
	BytesLost     int64         `json:"bytes_lost"`
	Lost          bool          `json:"lost"`
	LostReason    string        `json:"lost_reason,omitempty"`
}

func hangOp(e *trace.Event) *hangJSONOp {
	if e == nil {
		return nil
	}
	op := &hangJSONOp{Rank: int32(e.Rank), Kind: e.Kind.String(), Peer: int32(e.Peer), Step: e.Step,
		MicroBatch: int32(e.MicroBatch), Chunk: e.Chunk, Seq: e.Seq, Shape: e.Shape, Dtype: e.Dtype, Bytes: e.Bytes,
		IssueNs: e.IssueNs, Started: e.StartNs != trace.NoTime, Completed: e.EndNs != trace.NoTime}
	op.Group, op.GroupSeq = hangGroup(e)
	return op
}

// hangGroup returns an op's group and sequence number for the JSON: both
// absent when it has no group.
func hangGroup(e *trace.Event) (string, *int64) {
	if e.Group == "" {
		return "", nil
	}
	seq := e.GroupSeq
	return e.Group, &seq
}

func hangColl(c *hang.Collective) *hangJSONColl {
	if c == nil {
		return nil
	}
	out := &hangJSONColl{Group: c.Group, Desc: c.Desc, Seq: c.Seq, Kind: c.Kind.String(), Members: hangRanks(c.Members),
		Completed: hangRanks(c.Completed), Pending: hangRanks(c.Pending), Missing: hangRanks(c.Missing), Behind: hangRanks(c.Behind),
		IssueNs: c.IssueNs}
	for i := range c.Ops {
		out.Ops = append(out.Ops, *hangOp(&c.Ops[i]))
	}
	return out
}

func hangNode(n hang.Node) hangJSONNode {
	switch {
	case n.Group != "":
		seq := n.GroupSeq
		return hangJSONNode{Group: n.Group, GroupSeq: &seq, Kind: n.Kind.String()}
	case n.Barrier:
		s := n.Step
		return hangJSONNode{BarrierStep: &s}
	}
	r := int32(n.Rank)
	return hangJSONNode{Rank: &r}
}

func hangRanks(rs []trace.Rank) []int32 {
	out := make([]int32, len(rs))
	for i, r := range rs {
		out[i] = int32(r)
	}
	return out
}

func hangMismatch(m *hang.Mismatch) hangJSONMismatch {
	return hangJSONMismatch{Kind: string(m.Kind), Ranks: hangRanks(m.Ranks), Step: m.Step, MicroBatch: int32(m.MicroBatch),
		Detail: m.Detail, Count: m.Count, Suspect: int32(m.Suspect), Send: hangOp(m.Send), Recv: hangOp(m.Recv),
		Collective: hangColl(m.Collective)}
}

func writeHangJSON(w io.Writer, rep *hang.Report) error {
	rc := rep.RootCause
	out := hangJSON{
		Schema:  hang.SchemaID,
		Verdict: string(rep.Verdict),
		RootCause: hangJSONRootCause{Rank: int32(rc.Rank), Stage: int32(rc.Stage), Step: rc.Step, MicroBatch: int32(rc.MicroBatch),
			Reason: rc.Reason, Summary: rc.Summary},
		Blocked:    []hangJSONBlocked{},
		Cycle:      hangRanks(rep.Cycle),
		Mismatches: []hangJSONMismatch{},
		Path:       []hangJSONNode{},
		Job: hangJSONJob{WorldSize: rep.Job.WorldSize, PP: rep.Job.PP, DP: rep.Job.DP, TP: rep.Job.TP, Virtual: rep.Job.Virtual,
			MicroBatches: rep.Job.MicroBatches, Schedule: rep.Job.Schedule, Events: rep.Job.Events, RanksPresent: rep.Job.RanksPresent},
		DumpNs: rep.DumpNs, DumpGiven: rep.DumpGiven, MatchedPairs: rep.Matched, Cycles: rep.Cycles,
		States: map[string]int{}, Ranks: []hangJSONRank{}, Notes: []string{}, Collectives: []hangJSONColl{},
	}
	for i := range rep.Collectives {
		out.Collectives = append(out.Collectives, *hangColl(&rep.Collectives[i]))
	}
	if rc.Candidates != nil {
		out.RootCause.Candidates = hangRanks(rc.Candidates)
	}
	for _, b := range rep.Blocked {
		e := b.Op
		jb := hangJSONBlocked{Rank: int32(e.Rank), Kind: e.Kind.String(), Peer: int32(e.Peer), Step: e.Step,
			MicroBatch: int32(e.MicroBatch), Seq: e.Seq, SinceNs: b.WaitNs, Chunk: e.Chunk, IssueNs: e.IssueNs,
			Started: e.StartNs != trace.NoTime, Matched: b.Partner != nil}
		if b.Partner != nil {
			seq := b.Partner.Seq
			jb.PeerSeq = &seq
		}
		jb.Group, jb.GroupSeq = hangGroup(&e)
		out.Blocked = append(out.Blocked, jb)
	}
	for i := range rep.Mismatches {
		out.Mismatches = append(out.Mismatches, hangMismatch(&rep.Mismatches[i]))
	}
	if m := firstDivergence(rep); m != nil {
		jm := hangMismatch(m)
		out.FirstDivergence = &jm
	}
	if d := rep.Divergence; d != nil {
		out.Divergence = &hangJSONDivergence{Rank: int32(d.Rank), Step: d.Step, Index: d.Index, Got: hangOp(d.Got), Want: d.Want,
			Skipped: d.Skipped, Late: d.Late, MicroBatch: int32(d.MicroBatch)}
	}
	for _, n := range rep.Path {
		out.Path = append(out.Path, hangNode(n))
	}
	for st, n := range rep.States {
		out.States[string(st)] = n
	}
	for i := range rep.Ranks {
		rs := &rep.Ranks[i]
		jr := hangJSONRank{Rank: int32(rs.Rank), Stage: int32(rs.Stage), Pipeline: rs.Pipeline, TPRank: rs.TPRank,
			State: string(rs.State), Events: rs.Events, Pending: rs.Pending, WaitsBarrier: rs.WaitsBarrier, Terminal: rs.Terminal,
			LastCompleted: hangOp(rs.LastCompleted), Waiting: hangOp(rs.Waiting), Truncated: rs.Truncated,
			BytesLost: rs.BytesLost, Lost: rs.Lost, LostReason: rs.LostReason}
		if rs.WaitsFor != trace.NoRank {
			r := int32(rs.WaitsFor)
			jr.WaitsFor = &r
		}
		if rs.WaitsCollective != nil {
			n := hangNode(*rs.WaitsCollective)
			jr.WaitsIn, jr.WaitsOn = &n, hangRanks(rs.WaitsOn)
		}
		out.Ranks = append(out.Ranks, jr)
	}
	out.Notes = append(out.Notes, rep.Notes...)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// firstDivergence returns the first mismatched pair of the report (the
// first op where two ranks' state machines disagree), else its first
// mismatch, or nil.
func firstDivergence(rep *hang.Report) *hang.Mismatch {
	for i := range rep.Mismatches {
		if rep.Mismatches[i].Send != nil && rep.Mismatches[i].Recv != nil {
			return &rep.Mismatches[i]
		}
	}
	if len(rep.Mismatches) > 0 {
		return &rep.Mismatches[0]
	}
	return nil
}

// hangMaxRows bounds the per-rank table and the mismatch list of the text
// report; the JSON has everything.
const hangMaxRows = 40

func writeHangText(w io.Writer, rep *hang.Report) error {
	var b strings.Builder
	j := rep.Job
	sched := j.Schedule
	if sched == "" {
		sched = "unknown schedule"
	}
	pp := "?"
	if j.PP > 0 {
		pp = fmt.Sprint(j.PP)
	}
	fmt.Fprintf(&b, "Job: %d ranks (%d with events), PP %s x TP %d x DP %d, %s, %d events, %d send/recv pairs matched\n",
		j.WorldSize, j.RanksPresent, pp, max(j.TP, 1), max(j.DP, 1), sched, j.Events, rep.Matched)
	dump := "latest timestamp in the trace"
	if rep.DumpGiven {
		dump = "given"
	}
	fmt.Fprintf(&b, "Dump at %s (%s)\n\n", hangMs(rep.DumpNs), dump)
	fmt.Fprintf(&b, "Verdict: %s\n", rep.Verdict)
	fmt.Fprintf(&b, "Root cause: %s\n", rep.RootCause.Summary)
	if len(rep.RootCause.Candidates) > 1 {
		fmt.Fprintf(&b, "Candidates: %s\n", hangRankRanges(rep.RootCause.Candidates))
	}
	if len(rep.Path) > 0 {
		label := "Wait-for chain"
		if rep.Cycle != nil {
			label = "Wait-for cycle"
			if rep.Cycles > 1 {
				label = fmt.Sprintf("Wait-for cycle (1 of %d)", rep.Cycles)
			}
		}
		fmt.Fprintf(&b, "%s: %s\n", label, hangPath(rep))
	}
	if m := firstDivergence(rep); m != nil {
		fmt.Fprintf(&b, "First divergence: %s %s: %s\n", m.Kind, hangPair(m), m.Detail)
	}
	if d := rep.Divergence; d != nil {
		got := "went on to its optimizer step"
		if d.Got != nil {
			got = hangDescribe(d.Got)
		}
		fmt.Fprintf(&b, "Schedule: rank %d's F/B/W/P2P op #%d of step %d (from 0) is %s; the %s schedule has %s\n",
			d.Rank, d.Index, d.Step, got, sched, d.Want)
	}

	if len(rep.Mismatches) > 0 {
		fmt.Fprintf(&b, "\nMismatches (%d):\n", len(rep.Mismatches))
		for i, m := range rep.Mismatches {
			if i == hangMaxRows {
				fmt.Fprintf(&b, "  ... %d more (see --format json)\n", len(rep.Mismatches)-i)
				break
			}
			where := fmt.Sprintf("step %d", m.Step)
			if m.Step < 0 {
				where = "-"
			}
			if m.MicroBatch >= 0 {
				where += fmt.Sprintf(" mb %d", m.MicroBatch)
			}
			fmt.Fprintf(&b, "  %-23s %-14s %-13s %s\n", m.Kind, hangPair(&m), where, m.Detail)
		}
	}

	hangCollectives(&b, rep)
	b.WriteString("\n")
	hangRankTable(&b, rep)
	if len(rep.Notes) > 0 {
		b.WriteString("\nNotes:\n")
		for _, n := range rep.Notes {
			fmt.Fprintf(&b, "  - %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// hangCollectives summarises the pending collectives, one row per group:
// the pending sequence numbers, the first of them and who is where in it,
// and the first that some members never posted.
func hangCollectives(b *strings.Builder, rep *hang.Report) {
	if len(rep.Collectives) == 0 {
		return
	}
	var rows [][]string
	var queued []string
	groups := 0
	for lo := 0; lo < len(rep.Collectives); {
		hi := lo
		for hi < len(rep.Collectives) && rep.Collectives[hi].Group == rep.Collectives[lo].Group {
			hi++
		}
		groups++
		cs := rep.Collectives[lo:hi]
		lo = hi
		if len(rows) == hangMaxRows {
			continue
		}
		first := &cs[0]
		name := first.Group
		if first.Desc != "" {
			name += " " + first.Desc
		}
		seqs := fmt.Sprintf("#%d", first.Seq)
		if len(cs) > 1 {
			seqs = fmt.Sprintf("#%d-%d (%d)", first.Seq, cs[len(cs)-1].Seq, len(cs))
		}
		in := slices.DeleteFunc(slices.Clone(first.Pending), func(r trace.Rank) bool { return slices.Contains(first.Behind, r) })
		never := "-"
		for i := range cs {
			if len(cs[i].Missing) > 0 {
				never = fmt.Sprintf("%s (#%d %s)", hangRankRanges(cs[i].Missing), cs[i].Seq, cs[i].Kind)
				break
			}
		}
		if len(in) == 0 && len(first.Completed) == 0 && never == "-" {
			// Every member posted it and is blocked before it: queued
			// behind other work, it tells nothing.
			queued = append(queued, first.Group)
			continue
		}
		rows = append(rows, []string{name, hangRankRanges(first.Members), seqs, fmt.Sprintf("%s #%d", first.Kind, first.Seq),
			orDash(hangRankRanges(in)), orDash(hangRankRanges(first.Behind)), orDash(hangRankRanges(first.Completed)), never})
	}
	fmt.Fprintf(b, "\nCollectives pending (%d in %d groups; per group its first pending one):\n", len(rep.Collectives), groups)
	if len(rows) > 0 {
		hangTable(b, []string{"group", "members", "pending", "first pending", "in it", "blocked before it", "completed it", "never posted"}, rows)
	}
	if more := groups - len(rows) - len(queued); more > 0 {
		fmt.Fprintf(b, "  ... %d more groups (see --format json)\n", more)
	}
	if n := len(queued); n > 0 {
		if n > 16 {
			queued = append(queued[:16], "...")
		}
		fmt.Fprintf(b, "  %d more groups whose members all posted their first pending collective and are blocked before it: %s\n", n, strings.Join(queued, ", "))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// hangRankTable lists the ranks that matter (not done, not merely waiting
// in the optimizer barrier, or on the wait-for path), and summarises the
// others.
func hangRankTable(b *strings.Builder, rep *hang.Report) {
	onPath := map[trace.Rank]bool{rep.RootCause.Rank: true}
	for _, r := range rep.RootCause.Candidates {
		onPath[r] = true
	}
	for _, n := range rep.Path {
		if n.IsRank() {
			onPath[n.Rank] = true
		}
	}
	var rows [][]string
	var barrier, done, idle []trace.Rank
	shown := 0
	for i := range rep.Ranks {
		rs := &rep.Ranks[i]
		switch {
		case !onPath[rs.Rank] && rs.State == hang.StateDone:
			done = append(done, rs.Rank)
			continue
		case !onPath[rs.Rank] && rs.State == hang.StateBarrier:
			barrier = append(barrier, rs.Rank)
			continue
		case !onPath[rs.Rank] && rs.State == hang.StateIdle && rs.Terminal == "":
			idle = append(idle, rs.Rank)
			continue
		}
		shown++
		if len(rows) == hangMaxRows {
			continue
		}
		rows = append(rows, hangRankRow(rep, rs))
	}
	head := []string{"rank", "stage", "pipe", "tp", "state", "waiting in", "waits for", "waiting ms", "last completed"}
	fmt.Fprintf(b, "Ranks:\n")
	if len(rows) > 0 {
		hangTable(b, head, rows)
	}
	if shown > len(rows) {
		fmt.Fprintf(b, "  ... %d more ranks (see --format json)\n", shown-len(rows))
	}
	if len(barrier) > 0 {
		steps := map[int64]bool{}
		for _, r := range barrier {
			if e := rep.Ranks[r].Waiting; e != nil {
				steps[e.Step] = true
			}
		}
		var ss []string
		for s := range steps {
			ss = append(ss, fmt.Sprint(s))
		}
		slices.Sort(ss)
		fmt.Fprintf(b, "  %d more ranks wait in the optimizer step (step %s): %s\n", len(barrier), strings.Join(ss, ", "), hangRankRanges(barrier))
	}
	if len(done) > 0 {
		fmt.Fprintf(b, "  %d ranks finished with nothing pending: %s\n", len(done), hangRankRanges(done))
	}
	if len(idle) > 0 {
		fmt.Fprintf(b, "  %d ranks have nothing in flight in their dumps and nobody waits for them: %s\n", len(idle), hangRankRanges(idle))
	}
}

func hangRankRow(rep *hang.Report, rs *hang.RankState) []string {
	na := func(x int32) string {
		if x < 0 {
			return "?"
		}
		return fmt.Sprint(x)
	}
	state := string(rs.State)
	if rs.Lost {
		state += " (lost data)"
	}
	waiting, waitMs, waitsFor, last := "-", "-", "-", "-"
	if e := rs.Waiting; e != nil {
		waiting = hangDescribe(e)
		if e.Kind.IsP2P() && e.StartNs != trace.NoTime {
			waiting += " (started)"
		}
		waitMs = fmt.Sprintf("%.3f", float64(max(rep.DumpNs-e.IssueNs, 0))/1e6)
	}
	switch {
	case rs.WaitsCollective != nil && len(rs.WaitsOn) > 0:
		waitsFor = hangRankRanges(rs.WaitsOn)
	case rs.WaitsCollective != nil:
		waitsFor = "none: every member joined"
	case rs.WaitsBarrier:
		waitsFor = "barrier"
	case rs.WaitsFor != trace.NoRank:
		waitsFor = fmt.Sprint(rs.WaitsFor)
	case rs.Terminal != "":
		waitsFor = "none: " + rs.Terminal
	}
	if e := rs.LastCompleted; e != nil {
		last = fmt.Sprintf("%s (seq %d)", hangDescribe(e), e.Seq)
	}
	return []string{fmt.Sprint(rs.Rank), na(int32(rs.Stage)), na(rs.Pipeline), na(rs.TPRank), state, waiting, waitsFor, waitMs, last}
}

// hangDescribe says "RECV_F mb 6 c1 step 12 <- 4", or "ALL_REDUCE group 35
// #7 step 0", compactly.
func hangDescribe(e *trace.Event) string {
	s := e.Kind.String()
	if e.Group != "" && e.Kind.IsCollective() {
		s += " group " + e.Group
		if e.GroupSeq >= 0 {
			s += fmt.Sprintf(" #%d", e.GroupSeq)
		}
	}
	if e.MicroBatch >= 0 {
		s += fmt.Sprintf(" mb %d", e.MicroBatch)
	}
	if e.Chunk != 0 {
		s += fmt.Sprintf(" c%d", e.Chunk)
	}
	s += fmt.Sprintf(" step %d", e.Step)
	switch {
	case e.Kind.IsSend():
		s += fmt.Sprintf(" -> %d", e.Peer)
	case e.Kind.IsRecv():
		s += fmt.Sprintf(" <- %d", e.Peer)
	}
	return s
}

// hangPair says "0 -> 1" for a pair kind, or the ranks of a rank kind.
func hangPair(m *hang.Mismatch) string {
	if len(m.Ranks) == 2 && (m.Send != nil || m.Recv != nil) {
		return fmt.Sprintf("%d -> %d", m.Ranks[0], m.Ranks[1])
	}
	return "rank " + hangRankRanges(m.Ranks)
}

// hangPath says "rank 0 -> rank 1 -> optimizer barrier of step 0 -> rank 0".
func hangPath(rep *hang.Report) string {
	parts := make([]string, len(rep.Path))
	for i, n := range rep.Path {
		if n.Barrier {
			parts[i] = fmt.Sprintf("optimizer step %d (barrier)", n.Step)
			continue
		}
		if n.Group != "" {
			parts[i] = fmt.Sprintf("%s group %s #%d (collective)", n.Kind, n.Group, n.GroupSeq)
			continue
		}
		parts[i] = fmt.Sprintf("rank %d", n.Rank)
		if e := rep.Ranks[n.Rank].Waiting; e != nil && (i < len(rep.Path)-1 || rep.Cycle == nil) {
			parts[i] += fmt.Sprintf(" [%s]", hangDescribe(e))
		} else if e == nil {
			parts[i] += fmt.Sprintf(" [%s]", rep.Ranks[n.Rank].State)
		}
	}
	return strings.Join(parts, " -> ")
}

// hangRankRanges says "0-3, 6, 9-11" (sorted input), at most 16 ranges.
func hangRankRanges(rs []trace.Rank) string {
	rs = slices.Clone(rs)
	slices.Sort(rs)
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if len(parts) == 16 {
			parts = append(parts, "...")
			break
		}
		if j == i {
			parts = append(parts, fmt.Sprint(rs[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", rs[i], rs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

func hangMs(ns int64) string { return fmt.Sprintf("%.3f ms", float64(ns)/1e6) }

// hangTable writes an aligned text table indented by two spaces.
func hangTable(b *strings.Builder, head []string, rows [][]string) {
	width := make([]int, len(head))
	for i, h := range head {
		width[i] = len(h)
	}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	line := func(cells []string) {
		b.WriteString("  ")
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			if i == len(cells)-1 {
				b.WriteString(c)
				continue
			}
			fmt.Fprintf(b, "%-*s", width[i], c)
		}
		b.WriteString("\n")
	}
	line(head)
	for _, r := range rows {
		line(r)
	}
}
