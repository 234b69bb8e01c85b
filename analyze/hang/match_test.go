package hang

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// refMatch is the matching written the most obvious way, as an oracle for
// match: a map from (group, src, dst) to the channel's send and receive
// rows in row order, channels in the order of their first op, the k-th
// send paired with the k-th receive.
type refChannel struct {
	src, dst     trace.Rank
	sends, recvs []int32
}

type refResult struct {
	partner []int32
	chans   []refChannel
	pairMM  []pairMismatch
	matched int
}

func refMatch(a *analysis) refResult {
	t := a.t
	type key struct {
		group    trace.Str
		src, dst trace.Rank
	}
	byGroup := true
	anyP2P := false
	for i := 0; i < t.Len(); i++ {
		if t.Kind[i].IsP2P() {
			anyP2P = true
			if t.Group[i] == 0 {
				byGroup = false
			}
		}
	}
	byGroup = byGroup && anyP2P
	res := refResult{partner: make([]int32, t.Len())}
	index := map[key]int{}
	for i := 0; i < t.Len(); i++ {
		res.partner[i] = -1
		k := t.Kind[i]
		if !k.IsP2P() {
			continue
		}
		kk := key{src: t.Rank[i], dst: t.Peer[i]}
		if k.IsRecv() {
			kk.src, kk.dst = t.Peer[i], t.Rank[i]
		}
		if byGroup {
			kk.group = t.Group[i]
		}
		c, ok := index[kk]
		if !ok {
			c = len(res.chans)
			index[kk] = c
			res.chans = append(res.chans, refChannel{src: kk.src, dst: kk.dst})
		}
		if k.IsSend() {
			res.chans[c].sends = append(res.chans[c].sends, int32(i))
		} else {
			res.chans[c].recvs = append(res.chans[c].recvs, int32(i))
		}
	}
	for c, ch := range res.chans {
		seen := map[MismatchKind]int{}
		for k := 0; k < len(ch.sends) && k < len(ch.recvs); k++ {
			s, r := ch.sends[k], ch.recvs[k]
			res.partner[s], res.partner[r] = r, s
			res.matched++
			if mk, ok := a.pairKind(int(s), int(r)); ok {
				if j, ok := seen[mk]; ok {
					res.pairMM[j].count++
				} else {
					seen[mk] = len(res.pairMM)
					res.pairMM = append(res.pairMM, pairMismatch{kind: mk, ch: int32(c), send: s, recv: r, count: 1})
				}
			}
		}
	}
	return res
}

// checkMatch runs match on t and compares it with refMatch; "" when they
// agree. Partners are compared for every row: those match keeps for every
// row (allPartners), and those it keeps by default (the rows from each
// rank's first pending op on) or finds by counting (partnerScan).
func checkMatch(t *trace.Trace, opt Options) string {
	if !sortedByRankSeq(t) {
		t = sortedCopy(t)
	}
	a, err := newAnalysis(t, opt)
	if err != nil {
		return ""
	}
	a.scanRanks()
	a.allPartners = true
	a.match()
	ref := refMatch(a)
	if got := partners(a); !slices.Equal(got, ref.partner) {
		return fmt.Sprintf("partner %v, want %v", got, ref.partner)
	}
	d, _ := newAnalysis(t, opt)
	d.scanRanks()
	d.match()
	if got := partners(d); !slices.Equal(got, ref.partner) {
		return fmt.Sprintf("partner (kept for pending ops, counted for the others) %v, want %v", got, ref.partner)
	}
	if a.rep.Matched != ref.matched {
		return fmt.Sprintf("matched %d, want %d", a.rep.Matched, ref.matched)
	}
	if !slices.Equal(a.pairMM, ref.pairMM) {
		return fmt.Sprintf("pair mismatches %+v, want %+v", a.pairMM, ref.pairMM)
	}
	if len(a.chans) != len(ref.chans) {
		return fmt.Sprintf("%d channels, want %d", len(a.chans), len(ref.chans))
	}
	extra := 0 // unmatched rows of all the channels
	for c := range a.chans {
		ch, rc := &a.chans[c], &ref.chans[c]
		n := min(len(rc.sends), len(rc.recvs))
		switch {
		case ch.src != rc.src || ch.dst != rc.dst || int(ch.sends) != len(rc.sends) || int(ch.recvs) != len(rc.recvs):
			return fmt.Sprintf("channel %d: %d->%d %d sends %d recvs, want %d->%d %d %d", c,
				ch.src, ch.dst, ch.sends, ch.recvs, rc.src, rc.dst, len(rc.sends), len(rc.recvs))
		case !slices.Equal(a.unmatchedSends(ch), rc.sends[n:]) && len(rc.sends) > n:
			return fmt.Sprintf("channel %d: unmatched sends %v, want %v", c, a.unmatchedSends(ch), rc.sends[n:])
		case !slices.Equal(a.unmatchedRecvs(ch), rc.recvs[n:]) && len(rc.recvs) > n:
			return fmt.Sprintf("channel %d: unmatched receives %v, want %v", c, a.unmatchedRecvs(ch), rc.recvs[n:])
		}
		extra += len(a.unmatchedSends(ch)) + len(a.unmatchedRecvs(ch))
	}
	if extra != len(a.extra) {
		return fmt.Sprintf("channels show %d unmatched rows, %d kept", extra, len(a.extra))
	}
	return ""
}

// partners returns a.partner of every row.
func partners(a *analysis) []int32 {
	p := make([]int32, a.t.Len())
	for i := range p {
		p[i] = a.partner(i)
	}
	return p
}

// TestMatchOracle compares match with refMatch on random P2P traces (sparse
// rank ids, groups, unmatched ops, mismatched labels and sizes, ranks cut
// short, shuffled rows) and on simulated jobs.
func TestMatchOracle(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	for seed := int64(0); seed < int64(n); seed++ {
		tr, opt := randomP2PTrace(rand.New(rand.NewSource(seed)))
		if tr.Len() == 0 {
			continue
		}
		if msg := checkMatch(tr, opt); msg != "" {
			t.Fatalf("seed %d: %s", seed, msg)
		}
	}
	for _, c := range []sim.Config{
		{Schedule: "1f1b", Stages: 4, TP: 2, DP: 2, MicroBatches: 8, Steps: 2},
		{Schedule: "interleaved", Stages: 4, MicroBatches: 8, Steps: 2},
		{Schedule: "1f1b", Stages: 3, MicroBatches: 6, Steps: 2, Faults: []sim.Fault{{Kind: sim.FaultReorder, Rank: 1, Step: 1, MicroBatch: 2}}},
		{Schedule: "gpipe", Stages: 3, MicroBatches: 6, Steps: 2, Faults: []sim.Fault{{Kind: sim.FaultShape, Rank: 1, Step: 0, MicroBatch: 2}}},
	} {
		tr, err := sim.Run(c)
		if err != nil {
			t.Fatal(err)
		}
		if msg := checkMatch(tr, Options{}); msg != "" {
			t.Fatalf("%+v: %s", c, msg)
		}
	}
}

// TestStepKinds: compareStep takes the compute and P2P kinds to be 1..7.
func TestStepKinds(t *testing.T) {
	for k := trace.Kind(0); k < 64; k++ {
		if got, want := uint16(k)-uint16(trace.F) < 7, k.IsCompute() || k.IsP2P(); got != want {
			t.Errorf("%s: in 1..7 %v, compute or P2P %v", k, got, want)
		}
	}
}

// TestCounterpartBit: match takes a send's counterpart to be its kind with
// the low bit set.
func TestCounterpartBit(t *testing.T) {
	for _, k := range []trace.Kind{trace.SendF, trace.SendB} {
		if k.Counterpart() != k^1 || !(k ^ 1).IsRecv() || k&1 != 0 {
			t.Errorf("%s: counterpart %s, k^1 %s", k, k.Counterpart(), k^1)
		}
	}
	for _, k := range []trace.Kind{trace.RecvF, trace.RecvB} {
		if k&1 != 1 {
			t.Errorf("%s is odd", k)
		}
	}
}
