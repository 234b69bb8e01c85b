package analyze

import "github.com/ppprof/ppprof/trace"

// Pair is one matched P2P send and receive of a trace, as rows of it. A send
// or receive that no op of the peer matches is a Pair with the other side
// -1.
type Pair struct {
	Send, Recv int // trace rows; -1 for the missing side
}

// MatchP2P pairs every SEND with a RECV across the whole trace as NCCL
// does (the matching the analysis uses, see matchTransfers): for each
// ordered (sender, receiver) rank pair, the k-th send in the sender's issue
// order meets the k-th receive in the receiver's, whatever their labels.
// Pairs come in (sender, receiver, issue) order, unmatched ops after their
// rank pair's matched ones. t is not modified.
func MatchP2P(t *trace.Trace) []Pair {
	rows := make([]int, 0, t.Len()/2)
	for i, k := range t.Kind {
		if k.IsP2P() {
			rows = append(rows, i)
		}
	}
	var sc p2pScratch
	trs := matchTransfers(t, rows, &sc)
	out := make([]Pair, len(trs))
	for i, tr := range trs {
		out[i] = Pair{Send: tr.send, Recv: tr.recv}
	}
	return out
}
