package report

import (
	"cmp"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// fuzzTrace builds a small trace from data: up to 96 rows over 6 ranks and
// 4 steps, in any order, with null times, repeated and decreasing seq,
// any kind from F to COLLECTIVE and odd strings. It also returns where the
// trace is cut into the parts written one after another.
func fuzzTrace(data []byte) (*trace.Trace, []int) {
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := int(data[0])
		data = data[1:]
		return b
	}
	strs := []string{"", "bf16", "4096x1x4096", "fp8 é", "\x00\xff", strings.Repeat("s", 300)}
	t := &trace.Trace{}
	t.Meta.Job = strs[next()%len(strs)]
	n := next() % 97
	for range n {
		e := trace.Event{
			Rank: trace.Rank(next() % 6), Step: int64(next() % 4), Seq: int64(next() - 64),
			Pipeline: int32(next() % 3), Stage: trace.Stage(next() % 5), TPRank: int32(next() % 2), Chunk: int32(next() % 2),
			MicroBatch: trace.MicroBatch(next() - 8), Kind: trace.F + trace.Kind(next()%int(trace.Collective)),
			IssueNs: int64(next()) * 1000, StartNs: int64(next()) * 1000, EndNs: int64(next())*1000 + 7,
			Peer: trace.Rank(next()%7 - 1), Bytes: int64(next()) << 20, Shape: strs[next()%len(strs)], Dtype: strs[next()%len(strs)],
			Tokens: int64(next()), Flops: float64(next()) * 1.5e9, MemBytes: int64(next()) << 10, GroupSeq: trace.NoGroupSeq,
		}
		switch next() % 4 {
		case 0:
			e.EndNs = trace.NoTime
		case 1:
			e.StartNs, e.EndNs = trace.NoTime, trace.NoTime
		case 2:
			e.IssueNs = trace.NoTime
		}
		t.Append(e)
	}
	var cuts []int
	for range next() % 3 {
		cuts = append(cuts, next()%(n+1))
	}
	slices.Sort(cuts)
	return t, cuts
}

// FuzzParquetRoundTrip writes a trace in parts, in either layout, reads
// every file back and checks each holds exactly the rows the layout says:
// the rows of its part with its step (and rank), in (rank, seq) order as
// a stable sort leaves them, part-N for the N-th part that holds them.
func FuzzParquetRoundTrip(f *testing.F) {
	f.Add([]byte("\x01\x20\x00\x01\x40\x00\x00\x00\x08\x00\x10\x20\x30\x01\x01\x01\x01\x02\x03\x01\x01\x03\x00\x01\x02\x10\x02\x05\x00\x01\x30\x00\x00\x00\x08\x00\x10\x20\x30\x01\x01\x01\x01\x02\x03\x01\x01\x03\x00\x01\x05\x09"))
	f.Add([]byte("\x02\x60" + strings.Repeat("\x03\x01\x05\x02\x04\x01\x01\x09\x02\x11\x22\x33\x04\x05\x06\x07\x08\x09\x01", 40)))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, cuts := fuzzTrace(data)
		for _, layout := range []ParquetLayout{ByStepRank, ByStep} {
			dir := filepath.Join(t.TempDir(), "pq")
			w, err := NewParquetWriter(dir, layout)
			if err != nil {
				t.Fatal(err)
			}
			// The parts, and the files each (step[, rank]) of each part
			// should give.
			type key struct{ step, rank int64 }
			want := map[string][]int{}
			parts := map[key]int{}
			lo := 0
			for _, hi := range append(slices.Clone(cuts), tr.Len()) {
				rows := make([]int, 0, hi-lo)
				for i := lo; i < hi; i++ {
					rows = append(rows, i)
				}
				if err := w.Write(tr.Permute(rows)); err != nil {
					t.Fatal(err)
				}
				slices.SortStableFunc(rows, func(a, b int) int {
					return cmp.Or(cmp.Compare(tr.Step[a], tr.Step[b]), cmp.Compare(tr.Rank[a], tr.Rank[b]), cmp.Compare(tr.Seq[a], tr.Seq[b]))
				})
				seen := map[key]bool{}
				for _, i := range rows {
					k := key{tr.Step[i], int64(tr.Rank[i])}
					path := fmt.Sprintf("step=%d/rank=%d", k.step, k.rank)
					if layout == ByStep {
						k.rank, path = 0, fmt.Sprintf("step=%d", k.step)
					}
					if !seen[k] {
						seen[k] = true
						parts[k]++
					}
					path += "/part-" + strconv.Itoa(parts[k]-1) + ".parquet"
					want[path] = append(want[path], i)
				}
				lo = hi
			}
			got := 0
			err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(dir, path)
				rows, ok := want[filepath.ToSlash(rel)]
				if !ok {
					t.Fatalf("layout %d: file %s, not one of %d expected", layout, rel, len(want))
				}
				pf := readPQ(t, path)
				sameRows(t, rel, pf, tr, rows)
				if job := strings.ToValidUTF8(tr.Meta.Job, "\uFFFD"); tr.Meta.Job != "" && pf.meta["job"] != job {
					t.Fatalf("%s: metadata job %q, want %q", rel, pf.meta["job"], job)
				}
				if _, hasRank := pf.i32["rank"]; hasRank != (layout == ByStep) {
					t.Fatalf("layout %d: %s has a rank column: %v", layout, rel, hasRank)
				}
				got++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got != len(want) || w.Files() != len(want) {
				t.Fatalf("layout %d: %d files read, %d written, want %d", layout, got, w.Files(), len(want))
			}
		}
	})
}
