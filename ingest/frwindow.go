package ingest

import (
	"fmt"

	"github.com/ppprof/ppprof/trace"
)

// A Flight Recorder dump holds the last entries of its rank's ring buffer
// (TORCH_NCCL_TRACE_BUFFER_SIZE): when the ring wrapped, the rank's
// oldest operations are gone, and each rank's dump begins at a different
// time (a rank that issues more operations a step keeps a shorter past).
// A send or receive of one rank whose partner was one of those lost
// operations has nothing to match, and every later pair of their channel
// would be shifted by one: the hang diagnosis would blame the rank whose
// dump begins later for events it never lost, and the clock alignment's
// causality bounds would pair the wrong operations.
//
// windowDrops finds those operations: the P2P operations toward a rank
// whose ring wrapped (its first entry's record_id is not 0) that
// completed before that rank's dump begins (the time its first entry was
// created), on clocks shifted by off (nil: as recorded). An operation
// completes only once its peer has posted its side, so its partner was
// created before the peer's dump begins, and is not in it. Then, on each
// channel, the first send and receive left cannot be partners when one
// completed before the other was posted: the one that completed first
// lost its partner to its peer's ring too (a pair straddling the start of
// the peer's dump), and is dropped, until the first two can be partners.
func windowDrops(t *trace.Trace, parts []*part, off func(trace.Rank) int64) *windowDrop {
	// The ranks whose ring wrapped, and when each one's dump begins
	// (begin[wrapped.get(rank)]).
	path := map[trace.Rank]string{}
	var ranks []trace.Rank
	for _, p := range parts {
		if p.fr != nil && p.fr.wrapped {
			if _, ok := path[p.fr.rank]; !ok {
				ranks = append(ranks, p.fr.rank)
			}
			path[p.fr.rank] = p.info.Path
		}
	}
	if len(ranks) == 0 {
		return nil
	}
	wrapped := newRankIndex(func(add func(trace.Rank, int)) {
		for k, r := range ranks {
			add(r, k)
		}
	})
	begin := make([]int64, len(ranks))
	for k := range begin {
		begin[k] = trace.NoTime
	}
	shift := func(r trace.Rank) int64 {
		if off == nil {
			return 0
		}
		return off(r)
	}
	for i := range t.Len() {
		if k, ok := wrapped.get(t.Rank[i]); ok && (begin[k] == trace.NoTime || t.IssueNs[i] < begin[k]) {
			begin[k] = t.IssueNs[i]
		}
	}
	for k, r := range ranks {
		if begin[k] != trace.NoTime {
			begin[k] += shift(r)
		}
	}
	d := &windowDrop{rows: make([]bool, t.Len())}
	peers := map[trace.Rank]bool{}
	first := trace.NoRank // the lowest of peers
	for i := range t.Len() {
		p := t.Peer[i]
		if p < 0 || t.Kind[i].IsCollective() || t.EndNs[i] == trace.NoTime {
			continue
		}
		if k, ok := wrapped.get(p); ok && begin[k] != trace.NoTime && t.EndNs[i]+shift(t.Rank[i]) < begin[k] {
			d.rows[i] = true
			d.n++
			peers[p] = true
			if first == trace.NoRank || p < first {
				first = p
			}
		}
	}
	// A pair straddling the start of a dump: the first send and receive
	// left on a channel cannot be partners when one completed before the
	// other was posted; the one that completed first lost its partner to
	// its peer's ring (when that ring wrapped).
	sends, recvs := p2pChannels(t, d.rows)
	drop := func(i int32, peer trace.Rank) {
		d.rows[i] = true
		d.n++
		peers[peer] = true
		if first == trace.NoRank || peer < first {
			first = peer
		}
	}
	for k, ss := range sends {
		rs := recvs[k]
		_, srcWrapped := wrapped.get(k.src)
		_, dstWrapped := wrapped.get(k.dst)
		for len(ss) > 0 && len(rs) > 0 {
			s, r := ss[0], rs[0]
			se, re := t.EndNs[s], t.EndNs[r]
			if dstWrapped && se != trace.NoTime && se+shift(k.src) < t.IssueNs[r]+shift(k.dst) {
				drop(s, k.dst)
				ss = ss[1:]
				continue
			}
			if srcWrapped && re != trace.NoTime && re+shift(k.dst) < t.IssueNs[s]+shift(k.src) {
				drop(r, k.src)
				rs = rs[1:]
				continue
			}
			break
		}
	}
	if d.n == 0 {
		return nil
	}
	others := ""
	if len(peers) > 1 {
		others = fmt.Sprintf(" and %s", plural(len(peers)-1, "other dump"))
	}
	d.warn = Warning{Path: path[first], Message: fmt.Sprintf("Flight Recorder: the ring buffer dropped the oldest entries of this dump%s: %s of their peers completed before such a dump begins, so their partners are not in it: not matched",
		others, plural(d.n, "P2P operation"))}
	return d
}

// windowDrop is what windowDrops found: the rows to drop, how many, and
// the warning that says so.
type windowDrop struct {
	rows []bool
	n    int
	warn Warning
}

// apply returns t without the rows to drop, in place (t's columns are
// changed: a second copy of a fleet's merged rows is what the peak
// memory of reading its dumps would be).
func (d *windowDrop) apply(t *trace.Trace) *trace.Trace {
	t.DropRows(d.rows)
	return t
}
