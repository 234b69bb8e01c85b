package report

import (
	"bytes"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/sim"
)

// buildProfile is the profile WritePprof writes, built with
// github.com/google/pprof/profile (as WritePprof did before it encoded the
// protobuf itself): the reference TestPprofMatchesLibrary compares with.
func buildProfile(ps samples) *profile.Profile {
	wall := &profile.ValueType{Type: "wall", Unit: "nanoseconds"}
	p := &profile.Profile{SampleType: []*profile.ValueType{wall}, DefaultSampleType: "wall",
		PeriodType: &profile.ValueType{Type: "wall", Unit: "nanoseconds"}, Period: 1, DurationNanos: ps.durationNs}
	// One function and location per frame name.
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
	labels := map[labelKey]map[string][]string{}
	stacks := map[stackKey][]*profile.Location{}
	for _, k := range ps.keys {
		s := &profile.Sample{Value: []int64{ps.sums[k]}}
		lk, sk := sharedKeys(k)
		if s.Label = labels[lk]; s.Label == nil {
			s.Label = map[string][]string{}
			labelsOf(k, func(key string, v int64) { s.Label[key] = []string{itoa(v)} })
			labels[lk] = s.Label
		}
		if s.Location = stacks[sk]; s.Location == nil {
			for _, name := range stackOf(nil, k) {
				s.Location = append(s.Location, loc(name))
			}
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
