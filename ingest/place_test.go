package ingest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"sync"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// The files of a job are decoded straight into the merged trace where they
// can be (place.go): these tests check that Open and Chunk give exactly
// what they gave before (every file a trace of its own, then merged), on
// simulated fleets and on inputs that must fall back.

// openResult is what Open returned, with the warnings as Warn saw them.
type openResult struct {
	res    *Result
	err    error
	warned []Warning
}

func openWith(paths []string, place bool) openResult {
	noPlace.Store(!place)
	defer noPlace.Store(false)
	var o openResult
	o.res, o.err = Open(paths, Options{Warn: func(w Warning) { o.warned = append(o.warned, w) }})
	return o
}

// sameResult checks that a (placed) and b (merged) are the same result.
func sameResult(t *testing.T, name string, a, b openResult) {
	t.Helper()
	if (a.err == nil) != (b.err == nil) || a.err != nil && a.err.Error() != b.err.Error() {
		t.Fatalf("%s: error %v, before %v", name, a.err, b.err)
	}
	if reflect.TypeOf(a.err) != reflect.TypeOf(b.err) {
		t.Fatalf("%s: error of type %T, before %T", name, a.err, b.err)
	}
	if !reflect.DeepEqual(a.warned, b.warned) {
		t.Fatalf("%s: warned %v, before %v", name, a.warned, b.warned)
	}
	if a.err != nil {
		return
	}
	if d := trace.Diff(a.res.Trace, b.res.Trace); d != "" {
		t.Fatalf("%s: traces differ: %s", name, d)
	}
	if !reflect.DeepEqual(a.res, b.res) {
		t.Fatalf("%s: results differ:\n%+v\nbefore\n%+v", name, a.res, b.res)
	}
}

// openBoth opens paths placed and merged, checks they agree, and reports
// whether the placed read merged in place.
func openBoth(t *testing.T, name string, paths ...string) (openResult, bool) {
	t.Helper()
	before := placedMerges.Load()
	a := openWith(paths, true)
	placed := placedMerges.Load() > before
	b := openWith(paths, false)
	sameResult(t, name, a, b)
	return a, placed
}

// chunksBoth reads every chunk of paths placed and merged and checks they
// agree; it returns how many chunks merged in place.
func chunksBoth(t *testing.T, name string, maxRows int, paths ...string) int {
	t.Helper()
	c, err := OpenChunks(paths, maxRows, Options{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	placed, reused := 0, 0
	var prev *trace.Trace // the last chunk recycled, scribbled over
	for i := range c.NumChunks() {
		before := placedMerges.Load()
		a, aerr := c.Chunk(i)
		placed += int(placedMerges.Load() - before)
		if aerr == nil && prev != nil && a.Len() > 0 && cap(prev.Rank) > 0 && &a.Rank[:1][0] == &prev.Rank[:1][0] {
			reused++
		}
		noPlace.Store(true)
		b, berr := c.Chunk(i)
		noPlace.Store(false)
		what := fmt.Sprintf("%s: chunk %d", name, i)
		if (aerr == nil) != (berr == nil) || aerr != nil && aerr.Error() != berr.Error() {
			t.Fatalf("%s: error %v, before %v", what, aerr, berr)
		}
		if aerr != nil {
			continue
		}
		if d := trace.Diff(a, b); d != "" || !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: traces differ: %s", what, d)
		}
		// Hand the chunk back with junk in every row: the next chunk is
		// read into its columns (Recycle) and must not show any of it.
		scribble(a)
		c.Recycle(a)
		prev = a
	}
	if placed >= 2 && reused == 0 {
		t.Errorf("%s: %d chunks read in place, none into a recycled chunk's columns", name, placed)
	}
	return placed
}

// scribble writes junk in every row of a.
func scribble(a *trace.Trace) {
	for k := range a.Len() {
		a.Rank[k], a.Pipeline[k], a.Step[k], a.Seq[k], a.StartNs[k], a.EndNs[k] = -9, -9, -9, -9, -9, -9
		a.Kind[k], a.Peer[k], a.Bytes[k], a.Flops[k], a.MemBytes[k], a.GroupSeq[k] = 99, -9, -9, -9, -9, -9
		a.Shape[k], a.Dtype[k], a.Group[k], a.IssueNs[k], a.Tokens[k], a.MicroBatch[k] = trace.Intern("junk"), trace.Intern("junk"), trace.Intern("junk"), -9, -9, -9
		a.Stage[k], a.TPRank[k], a.Chunk[k] = -9, -9, -9
	}
}

// fleetTrace simulates a small fleet with sim.Fleet.
func fleetTrace(t testing.TB, c sim.Config) *trace.Trace {
	t.Helper()
	all := &trace.Trace{}
	meta, _, err := sim.Fleet(c, func(rows *trace.Trace) error {
		all.AppendRows(rows, 0, rows.Len())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	all.Meta = meta
	all.SortByRankSeq()
	return all
}

// writeRanks writes each rank of tr as a file named by name, encoded by
// enc, and returns the paths in rank order.
func writeRanks(t testing.TB, dir string, tr *trace.Trace, name func(trace.Rank) string, enc func(*trace.Trace) []byte) []string {
	t.Helper()
	var paths []string
	for _, r := range tr.Ranks() {
		paths = append(paths, writeFile(t, dir, name(r), enc(rankSlice(tr, r))))
	}
	return paths
}

func rankName(r trace.Rank) string { return fmt.Sprintf("rank-%05d.arrows", r) }

func TestPlacedFleet(t *testing.T) {
	tr := fleetTrace(t, sim.Config{Schedule: "interleaved", Stages: 4, TP: 2, DP: 4, MicroBatches: 8, Steps: 2,
		Jitter: 0.05, Seed: 5, OptMs: 2, P2PLatencyUs: 10, P2PGbps: 400})
	for _, enc := range []struct {
		name string
		f    func(*trace.Trace) []byte
	}{
		{"stream lz4", func(r *trace.Trace) []byte {
			return arrowStream(t, r, arrowv1.Options{Compression: arrowv1.LZ4, BatchRows: 64})
		}},
		{"stream zstd one batch", func(r *trace.Trace) []byte { return arrowStream(t, r, arrowv1.Options{Compression: arrowv1.ZSTD}) }},
		{"file", func(r *trace.Trace) []byte { return arrowFile(t, r, arrowv1.Options{BatchRows: 100}) }},
	} {
		dir := t.TempDir()
		writeRanks(t, dir, tr, rankName, enc.f)
		res, placed := openBoth(t, enc.name, dir)
		if !placed {
			t.Errorf("%s: a fleet's rank files were not read in place", enc.name)
		}
		if d := trace.Diff(res.res.Trace, tr); d != "" {
			t.Errorf("%s: Open differs from the simulated trace: %s", enc.name, d)
		}
		perPipe := tr.Len() / 4
		for _, maxRows := range []int{0, 1, perPipe, 3 * perPipe} {
			if n := chunksBoth(t, fmt.Sprintf("%s, chunks of %d", enc.name, maxRows), maxRows, dir); n == 0 {
				t.Errorf("%s, chunks of %d: no chunk read in place", enc.name, maxRows)
			}
		}
	}
}

// TestPlacedOddInputs: inputs that are read in place but are not one
// sorted rank per file in rank order, and inputs that must fall back; each
// gives what the merge gave.
func TestPlacedOddInputs(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 6, DP: 2, Steps: 2, Jitter: 0.1, Seed: 9, OptMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	ranks := tr.Ranks()
	lz4 := func(r *trace.Trace) []byte {
		return arrowStream(t, r, arrowv1.Options{Compression: arrowv1.LZ4, BatchRows: 16})
	}
	ranksOf := func(rs ...trace.Rank) *trace.Trace {
		out := &trace.Trace{Meta: tr.Meta}
		for _, r := range rs {
			s := rankSlice(tr, r)
			out.AppendRows(s, 0, s.Len())
		}
		return out
	}
	type file struct {
		name string
		data []byte
	}
	rest := func(skip ...trace.Rank) []file {
		var fs []file
		for _, r := range ranks {
			if !bytes.Contains([]byte(fmt.Sprint(skip)), []byte(fmt.Sprint(r))) || len(skip) == 0 {
				fs = append(fs, file{rankName(r), lz4(rankSlice(tr, r))})
			}
		}
		return fs
	}
	cutStream := func(r trace.Rank) []byte {
		data := lz4(rankSlice(tr, r))
		return data[:len(data)*2/3]
	}
	unsorted := func(r trace.Rank) *trace.Trace {
		s := rankSlice(tr, r)
		idx := make([]int, s.Len())
		for i := range idx {
			idx[i] = len(idx) - 1 - i
		}
		return s.Permute(idx)
	}
	conflict := rankSlice(tr, ranks[3])
	conflict.Meta.Schedule = "gpipe"
	corrupt := lz4(rankSlice(tr, ranks[2]))
	for i := len(corrupt) / 2; i < len(corrupt)/2+40; i++ {
		corrupt[i] ^= 0x5a
	}
	var gz bytes.Buffer
	gz.Write(gzipBytes(t, lz4(rankSlice(tr, ranks[1]))))
	empty := tr.Slice(0, 0)
	tests := []struct {
		name   string
		files  []file
		placed bool // read in place
	}{
		{"rank files", rest(), true},
		{"names not in rank order", append([]file{{"a-last.arrows", lz4(rankSlice(tr, ranks[7]))}}, rest(ranks[7])...), true},
		{"truncated stream", append(rest(ranks[5]), file{rankName(ranks[5]), cutStream(ranks[5])}), true},
		{"two ranks in one file", append(rest(ranks[0], ranks[1]), file{"a-two.arrows", lz4(ranksOf(ranks[0], ranks[1]))}), true},
		{"ranks of others between", append(rest(ranks[0], ranks[6]), file{"a-two.arrows", lz4(ranksOf(ranks[0], ranks[6]))}), true},
		{"a file with no events", append(rest(), file{"none.arrows", lz4(empty)}), true},
		{"not a trace in the directory", append(rest(), file{"notes.txt", []byte("hello\n")}), true},
		{"unsorted file", append(rest(ranks[4]), file{rankName(ranks[4]), lz4(unsorted(ranks[4]))}), false},
		{"gzip", append(rest(ranks[1]), file{"r1.arrows.gz", gz.Bytes()}), false},
		{"csv", append(rest(ranks[1]), file{"r1.csv", csvBytes(t, rankSlice(tr, ranks[1]))}), false},
		{"metadata conflict", append(rest(ranks[3]), file{rankName(ranks[3]), lz4(conflict)}), false},
		{"rank in two files", append(rest(), file{"again.arrows", lz4(rankSlice(tr, ranks[2]))}), false},
		{"corrupt file", append(rest(ranks[2]), file{rankName(ranks[2]), corrupt}), false},
		{"cut before the schema", append(rest(), file{"dead.arrows", lz4(empty)[:3]}), true},
	}
	for _, tc := range tests {
		dir := t.TempDir()
		for _, f := range tc.files {
			writeFile(t, dir, f.name, f.data)
		}
		_, placed := openBoth(t, tc.name, dir)
		if placed != tc.placed {
			t.Errorf("%s: read in place %v, want %v", tc.name, placed, tc.placed)
		}
		// Named one by one, in name order.
		entries, _ := os.ReadDir(dir)
		var paths []string
		for _, e := range entries {
			if e.Name() != "notes.txt" && e.Name() != "dead.arrows" {
				paths = append(paths, filepath.Join(dir, e.Name()))
			}
		}
		openBoth(t, tc.name+", named", paths...)
		if c, err := OpenChunks([]string{dir}, 0, Options{}); err == nil {
			chunksBoth(t, tc.name+", one chunk", 0, dir)
			chunksBoth(t, tc.name+", chunks", c.Events/3, dir)
		}
	}
}

// TestPlacedFileChanged: a file that changes between the count of its rows
// and its read (more rows, fewer, other ranks, gone) gives what the merge
// gives from what was read.
func TestPlacedFileChanged(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 6, DP: 2, Steps: 1, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	ranks := tr.Ranks()
	lz4 := func(r *trace.Trace) []byte {
		return arrowStream(t, r, arrowv1.Options{Compression: arrowv1.LZ4, BatchRows: 16})
	}
	r2 := rankSlice(tr, ranks[2])
	changes := map[string]func(path string){
		"more rows":   func(p string) { os.WriteFile(p, lz4(fEventsLike(r2, r2.Len()+5)), 0o644) },
		"fewer rows":  func(p string) { os.WriteFile(p, lz4(r2.Slice(0, r2.Len()-3)), 0o644) },
		"same count":  func(p string) { os.WriteFile(p, lz4(fEventsLike(r2, r2.Len())), 0o644) },
		"other rank":  func(p string) { os.WriteFile(p, lz4(rankSlice(tr, ranks[0])), 0o644) },
		"truncated":   func(p string) { data := lz4(r2); os.WriteFile(p, data[:len(data)/2], 0o644) },
		"not a trace": func(p string) { os.WriteFile(p, []byte("hello\n"), 0o644) },
		"removed":     func(p string) { os.Remove(p) },
	}
	for name, change := range changes {
		for _, named := range []bool{false, true} {
			what := fmt.Sprintf("%s (named %v)", name, named)
			run := func(place bool) openResult {
				dir := t.TempDir()
				paths := writeRanks(t, dir, tr, rankName, lz4)
				victim := paths[2]
				afterPlace = func() { change(victim) }
				defer func() { afterPlace = nil }()
				if !named {
					paths = []string{dir}
				}
				return openWith(paths, place)
			}
			a, b := run(true), run(false)
			// The directory differs between the runs: compare with paths
			// relative to it.
			sameResult(t, what, relative(a), relative(b))
		}
		// Chunks: the file changes after OpenChunks.
		dir := t.TempDir()
		paths := writeRanks(t, dir, tr, rankName, lz4)
		c, err := OpenChunks([]string{dir}, 0, Options{})
		if err != nil {
			t.Fatal(err)
		}
		change(paths[2])
		a, aerr := c.Chunk(0)
		noPlace.Store(true)
		b, berr := c.Chunk(0)
		noPlace.Store(false)
		if (aerr == nil) != (berr == nil) || aerr != nil && aerr.Error() != berr.Error() {
			t.Fatalf("%s, chunk: error %v, before %v", name, aerr, berr)
		}
		if aerr == nil && !reflect.DeepEqual(a, b) {
			t.Fatalf("%s, chunk: traces differ: %s", name, trace.Diff(a, b))
		}
	}
}

// fEventsLike returns n forward events of the rank, stage and pipeline of
// r's first row, with r's metadata.
func fEventsLike(r *trace.Trace, n int) *trace.Trace {
	out := &trace.Trace{Meta: r.Meta}
	for i := range n {
		out.Append(trace.Event{Rank: r.Rank[0], Pipeline: r.Pipeline[0], Stage: r.Stage[0], Kind: trace.F, Seq: int64(i),
			MicroBatch: trace.MicroBatch(i), IssueNs: int64(i) * 100, StartNs: int64(i) * 100, EndNs: int64(i)*100 + 90,
			Peer: trace.NoRank, GroupSeq: trace.NoGroupSeq})
	}
	return out
}

// relative replaces the temporary directory in o's paths and messages.
func relative(o openResult) openResult {
	s := fmt.Sprint(o.err)
	if o.res != nil {
		for i := range o.res.Files {
			o.res.Files[i].Path = filepath.Base(o.res.Files[i].Path)
		}
	}
	for i := range o.warned {
		o.warned[i].Path = filepath.Base(o.warned[i].Path)
	}
	if o.res != nil {
		o.res.Warnings = o.warned
	}
	if o.err != nil {
		o.err = fmt.Errorf("%s", filepath.Base(s))
	}
	return o
}

// TestPlacedHugeRowCount: a batch header claiming far more rows than its
// file could hold makes no trace of that size: the files are read as
// before, and say what is wrong the same way.
func TestPlacedHugeRowCount(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 4, DP: 1, Steps: 1, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lz4 := func(r *trace.Trace) []byte {
		return arrowStream(t, r, arrowv1.Options{Compression: arrowv1.LZ4, BatchRows: 3})
	}
	paths := writeRanks(t, dir, tr, rankName, lz4)
	// Every int64 3 (the rows of a batch and of its columns) in the
	// second batch of rank 1's stream becomes 1<<30 (framing takes up to 1<<31-1).
	data, ends := streamBatches(t, rankSlice(tr, 1), 3)
	second := data[ends[1]:ends[2]]
	copy(second, bytes.ReplaceAll(second, []byte{3, 0, 0, 0, 0, 0, 0, 0}, []byte{0, 0, 0, 0x40, 0, 0, 0, 0}))
	if n, err := arrowv1.Rows(data); err != nil || n < 1<<30 {
		t.Fatalf("the patched header was not taken as a row count (%d rows, %v)", n, err)
	}
	if err := os.WriteFile(paths[1], data, 0o644); err != nil {
		t.Fatal(err)
	}
	a, placed := openBoth(t, "huge count", dir)
	if a.err == nil || placed {
		t.Errorf("huge count: error %v, read in place %v", a.err, placed)
	}
	// OpenChunks reads only the first and last batches: the claim stands
	// until the chunk is read.
	if c, err := OpenChunks([]string{dir}, 0, Options{}); err != nil || c.Events < 1<<30 {
		t.Fatalf("OpenChunks: %v", err)
	}
	chunksBoth(t, "huge count, chunks", 0, dir)
}

// TestOpenPausesCollector: Open turns collections off while a placed
// trace's files are decoded into it (place.go) and gives the collector's
// percentage back as it found it: after a read, after a read that fails
// once the rows are placed, and with reads on several goroutines at once
// (the pauses are counted: an interleaving of save and restore pairs
// would leave collections off).
func TestOpenPausesCollector(t *testing.T) {
	tr := fleetTrace(t, sim.Config{Schedule: "1f1b", Stages: 4, DP: 2, MicroBatches: 4, Steps: 1, Seed: 3})
	lz4 := func(r *trace.Trace) []byte {
		return arrowStream(t, r, arrowv1.Options{Compression: arrowv1.LZ4, BatchRows: 16})
	}
	good := t.TempDir()
	writeRanks(t, good, tr, rankName, lz4)
	bad := t.TempDir()
	paths := writeRanks(t, bad, tr, rankName, lz4)
	data, err := os.ReadFile(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	for i := len(data) / 2; i < len(data)/2+40; i++ {
		data[i] ^= 0x5a
	}
	writeFile(t, bad, filepath.Base(paths[1]), data)

	const percent = 137
	defer debug.SetGCPercent(debug.SetGCPercent(percent))
	check := func(what string) {
		t.Helper()
		if got := debug.SetGCPercent(percent); got != percent {
			t.Errorf("%s: the collector's percentage is %d, want %d as before", what, got, percent)
		}
	}
	before := placedMerges.Load()
	if _, err := Open([]string{good}, Options{}); err != nil {
		t.Fatal(err)
	}
	if placedMerges.Load() == before {
		t.Fatal("the files were not read in place: the pause is not exercised")
	}
	check("after a read")
	afterPlace = func() {
		if got := debug.SetGCPercent(-1); got != -1 {
			t.Errorf("while the files are decoded: the collector's percentage is %d, want -1 (off)", got)
		}
	}
	if _, err := Open([]string{bad}, Options{}); err == nil {
		t.Fatal("a corrupt file read without error")
	}
	afterPlace = nil
	check("after a failed read")

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			dir := good
			if i%2 == 1 {
				dir = bad
			}
			Open([]string{dir}, Options{})
		})
	}
	wg.Wait()
	check("after 8 reads at once")

	// The pauses themselves: nested, ended out of order, ended twice.
	a, b := pauseGC(), pauseGC()
	a.resume()
	a.resume()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("one of two pauses ended: percentage %d, want -1", got)
	}
	b.resume()
	check("both pauses ended")
}
