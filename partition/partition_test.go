package partition

import (
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
)

// bruteForce enumerates every contiguous split of pr into non-empty
// stages and returns the least bottleneck (ns) among those within memory
// and, among those, the least sum of squared stage costs; ok is false when
// none fits.
func bruteForce(pr *problem) (best int64, bestSq float64, ok bool) {
	cuts := make([]int, pr.p+1)
	cuts[pr.p] = pr.n
	best, bestSq = math.MaxInt64, math.Inf(1)
	var rec func(s int)
	rec = func(s int) {
		if s == pr.p {
			var b int64
			var sq float64
			for k := range pr.p {
				if !pr.fits(k, cuts[k], cuts[k+1]) {
					return
				}
				c := pr.stageCost(k, cuts[k], cuts[k+1])
				b = max(b, c)
				sq += (float64(c) / 1e6) * (float64(c) / 1e6)
			}
			ok = true
			if b < best || b == best && sq < bestSq {
				best, bestSq = b, sq
			}
			return
		}
		lo := cuts[s-1] + 1
		hi := pr.n - (pr.p - s)
		for c := lo; c <= hi; c++ {
			cuts[s] = c
			rec(s + 1)
		}
	}
	if pr.p == 1 {
		cuts[0] = 0
		rec(1)
		return best, bestSq, ok
	}
	cuts[0] = 0
	rec(1)
	return best, bestSq, ok
}

// TestSolveOptimal: on random small models (random costs, activation
// bytes, embedding and loss, memory limits from none to infeasible, every
// schedule) Solve's bottleneck equals the brute-force minimum over all
// contiguous splits, its split fits memory, and its sum of squared stage
// costs is the least among the optimal splits.
func TestSolveOptimal(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for it := range 3000 {
		n := 1 + rng.Intn(9)
		p := 1 + rng.Intn(min(n, 5))
		m := &Model{}
		for i := range n {
			m.Layers = append(m.Layers, Layer{Name: "l" + string(rune('a'+i)),
				FwdMs: float64(rng.Intn(20)) / 4, BwdMs: float64(rng.Intn(40)) / 4, ActBytes: int64(rng.Intn(100))})
		}
		if rng.Intn(2) == 0 {
			m.Embedding = &Layer{Name: "embedding", FwdMs: rng.Float64() * 3, BwdMs: rng.Float64() * 3, ActBytes: int64(rng.Intn(50))}
		}
		if rng.Intn(2) == 0 {
			m.Loss = &Layer{Name: "loss", FwdMs: rng.Float64() * 3, BwdMs: rng.Float64(), ActBytes: int64(rng.Intn(50))}
		}
		opt := Options{Stages: p, Schedule: []string{"1f1b", "gpipe", "zb-h1", ""}[rng.Intn(4)], MicroBatches: 1 + rng.Intn(8)}
		if rng.Intn(3) > 0 {
			opt.MemLimitBytes = int64(1 + rng.Intn(1500))
		}
		pr, err := newProblem(m, opt)
		if err != nil {
			t.Fatal(err)
		}
		want, wantSq, ok := bruteForce(pr)
		res, err := Solve(m, opt)
		if !ok {
			if err == nil || !strings.Contains(err.Error(), "fits") {
				t.Fatalf("case %d (n=%d p=%d %+v): nothing fits, Solve gave %v, %v", it, n, p, opt, res, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("case %d (n=%d p=%d %+v): %v", it, n, p, opt, err)
		}
		if got := ns(res.BottleneckMs); got != want {
			t.Fatalf("case %d (n=%d p=%d %+v): bottleneck %d ns, brute force %d", it, n, p, opt, got, want)
		}
		var sq float64
		cuts := []int{0}
		for s, st := range res.Split {
			if st.First != cuts[s] || st.Last < st.First || st.Stage != s {
				t.Fatalf("case %d: split %+v not contiguous", it, res.Split)
			}
			cuts = append(cuts, st.Last+1)
			if opt.MemLimitBytes > 0 && st.MemBytes > opt.MemLimitBytes {
				t.Fatalf("case %d: stage %d needs %d bytes, limit %d", it, s, st.MemBytes, opt.MemLimitBytes)
			}
			c := pr.stageCost(s, st.First, st.Last+1)
			sq += (float64(c) / 1e6) * (float64(c) / 1e6)
		}
		if cuts[p] != n {
			t.Fatalf("case %d: split %+v does not cover %d layers", it, res.Split, n)
		}
		if math.Abs(sq-wantSq) > 1e-9*math.Max(1, wantSq) {
			t.Fatalf("case %d: sum of squares %v, least %v", it, sq, wantSq)
		}
		if res.StepMs < res.BottleneckMs*float64(res.MicroBatches)-1e-9 {
			t.Fatalf("case %d: step %v ms below m x bottleneck %v", it, res.StepMs, res.BottleneckMs)
		}
	}
}

// TestSolveByHand: 8 layers of 3 ms (F 1 + B 2) and a 3 ms loss on 4
// stages under 1F1B.
func TestSolveByHand(t *testing.T) {
	m := &Model{Loss: &Layer{Name: "loss", FwdMs: 1, BwdMs: 2}}
	for range 8 {
		m.Layers = append(m.Layers, Layer{Name: "block", FwdMs: 1, BwdMs: 2, ActBytes: 100})
	}
	res, err := Solve(m, Options{Stages: 4, MicroBatches: 8})
	if err != nil {
		t.Fatal(err)
	}
	// 27 ms in units of 3 over 4 stages: at least 9 ms on some stage, and
	// 9 is reached (e.g. 3, 3, 1, 1 layers... any split whose last stage
	// holds at most 2 layers and the others at most 3).
	if res.BottleneckMs != 9 {
		t.Errorf("bottleneck %v, want 9: %+v", res.BottleneckMs, res.Split)
	}
	if got := res.Sizes(); got[3] > 2 || slices.Max(got) > 3 {
		t.Errorf("sizes %v", got)
	}
	// 1F1B with (F, B) per stage: the even split's last stage (2 layers +
	// loss = 9 ms) bounds it as well.
	if res.Even.BottleneckMs != 9 || !slices.Equal(res.Even.Sizes, []int{2, 2, 2, 2}) || !res.Even.FitsMemory {
		t.Errorf("even %+v", res.Even)
	}
	// Memory: 1F1B keeps p - s micro-batches on stage s: with 250 bytes,
	// stage 0 (live 4) holds no layer (400 > 250): nothing fits.
	if _, err := Solve(m, Options{Stages: 4, MicroBatches: 8, MemLimitBytes: 250}); err == nil {
		t.Errorf("250 bytes: no error")
	}
	// With 800 bytes stage 0 holds 2 layers, stage 1 (live 3) 2, stage 2
	// (live 2) 4, stage 3 (live 1) 8.
	res, err = Solve(m, Options{Stages: 4, MicroBatches: 8, MemLimitBytes: 800})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Sizes(); got[0] > 2 || got[1] > 2 {
		t.Errorf("sizes %v under the memory limit", got)
	}
}

func TestSolveErrors(t *testing.T) {
	m := &Model{Layers: []Layer{{Name: "a", FwdMs: 1, BwdMs: 1}, {Name: "b", FwdMs: 1, BwdMs: 1}}}
	for _, tc := range []struct {
		opt  Options
		want string
	}{
		{Options{Stages: 3}, "every stage needs a layer"},
		{Options{Stages: 0}, "stages"},
		{Options{Stages: 2, Schedule: "interleaved"}, "interleaved"},
		{Options{Stages: 2, MicroBatches: -1}, "micro-batches"},
		{Options{Stages: 2, MemLimitBytes: -1}, "memory"},
	} {
		if _, err := Solve(m, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want one mentioning %q", tc.opt, err, tc.want)
		}
	}
	if _, err := Solve(&Model{}, Options{Stages: 1}); err == nil {
		t.Errorf("no layers: no error")
	}
	bad := &Model{Layers: []Layer{{Name: "a", FwdMs: math.NaN()}}}
	if _, err := Solve(bad, Options{Stages: 1}); err == nil {
		t.Errorf("NaN cost: no error")
	}
}

func TestReadCSV(t *testing.T) {
	in := `# a model
act_bytes, layer, fwd_ms, bwd_ms, note
0, embedding, 0.5, 0.25, x
100, block.0, 1, 2,
200, block.1, 1.5, 3,

0, LOSS, 0.75, 0.5,
`
	m, err := ReadCSV(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Layer{{"block.0", 1, 2, 100}, {"block.1", 1.5, 3, 200}}
	if !slices.Equal(m.Layers, want) || m.Embedding == nil || *m.Embedding != (Layer{"embedding", 0.5, 0.25, 0}) ||
		m.Loss == nil || m.Loss.FwdMs != 0.75 {
		t.Errorf("model %+v emb %+v loss %+v", m.Layers, m.Embedding, m.Loss)
	}
	if m, err := ReadCSV(strings.NewReader("layer,fwd_ms,bwd_ms\na,1,2\n")); err != nil || m.Layers[0].ActBytes != 0 {
		t.Errorf("no act_bytes column: %+v, %v", m, err)
	}
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"layer,fwd_ms\na,1\n", "bwd_ms"},
		{"layer,fwd_ms,bwd_ms\n", "no layers"},
		{"layer,fwd_ms,bwd_ms\na,x,1\n", "line 2"},
		{"layer,fwd_ms,bwd_ms\na,1,-1\n", "bwd_ms"},
		{"layer,fwd_ms,bwd_ms,act_bytes\na,1,1,1.5\n", "act_bytes"},
		{"layer,fwd_ms,bwd_ms\n,1,1\n", "empty layer name"},
		{"layer,fwd_ms,bwd_ms\nloss,1,1\nloss,1,1\na,1,1\n", "second loss"},
		{"layer,layer,fwd_ms,bwd_ms\n", "twice"},
		{"layer,fwd_ms,bwd_ms\na,1e300,1\n", "fwd_ms"},
	} {
		if _, err := ReadCSV(strings.NewReader(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want one mentioning %q", tc.in, err, tc.want)
		}
	}
}
