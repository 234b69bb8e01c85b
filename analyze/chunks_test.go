package analyze

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// pipelineChunks splits a trace into chunks of whole pipelines: chunk c
// holds, in trace order, the rows whose pipeline is in groups[c]. It counts
// the loads, and can fail a load (failAt: the load number that fails).
type pipelineChunks struct {
	parts    []*trace.Trace
	loads    int
	failAt   int // 0: never
	recycled int
}

func splitPipelines(tr *trace.Trace, groups [][]int32) *pipelineChunks {
	of := map[int32]int{}
	for c, g := range groups {
		for _, p := range g {
			of[p] = c
		}
	}
	pc := &pipelineChunks{parts: make([]*trace.Trace, len(groups))}
	for c := range pc.parts {
		pc.parts[c] = &trace.Trace{Meta: tr.Meta}
	}
	for i := 0; i < tr.Len(); i++ {
		c, ok := of[tr.Pipeline[i]]
		if !ok {
			panic(fmt.Sprintf("pipeline %d in no group", tr.Pipeline[i]))
		}
		pc.parts[c].AppendRows(tr, i, i+1)
	}
	return pc
}

func (pc *pipelineChunks) NumChunks() int { return len(pc.parts) }

func (pc *pipelineChunks) Chunk(c int) (*trace.Trace, error) {
	pc.loads++
	if pc.loads == pc.failAt {
		return nil, errors.New("disk on fire")
	}
	// A copy: Recycle scribbles over what it is handed back.
	p := pc.parts[c]
	cp := &trace.Trace{Meta: p.Meta}
	cp.AppendRows(p, 0, p.Len())
	return cp, nil
}

// Recycle overwrites every row of t: a report that used t after handing
// it back would not be Run's.
func (pc *pipelineChunks) Recycle(t *trace.Trace) {
	pc.recycled++
	if t == nil || t.Len() == 0 {
		return
	}
	for i := range t.Len() {
		t.Rank[i], t.Pipeline[i], t.Stage[i], t.Step[i], t.MicroBatch[i] = 7, 7, 7, 7, 7
		t.Kind[i], t.Seq[i], t.StartNs[i], t.EndNs[i], t.IssueNs[i] = trace.F, 0, 1, 2, 0
		t.Peer[i], t.Bytes[i], t.Flops[i], t.Shape[i], t.Group[i] = 3, 1, 1, trace.Intern("junk"), trace.Intern("junk")
	}
}

// stepChunks is pipelineChunks read a step at a time (StepChunks): rows,
// the chunk's rows of that step and of the step after it (which RunChunks
// must leave out); shape, every row with only the shape's columns, the
// others nil (a pass reading one would panic), in three parts cut
// anywhere (inside a rank's rows too). The previous call's parts are
// overwritten with junk, as a source reusing their memory may.
type stepChunks struct {
	*pipelineChunks
	last *[]*trace.Trace
}

func (sc stepChunks) ChunkStep(c int, step int64) (rows *trace.Trace, shape []*trace.Trace, err error) {
	if sc.last != nil {
		for _, p := range *sc.last {
			for i := range p.Len() {
				p.Rank[i], p.Stage[i], p.Step[i], p.Kind[i], p.MicroBatch[i], p.Chunk[i] = 99, 99, 99, trace.F, 99, 99
			}
		}
	}
	t, err := sc.Chunk(c)
	if err != nil {
		return nil, nil, err
	}
	rows = &trace.Trace{Meta: t.Meta}
	cuts := []int{0, t.Len() / 3, t.Len()/3 + t.Len()/5, t.Len()}
	for k := range 3 {
		part := &trace.Trace{Meta: t.Meta}
		for i := cuts[k]; i < cuts[k+1]; i++ {
			part.Rank, part.Pipeline, part.Stage = append(part.Rank, t.Rank[i]), append(part.Pipeline, t.Pipeline[i]), append(part.Stage, t.Stage[i])
			part.Step, part.Kind = append(part.Step, t.Step[i]), append(part.Kind, t.Kind[i])
			part.MicroBatch, part.Chunk = append(part.MicroBatch, t.MicroBatch[i]), append(part.Chunk, t.Chunk[i])
		}
		shape = append(shape, part)
	}
	for i := range t.Len() {
		if s := t.Step[i]; s == step || s == step+1 {
			rows.AppendRows(t, i, i+1)
		}
	}
	if sc.last != nil {
		*sc.last = shape
	}
	return rows, shape, nil
}

// reportDiff names the fields of two reports that differ ("" when none).
func reportDiff(a, b *Report) string {
	var out []string
	va, vb := reflect.ValueOf(*a), reflect.ValueOf(*b)
	for i := range va.NumField() {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, fmt.Sprintf("%s:\n  whole   %+v\n  chunked %+v", va.Type().Field(i).Name, va.Field(i).Interface(), vb.Field(i).Interface()))
		}
	}
	return strings.Join(out, "\n")
}

// chunkCorpus is simulated jobs of several pipeline replicas covering what
// the passes look at: every schedule, TP, jitter, slow stages, stragglers,
// variable sequence lengths (long_sequence stragglers), FLOPs (compute
// factor), faults that hang the job (incomplete windows), skipped and
// reordered ops (schedule deviations, violations) and optimizer skips.
func chunkCorpus(t *testing.T) map[string]*trace.Trace {
	t.Helper()
	out := map[string]*trace.Trace{}
	scheds := []string{"gpipe", "1f1b", "interleaved", "zb-h1"}
	for seed := int64(1); seed <= 12; seed++ {
		c := sim.Config{Schedule: scheds[seed%4], Stages: 2 + int(seed%3), MicroBatches: 4 + int(seed%5),
			Steps: 3, DP: 2 + int(seed%3), TP: 1 + int(seed/2%2), Jitter: 0.2, Seed: seed,
			SlowStage: int(seed % 2), SlowFactor: 1.4, P2PLatencyUs: 20, P2PGbps: 100, OptMs: 1,
			VarSeqLen: seed%3 == 0, PeakFlops: 1e15 * float64(seed%2),
			Stragglers: []sim.Straggler{{Step: 1, MicroBatch: 1, Stage: 0, Factor: 4}}}
		if c.Schedule == "interleaved" {
			c.MicroBatches = c.Stages * 2
		}
		out[fmt.Sprintf("seed%d-%s", seed, c.Schedule)] = simTrace(t, c)
	}
	faults := map[string][]string{
		"crash":   {"crash:rank=3,step=1,mb=2"},
		"exit":    {"exit:rank=5,step=2"},
		"skip":    {"skip:rank=2,step=1,mb=1"},
		"reorder": {"reorder:rank=6,step=0,mb=1"},
		"optskip": {"optskip:rank=5,step=1"},
		"shape":   {"shape:rank=1,step=1,mb=0"},
	}
	for name, specs := range faults {
		out["fault-"+name] = simTrace(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 6, DP: 2, TP: 1,
			Steps: 3, OptMs: 1, Jitter: 0.1, Seed: 7, Faults: simFaults(t, specs...)})
	}
	// Ops run out of the schedule's order: deviations.
	dev := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, DP: 3, Steps: 3, OptMs: 1, Seed: 3})
	swapCompute(t, dev, 6, 1, 2, 5)
	swapCompute(t, dev, 9, 2, 1, 6)
	out["deviations"] = dev
	// Ranks' rows interleaved (each rank's still in seq order), by start
	// time, as a converted profile may have them, and numbered against
	// the stages (the last stage's ranks first): the windows are not in
	// (rank, seq) order, and a packed chunk's replays take each rank's
	// post from its rows sorted.
	un := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 3, MicroBatches: 5, DP: 2, Steps: 2, OptMs: 1,
		Jitter: 0.2, P2PLatencyUs: 20, P2PGbps: 100, Seed: 5})
	last := slices.Max(un.Rank)
	for i := range un.Rank {
		un.Rank[i] = last - un.Rank[i]
		if un.Peer[i] != trace.NoRank {
			un.Peer[i] = last - un.Peer[i]
		}
	}
	out["interleaved ranks"] = interleaveRanks(un)
	return out
}

// interleaveRanks returns tr's rows merged across ranks by start time,
// each rank's rows in their order in tr (a k-way merge).
func interleaveRanks(tr *trace.Trace) *trace.Trace {
	byRank := map[trace.Rank][]int{}
	var ranks []trace.Rank
	for i, r := range tr.Rank {
		if _, ok := byRank[r]; !ok {
			ranks = append(ranks, r)
		}
		byRank[r] = append(byRank[r], i)
	}
	out := &trace.Trace{Meta: tr.Meta}
	for out.Len() < tr.Len() {
		best := -1
		for _, r := range ranks {
			if rows := byRank[r]; len(rows) > 0 && (best < 0 || cmp.Less(tr.StartNs[rows[0]], tr.StartNs[best])) {
				best = rows[0]
			}
		}
		out.AppendRows(tr, best, best+1)
		byRank[tr.Rank[best]] = byRank[tr.Rank[best]][1:]
	}
	return out
}

// TestRunChunksIsRun: a trace analysed a few pipelines at a time, chunks
// read again by every pass, gives Run's report to the bit.
func TestRunChunksIsRun(t *testing.T) {
	mixed := 0
	defer func() {
		if !t.Failed() && mixed == 0 {
			t.Error("no split of the corpus had some chunks packed and others read again")
		}
	}()
	for name, tr := range chunkCorpus(t) {
		want, err := Run(tr, Options{Step: AllSteps})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var pipes []int32
		for _, p := range tr.Pipeline {
			if len(pipes) == 0 || pipes[len(pipes)-1] != p {
				if !containsInt32(pipes, p) {
					pipes = append(pipes, p)
				}
			}
		}
		splits := map[string][][]int32{"one per chunk": nil, "reversed pairs": nil}
		for _, p := range pipes {
			splits["one per chunk"] = append(splits["one per chunk"], []int32{p})
		}
		// Chunks in an order unlike the trace's: last pipelines first,
		// two per chunk.
		for i := len(pipes); i > 0; i -= 2 {
			splits["reversed pairs"] = append(splits["reversed pairs"], pipes[max(0, i-2):i])
		}
		for how, groups := range splits {
			// Chunks read again, half kept whole, all packed, some packed:
			// a budget of about half of them packed beside the medians'
			// lists, without the columns a mix needs counted (with them,
			// a trace of a few chunks is packed whole or not at all).
			var packedAll int64
			for _, p := range splitPipelines(tr, groups).parts {
				packedAll += trace.Pack(p).Bytes()
			}
			some := packedAll/2 + listBytesPerCompute*int64(countCompute(tr))
			noneLoads := 0
			for _, cfg := range []struct{ keep, pack int }{{0, 0}, {tr.Len() / 2, 0}, {0, 1 << 40}, {0, int(some)}} {
				pc := splitPipelines(tr, groups)
				packMixColumns = cfg.pack != int(some)
				got, err := RunChunks(pc, Options{Step: AllSteps, KeepRows: cfg.keep, PackBytes: int64(cfg.pack)})
				packMixColumns = true
				if err != nil {
					t.Fatalf("%s, %s, %+v: %v", name, how, cfg, err)
				}
				if d := reportDiff(want, got); d != "" {
					t.Fatalf("%s, %s, %+v: reports differ:\n%s", name, how, cfg, d)
				}
				if cfg == (struct{ keep, pack int }{}) {
					noneLoads = pc.loads
				}
				if cfg.pack == int(some) && pc.loads > len(groups) && pc.loads < noneLoads {
					mixed++ // some chunks packed, others read again
				}
				if cfg == (struct{ keep, pack int }{}) && len(groups) > 1 && pc.loads <= len(groups) {
					t.Errorf("%s, %s: %d loads of %d chunks with none kept: passes did not read them again", name, how, pc.loads, len(groups))
				}
				if cfg.pack == 1<<40 && (pc.loads != len(groups) || pc.recycled != len(groups)-1) {
					t.Errorf("%s, %s: %d loads and %d recycled of %d chunks, all packed: want each read once, then all but the last recycled", name, how, pc.loads, pc.recycled, len(groups))
				}
			}
		}
		// One step only: chunks read again, kept, packed (cut to the
		// step's rows when kept or packed), each from the whole chunk and
		// from a source that reads a step for less (StepChunks).
		want1, err1 := Run(tr, Options{Step: 1})
		for _, cfg := range []struct {
			keep, pack int
			step       bool
		}{{0, 0, false}, {tr.Len() / 2, 0, false}, {0, 1 << 40, false}, {0, 0, true}, {tr.Len() / 2, 0, true}, {0, 1 << 40, true}} {
			var pc Chunks = splitPipelines(tr, splits["one per chunk"])
			if cfg.step {
				pc = stepChunks{pc.(*pipelineChunks), new([]*trace.Trace)}
			}
			got1, err2 := RunChunks(pc, Options{Step: 1, KeepRows: cfg.keep, PackBytes: int64(cfg.pack)})
			if (err1 == nil) != (err2 == nil) {
				t.Fatalf("%s step 1, %+v: errors %v vs %v", name, cfg, err1, err2)
			}
			if err1 == nil {
				if d := reportDiff(want1, got1); d != "" {
					t.Fatalf("%s step 1, %+v: reports differ:\n%s", name, cfg, d)
				}
			}
		}
	}
}

// countCompute is the number of F, B and W rows of tr.
func countCompute(tr *trace.Trace) int {
	n := 0
	for _, k := range tr.Kind {
		if k == trace.F || k == trace.B || k == trace.W {
			n++
		}
	}
	return n
}

func containsInt32(xs []int32, x int32) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestRunChunksKeep: chunks kept between passes are read once.
func TestRunChunksKeep(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, DP: 4, Steps: 2, OptMs: 1})
	pc := splitPipelines(tr, [][]int32{{0}, {1}, {2}, {3}})
	if _, err := RunChunks(pc, Options{Step: AllSteps, KeepRows: tr.Len()}); err != nil {
		t.Fatal(err)
	}
	if pc.loads != 4 {
		t.Errorf("%d loads with every chunk kept, want 4", pc.loads)
	}
	// Half kept: the other half is read by the index scan and again by
	// the passes.
	pc = splitPipelines(tr, [][]int32{{0}, {1}, {2}, {3}})
	if _, err := RunChunks(pc, Options{Step: AllSteps, KeepRows: tr.Len() / 2}); err != nil {
		t.Fatal(err)
	}
	if pc.loads <= 4+2 {
		t.Errorf("%d loads with half the chunks kept: the others were not read again", pc.loads)
	}
}

// TestRunChunksChunkProgress: every chunk a pass reads is announced, in
// order, to ChunkProgress and then to Progress by name, and the report
// does not change.
func TestRunChunksChunkProgress(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, DP: 4, Steps: 2, OptMs: 1})
	want, err := RunChunks(splitPipelines(tr, [][]int32{{0}, {1}, {2}, {3}}), Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	pc := splitPipelines(tr, [][]int32{{0}, {1}, {2}, {3}})
	type call struct {
		chunk   bool
		c, n    int // ChunkProgress
		pass    string
		done, m int // Progress
	}
	var calls []call
	got, err := RunChunks(pc, Options{Step: AllSteps,
		ChunkProgress: func(c, n int) { calls = append(calls, call{chunk: true, c: c, n: n}) },
		Progress:      func(done, total int, pass string) { calls = append(calls, call{pass: pass, done: done, m: total}) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := reportDiff(want, got); d != "" {
		t.Errorf("report with ChunkProgress differs: %s", d)
	}
	var chunks []int
	for i, c := range calls {
		if !c.chunk {
			continue
		}
		chunks = append(chunks, c.c)
		if c.n != 4 || c.c < 0 || c.c >= 4 {
			t.Fatalf("call %d: chunk %d of %d, want of 4", i, c.c, c.n)
		}
		suffix := fmt.Sprintf(" (chunk %d/4)", c.c+1)
		if i+1 >= len(calls) || calls[i+1].chunk || !strings.HasSuffix(calls[i+1].pass, suffix) {
			t.Fatalf("call %d: chunk %d not followed by a pass named ...%s: %+v", i, c.c, suffix, calls[i+1:])
		}
	}
	// Nothing kept or packed: every load is announced, the first read's
	// and each visit's, chunk by chunk in order.
	if len(chunks) != pc.loads || len(chunks) < 8 || len(chunks)%4 != 0 {
		t.Fatalf("%d chunks announced (%v), %d loaded", len(chunks), chunks, pc.loads)
	}
	for i, c := range chunks {
		if c != i%4 {
			t.Fatalf("chunks announced %v, want 0 1 2 3 over and over", chunks)
		}
	}
}

// TestRunChunksErrors: a chunk that fails to load, at any point of the
// analysis, ends it with that error; windows split across chunks and
// chunks that change between reads are refused.
func TestRunChunksErrors(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 3, MicroBatches: 6, DP: 3, Steps: 2, OptMs: 1})
	groups := [][]int32{{0}, {1}, {2}}
	pc := splitPipelines(tr, groups)
	if _, err := RunChunks(pc, Options{Step: AllSteps}); err != nil {
		t.Fatal(err)
	}
	total := pc.loads
	for fail := 1; fail <= total; fail++ {
		pc := splitPipelines(tr, groups)
		pc.failAt = fail
		rep, err := RunChunks(pc, Options{Step: AllSteps})
		if err == nil || !strings.Contains(err.Error(), "disk on fire") || rep != nil {
			t.Fatalf("load %d of %d failing: report %v, error %v", fail, total, rep != nil, err)
		}
	}

	// One window's rows in two chunks.
	split := &pipelineChunks{parts: []*trace.Trace{{Meta: tr.Meta}, {Meta: tr.Meta}}}
	for i := 0; i < tr.Len(); i++ {
		split.parts[int(tr.Rank[i])%2].AppendRows(tr, i, i+1)
	}
	if _, err := RunChunks(split, Options{Step: AllSteps}); err == nil || !strings.Contains(err.Error(), "must be in one chunk") {
		t.Errorf("window across chunks: %v", err)
	}

	// A chunk that changes between reads.
	ch := &changing{pipelineChunks: splitPipelines(tr, groups)}
	if _, err := RunChunks(ch, Options{Step: AllSteps}); err == nil || !strings.Contains(err.Error(), "changed between reads") {
		t.Errorf("changing chunk: %v", err)
	}
	if _, err := RunChunks(&pipelineChunks{}, Options{Step: AllSteps}); err == nil {
		t.Error("no chunks: no error")
	}
}

// changing serves chunk 1 without its last row from the second read on.
type changing struct {
	*pipelineChunks
	reads int
}

func (c *changing) Chunk(i int) (*trace.Trace, error) {
	t, err := c.pipelineChunks.Chunk(i)
	if i == 1 {
		c.reads++
		if c.reads > 1 {
			t = t.Slice(0, t.Len()-1)
		}
	}
	return t, err
}

// TestRunChunksStagesGuess: the index scan measures windows with the
// stages the metadata states; when the rows say otherwise, the windows are
// measured again, and the report is still Run's.
func TestRunChunksStagesGuess(t *testing.T) {
	for _, pp := range []int{0, 4, 2, 7} { // 4 is right; 2 is corrected by the first chunk's rows
		tr := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 6, DP: 3, Steps: 2, OptMs: 1, Jitter: 0.1, Seed: 2})
		tr.Meta.PP = pp
		want, err := Run(tr, Options{Step: AllSteps})
		if err != nil {
			t.Fatal(err)
		}
		pc := splitPipelines(tr, [][]int32{{0}, {1}, {2}})
		got, err := RunChunks(pc, Options{Step: AllSteps})
		if err != nil {
			t.Fatal(err)
		}
		if d := reportDiff(want, got); d != "" {
			t.Fatalf("PP %d: reports differ:\n%s", pp, d)
		}
		// Scan, three visits; plus the measure again when the guess was
		// wrong.
		wantLoads := 3 * 4
		if pp > 4 {
			wantLoads += 3
		}
		if pc.loads != wantLoads {
			t.Errorf("PP %d: %d loads, want %d", pp, pc.loads, wantLoads)
		}
	}
}

// TestRunChunksPackBudget: the packed chunks and the medians' lists of
// every compute op (listBytesPerCompute each) share Options.PackBytes. The
// four chunks are alike, so the lists the first chunk predicts are the
// whole trace's.
func TestRunChunksPackBudget(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, DP: 4, Steps: 2, OptMs: 1})
	groups := [][]int32{{0}, {1}, {2}, {3}}
	var packed int64
	compute := 0
	for _, p := range splitPipelines(tr, groups).parts {
		packed += trace.NewPacker(p.Len()).PackColumns(p, visitColumns).Bytes() // as RunChunks packs them
		for _, k := range p.Kind {
			if k == trace.F || k == trace.B || k == trace.W {
				compute++
			}
		}
	}
	lists := int64(12 * compute)
	want, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		budget int64
		once   bool // every chunk packed: each read once
	}{
		{packed + lists, true},
		{packed + lists - 1, false}, // the last chunk does not fit
		{packed, false},             // the lists alone take most of it
		{lists, false},              // nothing fits beside the lists
	} {
		pc := splitPipelines(tr, groups)
		got, err := RunChunks(pc, Options{Step: AllSteps, PackBytes: c.budget})
		if err != nil {
			t.Fatal(err)
		}
		if d := reportDiff(want, got); d != "" {
			t.Fatalf("budget %d: reports differ:\n%s", c.budget, d)
		}
		if once := pc.loads == len(groups); once != c.once {
			t.Errorf("budget %d (packed %d + lists %d): %d loads of %d chunks, want each read once: %v", c.budget, packed, lists, pc.loads, len(groups), c.once)
		}
	}
	// Room for three of the four chunks packed beside the lists, not for
	// the columns a mix of packed and read chunks needs (one chunk's more):
	// none is packed, every chunk is read as often as with no budget.
	loads := func(budget int64) int {
		pc := splitPipelines(tr, groups)
		if _, err := RunChunks(pc, Options{Step: AllSteps, PackBytes: budget}); err != nil {
			t.Fatal(err)
		}
		return pc.loads
	}
	if some, none := loads(packed*3/4+lists), loads(0); some != none {
		t.Errorf("three quarters of the packed chunks' room: %d loads, want %d as with none packed", some, none)
	}
	rows := tr.Len() / len(groups)
	if some, none := loads(packed*3/4+lists+int64(rows)*trace.RowBytes), loads(0); some >= none {
		t.Errorf("room for three chunks and the columns of a mix: %d loads, want fewer than the %d of none packed", some, none)
	}
}

// TestRunChunksRemeasurePacked: a chunk's windows measured with too few
// stages (the first chunk read lacks the last stage's rows, and the
// trace's metadata names no stage count) are measured again once every
// chunk is read, from packed chunks, which hold no FLOPs: the windows
// keep the FLOPs measured at the first read, and the report is Run's.
func TestRunChunksRemeasurePacked(t *testing.T) {
	full := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 6, DP: 2, Steps: 2, OptMs: 1,
		Jitter: 0.1, PeakFlops: 1e15, Seed: 4})
	tr := &trace.Trace{Meta: full.Meta}
	tr.Meta.PP = 0
	for i := range full.Len() {
		if full.Pipeline[i] != 0 || full.Stage[i] != 3 {
			tr.AppendRows(full, i, i+1)
		}
	}
	want, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	if want.Utilization.Compute == nil {
		t.Fatal("the trace's report has no compute factor: the test needs FLOPs")
	}
	pc := splitPipelines(tr, [][]int32{{0}, {1}})
	ix, err := newChunkedIndex(pc, nil, Options{Step: AllSteps, PackBytes: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	if ix.chunks[0].packed == nil || ix.chunks[0].packed.Columns().Has(trace.ColFlops) {
		t.Fatal("chunk 0 is not packed without its FLOPs")
	}
	remeasured := 0
	for _, g := range ix.windows {
		if g.chunk == 0 && g.measuredP == 4 {
			remeasured++
		}
	}
	if remeasured == 0 {
		t.Fatal("no window of chunk 0 was measured again with 4 stages")
	}
	got, err := RunChunks(splitPipelines(tr, [][]int32{{0}, {1}}), Options{Step: AllSteps, PackBytes: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	if d := reportDiff(want, got); d != "" {
		t.Fatalf("reports differ:\n%s", d)
	}
}

// TestAttachWithoutRuns: a packed chunk is unpacked with only the columns
// a visit reads, without the step and pipeline; one whose windows lack
// the runs of rows the scan found is grouped again, and so unpacked with
// those two as well. Both give each window the rows it had when read.
func TestAttachWithoutRuns(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, DP: 2, Steps: 2, OptMs: 1, Seed: 2})
	pc := splitPipelines(tr, [][]int32{{0}, {1}})
	ix, err := newChunkedIndex(pc, nil, Options{Step: AllSteps, PackBytes: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	if ix.chunks[1].packed == nil {
		t.Fatal("chunk 1 is not packed")
	}
	// The rows of each window of chunk 1, as (step, pipeline, rank, seq)
	// (each window's written by the worker visiting it).
	rowsOf := func() [][][4]int64 {
		out := make([][][4]int64, len(ix.windows))
		ix.visitColumns(replayColumns, visit{
			want: func(k int) bool { return ix.windows[k].chunk == 1 },
			window: func(_, k int) {
				g := ix.windows[k]
				for _, i := range g.rows {
					out[k] = append(out[k], [4]int64{g.step, int64(g.pipeline), int64(g.t.Rank[i]), g.t.Seq[i]})
				}
				if len(g.t.Step) != 0 && len(g.t.Step) != g.t.Len() {
					t.Errorf("window %d: step column of %d rows in a chunk of %d", k, len(g.t.Step), g.t.Len())
				}
			},
		})
		return out
	}
	withRuns := rowsOf()
	visited := 0
	for _, rows := range withRuns {
		visited += len(rows)
	}
	if visited == 0 {
		t.Fatal("no window of chunk 1 visited")
	}
	for _, k := range ix.chunks[1].wins {
		ix.windows[k].runs = nil
	}
	regrouped := rowsOf()
	if !reflect.DeepEqual(withRuns, regrouped) {
		t.Errorf("windows regrouped without their runs got other rows")
	}
	// And the rows are those of the trace's windows: every row of
	// pipeline 1 once, with its step.
	n := 0
	for _, rows := range regrouped {
		for _, r := range rows {
			if r[1] != 1 {
				t.Fatalf("a row of pipeline %d in a window of chunk 1", r[1])
			}
			n++
		}
	}
	want := 0
	for _, p := range tr.Pipeline {
		if p == 1 {
			want++
		}
	}
	if n != want {
		t.Errorf("%d rows in chunk 1's windows, want %d", n, want)
	}
}
