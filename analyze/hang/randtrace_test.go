package hang

import (
	"math/rand"

	"github.com/ppprof/ppprof/trace"
)

// RandomP2PTrace is randomP2PTrace for the external tests.
var RandomP2PTrace = randomP2PTrace

// randomP2PTrace draws a small trace of P2P traffic meant to stress the
// matcher: dense or sparse rank ids (some peers with no rows at all), sends
// and receives that pair up with the same or different labels, sizes,
// shapes and dtypes, unmatched ops on either side, ranks cut short, process
// groups on every P2P op, some or none, rows in (rank, seq) order or
// shuffled, compute and optimizer rows between, null ends and starts.
func randomP2PTrace(rng *rand.Rand) (*trace.Trace, Options) {
	n := 1 + rng.Intn(7)
	ids := make([]trace.Rank, n+1) // the last one never records anything
	switch rng.Intn(3) {
	case 0: // dense
		for i := range ids {
			ids[i] = trace.Rank(i)
		}
	case 1: // a permutation of a small range with holes
		perm := rng.Perm(2*len(ids) + 3)
		for i := range ids {
			ids[i] = trace.Rank(perm[i])
		}
	default: // sparse, some large
		seen := map[trace.Rank]bool{}
		for i := range ids {
			for {
				r := trace.Rank(rng.Intn(5000))
				if rng.Intn(8) == 0 {
					r = trace.Rank(60000 + rng.Intn(5000))
				}
				if !seen[r] {
					seen[r], ids[i] = true, r
					break
				}
			}
		}
	}
	groupMode := rng.Intn(3) // 0: no groups, 1: every P2P op names one, 2: some do
	groups := []string{"g0", "g1", "pp"}
	shapes := []string{"", "4x4", "8x4", "4x4"}
	dtypes := []string{"", "bf16", "bf16", "fp32"}
	sizes := []int64{0, 128, 128, 256}
	kinds := []trace.Kind{trace.F, trace.B, trace.W, trace.Opt, KindOptSkip, trace.AllReduce}

	per := make([][]trace.Event, n)
	clock := make([]int64, n)
	step := make([]int64, n)
	add := func(ri int, e trace.Event) {
		clock[ri] += 1 + rng.Int63n(5)
		e.Rank = ids[ri]
		e.Stage = trace.Stage(ri % 3)
		e.Seq = int64(len(per[ri])) * (1 + int64(ri%2))
		e.IssueNs = clock[ri]
		e.Step = step[ri]
		e.GroupSeq = trace.NoGroupSeq
		switch rng.Intn(6) {
		case 0:
			e.StartNs, e.EndNs = trace.NoTime, trace.NoTime
		case 1:
			e.StartNs, e.EndNs = clock[ri]+1, trace.NoTime
		default:
			e.StartNs, e.EndNs = clock[ri]+1, clock[ri]+2+rng.Int63n(3)
		}
		if !e.Kind.IsP2P() {
			e.Peer = trace.NoRank
		}
		per[ri] = append(per[ri], e)
		if rng.Intn(20) == 0 {
			step[ri]++
		}
	}
	label := func() (trace.MicroBatch, int64, string, string, int64) {
		return trace.MicroBatch(rng.Intn(5)) - 1, int64(rng.Intn(3)), shapes[rng.Intn(len(shapes))], dtypes[rng.Intn(len(dtypes))], sizes[rng.Intn(len(sizes))]
	}
	ops := rng.Intn(80)
	for k := 0; k < ops; k++ {
		if n < 2 || rng.Intn(6) == 0 {
			add(rng.Intn(n), trace.Event{Kind: kinds[rng.Intn(len(kinds))], MicroBatch: trace.MicroBatch(rng.Intn(4))})
			continue
		}
		s := rng.Intn(n)
		d := rng.Intn(n + 1) // n: the rank that never records
		if d == s {
			d = (s + 1) % n
		}
		g := ""
		if groupMode == 1 || groupMode == 2 && rng.Intn(2) == 0 {
			g = groups[rng.Intn(len(groups))]
		}
		fwd := rng.Intn(2) == 0
		sk, rk := trace.SendF, trace.RecvF
		if !fwd {
			sk, rk = trace.SendB, trace.RecvB
		}
		mb, ch, shape, dtype, bytes := label()
		send := trace.Event{Kind: sk, Peer: ids[d], MicroBatch: mb, Chunk: int32(ch), Shape: shape, Dtype: dtype, Bytes: bytes, Group: g}
		recv := trace.Event{Kind: rk, Peer: ids[s], MicroBatch: mb, Chunk: int32(ch), Shape: shape, Dtype: dtype, Bytes: bytes, Group: g}
		switch rng.Intn(10) {
		case 0: // different labels on the receive
			recv.MicroBatch, _, recv.Shape, recv.Dtype, recv.Bytes = label()
		case 1:
			recv.Kind = []trace.Kind{trace.RecvF, trace.RecvB}[rng.Intn(2)]
		case 2:
			recv.Bytes = sizes[rng.Intn(len(sizes))]
		}
		switch {
		case d == n: // the peer never records
			add(s, send)
		case rng.Intn(8) == 0: // a send nobody receives
			add(s, send)
		case rng.Intn(8) == 0: // a receive nobody sends
			add(d, recv)
		default:
			add(s, send)
			add(d, recv)
		}
	}
	// Cut some ranks short.
	for ri := range per {
		if rng.Intn(5) == 0 && len(per[ri]) > 0 {
			per[ri] = per[ri][:rng.Intn(len(per[ri]))]
		}
	}
	t := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	var rows []trace.Event
	for ri := range per {
		rows = append(rows, per[ri]...)
	}
	if rng.Intn(3) == 0 {
		rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	} else {
		// (rank, seq) order.
		rows = rows[:0]
		byID := make([]int, n)
		for i := range byID {
			byID[i] = i
		}
		for i := 1; i < n; i++ {
			for j := i; j > 0 && ids[byID[j]] < ids[byID[j-1]]; j-- {
				byID[j], byID[j-1] = byID[j-1], byID[j]
			}
		}
		for _, ri := range byID {
			rows = append(rows, per[ri]...)
		}
	}
	for _, e := range rows {
		t.Append(e)
	}
	opt := Options{}
	if rng.Intn(3) == 0 {
		opt.WorldSize = rng.Intn(10)
	}
	if rng.Intn(4) == 0 {
		ri := rng.Intn(n)
		opt.Files = []File{{Path: "r.bin", Ranks: []trace.Rank{ids[ri]}, Truncated: true, BytesLost: int64(rng.Intn(2)) * 100}}
	}
	if rng.Intn(3) == 0 {
		opt.DumpNs = 1000
	}
	return t, opt
}
