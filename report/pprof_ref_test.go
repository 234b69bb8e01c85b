package report

import (
	"bytes"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// buildProfile is the profile WritePprof writes, built with
// github.com/google/pprof/profile (as WritePprof did before it encoded the
// protobuf itself): the reference TestPprofMatchesLibrary compares with.
func buildProfile(ps samples) *profile.Profile {
	wall := &profile.ValueType{Type: "wall", Unit: "nanoseconds"}
	p := &profile.Profile{SampleType: []*profile.ValueType{wall}, DefaultSampleType: "wall",
		PeriodType: &profile.ValueType{Type: "wall", Unit: "nanoseconds"}, Period: 1, DurationNanos: ps.durationNs}
	keys, sums := ps.keys, ps.sums
	// 2. One function and location per frame name.
	locs := map[string]*profile.Location{}
	loc := func(name string) *profile.Location {
		if l, ok := locs[name]; ok {
			return l
		}
		f := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, SystemName: name}
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f}}}
		p.Function = append(p.Function, f)
		p.Location = append(p.Location, l)
		locs[name] = l
		return l
	}
	// 3. Samples, leaf first. A job's samples share few label values and
	// frames: each made once (the profile only reads them).
	vals := map[int64][]string{}
	val := func(x int64) []string {
		v, ok := vals[x]
		if !ok {
			v = []string{itoa(x)}
			vals[x] = v
		}
		return v
	}
	type frameKey struct {
		what string
		x    int64
	}
	frames := map[frameKey]*profile.Location{}
	frame := func(what string, x int64) *profile.Location {
		l, ok := frames[frameKey{what, x}]
		if !ok {
			l = loc(what + " " + itoa(x))
			frames[frameKey{what, x}] = l
		}
		return l
	}
	kinds := map[trace.Kind]*profile.Location{}
	// Samples of the same labels share one label map, and those of the
	// same frames one stack (a busy op's F and B, a rank's idle causes):
	// a fleet job's profile has millions of samples, and a map each was
	// most of the time building it. The profile only reads them.
	type labelKey struct {
		step     int64
		pipeline int32
		stage    int
		rank     trace.Rank
		busy     bool
		mb       trace.MicroBatch
		chunk    int32
	}
	labels := map[labelKey]map[string][]string{}
	type stackKey struct {
		pipeline int32
		stage    int
		cause    analyze.Cause
		kind     trace.Kind
		mb       trace.MicroBatch
	}
	stacks := map[stackKey][]*profile.Location{}
	samples := make([]profile.Sample, len(keys))
	values := make([]int64, len(keys))
	for i, k := range keys {
		s := &samples[i]
		values[i] = sums[k]
		s.Value = values[i : i+1 : i+1]
		busy := k.cause == analyze.CauseBusy
		lk := labelKey{step: k.step, pipeline: k.pipeline, stage: k.stage, rank: k.rank, busy: busy, mb: trace.NoMicroBatch, chunk: -1}
		sk := stackKey{pipeline: k.pipeline, stage: k.stage, cause: k.cause, mb: trace.NoMicroBatch}
		if busy {
			lk.mb, lk.chunk = k.mb, k.chunk
			sk.kind, sk.mb = k.kind, k.mb
		}
		if s.Label = labels[lk]; s.Label == nil {
			s.Label = map[string][]string{"step": val(k.step), "pipeline": val(int64(k.pipeline)), "stage": val(int64(k.stage)), "rank": val(int64(k.rank))}
			if busy {
				if k.mb >= 0 {
					s.Label["microbatch"] = val(int64(k.mb))
				}
				s.Label["chunk"] = val(int64(k.chunk))
			}
			labels[lk] = s.Label
		}
		if s.Location = stacks[sk]; s.Location == nil {
			stack := make([]*profile.Location, 0, 4)
			if busy {
				if k.mb >= 0 {
					stack = append(stack, frame("mb", int64(k.mb)))
				}
				kl, ok := kinds[k.kind]
				if !ok {
					kl = loc(k.kind.String())
					kinds[k.kind] = kl
				}
				stack = append(stack, kl)
			} else {
				stack = append(stack, loc(idleFrame[k.cause]))
			}
			stack = append(stack, frame("stage", int64(k.stage)), frame("pipeline", int64(k.pipeline)))
			s.Location = stack[:len(stack):len(stack)]
			stacks[sk] = s.Location
		}
		p.Sample = append(p.Sample, s)
	}
	p.Comments = []string{profileComment}
	if ps.job != "" {
		p.Comments = append(p.Comments, "job: "+ps.job)
	}
	return p
}

// TestPprofMatchesLibrary checks that the profile WritePprof encodes
// parses (with github.com/google/pprof/profile, as go tool pprof does) to
// the profile the library builds and writes from the same samples: the
// same samples (values, stacks, labels), locations, functions, types,
// period, duration and comments; and that it is valid.
func TestPprofMatchesLibrary(t *testing.T) {
	for _, cfg := range []sim.Config{
		{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, P2PLatencyUs: 150, P2PGbps: 200, SlowStage: 1, SlowFactor: 1.5},
		{Schedule: "interleaved", Stages: 4, TP: 2, DP: 2, MicroBatches: 8, Steps: 3, Jitter: 0.1, Seed: 5},
		{Schedule: "zb-h1", Stages: 4, MicroBatches: 6, Steps: 2, Jitter: 0.05, Seed: 2},
	} {
		tr, err := sim.Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		tr.SortByRankSeq()
		if cfg.Schedule == "interleaved" {
			tr.Meta.Job = "a job name"
		}
		var got bytes.Buffer
		if err := WritePprof(&got, tr, analyze.Options{Step: analyze.AllSteps}); err != nil {
			t.Fatal(err)
		}
		gp, err := profile.Parse(bytes.NewReader(got.Bytes()))
		if err != nil {
			t.Fatalf("%s: parsing the written profile: %v", cfg.Schedule, err)
		}
		if err := gp.CheckValid(); err != nil {
			t.Fatalf("%s: %v", cfg.Schedule, err)
		}
		ref := buildProfile(profileSamples(tr, analyze.StageTimes(tr, analyze.Options{Step: analyze.AllSteps})))
		var want bytes.Buffer
		if err := ref.Write(&want); err != nil {
			t.Fatal(err)
		}
		wp, err := profile.Parse(bytes.NewReader(want.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if len(gp.Sample) < 10 {
			t.Fatalf("%s: %d samples", cfg.Schedule, len(gp.Sample))
		}
		if g, w := gp.String(), wp.String(); g != w {
			t.Errorf("%s: the written profile differs from the library's:\n%s\nwant:\n%s", cfg.Schedule, g, w)
		}
		if g, w := joinLines(gp.Comments), joinLines(wp.Comments); g != w || gp.DefaultSampleType != wp.DefaultSampleType {
			t.Errorf("%s: comments %s, default sample type %q; want %s, %q", cfg.Schedule, g, gp.DefaultSampleType, w, wp.DefaultSampleType)
		}
		if gp.DurationNanos != wp.DurationNanos || gp.Period != wp.Period || gp.TimeNanos != wp.TimeNanos ||
			*gp.PeriodType != *wp.PeriodType || len(gp.SampleType) != 1 || *gp.SampleType[0] != *wp.SampleType[0] {
			t.Errorf("%s: duration %d, period %d %+v, time %d, sample type %+v; want %d, %d %+v, %d, %+v", cfg.Schedule,
				gp.DurationNanos, gp.Period, *gp.PeriodType, gp.TimeNanos, gp.SampleType,
				wp.DurationNanos, wp.Period, *wp.PeriodType, wp.TimeNanos, wp.SampleType)
		}
		if len(gp.Function) != len(wp.Function) {
			t.Fatalf("%s: %d functions, want %d", cfg.Schedule, len(gp.Function), len(wp.Function))
		}
		for i, f := range gp.Function {
			if w := wp.Function[i]; f.ID != w.ID || f.Name != w.Name || f.SystemName != w.SystemName {
				t.Errorf("%s: function %+v, want %+v", cfg.Schedule, *f, *w)
			}
		}
	}
}

// joinLines joins ss for comparing.
func joinLines(ss []string) string {
	var b bytes.Buffer
	for _, s := range ss {
		b.WriteString(s + "\n")
	}
	return b.String()
}
