package analyze

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/ppprof/ppprof/sim"
)

// xferSample is one transfer as the tests build them (the what-if keeps
// a step's as a stepXfers): the boundary it crossed, its payload and
// its duration.
type xferSample struct {
	from, to int32
	dir      uint8 // 0 activation, 1 gradient
	bytes    int64
	durNs    int64
}

// at returns transfer j.
func (sx *stepXfers) at(j int) xferSample {
	k := sx.kinds[sx.kind[j]]
	return xferSample{from: k.from, to: k.to, dir: k.dir, bytes: k.bytes, durNs: sx.durNs[j]}
}

// fitXfersOne fits one group's transfers the straightforward way: its
// times and payloads gathered in order, the medians from a sort, the line
// from the centred sums (see p2pModel).
func fitXfersOne(xs []xferSample) xferFit {
	n := len(xs)
	if n == 0 {
		return xferFit{}
	}
	ds, bs := make([]float64, n), make([]float64, n)
	lo, hi := math.Inf(1), math.Inf(-1)
	known := true
	for i, x := range xs {
		ds[i], bs[i] = float64(x.durNs), float64(x.bytes)
		known = known && x.bytes > 0
		lo, hi = min(lo, bs[i]), max(hi, bs[i])
	}
	sorted := func(v []float64) float64 {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		if n%2 == 1 {
			return s[n/2]
		}
		return (s[n/2-1] + s[n/2]) / 2
	}
	f := xferFit{ok: true, constNs: sorted(ds)}
	if !known {
		return f
	}
	f.bytes = sorted(bs)
	if hi > 1.05*lo && n >= 3 {
		var mx, my float64
		for i := range n {
			mx += bs[i]
			my += ds[i]
		}
		mx, my = mx/float64(n), my/float64(n)
		var sxy, sxx, xy, xx float64
		for i := range n {
			sxy += (bs[i] - mx) * (ds[i] - my)
			sxx += (bs[i] - mx) * (bs[i] - mx)
			xy += bs[i] * ds[i]
			xx += bs[i] * bs[i]
		}
		slope := sxy / sxx
		if slope <= 0 {
			return f
		}
		f.perByte, f.nsPerByte, f.latNs = true, slope, my-slope*mx
		if f.latNs < 0 {
			f.latNs, f.nsPerByte = 0, xy/xx
		}
		return f
	}
	f.perByte, f.nsPerByte = true, f.constNs/f.bytes
	return f
}

// TestFitP2PMatchesGroups: fitP2P (every group's sums in two passes over
// the steps' transfers, medians selected from a partition by boundary)
// gives, bit for bit, the fits of each group's transfers gathered in
// order and fitted one group at a time. The random sets cover spread and
// equal payloads, unknown (0) payloads, negative slopes and latencies,
// groups of one or two transfers, empty steps and durations past 2^53.
func TestFitP2PMatchesGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 1))
	for trial := range 400 {
		p := 2 + rng.IntN(5)
		steps := make([]*stepXfers, 1+rng.IntN(4))
		var ix xferIndex
		var all []xferSample
		for s := range steps {
			for range rng.IntN([]int{0, 3, 40, 400}[rng.IntN(4)] + 1) {
				from := int32(rng.IntN(p))
				dir := uint8(rng.IntN(2))
				to := from + 1 - 2*int32(dir)
				if rng.IntN(10) == 0 {
					to = int32(rng.IntN(p)) // a wrap-around or odd boundary
				}
				if rng.IntN(20) == 0 {
					from += xferSlots // a boundary past the kinds' slots (xferIndex's map)
				}
				var bytes int64
				switch trial % 4 {
				case 0: // spread payloads, time rising with them
					bytes = int64(1 + rng.IntN(1<<20))
				case 1: // all alike
					bytes = 1 << 16
				case 2: // some unknown
					bytes = int64(rng.IntN(3)) << 10
				default: // a few sizes
					bytes = int64(1+rng.IntN(3)) << 12
				}
				dur := 5000 + bytes/int64(1+rng.IntN(4)) + int64(rng.IntN(2000)) - 1000
				switch rng.IntN(50) {
				case 0:
					dur = 1<<60 + int64(rng.IntN(1000)) // beyond float64's integers
				case 1:
					dur = 0
				}
				x := xferSample{from: from, to: to, dir: dir, bytes: bytes, durNs: dur}
				if steps[s] == nil {
					steps[s] = &stepXfers{}
				}
				steps[s].add(&ix, xferKind{boundaryKey{x.from, x.to, x.dir}, x.bytes}, x.durNs)
				if got := steps[s].at(steps[s].len() - 1); got != x {
					t.Fatalf("trial %d: transfer kept as %+v, want %+v", trial, got, x)
				}
				all = append(all, x)
			}
			if steps[s] == nil {
				steps[s] = &stepXfers{}
			}
			ix.reset(steps[s])
		}
		want := &p2pModel{byBoundary: map[boundaryKey]xferFit{}}
		by := map[boundaryKey][]xferSample{}
		var dirs [2][]xferSample
		for _, x := range all {
			k := boundaryKey{x.from, x.to, x.dir}
			by[k] = append(by[k], x)
			dirs[x.dir] = append(dirs[x.dir], x)
		}
		for k, xs := range by {
			want.byBoundary[k] = fitXfersOne(xs)
		}
		want.byDir[0], want.byDir[1], want.all = fitXfersOne(dirs[0]), fitXfersOne(dirs[1]), fitXfersOne(all)
		got := fitP2P(steps)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("trial %d: fitP2P\n%+v\nwant\n%+v", trial, got, want)
		}
	}
}

// TestMedianNs: medianNs of integers is the median of the same values as
// float64, sorted, for odd and even counts, repeats and values past 2^53.
func TestMedianNs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 2000 {
		n := rng.IntN(60)
		xs := make([]int64, n)
		fs := make([]float64, n)
		for i := range xs {
			switch trial % 3 {
			case 0:
				xs[i] = int64(rng.IntN(10))
			case 1:
				xs[i] = rng.Int64N(1<<62) - 1<<61
			default:
				xs[i] = 1<<60 + int64(rng.IntN(300))
			}
			fs[i] = float64(xs[i])
		}
		want := median(fs)
		if got := medianNs(xs); got != want {
			t.Fatalf("trial %d: medianNs = %v, want %v", trial, got, want)
		}
	}
}

// TestMedianOfCounts: the median of values given as counts is medianNs
// of the list holding each value that many times, for odd and even
// totals, zero counts, repeated values and values past 2^53.
func TestMedianOfCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 2000 {
		var vc []valueCount
		var list []int64
		for range rng.IntN(8) {
			v := int64(rng.IntN(5)) << (10 * rng.IntN(6))
			if rng.IntN(10) == 0 {
				v = 1<<60 + int64(rng.IntN(3))
			}
			c := rng.IntN(4)
			vc = append(vc, valueCount{v, c})
			for range c {
				list = append(list, v)
			}
		}
		want := medianNs(slices.Clone(list))
		if got := medianOfCounts(vc); got != want {
			t.Fatalf("trial %d: medianOfCounts(%v) = %v, want %v (of %v)", trial, vc, got, want, list)
		}
	}
}

// TestWhatIfStatsMedians: the medians the scenarios start from, per key
// (pipeline, stage, chunk, kind), per (stage, chunk, kind) and per
// (stage, kind) of compute ops, and the samples per key, are those of the
// step graphs' compute ops and receives gathered one by one and sorted.
func TestWhatIfStatsMedians(t *testing.T) {
	for _, c := range []sim.Config{
		{Schedule: "interleaved", Stages: 4, DP: 2, MicroBatches: 8, Steps: 3, Jitter: 0.2, Seed: 3, P2PLatencyUs: 10, P2PGbps: 100},
		{Schedule: "zb-h1", Stages: 3, DP: 3, TP: 2, MicroBatches: 6, Steps: 2, Jitter: 0.1, Seed: 5, P2PGbps: 50},
		{Schedule: "1f1b", Stages: 5, MicroBatches: 7, Steps: 4, Jitter: 0.3, Seed: 7},
		// One op of step 1 past 2^32 ns: that step's samples are kept in
		// 64 bits, the others' in 32.
		{Schedule: "1f1b", Stages: 3, MicroBatches: 4, Steps: 3, Jitter: 0.1, Seed: 9,
			Stragglers: []sim.Straggler{{Step: 1, MicroBatch: 2, Stage: 1, Factor: 1e4}}},
	} {
		tr, err := sim.Run(c)
		if err != nil {
			t.Fatal(err)
		}
		ix := newIndex(tr, Options{Step: AllSteps})
		var mem []graphMem
		og := newOpGroups(ix)
		ok, ranksOf, err := baselinePass(ix, og, false, graphWorkers(ix, 0), &mem)
		if err != nil {
			t.Fatal(err)
		}
		wide := 0
		for _, s := range ok {
			if s.samples.durs != nil {
				wide++
			}
		}
		if want := len(c.Stragglers); wide != want {
			t.Fatalf("%s: %d steps' samples in 64 bits, want %d", c.Schedule, wide, want)
		}
		for _, s := range ok {
			if s.err != nil {
				t.Fatalf("%s: step %d: %v", c.Schedule, s.step, s.err)
			}
		}
		st := newWhatIfStats(ix, ok, og, ranksOf)
		worker, chunk, stage := map[sampleKey][]float64{}, map[sampleKey][]float64{}, map[sampleKey][]float64{}
		for _, s := range ok {
			g, err := buildStepGraph(ix, s.ws)
			if err != nil {
				t.Fatal(err)
			}
			for v := range g.numNodes() {
				if g.class[v] != ncCompute && g.class[v] != ncRecv {
					continue
				}
				k := sampleKey{g.ranks[g.owner[v]].pipeline, g.stage[v], g.chunk[v], g.kind[v]}
				d := float64(g.meas[v])
				worker[k] = append(worker[k], d)
				chunk[sampleKey{-1, k.stage, k.chunk, k.kind}] = append(chunk[sampleKey{-1, k.stage, k.chunk, k.kind}], d)
				if k.kind.IsCompute() {
					stage[sampleKey{-1, k.stage, -1, k.kind}] = append(stage[sampleKey{-1, k.stage, -1, k.kind}], d)
				}
			}
		}
		if len(worker) == 0 || len(st.worker) != len(worker) || len(st.chunk) != len(chunk) || len(st.stage) != len(stage) {
			t.Fatalf("%s: %d/%d/%d keys, want %d/%d/%d", c.Schedule, len(st.worker), len(st.chunk), len(st.stage), len(worker), len(chunk), len(stage))
		}
		check := func(what string, got map[sampleKey]float64, want map[sampleKey][]float64) {
			for k, ds := range want {
				if m := median(ds); got[k] != m {
					t.Errorf("%s: %s median of %+v = %v, want %v (%d samples)", c.Schedule, what, k, got[k], m, len(ds))
				}
			}
		}
		check("key", st.worker, worker)
		check("chunk", st.chunk, chunk)
		check("stage", st.stage, stage)
		for k, ds := range worker {
			if st.workerN[k] != len(ds) {
				t.Errorf("%s: %+v: %d samples, want %d", c.Schedule, k, st.workerN[k], len(ds))
			}
		}
		if c.Schedule == "zb-h1" && !st.split {
			t.Errorf("zb-h1: W not seen")
		}
		if want := max(c.Virtual, 1); c.Schedule == "interleaved" && st.v != 2 || c.Schedule != "interleaved" && st.v != want {
			t.Errorf("%s: v = %d", c.Schedule, st.v)
		}
		if len(st.replicas) != max(c.DP, 1) {
			t.Errorf("%s: replicas %v, want %d", c.Schedule, st.replicas, max(c.DP, 1))
		}
	}
}

// TestReplayPlansReusesGraphs: replaying the plans on the graphs the
// baseline pass left in its workers' memory predicts what graphs built
// afresh for every step predict, for every step of a job and for one.
func TestReplayPlansReusesGraphs(t *testing.T) {
	c := sim.Config{Schedule: "interleaved", Stages: 4, DP: 2, MicroBatches: 8, Steps: 3, Jitter: 0.2, Seed: 9,
		P2PLatencyUs: 10, P2PGbps: 100, SlowRanks: []sim.SlowRank{{Pipeline: 1, Stage: 2, Factor: 1.4}},
		Stragglers: []sim.Straggler{{Step: -1, MicroBatch: 3, Stage: 1, Factor: 2}}}
	tr, err := sim.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []int64{AllSteps, 1} {
		ix := newIndex(tr, Options{Step: step})
		var mem []graphMem
		og := newOpGroups(ix)
		ok, ranksOf, err := baselinePass(ix, og, false, graphWorkers(ix, 0), &mem)
		if err != nil {
			t.Fatal(err)
		}
		held := 0
		for _, m := range mem {
			if m.held != nil {
				held++
			}
		}
		if held == 0 {
			t.Fatalf("step %d: the baseline pass left no graph", step)
		}
		plans := newWhatIfStats(ix, ok, og, ranksOf).plans()
		got := replayPlans(ix, ok, plans, false, graphWorkers(ix, 0), mem)
		want := replayPlans(ix, ok, plans, false, graphWorkers(ix, 0), nil)
		if len(want) == 0 || len(want[0]) != len(ok) || want[0][0] <= 0 {
			t.Fatalf("step %d: predictions %v", step, want)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("step %d: replays on the held graphs %v, on graphs built again %v", step, got, want)
		}
		if step == 1 && len(ok) != 1 {
			t.Errorf("step 1: %d steps replayed", len(ok))
		}
	}
}

// TestWhatIfProgress: RunWhatIf reports each phase as it starts, in
// order, then the end; the prediction is the one made without a callback.
func TestWhatIfProgress(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 4, DP: 2, MicroBatches: 6, Steps: 2, Jitter: 0.1, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	type call struct {
		done, total int
		phase       string
	}
	var got []call
	wi, err := RunWhatIf(tr, WhatIfOptions{Step: AllSteps, Progress: func(done, total int, phase string) {
		got = append(got, call{done, total, phase})
	}})
	if err != nil {
		t.Fatal(err)
	}
	var want []call
	for k, name := range append(slices.Clone(WhatIfPhases), "") {
		want = append(want, call{k, len(WhatIfPhases), name})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("progress calls %v, want %v", got, want)
	}
	plain, err := RunWhatIf(tr, WhatIfOptions{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(wi, plain) {
		t.Errorf("the what-if with progress differs from the one without")
	}
}

// TestFactorString: a factor that is not 1 reads "1" only beyond six digits.
func TestFactorString(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want string
	}{{0.5, "0.5"}, {0.8333333, "0.833"}, {0.99964, "0.9996"}, {0.999996, "0.999996"}, {0.9999999, "1"}, {1, "1"}, {1.00031, "1.0003"}, {1.4, "1.4"}} {
		if got := factorString(tc.f); got != tc.want {
			t.Errorf("factorString(%v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}
