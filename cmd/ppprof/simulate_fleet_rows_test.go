package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// TestRankStreamsRows writes a fleet job through rankStreams and reads
// every rank file back: each holds exactly that rank's rows as sim.Fleet
// emitted them (every column, FLOPs and strings included), in record
// batches of at most the flush size. Pending rows are held packed: what a
// rank buffers costs far less than the model's 122 bytes a row.
func TestRankStreamsRows(t *testing.T) {
	c := sim.Config{Schedule: "interleaved", Stages: 4, TP: 2, DP: 2, MicroBatches: 8, Steps: 6,
		Jitter: 0.05, P2PLatencyUs: 10, P2PGbps: 400, OptMs: 1, Seed: 7}
	const flushRows = 100
	dir := t.TempDir()
	rs := &rankStreams{dir: dir, opt: arrowv1.Options{Compression: "lz4", BatchRows: flushRows}, flushRows: flushRows}
	want := map[trace.Rank]*trace.Trace{}
	held, pending, parts := 0, 0, 0 // when the most rows were pending: their bytes, rows and parts
	_, _, err := sim.Fleet(c, func(rows *trace.Trace) error {
		for i := range rows.Len() {
			r := rows.Rank[i]
			if want[r] == nil {
				want[r] = &trace.Trace{Meta: rows.Meta}
			}
			want[r].AppendRows(rows, i, i+1)
		}
		if err := rs.add(rows); err != nil {
			return err
		}
		b, n, k := 0, 0, 0
		for _, s := range rs.ranks {
			if s != nil {
				for _, p := range s.parts {
					b += int(p.Bytes())
				}
				n += s.n
				k += len(s.parts)
			}
		}
		if n > pending {
			held, pending, parts = b, n, k
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Packed, a pending row takes a fraction of the model's 122 bytes,
	// besides each part's headers (a part is one emitted run of a rank:
	// its rows of a step and pipeline replica, or its OPT row).
	t.Logf("most rows pending: %d, in %d parts of %d bytes", pending, parts, held)
	if pending == 0 || held > 24*pending+1024*parts {
		t.Errorf("%d rows pending in %d parts held %d bytes, want at most 24 a row and 1 KiB a part", pending, parts, held)
	}
	if err := rs.close(); err != nil {
		t.Fatal(err)
	}
	if len(want) != c.Stages*c.TP*c.DP {
		t.Fatalf("%d ranks emitted", len(want))
	}
	for r, w := range want {
		path := filepath.Join(dir, fmt.Sprintf("rank-%05d.arrows", r))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		res, err := arrowv1.Read(data)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		got := res.Trace
		if res.Truncated || got.Len() != w.Len() {
			t.Fatalf("%s: %d rows (truncated %v), want %d", path, got.Len(), res.Truncated, w.Len())
		}
		if min := (w.Len() + flushRows - 1) / flushRows; res.Batches < min {
			t.Errorf("%s: %d record batches of %d rows, want at least %d of at most %d", path, res.Batches, w.Len(), min, flushRows)
		}
		for i := range w.Len() {
			if a, b := got.At(i), w.At(i); a != b {
				t.Fatalf("%s row %d: read %+v, emitted %+v", path, i, a, b)
			}
		}
	}
}
