package ingest

import (
	"fmt"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// TestAlignClocksManyFiles aligns files (one rank each, each its own
// clock) that share collectives of one group: each rank's clock is off by
// a known skew, so the offset alignClocks finds for it must undo that
// skew exactly. Sizes on both sides of allPairsDomains: every pair of
// files, and each file against the lowest one.
func TestAlignClocksManyFiles(t *testing.T) {
	for _, files := range []int{5, allPairsDomains, allPairsDomains + 1, 300} {
		t.Run(fmt.Sprint(files), func(t *testing.T) {
			tr := &trace.Trace{}
			var parts []*part
			skew := func(r int) int64 { return int64(r*7919%1000) * 1000 } // ns, rank 0: 0
			for r := range files {
				parts = append(parts, &part{external: true, info: FileInfo{Path: fmt.Sprintf("_dump_%d", r), Ranks: []trace.Rank{trace.Rank(r)}}})
				for k := range 3 {
					// Collective k of the world group ends at 1 ms + k ms
					// on the true clock; rank r's clock reads skew(r) more.
					end := int64(1_000_000*(k+1)) + skew(r)
					tr.Append(trace.Event{Rank: trace.Rank(r), Kind: trace.AllReduce, Group: "world", GroupSeq: int64(k),
						Peer: trace.NoRank, MicroBatch: trace.NoMicroBatch, Seq: int64(k),
						IssueNs: end - 500, StartNs: end - 400, EndNs: end})
				}
			}
			offs, _, _ := alignClocks(tr, parts)
			if len(offs) != files {
				t.Fatalf("%d offsets for %d files", len(offs), files)
			}
			for r, o := range offs {
				if o.OffsetNs != -skew(r) {
					t.Errorf("rank %d: offset %d ns (%s), want %d", r, o.OffsetNs, o.Method, -skew(r))
				}
				if r > 0 && (o.Method != "collectives" || o.Collectives != 3) {
					t.Errorf("rank %d: method %q from %d collectives, want collectives from 3", r, o.Method, o.Collectives)
				}
			}
			// The times are shifted onto rank 0's clock: every copy of a
			// collective now ends together.
			for i := range tr.Len() {
				if want := int64(1_000_000 * (tr.GroupSeq[i] + 1)); tr.EndNs[i] != want {
					t.Fatalf("row %d (rank %d): end %d after alignment, want %d", i, tr.Rank[i], tr.EndNs[i], want)
				}
			}
		})
	}
}
