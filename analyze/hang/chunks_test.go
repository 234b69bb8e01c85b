package hang_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// rankChunks splits a trace into chunks of whole ranks: chunk c holds the
// rows of the ranks chunkOf maps to c, in trace order, or shuffled. It
// hands out copies, counts the loads, can fail a load (failAt: the load
// number that fails) and scribbles over the traces handed back.
type rankChunks struct {
	parts    []*trace.Trace
	loads    int
	failAt   int // 0: never
	recycled int
}

func splitRanks(tr *trace.Trace, n int, chunkOf func(row int) int, shuffle *rand.Rand) *rankChunks {
	rc := &rankChunks{parts: make([]*trace.Trace, n)}
	idx := make([][]int, n)
	for i := 0; i < tr.Len(); i++ {
		c := chunkOf(i)
		idx[c] = append(idx[c], i)
	}
	for c := range rc.parts {
		if shuffle != nil {
			shuffle.Shuffle(len(idx[c]), func(i, j int) { idx[c][i], idx[c][j] = idx[c][j], idx[c][i] })
		}
		rc.parts[c] = tr.Permute(idx[c])
	}
	return rc
}

func (rc *rankChunks) NumChunks() int { return len(rc.parts) }

func (rc *rankChunks) Chunk(c int) (*trace.Trace, error) {
	rc.loads++
	if rc.loads == rc.failAt {
		return nil, errors.New("disk on fire")
	}
	p := rc.parts[c]
	cp := &trace.Trace{Meta: p.Meta}
	cp.AppendRows(p, 0, p.Len())
	return cp, nil
}

// Recycle overwrites every row of t: a report that used t after handing it
// back would not be Run's.
func (rc *rankChunks) Recycle(t *trace.Trace) {
	rc.recycled++
	for i := range t.Len() {
		t.Rank[i], t.Pipeline[i], t.Stage[i], t.Step[i], t.MicroBatch[i] = 7, 7, 7, 7, 7
		t.Kind[i], t.Seq[i], t.StartNs[i], t.EndNs[i], t.IssueNs[i] = trace.F, 0, 1, 2, 0
		t.Peer[i], t.Bytes[i], t.Flops[i], t.Shape[i], t.Group[i], t.Dtype[i] = 3, 1, 1, trace.Intern("junk"), trace.Intern("junk"), trace.Intern("junk")
	}
}

// chunkings returns the ways TestRunChunksIsRun splits tr: everything in
// one chunk; one, two and every pipeline replica per chunk (rows in
// order); and ranks dealt at random into one to four chunks, rows shuffled
// (P2P channels then cross chunks).
func chunkings(tr *trace.Trace, rng *rand.Rand) map[string]*rankChunks {
	out := map[string]*rankChunks{}
	out["one chunk"] = splitRanks(tr, 1, func(int) int { return 0 }, nil)
	// A rank's pipeline: that of its first row (sim's ranks keep one).
	pipeOf := map[trace.Rank]int32{}
	var pipes []int32
	for i := 0; i < tr.Len(); i++ {
		if _, ok := pipeOf[tr.Rank[i]]; !ok {
			pipeOf[tr.Rank[i]] = tr.Pipeline[i]
			if !slices.Contains(pipes, tr.Pipeline[i]) {
				pipes = append(pipes, tr.Pipeline[i])
			}
		}
	}
	slices.Sort(pipes)
	for _, per := range []int{1, 2, len(pipes)} {
		n := (len(pipes) + per - 1) / per
		out[fmt.Sprintf("%d pipelines per chunk", per)] = splitRanks(tr, n, func(i int) int {
			p, _ := slices.BinarySearch(pipes, pipeOf[tr.Rank[i]])
			return p / per
		}, nil)
	}
	n := 1 + rng.Intn(4)
	deal := map[trace.Rank]int{}
	out[fmt.Sprintf("ranks dealt into %d chunks, shuffled", n)] = splitRanks(tr, n, func(i int) int {
		c, ok := deal[tr.Rank[i]]
		if !ok {
			c = rng.Intn(n)
			deal[tr.Rank[i]] = c
		}
		return c
	}, rng)
	return out
}

// sameAsRun fails unless RunChunks over every chunking of tr gives Run's
// report (the same values, the same JSON and text), or both fail.
func sameAsRun(t *testing.T, name string, tr *trace.Trace, opt hang.Options, rng *rand.Rand) {
	t.Helper()
	want, werr := hang.Run(tr, opt)
	wantJSON := ""
	for how, src := range chunkings(tr, rng) {
		got, err := hang.RunChunks(src, opt)
		switch {
		case werr != nil && err != nil:
			continue
		case werr != nil || err != nil:
			t.Fatalf("%s, %s: Run error %v, RunChunks error %v", name, how, werr, err)
		}
		if d := reportDiff(want, got); d != "" {
			t.Fatalf("%s, %s: RunChunks differs from Run:\n%s", name, how, d)
		}
		// Equal values render the same (DeepEqual above); rendering a
		// report of thousands of ranks (sparse rank ids) takes long.
		if len(want.Ranks) <= 512 {
			if wantJSON == "" {
				wantJSON = renderJSON(t, want)
			}
			if g := renderJSON(t, got); wantJSON != g {
				t.Fatalf("%s, %s: rendered reports differ:\n%s", name, how, lineDiff(wantJSON, g))
			}
		}
		if src.NumChunks() > 1 && src.recycled != src.NumChunks()-1 {
			t.Fatalf("%s, %s: %d chunks recycled, want %d", name, how, src.recycled, src.NumChunks()-1)
		}
	}
}

// reportDiff names the fields of two reports that differ ("" when none).
func reportDiff(a, b *hang.Report) string {
	var out []string
	va, vb := reflect.ValueOf(*a), reflect.ValueOf(*b)
	for i := range va.NumField() {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, fmt.Sprintf("%s:\n  whole   %+v\n  chunked %+v", va.Type().Field(i).Name, va.Field(i).Interface(), vb.Field(i).Interface()))
		}
	}
	return strings.Join(out, "\n")
}

// TestRunChunksIsRun: over every fault the simulator injects on every
// layout of the fault matrix (schedules, DP and TP replicas), with and
// without P2P latency, RunChunks gives Run's report however the trace is
// chunked.
func TestRunChunksIsRun(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	n := 0
	for _, l := range layouts() {
		for _, lat := range []float64{0, 100} {
			l.latencyUs = lat
			sameAsRun(t, l.String()+" clean", mustRun(t, l.config()), hang.Options{}, rng)
			for _, f := range faultsFor(l) {
				if lat > 0 && f.Kind != sim.FaultCrash && f.Kind != sim.FaultSkip {
					continue
				}
				sameAsRun(t, fmt.Sprintf("%s latency %g %s", l, lat, f), mustRun(t, l.config(f)), hang.Options{}, rng)
				n++
			}
		}
	}
	// Most ranks skip the optimizer step: the few that stepped (ranks 0, 2
	// and 4: with DP 2 and TP 2, replicas 0, 1 and 0) are listed in rank
	// order, though their replicas are in different chunks.
	for _, l := range layouts() {
		c := l.config()
		for r := 1; r < c.WorldSize(); r++ {
			if r != 2 && r != 4 {
				c.Faults = append(c.Faults, sim.Fault{Kind: sim.FaultOptSkip, Rank: r, Step: 1, MicroBatch: -1})
			}
		}
		sameAsRun(t, l.String()+" most ranks skip", mustRun(t, c), hang.Options{}, rng)
	}
	t.Logf("%d faulted traces", n)
}

// TestRunChunksRandomJobs: random jobs with a random fault each, some with
// a rank's file cut off (its last rows lost), a world size beyond the
// ranks seen, or a dump time given.
func TestRunChunksRandomJobs(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	cases := 300
	if testing.Short() {
		cases = 60
	}
	for n := 0; n < cases; n++ {
		c := randomConfig(rng)
		tr := mustRun(t, c)
		if tr.Len() == 0 {
			continue
		}
		var opt hang.Options
		switch rng.Intn(4) {
		case 0: // a rank's file lost its tail
			r := tr.Rank[rng.Intn(tr.Len())]
			tr = dropTail(tr, r, 1+rng.Intn(5))
			opt.Files = []hang.File{{Path: fmt.Sprintf("rank-%05d.arrows", r), Ranks: []trace.Rank{r}, Truncated: true, BytesLost: 100}}
		case 1:
			opt.WorldSize = c.WorldSize() + 1 + rng.Intn(3)
		case 2:
			opt.DumpNs = 1 << 40
		}
		if tr.Len() == 0 {
			continue
		}
		sameAsRun(t, fmt.Sprintf("job %d %+v", n, c), tr, opt, rng)
	}
}

// TestRunChunksMutated: simulated traces with rows dropped, ends nulled,
// peers, labels and sizes changed (FuzzRun's mutations): Run and RunChunks
// agree, or both fail.
func TestRunChunksMutated(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	cases := 300
	if testing.Short() {
		cases = 60
	}
	for n := 0; n < cases; n++ {
		c := randomConfig(rng)
		tr := mustRun(t, c)
		muts := make([]byte, 3*(1+rng.Intn(12)))
		rng.Read(muts)
		tr = mutate(tr, muts)
		if tr.Len() == 0 || tr.Validate() != nil {
			continue
		}
		sameAsRun(t, fmt.Sprintf("mutated job %d", n), tr, hang.Options{}, rng)
	}
}

// TestRunChunksRandomP2P: the matcher's stress traces (sparse rank ids,
// process groups on all, some or no P2P ops, labels that disagree,
// unmatched ops, shuffled rows).
func TestRunChunksRandomP2P(t *testing.T) {
	rng := rand.New(rand.NewSource(13))
	cases := 200
	if testing.Short() {
		cases = 50
	}
	for n := 0; n < cases; n++ {
		tr, opt := hang.RandomP2PTrace(rng)
		if tr.Len() == 0 {
			continue
		}
		sameAsRun(t, fmt.Sprintf("random P2P trace %d", n), tr, opt, rng)
	}
}

// TestRunChunksCollectives: random collective jobs with process groups,
// Flight Recorder-style dumps and progress, P2P in groups.
func TestRunChunksCollectives(t *testing.T) {
	rng := rand.New(rand.NewSource(17))
	cases := 400
	if testing.Short() {
		cases = 100
	}
	for n := 0; n < cases; n++ {
		tr, opt := randomCollectiveTrace(rng)
		if tr.Len() == 0 {
			continue
		}
		sameAsRun(t, fmt.Sprintf("random collective trace %d", n), tr, opt, rng)
	}
}

// TestRunChunksErrors: a chunk that cannot be read ends the diagnosis with
// its error; a rank in two chunks is refused; no events is Run's error.
func TestRunChunksErrors(t *testing.T) {
	l := layout{schedule: "1f1b", p: 2, m: 4, v: 1, dp: 2, tp: 1}
	tr := mustRun(t, l.config(sim.Fault{Kind: sim.FaultCrash, Rank: 1, Step: 0, MicroBatch: 2}))
	src := splitRanks(tr, 2, func(i int) int { return int(tr.Pipeline[i]) }, nil)
	src.failAt = 2
	if _, err := hang.RunChunks(src, hang.Options{}); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("failing chunk: error %v", err)
	}
	split := splitRanks(tr, 2, func(i int) int { return i % 2 }, nil)
	if _, err := hang.RunChunks(split, hang.Options{}); err == nil || !strings.Contains(err.Error(), "in one chunk") {
		t.Errorf("rank in two chunks: error %v", err)
	}
	empty := splitRanks(tr, 1, func(int) int { return 0 }, nil)
	empty.parts[0] = &trace.Trace{Meta: tr.Meta}
	_, werr := hang.Run(empty.parts[0], hang.Options{})
	if _, err := hang.RunChunks(empty, hang.Options{}); err == nil || werr == nil || err.Error() != werr.Error() {
		t.Errorf("no events: error %v, Run's %v", err, werr)
	}
}

// TestRunChunksScheduleLate: metadata whose schedule is too large to check
// against the first chunk's rows (more than 65536 actions) but not against
// the whole trace's: the chunks read before are read again for the check,
// and the report is still Run's. An empty chunk changes nothing.
func TestRunChunksScheduleLate(t *testing.T) {
	l := layout{schedule: "1f1b", p: 2, m: 4, v: 1, dp: 1, tp: 1}
	for _, f := range []sim.Fault{{Kind: sim.FaultSkip, Rank: 1, Step: 300, MicroBatch: 1}, {Kind: sim.FaultCrash, Rank: 0, Step: 400, MicroBatch: 2}} {
		c := l.config(f)
		c.Steps = 500
		tr := mustRun(t, c)
		// 2 x 40000 actions: checked only for a trace of 3616 rows or more.
		tr.Meta.MicroBatches = 40000
		// A rank of one row first.
		tiny := &trace.Trace{Meta: tr.Meta}
		tiny.Append(trace.Event{Rank: 2, Pipeline: 0, Stage: 0, Kind: trace.MustKind("DATA"), Seq: 0, IssueNs: 1, StartNs: 1, EndNs: 2,
			Peer: trace.NoRank, MicroBatch: -1, GroupSeq: trace.NoGroupSeq})
		whole := &trace.Trace{Meta: tr.Meta}
		whole.AppendRows(tiny, 0, 1)
		whole.AppendRows(tr, 0, tr.Len())
		want, err := hang.Run(whole, hang.Options{})
		if err != nil {
			t.Fatal(err)
		}
		src := &rankChunks{parts: []*trace.Trace{tiny, {Meta: tr.Meta}, tr}}
		var progress []int
		got, err := hang.RunChunks(src, hang.Options{Progress: func(done, total int) {
			if total != 3 {
				t.Errorf("progress: %d of %d chunks", done, total)
			}
			progress = append(progress, done)
		}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(progress, []int{0, 1, 2}) {
			t.Errorf("progress %v, want [0 1 2]", progress)
		}
		if d := reportDiff(want, got); d != "" {
			t.Fatalf("%s: RunChunks differs from Run:\n%s", f, d)
		}
		if src.loads != 4 {
			t.Errorf("%s: %d loads, want 4 (the first chunk again; the empty one holds no rank)", f, src.loads)
		}
		if slices.ContainsFunc(want.Notes, func(n string) bool { return strings.Contains(n, "far larger") }) {
			t.Errorf("%s: the schedule was not checked: %v", f, want.Notes)
		}
	}
}

// TestRunChunksFileError: over ingest's chunks, a rank file that no longer
// reads as it did when the chunks were planned ends the diagnosis with an
// error naming the file; untouched, the files give Run's report.
func TestRunChunksFileError(t *testing.T) {
	l := layout{schedule: "1f1b", p: 3, m: 4, v: 1, dp: 2, tp: 1}
	tr := mustRun(t, l.config(sim.Fault{Kind: sim.FaultSkip, Rank: 3, Step: 1, MicroBatch: 2}))
	dir := t.TempDir()
	write := func(r trace.Rank, drop int) {
		var idx []int
		for i := 0; i < tr.Len(); i++ {
			if tr.Rank[i] == r {
				idx = append(idx, i)
			}
		}
		var b bytes.Buffer
		if err := arrowv1.WriteStream(&b, tr.Permute(idx[:len(idx)-drop]), arrowv1.Options{BatchRows: 8}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank-%05d.arrows", r)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range tr.Ranks() {
		write(r, 0)
	}
	whole, err := ingest.Open([]string{dir}, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := run(t, whole.Trace, hang.Options{})
	open := func() *ingest.Chunks {
		c, err := ingest.OpenChunks([]string{dir}, 1, ingest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := open()
	if c.NumChunks() != 2 {
		t.Fatalf("%d chunks, want one per replica", c.NumChunks())
	}
	got, err := hang.RunChunks(c, hang.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := reportDiff(want, got); d != "" {
		t.Errorf("RunChunks over ingest's chunks differs from Run:\n%s", d)
	}
	c = open()
	write(5, 1) // rank 5 (stage 2, replica 1), in the last chunk
	if _, err := hang.RunChunks(c, hang.Options{}); err == nil || !strings.Contains(err.Error(), "rank-00005.arrows") {
		t.Errorf("changed file: error %v", err)
	}
}

// FuzzRunChunks: FuzzRun's mutated jobs (and random ones, with faults,
// DP and TP), diagnosed whole and in chunks every way chunkings splits
// them, give the same report or both fail.
func FuzzRunChunks(f *testing.F) {
	addMutationSeeds(f)
	f.Add(int64(8), []byte{1, 0, 0, 1, 1, 0, 1, 2, 0, 1, 3, 0})
	f.Fuzz(func(t *testing.T, seed int64, muts []byte) {
		rng := rand.New(rand.NewSource(seed))
		c := randomConfig(rng)
		tr, err := sim.Run(c)
		if err != nil {
			t.Skip()
		}
		tr = mutate(tr, muts)
		if tr.Len() == 0 || tr.Validate() != nil {
			t.Skip()
		}
		sameAsRun(t, fmt.Sprintf("seed %d", seed), tr, hang.Options{WorldSize: int(seed % 7)}, rng)
	})
}
