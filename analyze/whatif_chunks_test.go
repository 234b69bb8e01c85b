package analyze

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// splitSteps splits a trace into chunks of whole steps of every pipeline:
// chunk c holds, in trace order, the rows whose step is in steps[c].
func splitSteps(tr *trace.Trace, steps [][]int64) *pipelineChunks {
	pc := &pipelineChunks{parts: make([]*trace.Trace, len(steps))}
	for c := range pc.parts {
		pc.parts[c] = &trace.Trace{Meta: tr.Meta}
	}
	for i := range tr.Len() {
		c := slices.IndexFunc(steps, func(ss []int64) bool { return slices.Contains(ss, tr.Step[i]) })
		if c < 0 {
			panic(fmt.Sprintf("step %d in no chunk", tr.Step[i]))
		}
		pc.parts[c].AppendRows(tr, i, i+1)
	}
	return pc
}

// TestWhatIfChunksIsWhatIf: the what-if of a trace read a few steps at a
// time (chunks packed, or read again by every phase, or some kept) is the
// what-if of the whole trace, to the bit: every field, every scenario,
// the verdict and the critical path; errors alike.
func TestWhatIfChunksIsWhatIf(t *testing.T) {
	corpus := chunkCorpus(t)
	// A slow worker (its ranks named in the verdict), stragglers and
	// variable sequence lengths in one job.
	corpus["slow-worker"] = simTrace(t, sim.Config{Schedule: "interleaved", Stages: 4, DP: 3, TP: 2, MicroBatches: 8, Steps: 4,
		Jitter: 0.2, Seed: 9, P2PLatencyUs: 10, P2PGbps: 100, OptMs: 1, VarSeqLen: true,
		SlowRanks:  []sim.SlowRank{{Pipeline: 1, Stage: 2, Factor: 1.4}},
		Stragglers: []sim.Straggler{{Step: -1, MicroBatch: 3, Stage: 1, Factor: 2}}})
	// The optimizer step as data-parallel all-reduces of each stage's
	// replicas (process groups: what the graphs join collectives by), with
	// and without their group's sequence numbers.
	for _, seqs := range []bool{true, false} {
		tr := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 3, DP: 3, MicroBatches: 5, Steps: 3, Jitter: 0.2, Seed: 4,
			SlowRanks: []sim.SlowRank{{Pipeline: 2, Stage: 1, Factor: 1.3}}, OptMs: 1})
		for i, k := range tr.Kind {
			if k == trace.Opt {
				tr.Kind[i], tr.Group[i] = trace.AllReduce, trace.Intern(fmt.Sprintf("dp-stage%d", tr.Stage[i]))
				if seqs {
					tr.GroupSeq[i] = tr.Step[i]
				}
			}
		}
		if err := tr.Validate(); err != nil {
			t.Fatal(err)
		}
		corpus[fmt.Sprintf("dp-allreduce-seq-%v", seqs)] = tr
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range corpus {
			if !yield(n) {
				return
			}
		}
	})
	type layout struct {
		name  string
		steps func(all []int64) [][]int64
		opt   Options
	}
	layouts := []layout{
		{"a step a chunk, packed", func(all []int64) [][]int64 {
			var out [][]int64
			for _, s := range all {
				out = append(out, []int64{s})
			}
			return out
		}, Options{PackBytes: 1 << 40}},
		{"two chunks, read again", func(all []int64) [][]int64 {
			return [][]int64{all[:len(all)/2+1], all[len(all)/2+1:]}
		}, Options{}},
		{"first step kept, the rest read again", func(all []int64) [][]int64 {
			var out [][]int64
			for _, s := range all {
				out = append(out, []int64{s})
			}
			return out
		}, Options{KeepRows: 1}},
	}
	compared, failed := 0, 0
	for _, name := range names {
		tr := corpus[name]
		all := slices.Compact(slices.Sorted(slices.Values(tr.Step)))
		for _, step := range []int64{AllSteps, all[len(all)-1]} {
			want, wantErr := RunWhatIf(tr, WhatIfOptions{Step: step})
			for _, lay := range layouts {
				ranges := slices.DeleteFunc(lay.steps(all), func(s []int64) bool { return len(s) == 0 })
				src := splitSteps(tr, ranges)
				got, err := RunWhatIfChunks(src, WhatIfOptions{Step: step}, lay.opt)
				what := fmt.Sprintf("%s, step %d, %s", name, step, lay.name)
				if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
					t.Errorf("%s: error %v, want %v", what, err, wantErr)
					continue
				}
				if err == nil && strings.HasPrefix(name, "dp-allreduce") {
					if sc := scenarioOf(t, got, ScenarioSlowWorkerFixed); !sc.Available || sc.Speedup <= 1.01 {
						t.Errorf("%s: the slow worker not found: %+v", what, sc)
					}
				}
				if err != nil {
					failed++
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: what-if differs:\n got %+v\nwant %+v", what, got, want)
				}
				if len(ranges) > 1 && step == AllSteps && src.loads <= len(ranges) && lay.opt.PackBytes == 0 {
					t.Errorf("%s: %d chunks loaded %d times: not read again", what, len(ranges), src.loads)
				}
				compared++
			}
		}
	}
	if compared < 100 || failed > compared/4 {
		t.Fatalf("%d what-ifs compared, %d of them errors", compared, failed)
	}
	t.Logf("%d what-ifs compared, %d errors", compared, failed)
}

// TestWhatIfChunksNeedWholeSteps: chunks of pipeline replicas (a step's
// windows in several chunks) are refused, naming the step.
func TestWhatIfChunksNeedWholeSteps(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 3, DP: 2, MicroBatches: 4, Steps: 2, Seed: 1})
	_, err := RunWhatIfChunks(splitPipelines(tr, [][]int32{{0}, {1}}), WhatIfOptions{Step: AllSteps}, Options{})
	if err == nil || !strings.Contains(err.Error(), "step 0 has rows in chunks 0 and 1") {
		t.Fatalf("error %v", err)
	}
	// A chunk that fails to load is the error.
	src := splitSteps(tr, [][]int64{{0}, {1}})
	src.failAt = 3 // the scan reads each once; the first phase's second load fails
	if _, err := RunWhatIfChunks(src, WhatIfOptions{Step: AllSteps}, Options{}); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("error %v", err)
	}
}

// TestWhatIfChunksProgress: a what-if of several chunks tells, within a
// phase that reads them, which chunk it is at.
func TestWhatIfChunksProgress(t *testing.T) {
	tr := simTrace(t, sim.Config{Schedule: "1f1b", Stages: 3, DP: 2, MicroBatches: 4, Steps: 3, Seed: 1})
	var seen []string
	_, err := RunWhatIfChunks(splitSteps(tr, [][]int64{{0}, {1}, {2}}), WhatIfOptions{Step: AllSteps, Progress: func(done, total int, phase string) {
		seen = append(seen, fmt.Sprintf("%d/%d %s", done, total, phase))
	}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1/5 baseline replays (chunk 3/3)", "3/5 scenario replays (chunk 1/3)", "0/5 analysis (chunk 2/3)"} {
		if !slices.Contains(seen, want) {
			t.Errorf("no %q in %q", want, seen)
		}
	}
	// Chunk 1 is read three times in the analysis phase: first (the
	// scan), then by its two visits (nothing packed or kept).
	n := 0
	for _, s := range seen {
		n += b2i(s == "0/5 analysis (chunk 1/3)")
	}
	if n != 3 {
		t.Errorf("chunk 1 read %d times in the analysis, want 3: %q", n, seen)
	}
}

// FuzzWhatIfChunks: whatever a (valid) trace holds, its what-if read a few
// whole steps at a time, chunks read again or held packed, for every step
// and for one, is RunWhatIf's of the whole trace (or its error), and
// neither panics.
func FuzzWhatIfChunks(f *testing.F) {
	fuzzSeeds(f, []byte{1, 0, 3, 5, 0, 0, 2, 0, 10, 7, 7, 0, 17, 0, 0, 250, 0, 0})
	f.Fuzz(func(t *testing.T, sel byte, script []byte) {
		tr, ok := fuzzTrace(t, sel, script)
		if !ok {
			return
		}
		all := slices.Compact(slices.Sorted(slices.Values(tr.Step)))
		half := (len(all) + 1) / 2
		ranges := [][]int64{all[:half], all[half:]}
		if len(ranges[1]) == 0 {
			ranges = ranges[:1]
		}
		for _, step := range []int64{AllSteps, 1} {
			want, werr := RunWhatIf(tr, WhatIfOptions{Step: step})
			for _, pack := range []int64{0, 1 << 40} {
				got, gerr := RunWhatIfChunks(splitSteps(tr, ranges), WhatIfOptions{Step: step}, Options{PackBytes: pack})
				if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
					t.Fatalf("step %d, pack %d: RunWhatIf error %v, RunWhatIfChunks error %v", step, pack, werr, gerr)
				}
				if werr == nil && !reflect.DeepEqual(want, got) {
					t.Fatalf("step %d, pack %d: what-ifs differ:\n got %+v\nwant %+v", step, pack, got, want)
				}
			}
		}
	})
}
