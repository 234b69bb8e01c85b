package sim

import (
	"sort"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// mustRun runs c and checks what every emitted trace must satisfy: the
// validity gate, rows sorted by (rank, seq) with seq 0, 1, 2... per rank,
// and at most one pending non-send row per rank, which is its last row.
func mustRun(t *testing.T, c Config) *trace.Trace {
	t.Helper()
	tr, err := Run(c)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := tr.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	for i := 0; i < tr.Len(); i++ {
		first := i == 0 || tr.Rank[i] != tr.Rank[i-1]
		if first && tr.Seq[i] != 0 || !first && (tr.Rank[i] < tr.Rank[i-1] || tr.Seq[i] != tr.Seq[i-1]+1) {
			t.Fatalf("row %d: rank %d seq %d: rows not sorted by (rank, seq) with dense seq", i, tr.Rank[i], tr.Seq[i])
		}
		last := i == tr.Len()-1 || tr.Rank[i+1] != tr.Rank[i]
		if !tr.Completed(i) && !tr.Kind[i].IsSend() && !last {
			t.Fatalf("rank %d: pending %s (seq %d) is not the rank's last row", tr.Rank[i], tr.Kind[i], tr.Seq[i])
		}
	}
	return tr
}

func events(tr *trace.Trace) []trace.Event {
	out := make([]trace.Event, tr.Len())
	for i := range out {
		out[i] = tr.At(i)
	}
	return out
}

// pair is a send and the receive it meets: the k-th send of an ordered rank
// pair with the k-th receive, whatever their labels (NCCL semantics).
type pair struct{ send, recv trace.Event }

// matchP2P pairs sends and receives by issue order per ordered rank pair,
// independently of the simulator, and returns the pairs and the ops left
// without a partner.
func matchP2P(tr *trace.Trace) (pairs []pair, unmatched []trace.Event) {
	type key struct{ src, dst trace.Rank }
	sends := map[key][]trace.Event{}
	recvs := map[key][]trace.Event{}
	for _, e := range events(tr) { // rows are in (rank, seq) order
		switch {
		case e.Kind.IsSend():
			k := key{e.Rank, e.Peer}
			sends[k] = append(sends[k], e)
		case e.Kind.IsRecv():
			k := key{e.Peer, e.Rank}
			recvs[k] = append(recvs[k], e)
		}
	}
	keys := map[key]bool{}
	for k := range sends {
		keys[k] = true
	}
	for k := range recvs {
		keys[k] = true
	}
	var ks []key
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		return ks[i].src < ks[j].src || ks[i].src == ks[j].src && ks[i].dst < ks[j].dst
	})
	for _, k := range ks {
		s, r := sends[k], recvs[k]
		n := min(len(s), len(r))
		for i := 0; i < n; i++ {
			pairs = append(pairs, pair{s[i], r[i]})
		}
		unmatched = append(unmatched, s[n:]...)
		unmatched = append(unmatched, r[n:]...)
	}
	return pairs, unmatched
}

// labelsAgree reports whether a matched pair carries the same labels.
func labelsAgree(p pair) bool {
	s, r := p.send, p.recv
	return s.Step == r.Step && s.MicroBatch == r.MicroBatch && s.Kind.Counterpart() == r.Kind &&
		s.Shape == r.Shape && s.Dtype == r.Dtype && s.Bytes == r.Bytes
}

// measuredBubble computes DESIGN.md's bubble for one step of one pipeline
// from the rows: the window spans the first start to the last end of the
// step's F/B/W/P2P rows, busy_i is the union of F/B/W intervals on stage i
// (over its TP ranks), and bubble = 1 - max busy / window.
func measuredBubble(tr *trace.Trace, step int64, pipe int32, p int) float64 {
	lo, hi := int64(1<<62), int64(-1<<62)
	type iv struct{ a, b int64 }
	busy := make([][]iv, p)
	for i := 0; i < tr.Len(); i++ {
		k := tr.Kind[i]
		if tr.Step[i] != step || tr.Pipeline[i] != pipe || !(k.IsCompute() || k.IsP2P()) {
			continue
		}
		lo, hi = min(lo, tr.StartNs[i]), max(hi, tr.EndNs[i])
		if k.IsCompute() {
			busy[tr.Stage[i]] = append(busy[tr.Stage[i]], iv{tr.StartNs[i], tr.EndNs[i]})
		}
	}
	var maxBusy int64
	for _, ivs := range busy {
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].a < ivs[j].a })
		var total, curA, curB int64
		open := false
		for _, x := range ivs {
			switch {
			case !open:
				curA, curB, open = x.a, x.b, true
			case x.a <= curB:
				curB = max(curB, x.b)
			default:
				total += curB - curA
				curA, curB = x.a, x.b
			}
		}
		if open {
			total += curB - curA
		}
		maxBusy = max(maxBusy, total)
	}
	return 1 - float64(maxBusy)/float64(hi-lo)
}

// durations returns end-start of every completed row of kind k, keyed by
// (rank, step, mb, chunk).
type opKey struct {
	rank  trace.Rank
	step  int64
	mb    trace.MicroBatch
	chunk int32
	kind  trace.Kind
}

func durations(tr *trace.Trace) map[opKey]int64 {
	out := map[opKey]int64{}
	for i := 0; i < tr.Len(); i++ {
		if tr.Completed(i) {
			out[opKey{tr.Rank[i], tr.Step[i], tr.MicroBatch[i], tr.Chunk[i], tr.Kind[i]}] = tr.EndNs[i] - tr.StartNs[i]
		}
	}
	return out
}
