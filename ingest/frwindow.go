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
// dump begins later for events it never lost.
//
// trimWindows drops those operations: the P2P operations toward a rank
// whose ring wrapped that completed before that rank's dump begins (the
// time its first entry was created, after clock alignment). An operation
// completes only once its peer has posted its side, so its partner was
// created before the peer's dump begins, and is not in it. An operation
// that completed after that time stays, even if its partner was posted
// just before (a pair straddling the start of the peer's dump: rare, as
// a pair completes within a transfer's time).
func trimWindows(t *trace.Trace, parts []*part) (*trace.Trace, []Warning) {
	begin := map[trace.Rank]int64{} // ranks whose ring wrapped: when their dump begins
	path := map[trace.Rank]string{}
	for _, p := range parts {
		if p.fr != nil && p.fr.wrapped {
			begin[p.fr.rank] = trace.NoTime
			path[p.fr.rank] = p.info.Path
		}
	}
	if len(begin) == 0 {
		return t, nil
	}
	for i := range t.Len() {
		r := t.Rank[i]
		if b, ok := begin[r]; ok && (b == trace.NoTime || t.IssueNs[i] < b) {
			begin[r] = t.IssueNs[i]
		}
	}
	keep := make([]int, 0, t.Len())
	dropped := 0
	peers := map[trace.Rank]bool{}
	first := trace.NoRank // the lowest of peers
	for i := range t.Len() {
		if p := t.Peer[i]; p >= 0 && !t.Kind[i].IsCollective() && t.EndNs[i] != trace.NoTime {
			if b, ok := begin[p]; ok && b != trace.NoTime && t.EndNs[i] < b {
				dropped++
				peers[p] = true
				if first == trace.NoRank || p < first {
					first = p
				}
				continue
			}
		}
		keep = append(keep, i)
	}
	if dropped == 0 {
		return t, nil
	}
	others := ""
	if len(peers) > 1 {
		others = fmt.Sprintf(" and %s", plural(len(peers)-1, "other dump"))
	}
	return t.Permute(keep), []Warning{{Path: path[first], Message: fmt.Sprintf("Flight Recorder: the ring buffer dropped the oldest entries of this dump%s: %s of their peers completed before such a dump begins, so their partners are not in it: not matched",
		others, plural(dropped, "P2P operation"))}}
}
