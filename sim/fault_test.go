package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// pend is a row with a null end: what a hung or crashed job leaves.
type pend struct {
	rank    trace.Rank
	kind    string
	peer    trace.Rank
	step    int64
	mb      trace.MicroBatch
	chunk   int32
	started bool
}

func (p pend) String() string {
	return fmt.Sprintf("r%d %s peer=%d step=%d mb=%d c%d started=%v", p.rank, p.kind, p.peer, p.step, p.mb, p.chunk, p.started)
}

// opt is a rank's OPT posted in step and never started: it waits in a
// barrier some rank never reaches.
func opt(rank trace.Rank, step int64) pend { return pend{rank, "OPT", -1, step, -1, 0, false} }

// mm is an order-matched pair whose labels differ, seen from the receiver.
type mm struct {
	recvRank trace.Rank
	recvKind string
	recvMB   trace.MicroBatch
	sendKind string
	sendMB   trace.MicroBatch
}

func (m mm) String() string {
	return fmt.Sprintf("r%d %s%d <- %s%d", m.recvRank, m.recvKind, m.recvMB, m.sendKind, m.sendMB)
}

type faultCase struct {
	name       string
	c          Config
	pending    []pend   // every row with a null end, in (rank, seq) order; none: the job completes
	missing    [][3]int // (rank, step, mb) with no row at all
	absentFrom [][2]int // (rank, step): no row of that step or later
	mismatches []mm     // every order-matched pair with differing labels
	check      func(t *testing.T, tr *trace.Trace)
}

func f(spec string) []Fault {
	ft, err := ParseFault(spec)
	if err != nil {
		panic(err)
	}
	return []Fault{ft}
}

// The expectations below come from walking the stages' action lists (as
// printed by schedule.New) by hand: a receive blocks until the peer has
// posted the matching send (by order on the rank pair), sends never block,
// a rank waits for its sends before OPT, OPT needs every rank.
//
// Programs used (p=3, m=4; S = SEND, R = RECV):
//
//	gpipe  s0: F0 SF0 F1 SF1 F2 SF2 F3 SF3 RB0 B0 RB1 B1 RB2 B2 RB3 B3
//	       s1: RF0 F0 SF0 RF1 F1 SF1 RF2 F2 SF2 RF3 F3 SF3 RB0 B0 SB0 ... RB3 B3 SB3
//	       s2: RF0 F0 RF1 F1 RF2 F2 RF3 F3 B0 SB0 B1 SB1 B2 SB2 B3 SB3
//	1f1b   s0: F0 SF0 F1 SF1 F2 SF2 RB0 B0 F3 SF3 RB1 B1 RB2 B2 RB3 B3
//	       s1: RF0 F0 SF0 RF1 F1 SF1 RB0 B0 SB0 RF2 F2 SF2 RB1 B1 SB1 RF3 F3 SF3 RB2 B2 SB2 RB3 B3 SB3
//	       s2: RF0 F0 B0 SB0 RF1 F1 B1 SB1 RF2 F2 B2 SB2 RF3 F3 B3 SB3
//	zb-h1  as 1f1b with W passes that never communicate.
var faultCases = []faultCase{
	// ---- gpipe, p=3, m=4, 2 steps: rank = stage ----
	{
		// r1 drops mb1: its RF2/RF3 meet r0's SF1/SF2, r2's RF1/RF2 meet
		// r1's SF2/SF3; r2 waits for a 4th SF that never comes, so no B
		// ever flows back: r1 and r0 block in RB0; r0's SF3 finds no RF.
		name: "gpipe/skip", c: Config{Schedule: "gpipe", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("skip:rank=1,step=0,mb=1")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 3, 0, false}, {0, "RECV_B", 1, 0, 0, 0, false},
			{1, "RECV_B", 2, 0, 0, 0, false},
			{2, "RECV_F", 1, 0, 3, 0, false},
		},
		missing:    [][3]int{{1, 0, 1}},
		mismatches: []mm{{1, "RECV_F", 2, "SEND_F", 1}, {1, "RECV_F", 3, "SEND_F", 2}, {2, "RECV_F", 1, "SEND_F", 2}, {2, "RECV_F", 2, "SEND_F", 3}},
	},
	{
		// r0's SF2 has twice the bytes: r1's RF2 meets it and both hang
		// (started); r0's SF3 is behind it on the pair; r2 waits for SF2.
		name: "gpipe/shape", c: Config{Schedule: "gpipe", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("shape:rank=0,step=0,mb=2")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 2, 0, true}, {0, "SEND_F", 1, 0, 3, 0, false}, {0, "RECV_B", 1, 0, 0, 0, false},
			{1, "RECV_F", 0, 0, 2, 0, true},
			{2, "RECV_F", 1, 0, 2, 0, false},
		},
		mismatches: []mm{{1, "RECV_F", 2, "SEND_F", 2}},
		check: func(t *testing.T, tr *trace.Trace) {
			checkBadSend(t, tr, 0, 0, 2, "8192x1x4096", "bf16", 2)
		},
	},
	{
		// r1 sends mb0 as fp32: r2's RF0 hangs on it, r1's later SFs queue
		// behind it, and r1 (RB0) and r0 (RB0) wait for backwards.
		name: "gpipe/dtype", c: Config{Schedule: "gpipe", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("dtype:rank=1,step=0,mb=0")},
		pending: []pend{
			{0, "RECV_B", 1, 0, 0, 0, false},
			{1, "SEND_F", 2, 0, 0, 0, true}, {1, "SEND_F", 2, 0, 1, 0, false}, {1, "SEND_F", 2, 0, 2, 0, false},
			{1, "SEND_F", 2, 0, 3, 0, false}, {1, "RECV_B", 2, 0, 0, 0, false},
			{2, "RECV_F", 1, 0, 0, 0, true},
		},
		mismatches: []mm{{2, "RECV_F", 0, "SEND_F", 0}},
		check: func(t *testing.T, tr *trace.Trace) {
			checkBadSend(t, tr, 1, 0, 0, "4096x1x4096", "fp32", 2)
		},
	},
	{
		// r1 dies at RF2 at 3ms (free P2P: its SF0, SF1 were delivered at
		// once). RF2 pairs with r0's SF2, posted at 3ms too: that transfer
		// started and never ends. SF3 finds no receiver; r2 waits for SF2.
		name: "gpipe/crash", c: Config{Schedule: "gpipe", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("crash:rank=1,step=0,mb=2")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 2, 0, true}, {0, "SEND_F", 1, 0, 3, 0, false}, {0, "RECV_B", 1, 0, 0, 0, false},
			{1, "RECV_F", 0, 0, 2, 0, true},
			{2, "RECV_F", 1, 0, 2, 0, false},
		},
	},
	{
		// r0 dies at F1 (t=1ms) while its SF0 (posted at 1ms, 0.5ms of
		// latency) is in flight: the transfer started and never ends.
		name: "gpipe/crash-in-flight", c: Config{Schedule: "gpipe", Stages: 3, MicroBatches: 4, Steps: 2, P2PLatencyUs: 500, Faults: f("crash:rank=0,step=0,mb=1")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 0, 0, true}, {0, "F", -1, 0, 1, 0, true},
			{1, "RECV_F", 0, 0, 0, 0, true},
			{2, "RECV_F", 1, 0, 0, 0, false},
		},
		check: func(t *testing.T, tr *trace.Trace) {
			i := lastRow(tr, 0)
			if tr.StartNs[i] != 1e6 || tr.IssueNs[i] != 1e6 {
				t.Errorf("crash row %+v: want issue = start = 1ms", tr.At(i))
			}
		},
	},
	{
		// Step 0 completes; r2 is gone in step 1: r1's SFs find no RF and
		// r1, r0 wait for backwards.
		name: "gpipe/exit", c: Config{Schedule: "gpipe", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("exit:rank=2,step=1")},
		pending: []pend{
			{0, "RECV_B", 1, 1, 0, 0, false},
			{1, "SEND_F", 2, 1, 0, 0, false}, {1, "SEND_F", 2, 1, 1, 0, false}, {1, "SEND_F", 2, 1, 2, 0, false},
			{1, "SEND_F", 2, 1, 3, 0, false}, {1, "RECV_B", 2, 1, 0, 0, false},
		},
		absentFrom: [][2]int{{2, 1}},
	},
	{
		// r0 sends SF0 SF2 SF1 SF3: r1's RF1 gets mb2's data and RF2 mb1's;
		// equal bytes, so the job completes, RF1 waiting for F2 (3ms).
		name: "gpipe/reorder", c: Config{Schedule: "gpipe", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("reorder:rank=0,step=0,mb=1")},
		mismatches: []mm{{1, "RECV_F", 1, "SEND_F", 2}, {1, "RECV_F", 2, "SEND_F", 1}},
		check: func(t *testing.T, tr *trace.Trace) {
			for i := 0; i < tr.Len(); i++ {
				if tr.Rank[i] == 1 && tr.Step[i] == 0 && tr.Kind[i] == trace.RecvF && tr.MicroBatch[i] == 1 && tr.EndNs[i] != 3e6 {
					t.Errorf("r1 RECV_F mb1 %+v: want end at 3ms (r0's F2 end)", tr.At(i))
				}
			}
		},
	},
	{
		name: "gpipe/optskip", c: Config{Schedule: "gpipe", Stages: 3, MicroBatches: 4, Steps: 2, OptMs: 1, Faults: f("optskip:rank=1,step=0")},
		check: func(t *testing.T, tr *trace.Trace) { checkOptSkip(t, tr, 1, 0) },
	},

	// ---- 1f1b, p=3, m=4, 2 steps ----
	{
		// r1 drops mb1 (RF1, F1, SF1, RB1, B1, SB1). Order matching shifts
		// every later label by one on r0->r1, r1->r2, r2->r1 and r1->r0.
		// r1 runs to its end and waits in OPT; r2 waits for a 4th SF, r0 for
		// a 4th SB; r0's SF3 finds no receiver.
		name: "1f1b/skip", c: Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("skip:rank=1,step=0,mb=1")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 3, 0, false}, {0, "RECV_B", 1, 0, 3, 0, false},
			opt(1, 0),
			{2, "RECV_F", 1, 0, 3, 0, false},
		},
		missing: [][3]int{{1, 0, 1}},
		mismatches: []mm{
			{0, "RECV_B", 1, "SEND_B", 2}, {0, "RECV_B", 2, "SEND_B", 3},
			{1, "RECV_B", 2, "SEND_B", 1}, {1, "RECV_B", 3, "SEND_B", 2},
			{1, "RECV_F", 2, "SEND_F", 1}, {1, "RECV_F", 3, "SEND_F", 2},
			{2, "RECV_F", 1, "SEND_F", 2}, {2, "RECV_F", 2, "SEND_F", 3},
		},
	},
	{
		// r1's RF2 hangs on r0's oversized SF2. Before it r1 sent SB0 (r0
		// ran B0, F3, then waits in RB1) and SF1 (r2 ran mb1, sent SB1 that
		// r1 never receives, then waits in RF2).
		name: "1f1b/shape", c: Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("shape:rank=0,step=0,mb=2")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 2, 0, true}, {0, "SEND_F", 1, 0, 3, 0, false}, {0, "RECV_B", 1, 0, 1, 0, false},
			{1, "RECV_F", 0, 0, 2, 0, true},
			{2, "SEND_B", 1, 0, 1, 0, false}, {2, "RECV_F", 1, 0, 2, 0, false},
		},
		mismatches: []mm{{1, "RECV_F", 2, "SEND_F", 2}},
	},
	{
		// r1's SF0 (fp32) hangs r2 at RF0; r1 posts SF1 behind it and waits
		// in RB0; r0 waits in RB0 with SF2 unreceived (r1 posted RF0, RF1).
		name: "1f1b/dtype", c: Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("dtype:rank=1,step=0,mb=0")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 2, 0, false}, {0, "RECV_B", 1, 0, 0, 0, false},
			{1, "SEND_F", 2, 0, 0, 0, true}, {1, "SEND_F", 2, 0, 1, 0, false}, {1, "RECV_B", 2, 0, 0, 0, false},
			{2, "RECV_F", 1, 0, 0, 0, true},
		},
		mismatches: []mm{{2, "RECV_F", 0, "SEND_F", 0}},
	},
	{
		// r1 dies at RF2 (7ms) after SB0 (free P2P: delivered). r0's SF2
		// (posted at 3ms) meets the dying RF2: started, never ends. r0 runs
		// B0, F3, waits in RB1 with SF3 unreceived; r2 ran mb1 and waits in
		// RF2 with SB1 unreceived.
		name: "1f1b/crash", c: Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("crash:rank=1,step=0,mb=2")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 2, 0, true}, {0, "SEND_F", 1, 0, 3, 0, false}, {0, "RECV_B", 1, 0, 1, 0, false},
			{1, "RECV_F", 0, 0, 2, 0, true},
			{2, "SEND_B", 1, 0, 1, 0, false}, {2, "RECV_F", 1, 0, 2, 0, false},
		},
	},
	{
		// Same with 0.1ms latency. r1 posts SB0 at 7.3ms and dies at once:
		// r0's RB0 (posted at 3ms) started the transfer, which never ends,
		// so r0 never runs B0 or F3.
		name: "1f1b/crash-in-flight", c: Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, Steps: 2, P2PLatencyUs: 100, Faults: f("crash:rank=1,step=0,mb=2")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 2, 0, true}, {0, "RECV_B", 1, 0, 0, 0, true},
			{1, "SEND_B", 0, 0, 0, 0, true}, {1, "RECV_F", 0, 0, 2, 0, true},
			{2, "SEND_B", 1, 0, 1, 0, false}, {2, "RECV_F", 1, 0, 2, 0, false},
		},
		check: func(t *testing.T, tr *trace.Trace) {
			i := lastRow(tr, 1)
			if tr.StartNs[i] != 7.3e6 {
				t.Errorf("crash row %+v: want start 7.3ms", tr.At(i))
			}
		},
	},
	{
		// The last stage dies at RF1 (5ms) after SB0, which r1 receives
		// (free P2P). r1's SF1 (3ms) meets the dying RF1: started. r1 runs
		// to RB1, r0 to RB1; SFs nobody receives pile up.
		name: "1f1b/crash-last", c: Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("crash:rank=2,step=0,mb=1")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 3, 0, false}, {0, "RECV_B", 1, 0, 1, 0, false},
			{1, "SEND_F", 2, 0, 1, 0, true}, {1, "SEND_F", 2, 0, 2, 0, false}, {1, "RECV_B", 2, 0, 1, 0, false},
			{2, "RECV_F", 1, 0, 1, 0, true},
		},
	},
	{
		// With latency the SB0 r2 posts just before dying is lost.
		name: "1f1b/crash-last-in-flight", c: Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, Steps: 2, P2PLatencyUs: 100, Faults: f("crash:rank=2,step=0,mb=1")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 2, 0, false}, {0, "RECV_B", 1, 0, 0, 0, false},
			{1, "SEND_F", 2, 0, 1, 0, true}, {1, "RECV_B", 2, 0, 0, 0, true},
			{2, "SEND_B", 1, 0, 0, 0, true}, {2, "RECV_F", 1, 0, 1, 0, true},
		},
	},
	{
		// p=2: r1 dies at RF2 (7.2ms) right after SB1, which is lost;
		// r0's SF2, posted at 7.2ms, meets the dying RF2.
		name: "1f1b/crash-p2-in-flight", c: Config{Schedule: "1f1b", Stages: 2, MicroBatches: 3, P2PLatencyUs: 100, Faults: f("crash:rank=1,step=0,mb=2")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 2, 0, true}, {0, "RECV_B", 1, 0, 1, 0, true},
			{1, "SEND_B", 0, 0, 1, 0, true}, {1, "RECV_F", 0, 0, 2, 0, true},
		},
	},
	{
		name: "1f1b/exit", c: Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("exit:rank=2,step=1")},
		pending: []pend{
			{0, "SEND_F", 1, 1, 2, 0, false}, {0, "RECV_B", 1, 1, 0, 0, false},
			{1, "SEND_F", 2, 1, 0, 0, false}, {1, "SEND_F", 2, 1, 1, 0, false}, {1, "RECV_B", 2, 1, 0, 0, false},
		},
		absentFrom: [][2]int{{2, 1}},
	},
	{
		// r1 sends SF1 SF0 and SB1 SB0: r2 and r0 each see two swapped
		// labels; the job completes.
		name: "1f1b/reorder", c: Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("reorder:rank=1,step=0,mb=0")},
		mismatches: []mm{
			{0, "RECV_B", 0, "SEND_B", 1}, {0, "RECV_B", 1, "SEND_B", 0},
			{2, "RECV_F", 0, "SEND_F", 1}, {2, "RECV_F", 1, "SEND_F", 0},
		},
	},
	{
		name: "1f1b/optskip", c: Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, Steps: 2, OptMs: 1, Faults: f("optskip:rank=0,step=1")},
		check: func(t *testing.T, tr *trace.Trace) { checkOptSkip(t, tr, 0, 1) },
	},

	// ---- DP=2, TP=2, p=2, m=3: rank = (stage*2 + pipeline)*2 + tp ----
	// stage 0: r0 r1 (pipeline 0), r2 r3 (pipeline 1); stage 1: r4 r5, r6 r7.
	// 1f1b s0: F0 SF0 F1 SF1 RB0 B0 F2 SF2 RB1 B1 RB2 B2
	//      s1: RF0 F0 B0 SB0 RF1 F1 B1 SB1 RF2 F2 B2 SB2
	{
		// r5 (stage 1, pipeline 0, tp 1) drops mb1 and talks only to r1.
		// r5 finishes and waits in OPT with the six untouched ranks; r1
		// waits for a third SB.
		name: "1f1b-dp2-tp2/skip", c: Config{Schedule: "1f1b", Stages: 2, MicroBatches: 3, DP: 2, TP: 2, Faults: f("skip:rank=5,step=0,mb=1")},
		pending: []pend{
			opt(0, 0), {1, "SEND_F", 5, 0, 2, 0, false}, {1, "RECV_B", 5, 0, 2, 0, false},
			opt(2, 0), opt(3, 0), opt(4, 0), opt(5, 0), opt(6, 0), opt(7, 0),
		},
		missing:    [][3]int{{5, 0, 1}},
		mismatches: []mm{{1, "RECV_B", 1, "SEND_B", 2}, {5, "RECV_F", 2, "SEND_F", 1}},
	},
	{
		// r2 (stage 0, pipeline 1, tp 0) dies at its first action, F0.
		name: "gpipe-dp2-tp2/crash", c: Config{Schedule: "gpipe", Stages: 2, MicroBatches: 3, DP: 2, TP: 2, Faults: f("crash:rank=2,step=0,mb=0")},
		pending: []pend{
			opt(0, 0), opt(1, 0), {2, "F", -1, 0, 0, 0, true}, opt(3, 0),
			opt(4, 0), opt(5, 0), {6, "RECV_F", 2, 0, 0, 0, false}, opt(7, 0),
		},
	},
	{
		// r4 (stage 1, pipeline 0, tp 0) sends SB0 with a doubled shape: r0
		// hangs on it, r4 waits for its sends (SB1, SB2 queue behind).
		// gpipe s1: RF0 F0 RF1 F1 RF2 F2 B0 SB0 B1 SB1 B2 SB2.
		name: "gpipe-dp2-tp2/shape", c: Config{Schedule: "gpipe", Stages: 2, MicroBatches: 3, DP: 2, TP: 2, Faults: f("shape:rank=4,step=0,mb=0")},
		pending: []pend{
			{0, "RECV_B", 4, 0, 0, 0, true}, opt(1, 0), opt(2, 0), opt(3, 0),
			{4, "SEND_B", 0, 0, 0, 0, true}, {4, "SEND_B", 0, 0, 1, 0, false}, {4, "SEND_B", 0, 0, 2, 0, false},
			opt(5, 0), opt(6, 0), opt(7, 0),
		},
		mismatches: []mm{{0, "RECV_B", 0, "SEND_B", 0}},
	},
	{
		name: "1f1b-dp2-tp2/dtype", c: Config{Schedule: "1f1b", Stages: 2, MicroBatches: 3, DP: 2, TP: 2, Faults: f("dtype:rank=3,step=0,mb=2")},
		// r3 (stage 0, pipeline 1, tp 1) sends SF2 as fp32: r7 hangs in RF2
		// after SB1; r3 waits in RB2... no: in RB1? r3 posts SF2 then RB1,
		// which r7's SB1 (sent before RF2) satisfies; then B1, RB2: blocked.
		pending: []pend{
			opt(0, 0), opt(1, 0), opt(2, 0),
			{3, "SEND_F", 7, 0, 2, 0, true}, {3, "RECV_B", 7, 0, 2, 0, false},
			opt(4, 0), opt(5, 0), opt(6, 0),
			{7, "RECV_F", 3, 0, 2, 0, true},
		},
		mismatches: []mm{{7, "RECV_F", 2, "SEND_F", 2}},
	},
	{
		name: "1f1b-dp2-tp2/exit", c: Config{Schedule: "1f1b", Stages: 2, MicroBatches: 3, DP: 2, TP: 2, Steps: 2, Faults: f("exit:rank=7,step=1")},
		pending: []pend{
			opt(0, 1), opt(1, 1), opt(2, 1),
			{3, "SEND_F", 7, 1, 0, 0, false}, {3, "SEND_F", 7, 1, 1, 0, false}, {3, "RECV_B", 7, 1, 0, 0, false},
			opt(4, 1), opt(5, 1), opt(6, 1),
		},
		absentFrom: [][2]int{{7, 1}},
	},
	{
		name: "1f1b-dp2-tp2/reorder", c: Config{Schedule: "1f1b", Stages: 2, MicroBatches: 3, DP: 2, TP: 2, Faults: f("reorder:rank=1,step=0,mb=0")},
		mismatches: []mm{{5, "RECV_F", 0, "SEND_F", 1}, {5, "RECV_F", 1, "SEND_F", 0}},
	},
	{
		name: "1f1b-dp2-tp2/optskip", c: Config{Schedule: "1f1b", Stages: 2, MicroBatches: 3, DP: 2, TP: 2, Steps: 2, OptMs: 1, Faults: f("optskip:rank=6,step=0")},
		check: func(t *testing.T, tr *trace.Trace) { checkOptSkip(t, tr, 6, 0) },
	},

	// ---- zb-h1, p=3, m=4 (1f1b's P2P order, plus W) ----
	{
		name: "zb-h1/skip", c: Config{Schedule: "zb-h1", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("skip:rank=1,step=0,mb=1")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 3, 0, false}, {0, "RECV_B", 1, 0, 3, 0, false},
			opt(1, 0),
			{2, "RECV_F", 1, 0, 3, 0, false},
		},
		missing: [][3]int{{1, 0, 1}},
		mismatches: []mm{
			{0, "RECV_B", 1, "SEND_B", 2}, {0, "RECV_B", 2, "SEND_B", 3},
			{1, "RECV_B", 2, "SEND_B", 1}, {1, "RECV_B", 3, "SEND_B", 2},
			{1, "RECV_F", 2, "SEND_F", 1}, {1, "RECV_F", 3, "SEND_F", 2},
			{2, "RECV_F", 1, "SEND_F", 2}, {2, "RECV_F", 2, "SEND_F", 3},
		},
	},
	{
		// r2's SB0 is oversized: r1 hangs in RB0 (after RF1); r2 runs mb1,
		// its SB1 queues behind, then waits in RF2; r0's SF2 finds no RF.
		name: "zb-h1/shape", c: Config{Schedule: "zb-h1", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("shape:rank=2,step=0,mb=0")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 2, 0, false}, {0, "RECV_B", 1, 0, 0, 0, false},
			{1, "RECV_B", 2, 0, 0, 0, true},
			{2, "SEND_B", 1, 0, 0, 0, true}, {2, "SEND_B", 1, 0, 1, 0, false}, {2, "RECV_F", 1, 0, 2, 0, false},
		},
		mismatches: []mm{{1, "RECV_B", 0, "SEND_B", 0}},
	},
	{
		// r0's SF3 is fp32: r1 hangs in RF3 (after SB1 and W0); r0 gets SB1,
		// runs B1 W1 and waits in RB2; r2 sends SB2 nobody receives and
		// waits in RF3.
		name: "zb-h1/dtype", c: Config{Schedule: "zb-h1", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("dtype:rank=0,step=0,mb=3")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 3, 0, true}, {0, "RECV_B", 1, 0, 2, 0, false},
			{1, "RECV_F", 0, 0, 3, 0, true},
			{2, "SEND_B", 1, 0, 2, 0, false}, {2, "RECV_F", 1, 0, 3, 0, false},
		},
		mismatches: []mm{{1, "RECV_F", 3, "SEND_F", 3}},
	},
	{
		name: "zb-h1/crash", c: Config{Schedule: "zb-h1", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("crash:rank=2,step=0,mb=1")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 3, 0, false}, {0, "RECV_B", 1, 0, 1, 0, false},
			{1, "SEND_F", 2, 0, 1, 0, true}, {1, "SEND_F", 2, 0, 2, 0, false}, {1, "RECV_B", 2, 0, 1, 0, false},
			{2, "RECV_F", 1, 0, 1, 0, true},
		},
	},
	{
		name: "zb-h1/exit", c: Config{Schedule: "zb-h1", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("exit:rank=0,step=1")},
		pending: []pend{
			{1, "RECV_F", 0, 1, 0, 0, false},
			{2, "RECV_F", 1, 1, 0, 0, false},
		},
		absentFrom: [][2]int{{0, 1}},
	},
	{
		// r2 sends SB3 before SB2; r1 has already posted SF3 by its RB2.
		name: "zb-h1/reorder", c: Config{Schedule: "zb-h1", Stages: 3, MicroBatches: 4, Steps: 2, Faults: f("reorder:rank=2,step=0,mb=2")},
		mismatches: []mm{{1, "RECV_B", 2, "SEND_B", 3}, {1, "RECV_B", 3, "SEND_B", 2}},
	},
	{
		name: "zb-h1/optskip", c: Config{Schedule: "zb-h1", Stages: 3, MicroBatches: 4, Steps: 2, OptMs: 1, Faults: f("optskip:rank=2,step=0")},
		check: func(t *testing.T, tr *trace.Trace) { checkOptSkip(t, tr, 2, 0) },
	},

	// ---- interleaved, p=2, m=4, v=2: both chunks' F and B share a pair ----
	// s0: F0 SF0 F1 SF1 RF0c1 F0c1 SF0c1 RF1c1 F1c1 SF1c1 F2 SF2 RB0c1 B0c1 SB0c1
	//     F3 SF3 RB1c1 B1c1 SB1c1 RF2c1 F2c1 SF2c1 RB0 B0 RF3c1 F3c1 SF3c1 RB1 B1
	//     RB2c1 B2c1 SB2c1 RB3c1 B3c1 SB3c1 RB2 B2 RB3 B3
	// s1: RF0 F0 SF0 RF1 F1 SF1 RF0c1 F0c1 B0c1 SB0c1 RF1c1 F1c1 B1c1 SB1c1 RF2 F2
	//     SF2 RB0 B0 SB0 RF3 F3 SF3 RB1 B1 SB1 RF2c1 F2c1 B2c1 SB2c1 RF3c1 F3c1 B3c1
	//     SB3c1 RB2 B2 SB2 RB3 B3 SB3
	// 0->1 carries s0's sends in order (SF0 SF1 SF0c1 SF1c1 SF2 SB0c1 SF3 SB1c1
	// SF2c1 SF3c1 SB2c1 SB3c1) to s1's receives (RF0 RF1 RF0c1 RF1c1 RF2 RB0 RF3
	// RB1 RF2c1 RF3c1 RB2 RB3); 1->0 likewise.
	{
		// r0 drops both chunks of mb1: 9 sends each way where r1 expects 12.
		// Every receive finds its data until r1's 10th (RF3c1): r0 runs to
		// its end and waits in OPT.
		name: "interleaved/skip", c: Config{Schedule: "interleaved", Stages: 2, MicroBatches: 4, Steps: 2, Faults: f("skip:rank=0,step=0,mb=1")},
		pending: []pend{
			opt(0, 0),
			{1, "RECV_F", 0, 0, 3, 1, false},
		},
		missing: [][3]int{{0, 0, 1}},
		mismatches: []mm{
			// 0->1: r0 sends SF0 SF0c1 SF2 SB0c1 SF3 SF2c1 SF3c1 SB2c1 SB3c1
			{1, "RECV_F", 1, "SEND_F", 0}, {1, "RECV_F", 0, "SEND_F", 2}, {1, "RECV_F", 1, "SEND_B", 0},
			{1, "RECV_F", 2, "SEND_F", 3}, {1, "RECV_B", 0, "SEND_F", 2}, {1, "RECV_B", 1, "SEND_B", 2},
			{1, "RECV_F", 2, "SEND_B", 3},
			// 1->0: r0 receives RF0c1 RB0c1 RF2c1 RB0 RF3c1 RB2c1 RB3c1 RB2 RB3
			{0, "RECV_B", 0, "SEND_F", 1}, {0, "RECV_F", 2, "SEND_B", 0}, {0, "RECV_B", 0, "SEND_B", 1},
			{0, "RECV_F", 3, "SEND_F", 2}, {0, "RECV_B", 2, "SEND_B", 0}, {0, "RECV_B", 3, "SEND_F", 3},
			{0, "RECV_B", 2, "SEND_B", 1}, {0, "RECV_B", 3, "SEND_B", 2},
		},
	},
	{
		// r1's SF2 (5th on 1->0) is oversized: r0 hangs in RF2c1, having
		// sent up to SB1c1; r1 gets those, posts SB0 SF3 SB1 behind the
		// hung one and waits in RF2c1.
		name: "interleaved/shape", c: Config{Schedule: "interleaved", Stages: 2, MicroBatches: 4, Steps: 2, Faults: f("shape:rank=1,step=0,mb=2")},
		pending: []pend{
			{0, "RECV_F", 1, 0, 2, 1, true},
			{1, "SEND_F", 0, 0, 2, 0, true}, {1, "SEND_B", 0, 0, 0, 0, false}, {1, "SEND_F", 0, 0, 3, 0, false},
			{1, "SEND_B", 0, 0, 1, 0, false}, {1, "RECV_F", 0, 0, 2, 1, false},
		},
		mismatches: []mm{{0, "RECV_F", 2, "SEND_F", 2}},
	},
	{
		// r0's SF3 (7th on 0->1) is fp32: r1 hangs in RF3; r0 goes on to
		// RF3c1, waiting for r1's SF3, with SB1c1 and SF2c1 queued behind.
		name: "interleaved/dtype", c: Config{Schedule: "interleaved", Stages: 2, MicroBatches: 4, Steps: 2, Faults: f("dtype:rank=0,step=0,mb=3")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 3, 0, true}, {0, "SEND_B", 1, 0, 1, 1, false}, {0, "SEND_F", 1, 0, 2, 1, false},
			{0, "RECV_F", 1, 0, 3, 1, false},
			{1, "RECV_F", 0, 0, 3, 0, true},
		},
		mismatches: []mm{{1, "RECV_F", 3, "SEND_F", 3}},
	},
	{
		// r1 dies at once, in RF0 (t=0); r0's SF0, posted at 0.5ms, meets
		// it after the crash: never started.
		name: "interleaved/crash", c: Config{Schedule: "interleaved", Stages: 2, MicroBatches: 4, Steps: 2, Faults: f("crash:rank=1,step=0,mb=0")},
		pending: []pend{
			{0, "SEND_F", 1, 0, 0, 0, false}, {0, "SEND_F", 1, 0, 1, 0, false}, {0, "RECV_F", 1, 0, 0, 1, false},
			{1, "RECV_F", 0, 0, 0, 0, true},
		},
	},
	{
		name: "interleaved/exit", c: Config{Schedule: "interleaved", Stages: 2, MicroBatches: 4, Steps: 2, Faults: f("exit:rank=0,step=1")},
		pending:    []pend{{1, "RECV_F", 0, 1, 0, 0, false}},
		absentFrom: [][2]int{{0, 1}},
	},
	{
		// r0's sends become SF1 SF0 SF1c1 SF0c1 SF2 SF3 SB1c1 SB0c1 SF2c1...:
		// the first eight receives of r1 see swapped labels (the 5th
		// agrees); it completes.
		name: "interleaved/reorder", c: Config{Schedule: "interleaved", Stages: 2, MicroBatches: 4, Steps: 2, Faults: f("reorder:rank=0,step=0,mb=0")},
		mismatches: []mm{
			{1, "RECV_F", 0, "SEND_F", 1}, {1, "RECV_F", 1, "SEND_F", 0}, {1, "RECV_F", 0, "SEND_F", 1},
			{1, "RECV_F", 1, "SEND_F", 0}, {1, "RECV_B", 0, "SEND_F", 3}, {1, "RECV_F", 3, "SEND_B", 1},
			{1, "RECV_B", 1, "SEND_B", 0},
		},
	},
	{
		name: "interleaved/optskip", c: Config{Schedule: "interleaved", Stages: 2, MicroBatches: 4, Steps: 2, OptMs: 1, Faults: f("optskip:rank=1,step=0")},
		check: func(t *testing.T, tr *trace.Trace) { checkOptSkip(t, tr, 1, 0) },
	},
}

func TestFaults(t *testing.T) {
	kinds := map[string]map[FaultKind]bool{}
	for _, fc := range faultCases {
		sched := fc.c.Schedule
		if kinds[sched] == nil {
			kinds[sched] = map[FaultKind]bool{}
		}
		kinds[sched][fc.c.Faults[0].Kind] = true
		t.Run(fc.name, func(t *testing.T) {
			needSchedule(t, sched)
			tr := mustRun(t, fc.c)
			checkFaultCase(t, fc, tr)
		})
	}
	for sched, ks := range kinds {
		for k := FaultSkip; k < numFaultKinds; k++ {
			if !ks[k] {
				t.Errorf("%s: no test case for fault %s", sched, k)
			}
		}
	}
}

func checkFaultCase(t *testing.T, fc faultCase, tr *trace.Trace) {
	t.Helper()
	c := fc.c.WithDefaults()
	var got []pend
	minPendingStep := int64(c.Steps)
	for i := 0; i < tr.Len(); i++ {
		if tr.Completed(i) {
			continue
		}
		got = append(got, pend{tr.Rank[i], tr.Kind[i].String(), tr.Peer[i], tr.Step[i], tr.MicroBatch[i], tr.Chunk[i], tr.Started(i)})
		minPendingStep = min(minPendingStep, tr.Step[i])
	}
	if !slices.Equal(got, fc.pending) {
		t.Errorf("pending rows:\n got  %v\n want %v", got, fc.pending)
	}
	// A step some rank never finished lets no rank into the next one.
	for i := 0; i < tr.Len(); i++ {
		if tr.Step[i] > minPendingStep {
			t.Fatalf("row %+v: in a step after the hung step %d", tr.At(i), minPendingStep)
		}
	}
	if len(fc.pending) == 0 {
		// The job completes: every rank has an OPT (or OPT_SKIP) per step.
		opts := map[[2]int64]bool{}
		for i := 0; i < tr.Len(); i++ {
			if tr.Kind[i] == trace.Opt || tr.Kind[i] == KindOptSkip {
				opts[[2]int64{int64(tr.Rank[i]), tr.Step[i]}] = true
			}
		}
		if len(opts) != c.WorldSize()*c.Steps {
			t.Errorf("%d optimizer rows, want %d", len(opts), c.WorldSize()*c.Steps)
		}
	}
	for _, m := range fc.missing {
		for i := 0; i < tr.Len(); i++ {
			if int(tr.Rank[i]) == m[0] && int(tr.Step[i]) == m[1] && int(tr.MicroBatch[i]) == m[2] {
				t.Errorf("rank %d has a row of step %d mb %d: %+v", m[0], m[1], m[2], tr.At(i))
			}
		}
	}
	for _, a := range fc.absentFrom {
		for i := 0; i < tr.Len(); i++ {
			if int(tr.Rank[i]) == a[0] && int(tr.Step[i]) >= a[1] {
				t.Errorf("rank %d has a row of step %d: %+v", a[0], tr.Step[i], tr.At(i))
			}
		}
		if !slices.Contains(tr.Rank, trace.Rank(a[0])) && a[1] > 0 {
			t.Errorf("rank %d has no rows at all", a[0])
		}
	}
	pairs, _ := matchP2P(tr)
	var gotMM []string
	for _, p := range pairs {
		if !labelsAgree(p) {
			gotMM = append(gotMM, mm{p.recv.Rank, p.recv.Kind.String(), p.recv.MicroBatch, p.send.Kind.String(), p.send.MicroBatch}.String())
		}
	}
	var wantMM []string
	for _, m := range fc.mismatches {
		wantMM = append(wantMM, m.String())
	}
	slices.Sort(gotMM)
	slices.Sort(wantMM)
	if !slices.Equal(gotMM, wantMM) {
		t.Errorf("label mismatches:\n got  %s\n want %s", strings.Join(gotMM, "; "), strings.Join(wantMM, "; "))
	}
	// Paired ops share their times (a hung pair: its start, if any, and a
	// null end), except the op a rank crashed in, which started when the
	// rank died whatever its peer did.
	crashRow := map[[2]int64]bool{}
	for _, ft := range c.Faults {
		if ft.Kind == FaultCrash {
			if i := lastRow(tr, trace.Rank(ft.Rank)); i >= 0 {
				crashRow[[2]int64{int64(ft.Rank), tr.Seq[i]}] = true
			}
		}
	}
	for _, p := range pairs {
		crash := crashRow[[2]int64{int64(p.send.Rank), p.send.Seq}] || crashRow[[2]int64{int64(p.recv.Rank), p.recv.Seq}]
		if p.send.EndNs != p.recv.EndNs || !crash && p.send.StartNs != p.recv.StartNs {
			t.Errorf("pair disagrees on times:\n send %+v\n recv %+v", p.send, p.recv)
		}
	}
	if fc.check != nil {
		fc.check(t, tr)
	}
}

func lastRow(tr *trace.Trace, rank trace.Rank) int {
	last := -1
	for i := 0; i < tr.Len(); i++ {
		if tr.Rank[i] == rank {
			last = i
		}
	}
	return last
}

// checkBadSend asserts rank's sends of mb in step carry shape and dtype
// with factor times the normal bytes, and its other sends the normal ones.
func checkBadSend(t *testing.T, tr *trace.Trace, rank trace.Rank, step int64, mb trace.MicroBatch, shape, dtype string, factor int64) {
	t.Helper()
	const normal = 4096 * 4096 * 2
	n := 0
	for i := 0; i < tr.Len(); i++ {
		if tr.Rank[i] != rank || !tr.Kind[i].IsP2P() {
			continue
		}
		e := tr.At(i)
		if e.Kind.IsSend() && e.Step == step && e.MicroBatch == mb {
			n++
			if e.Shape != shape || e.Dtype != dtype || e.Bytes != factor*normal {
				t.Errorf("faulted send %+v: want %s %s %d bytes", e, shape, dtype, factor*normal)
			}
		} else if e.Shape != "4096x1x4096" || e.Dtype != "bf16" || e.Bytes != normal {
			t.Errorf("other P2P row %+v: want the normal shape", e)
		}
	}
	if n == 0 {
		t.Errorf("rank %d has no send of step %d mb %d", rank, step, mb)
	}
}

// checkOptSkip asserts rank records OPT_SKIP in step, at the barrier time
// with zero duration, while every other rank records OPT there.
func checkOptSkip(t *testing.T, tr *trace.Trace, rank trace.Rank, step int64) {
	t.Helper()
	var barrier int64 = -1
	for i := 0; i < tr.Len(); i++ {
		k := tr.Kind[i]
		if tr.Step[i] != step || k != trace.Opt && k != KindOptSkip {
			continue
		}
		if barrier < 0 {
			barrier = tr.StartNs[i]
		}
		if tr.StartNs[i] != barrier {
			t.Errorf("%+v: optimizer rows of one step start apart", tr.At(i))
		}
		switch {
		case tr.Rank[i] == rank && (k != KindOptSkip || tr.EndNs[i] != tr.StartNs[i]):
			t.Errorf("%+v: want OPT_SKIP of zero duration", tr.At(i))
		case tr.Rank[i] != rank && (k != trace.Opt || tr.EndNs[i]-tr.StartNs[i] != 1e6):
			t.Errorf("%+v: want OPT of 1ms", tr.At(i))
		}
	}
}
