package hang

import (
	"fmt"
	"strings"

	"github.com/ppprof/ppprof/trace"
)

// channel holds the P2P ops of one ordered rank pair (src, dst) in issue
// order: src's sends to dst and dst's receives from src. The k-th of each
// meet, as NCCL's do. When every P2P op of the trace names its process
// group, the channel is (group, src, dst): communicators do not match each
// other's ops.
type channel struct {
	src, dst trace.Rank
	sends    []int32 // rows
	recvs    []int32 // rows
}

// chanKey packs a channel's identity into one word: src and dst (below
// MaxRanks, 22 bits each) and the group's index when channels are per
// group (0 otherwise; 20 bits, the last index shared past a million
// groups).
func chanKey(src, dst trace.Rank, group uint64) uint64 {
	return uint64(src)<<42 | uint64(dst)<<20 | min(group, 1<<20-1)
}

// p2pGroups reports whether every P2P op of t names its process group.
func p2pGroups(t *trace.Trace) bool {
	found := false
	for i := 0; i < t.Len(); i++ {
		if t.Kind[i].IsP2P() {
			if t.Group[i] == "" {
				return false
			}
			found = true
		}
	}
	return found
}

// pairMismatch is the first pair of a channel showing one mismatch kind,
// and how many pairs of the channel show it.
type pairMismatch struct {
	kind       MismatchKind
	ch         int32
	send, recv int32 // rows of the first pair
	count      int
}

// match builds the per-pair FIFO queues and pairs the k-th send with the
// k-th receive of each, then checks every pair's labels. One pass over the
// rows and one over the pairs: linear in the number of ops.
func (a *analysis) match() {
	t := a.t
	a.partner = make([]int32, t.Len())
	chanOf := map[uint64]int32{}
	byGroup := p2pGroups(t)
	groupOf := map[string]uint64{}
	lastGroup, lastGID := "", uint64(0)
	// A rank talks to few peers: remember the last few channels it used so
	// most ops skip the map.
	type cached struct {
		key uint64
		id  int32
	}
	var cache [4]cached
	cacheRank := trace.NoRank
	for i := 0; i < t.Len(); i++ {
		a.partner[i] = -1
		k := t.Kind[i]
		if !k.IsP2P() {
			continue
		}
		src, dst := t.Rank[i], t.Peer[i]
		if k.IsRecv() {
			src, dst = dst, src
		}
		gid := uint64(0)
		if byGroup {
			if g := t.Group[i]; g != lastGroup || lastGID == 0 {
				id, ok := groupOf[g]
				if !ok {
					id = uint64(len(groupOf)) + 1
					groupOf[g] = id
				}
				lastGroup, lastGID = g, id
			}
			gid = lastGID
		}
		key := chanKey(src, dst, gid)
		if t.Rank[i] != cacheRank {
			cacheRank = t.Rank[i]
			cache = [4]cached{}
		}
		id := int32(-1)
		for _, c := range cache {
			if c.key == key && c.id > 0 {
				id = c.id - 1
			}
		}
		if id < 0 {
			var ok bool
			if id, ok = chanOf[key]; !ok {
				id = int32(len(a.chans))
				chanOf[key] = id
				a.chans = append(a.chans, channel{src: src, dst: dst})
			}
			copy(cache[1:], cache[:3])
			cache[0] = cached{key, id + 1}
		}
		ch := &a.chans[id]
		if k.IsSend() {
			ch.sends = append(ch.sends, int32(i))
		} else {
			ch.recvs = append(ch.recvs, int32(i))
		}
	}
	for ci := range a.chans {
		ch := &a.chans[ci]
		n := min(len(ch.sends), len(ch.recvs))
		a.rep.Matched += n
		first := len(a.pairMM)
		for k := 0; k < n; k++ {
			s, r := ch.sends[k], ch.recvs[k]
			a.partner[s], a.partner[r] = r, s
			kind, ok := a.pairKind(int(s), int(r))
			if !ok {
				continue
			}
			found := false
			for j := first; j < len(a.pairMM); j++ {
				if a.pairMM[j].kind == kind {
					a.pairMM[j].count++
					found = true
					break
				}
			}
			if !found {
				a.pairMM = append(a.pairMM, pairMismatch{kind: kind, ch: int32(ci), send: s, recv: r, count: 1})
			}
		}
	}
}

// pairKind returns what a matched pair disagrees on first: its labels
// (step, micro-batch, kind), then shape, dtype and bytes; ok is false when
// they agree. Empty shapes and dtypes and zero bytes are unknown and agree
// with anything.
func (a *analysis) pairKind(s, r int) (MismatchKind, bool) {
	t := a.t
	switch {
	case t.Step[s] != t.Step[r] || t.MicroBatch[s] != t.MicroBatch[r] || t.Kind[s].Counterpart() != t.Kind[r]:
		return OrderMismatch, true
	case t.Shape[s] != "" && t.Shape[r] != "" && t.Shape[s] != t.Shape[r]:
		return ShapeMismatch, true
	case t.Dtype[s] != "" && t.Dtype[r] != "" && t.Dtype[s] != t.Dtype[r]:
		return DtypeMismatch, true
	case t.Bytes[s] > 0 && t.Bytes[r] > 0 && t.Bytes[s] != t.Bytes[r]:
		return BytesMismatch, true
	}
	return "", false
}

// badPair reports whether a matched pair can never complete: its byte
// counts differ (NCCL waits for the count it was given), or, with a byte
// count unknown, its shapes do.
func (a *analysis) badPair(s, r int) bool {
	t := a.t
	if t.Bytes[s] > 0 && t.Bytes[r] > 0 {
		return t.Bytes[s] != t.Bytes[r]
	}
	return t.Shape[s] != "" && t.Shape[r] != "" && t.Shape[s] != t.Shape[r]
}

// pairDetail lists every label on which a pair differs: "micro-batch 7 vs
// 6, shape 8192x1x4096 vs 4096x1x4096" (send side first).
func (a *analysis) pairDetail(s, r int) string {
	t := a.t
	var d []string
	if t.Step[s] != t.Step[r] {
		d = append(d, fmt.Sprintf("step %d vs %d", t.Step[s], t.Step[r]))
	}
	if t.MicroBatch[s] != t.MicroBatch[r] {
		d = append(d, fmt.Sprintf("micro-batch %d vs %d", t.MicroBatch[s], t.MicroBatch[r]))
	}
	if t.Kind[s].Counterpart() != t.Kind[r] {
		d = append(d, fmt.Sprintf("kind %s vs %s", t.Kind[s], t.Kind[r]))
	}
	if t.Chunk[s] != t.Chunk[r] && t.Kind[s].Counterpart() != t.Kind[r] {
		d = append(d, fmt.Sprintf("chunk %d vs %d", t.Chunk[s], t.Chunk[r]))
	}
	if t.Shape[s] != t.Shape[r] {
		d = append(d, fmt.Sprintf("shape %s vs %s", orUnknown(t.Shape[s]), orUnknown(t.Shape[r])))
	}
	if t.Dtype[s] != t.Dtype[r] {
		d = append(d, fmt.Sprintf("dtype %s vs %s", orUnknown(t.Dtype[s]), orUnknown(t.Dtype[r])))
	}
	if t.Bytes[s] != t.Bytes[r] {
		d = append(d, fmt.Sprintf("bytes %d vs %d", t.Bytes[s], t.Bytes[r]))
	}
	return strings.Join(d, ", ")
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// markLost marks the ranks whose events are evidently missing from the
// dump: their file lost bytes (newAnalysis); a peer holds a completed op
// that nothing of theirs matches; or other ranks completed an optimizer
// step (a barrier every rank must reach) that they, recording optimizer
// steps or recording nothing, never posted.
func (a *analysis) markLost() {
	t := a.t
	mark := func(r trace.Rank, why string) {
		ri := &a.ranks[r]
		if !ri.lost {
			ri.lost, ri.lostWhy = true, why
		}
	}
	for _, ch := range a.chans {
		for _, s := range ch.sends[min(len(ch.sends), len(ch.recvs)):] {
			if t.EndNs[s] != trace.NoTime {
				mark(ch.dst, fmt.Sprintf("rank %d's %s completed, but rank %d has no receive for it", ch.src, describeOp(a.event(int(s))), ch.dst))
				break
			}
		}
		for _, r := range ch.recvs[min(len(ch.sends), len(ch.recvs)):] {
			if t.EndNs[r] != trace.NoTime {
				mark(ch.src, fmt.Sprintf("rank %d's %s completed, but rank %d has no send for it", ch.dst, describeOp(a.event(int(r))), ch.src))
				break
			}
		}
	}
	done := int64(-1) // highest step whose optimizer barrier completed somewhere
	doneRank := trace.NoRank
	for i := 0; i < t.Len(); i++ {
		if isOpt(t.Kind[i]) && t.EndNs[i] != trace.NoTime && t.Step[i] > done {
			done, doneRank = t.Step[i], t.Rank[i]
		}
	}
	if done < 0 {
		return
	}
	for r := range a.ranks {
		// A rank with events but no optimizer step at all does not record
		// OPT (some runtimes record it on some ranks only): no evidence.
		if ri := &a.ranks[r]; ri.lastOptStep < done && (ri.lastOptStep >= 0 || !ri.present) {
			mark(trace.Rank(r), fmt.Sprintf("rank %d completed the optimizer step of step %d, which every rank must reach, but rank %d recorded no optimizer step %d", doneRank, done, r, done))
		}
	}
}
