package report

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/google/pprof/profile"
	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/trace"
)

// Frame names of the pprof profile. A busy sample's stack reads, root
// first, "pipeline P" > "stage S" > kind (F, B, W) > "mb M"; an idle
// sample's "pipeline P" > "stage S" > one of the idle frames.
const (
	FrameIdleWarmup   = "idle:warmup"
	FrameIdleCooldown = "idle:cooldown"
	FrameIdleP2PWait  = "idle:p2p-wait"
	FrameIdleOther    = "idle:other"
)

// idleFrame names the leaf frame of an idle segment.
var idleFrame = map[analyze.Cause]string{
	analyze.CauseWarmup:   FrameIdleWarmup,
	analyze.CauseCooldown: FrameIdleCooldown,
	analyze.CauseP2PWait:  FrameIdleP2PWait,
	analyze.CauseOther:    FrameIdleOther,
}

// WritePprof writes where t's pipeline time went as a pprof profile
// (gzipped protobuf) to w, for `go tool pprof -top` and flame graphs.
//
// The one sample type is wall time in nanoseconds. Every stage of every
// complete (step, pipeline) window opt selects contributes its whole
// window: busy time charged to the compute op that ran (the union over the
// stage's TP ranks, see analyze.StageTimes), idle time to warmup,
// cooldown, exposed P2P wait or other waits, exactly as the analysis
// splits it. So a stage frame's cumulative time is the summed window
// length, and a "pipeline P" frame's is the stages times that (so the
// profile's total is p x its duration: 400% for 4 stages). Windows with a
// pending op are left out. Samples carry labels step, pipeline, stage,
// rank (the rank that ran the op; for idle time the stage's lowest rank),
// and for busy time microbatch and chunk: strings, since pprof's encoding
// drops a numeric label of value 0 (filter with -tagfocus=step=3).
func WritePprof(w io.Writer, t *trace.Trace, opt analyze.Options) error {
	sts := analyze.StageTimes(t, opt)
	if len(sts) == 0 {
		return fmt.Errorf("pprof: no complete step window to profile")
	}
	p := buildProfile(t, sts)
	if err := p.CheckValid(); err != nil {
		return fmt.Errorf("pprof: %w", err)
	}
	if err := p.Write(w); err != nil {
		return fmt.Errorf("writing pprof profile: %w", err)
	}
	return nil
}

func itoa(x int64) string { return strconv.FormatInt(x, 10) }

// sampleKey identifies one aggregated sample.
type sampleKey struct {
	pipeline int32
	stage    int
	step     int64
	rank     trace.Rank
	cause    analyze.Cause
	kind     trace.Kind // busy only
	mb       trace.MicroBatch
	chunk    int32
}

func buildProfile(t *trace.Trace, sts []analyze.StageTime) *profile.Profile {
	wall := &profile.ValueType{Type: "wall", Unit: "nanoseconds"}
	p := &profile.Profile{SampleType: []*profile.ValueType{wall}, DefaultSampleType: "wall",
		PeriodType: &profile.ValueType{Type: "wall", Unit: "nanoseconds"}, Period: 1}
	// 1. Sum segments per key.
	sums := map[sampleKey]int64{}
	seen := map[[2]int64]bool{}
	for _, st := range sts {
		if w := [2]int64{st.Step, int64(st.Pipeline)}; !seen[w] {
			seen[w] = true
			p.DurationNanos += st.EndNs - st.StartNs
		}
		for _, sg := range st.Segments {
			k := sampleKey{pipeline: st.Pipeline, stage: st.Stage, step: st.Step, rank: st.Rank, cause: sg.Cause, mb: trace.NoMicroBatch, chunk: -1}
			if sg.Cause == analyze.CauseBusy {
				k.rank, k.kind, k.mb, k.chunk = t.Rank[sg.Row], t.Kind[sg.Row], t.MicroBatch[sg.Row], t.Chunk[sg.Row]
			}
			sums[k] += sg.EndNs - sg.StartNs
		}
	}
	keys := make([]sampleKey, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b sampleKey) int {
		return cmp.Or(cmp.Compare(a.pipeline, b.pipeline), cmp.Compare(a.stage, b.stage), cmp.Compare(a.step, b.step),
			cmp.Compare(a.cause, b.cause), cmp.Compare(a.kind, b.kind), cmp.Compare(a.mb, b.mb), cmp.Compare(a.chunk, b.chunk),
			cmp.Compare(a.rank, b.rank))
	})
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
	p.Comments = []string{"ppprof: wall time of every stage in every complete (step, pipeline) window: busy by op, idle by cause"}
	if t.Meta.Job != "" {
		p.Comments = append(p.Comments, "job: "+t.Meta.Job)
	}
	return p
}
