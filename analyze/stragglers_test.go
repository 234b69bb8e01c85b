package analyze

import (
	"math"
	"math/rand"
	"reflect"
	"slices"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

func mustRun(t *testing.T, c sim.Config) (*trace.Trace, *Report) {
	t.Helper()
	tr, err := sim.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	return tr, rep
}

func within(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

// TestStragglerFound: one straggler (micro-batch 5 of stage 1 in step 2,
// factor 3) on 1F1B is found as exactly its F and B (once each, whatever
// the TP degree; once per pipeline replica, as the sim slows every
// replica), with Factor 3, class slow; the delays of the two ops add up to
// what the sim says the straggler cost: the step-2 window minus that of the
// same job simulated without it (within 1%; the two ops' delays are not
// additive in general, but are here: F5 and B5 of stage 1 sit on the
// critical path one after the other).
func TestStragglerFound(t *testing.T) {
	for _, c := range []sim.Config{
		{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 3, P2PLatencyUs: 20},
		{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 3, P2PLatencyUs: 20, Jitter: 0.02, Seed: 1},
		{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 3, P2PLatencyUs: 20, DP: 2, TP: 2},
	} {
		slow := c
		slow.Stragglers = []sim.Straggler{{Step: 2, MicroBatch: 5, Stage: 1, Factor: 3}}
		_, rep := mustRun(t, slow)
		_, clean := mustRun(t, c)
		dp := max(c.DP, 1)
		if len(rep.Stragglers) != 2*dp {
			t.Fatalf("%+v: %d stragglers, want %d: %+v", c, len(rep.Stragglers), 2*dp, rep.Stragglers)
		}
		sum := make([]float64, dp)
		for _, s := range rep.Stragglers {
			if s.Step != 2 || s.Stage != 1 || s.MicroBatch != 5 || (s.Kind != "F" && s.Kind != "B") || s.Class != StragglerSlow {
				t.Errorf("%+v: unexpected straggler %+v", c, s)
			}
			if !within(s.Factor, 3, 0.05) {
				t.Errorf("%+v: factor %v, want 3", c, s.Factor)
			}
			sum[s.Pipeline] += s.DelayMs
		}
		for pipe := range dp {
			want := rep.Steps[2*dp+pipe].WindowMs() - clean.Steps[2*dp+pipe].WindowMs()
			if !within(sum[pipe], want, 0.01) {
				t.Errorf("%+v pipeline %d: delays add to %v ms, the sim says %v", c, pipe, sum[pipe], want)
			}
		}
		for j := 1; j < len(rep.Stragglers); j++ {
			if rep.Stragglers[j].DelayMs > rep.Stragglers[j-1].DelayMs {
				t.Errorf("not sorted by delay: %+v", rep.Stragglers)
			}
		}
	}
}

// TestStragglerEverySchedule: on each schedule a factor-3
// straggler yields only ops of its micro-batch and stage, each with Factor
// about 3 and a delay no larger than what the sim says fixing all of them
// buys (replays are monotone and a single fix cannot beat fixing all).
func TestStragglerEverySchedule(t *testing.T) {
	for _, sched := range []string{"gpipe", "1f1b", "interleaved", "zb-h1"} {
		c := sim.Config{Schedule: sched, Stages: 4, MicroBatches: 8, Steps: 3, P2PLatencyUs: 20, Jitter: 0.03, Seed: 5}
		slow := c
		slow.Stragglers = []sim.Straggler{{Step: 1, MicroBatch: 2, Stage: 2, Factor: 3}}
		_, rep := mustRun(t, slow)
		_, clean := mustRun(t, c)
		want := rep.Steps[1].WindowMs() - clean.Steps[1].WindowMs()
		if len(rep.Stragglers) == 0 {
			t.Fatalf("%s: no straggler found", sched)
		}
		for _, s := range rep.Stragglers {
			if s.Step != 1 || s.Stage != 2 || s.MicroBatch != 2 || s.Class != StragglerSlow || !within(s.Factor, 3, 0.1) {
				t.Errorf("%s: unexpected straggler %+v", sched, s)
			}
			if s.DelayMs > want*1.01 || s.DelayMs < 0 {
				t.Errorf("%s: delay %v outside [0, %v]", sched, s.DelayMs, want)
			}
		}
	}
}

// TestStragglerVarSeqLen: with sequence lengths drawn per micro-batch
// (durations proportional to tokens) and no jitter, nothing is "slow"; a
// real straggler on top is found slow, with its factor measured against
// its tokens.
func TestStragglerVarSeqLen(t *testing.T) {
	c := sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 16, Steps: 3, VarSeqLen: true, Seed: 11}
	_, rep := mustRun(t, c)
	for _, s := range rep.Stragglers {
		if s.Class == StragglerSlow {
			t.Errorf("variable sequence lengths flagged slow: %+v", s)
		}
	}
	c.Stragglers = []sim.Straggler{{Step: 0, MicroBatch: 4, Stage: 3, Factor: 2}}
	_, rep = mustRun(t, c)
	if len(rep.Stragglers) != 2 {
		t.Fatalf("%d stragglers, want F and B of micro-batch 4: %+v", len(rep.Stragglers), rep.Stragglers)
	}
	for _, s := range rep.Stragglers {
		if s.MicroBatch != 4 || s.Stage != 3 || s.Class != StragglerSlow || !within(s.Factor, 2, 0.01) || s.Tokens == 0 {
			t.Errorf("straggler %+v, want mb 4 stage 3 slow factor 2 with tokens", s)
		}
	}
}

// TestStragglerJitterOnly: jitter of 5% alone flags nothing.
func TestStragglerJitterOnly(t *testing.T) {
	for _, sched := range []string{"gpipe", "1f1b", "interleaved", "zb-h1"} {
		_, rep := mustRun(t, sim.Config{Schedule: sched, Stages: 4, MicroBatches: 8, Steps: 4, DP: 2, Jitter: 0.05, Seed: 2})
		if len(rep.Stragglers) != 0 {
			t.Errorf("%s: jitter flagged %+v", sched, rep.Stragglers[0])
		}
	}
}

// longSeqTrace is one stage running 8 forwards of 1000 tokens, 1 ms each,
// and one of 3000 tokens taking 3 ms (1 µs per token throughout): the long
// one is 3x the median (a plain outlier, MAD 0) and exactly what its tokens
// predict, so it is a long sequence; replayed at the typical 1 ms the
// window (the sum of the 9 forwards, 11 ms) ends 2 ms earlier.
func longSeqTrace() *trace.Trace {
	tr := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	at := int64(0)
	for mb := range 9 {
		d, tok := ms, int64(1000)
		if mb == 6 {
			d, tok = 3*ms, 3000
		}
		tr.Append(trace.Event{Kind: trace.F, MicroBatch: trace.MicroBatch(mb), Seq: int64(mb), IssueNs: at, StartNs: at, EndNs: at + d,
			Peer: trace.NoRank, Tokens: tok})
		at += d
	}
	return tr
}

func TestStragglerLongSequence(t *testing.T) {
	rep, err := Run(longSeqTrace(), Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Stragglers) != 1 {
		t.Fatalf("stragglers %+v, want one", rep.Stragglers)
	}
	s := rep.Stragglers[0]
	if s.MicroBatch != 6 || s.Class != StragglerLongSequence || !near(s.ExpectedMs, 3) || !near(s.TypicalMs, 1) ||
		!near(s.Factor, 1) || !near(s.DelayMs, 2) {
		t.Errorf("straggler %+v, want mb 6 long_sequence expected 3 typical 1 factor 1 delay 2", s)
	}
	fs := stragglersFindings(nil, rep)
	if len(fs) != 1 || fs[0].Code != CodeStraggler || fs[0].Severity != "info" || !near(fs[0].ImpactMs, 2) {
		t.Errorf("findings %+v, want one info STRAGGLER costing 2 ms", fs)
	}
}

// TestStragglerRobust: weird traces do not panic and flag nothing absurd:
// zero durations, fewer ops than StragglerMinSamples, a pending op.
func TestStragglerRobust(t *testing.T) {
	tr := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	for mb := range 8 {
		e := int64(0)
		if mb == 3 {
			e = 5 * ms // 5 ms against a median of 0: no factor to speak of
		}
		tr.Append(trace.Event{Kind: trace.F, MicroBatch: trace.MicroBatch(mb), Seq: int64(mb), EndNs: e, Peer: trace.NoRank})
	}
	few := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	for mb := range 3 {
		few.Append(trace.Event{Kind: trace.B, MicroBatch: trace.MicroBatch(mb), Seq: int64(mb), StartNs: int64(mb) * 10 * ms,
			EndNs: int64(mb)*10*ms + int64(mb+1)*ms, Peer: trace.NoRank})
	}
	pending := longSeqTrace()
	pending.EndNs[8] = trace.NoTime
	for name, x := range map[string]*trace.Trace{"zero": tr, "few": few, "pending": pending} {
		rep, err := Run(x, Options{Step: AllSteps})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(rep.Stragglers) != 0 {
			t.Errorf("%s: stragglers %+v", name, rep.Stragglers)
		}
	}
}

// TestStragglerFindings: a slow straggler that delays its step is a
// warning costing its delay; a trace without stragglers has no STRAGGLER
// finding.
func TestStragglerFindings(t *testing.T) {
	_, rep := mustRun(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2,
		Stragglers: []sim.Straggler{{Step: 1, MicroBatch: 5, Stage: 1, Factor: 3}}})
	fs := stragglersFindings(nil, rep)
	if len(fs) != 2 {
		t.Fatalf("findings %+v, want two (F and B)", fs)
	}
	for j, f := range fs {
		if f.Code != CodeStraggler || f.Severity != "warning" || f.ImpactMs != rep.Stragglers[j].DelayMs || f.ImpactMs <= 0 {
			t.Errorf("finding %+v for %+v", f, rep.Stragglers[j])
		}
	}
	_, rep = mustRun(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, Jitter: 0.05})
	if fs := stragglersFindings(nil, rep); len(fs) != 0 {
		t.Errorf("findings %+v, want none", fs)
	}
}

// BenchmarkStragglers times the straggler pass over a 64-step, 8-stage,
// 32-micro-batch 1F1B trace with jitter and one straggler per step.
func BenchmarkStragglers(b *testing.B) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 8, MicroBatches: 32, Steps: 64, Jitter: 0.1,
		Stragglers: []sim.Straggler{{Step: -1, MicroBatch: 7, Stage: 3, Factor: 3}}})
	if err != nil {
		b.Fatal(err)
	}
	ix := newIndex(tr, Options{Step: AllSteps})
	b.ResetTimer()
	for range b.N {
		var rep Report
		analyzeStragglers(ix, &rep)
	}
}

// TestSelectMedian checks selection against sorting on seeded random
// slices of every length up to 200, with many ties and without.
func TestSelectMedian(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for n := 0; n <= 200; n++ {
		for _, levels := range []int{3, 1 << 30} {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = float64(rng.Intn(levels))
			}
			s := slices.Clone(xs)
			slices.Sort(s)
			want := 0.0
			if n > 0 {
				want = (s[(n-1)/2] + s[n/2]) / 2
			}
			if got := medianOf(xs); got != want {
				t.Fatalf("n %d levels %d: median %v, want %v", n, levels, got, want)
			}
		}
	}
}

// TestSelectPair: the k-th and (k-1)-th smallest values, checked against a
// sort, on inputs large enough to be narrowed by the sample (random,
// sorted, reversed, few distinct values, and a sample that misses: every
// sampled position holds the minimum, which sends the search back to the
// whole input).
func TestSelectPair(t *testing.T) {
	rng := rand.New(rand.NewSource(34))
	for it := range 200 {
		n := 1 + rng.Intn(60000)
		levels := 1 + rng.Intn(3000)
		xs := make([]int64, n)
		for i := range xs {
			switch it % 5 {
			case 0:
				xs[i] = int64(i)
			case 1:
				xs[i] = int64(n - i)
			case 2:
				xs[i] = int64(rng.Intn(3))
			case 3:
				xs[i] = 1 + int64(rng.Intn(levels))
				if step := n / selectSample; step > 0 && i%step == 0 {
					xs[i] = 0
				}
			default:
				xs[i] = int64(rng.Intn(levels))
			}
		}
		s := slices.Clone(xs)
		slices.Sort(s)
		k := rng.Intn(n)
		if it%7 == 0 {
			k = n / 2
		}
		lo, hi := selectPair(slices.Clone(xs), k, make([]int64, n))
		want := int64(0)
		if k > 0 {
			want = s[k-1]
		}
		if hi != s[k] || lo != want {
			t.Fatalf("case %d, n %d, k %d: got %d, %d, want %d, %d", it%5, n, k, lo, hi, want, s[k])
		}
		// The same values in blocks of random sizes (selectPairIn, as
		// distOf reads a blockList), which must be left as they were.
		var bs [][]int64
		for rest := slices.Clone(xs); len(rest) > 0; {
			m := min(len(rest), 1+rng.Intn(2*n/3+1))
			bs = append(bs, rest[:m:m])
			rest = rest[m:]
		}
		kept := slices.Concat(bs...)
		lo, hi = selectPairIn(bs, n, k, make([]int64, n))
		if hi != s[k] || lo != want {
			t.Fatalf("case %d, n %d, k %d, %d blocks: got %d, %d, want %d, %d", it%5, n, k, len(bs), lo, hi, want, s[k])
		}
		if len(bs) > 1 && !slices.Equal(slices.Concat(bs...), kept) {
			t.Fatalf("case %d, n %d, %d blocks: the blocks were reordered", it%5, n, len(bs))
		}
		fs := make([]float64, n)
		for i, x := range xs {
			fs[i] = float64(x) / 7
		}
		if got, wantMed := medianIn(fs, make([]float64, n)), (float64(s[(n-1)/2])/7+float64(s[n/2])/7)/2; got != wantMed {
			t.Fatalf("case %d, n %d: median %v, want %v", it%5, n, got, wantMed)
		}
	}
}

// TestOpGroupsNarrowIsWide checks that the op groups' statistics are the
// same, to the bit, whether the builder keeps each op's duration and
// tokens in 32 bits (what it does when they fit) or its duration and ns
// per token as float64s (what it does when one does not).
func TestOpGroupsNarrowIsWide(t *testing.T) {
	var tokenLists int // narrow layouts that kept token counts (some group's vary)
	build := func(tr *trace.Trace, wide bool) (*opGroups, bool) {
		opGroupsWide = wide
		defer func() { opGroupsWide = false }()
		ix := newIndex(tr, Options{Step: AllSteps})
		b := newOpGroupsBuilder(ix)
		ix.visit(b.countVisit())
		narrow := b.dur32 != nil
		if b.tok32 != nil {
			tokenLists++
		}
		ix.visit(b.fillVisit())
		return ix.groups, narrow
	}
	perToken := 0
	corpus := chunkCorpus(t)
	for name, tr := range chunkCorpus(t) {
		// The same trace with token counts that differ within groups:
		// the narrow layout keeps them (tok32), where the corpus's
		// constant counts need none.
		vary := tr.Slice(0, tr.Len())
		vary.Tokens = slices.Clone(vary.Tokens)
		for i := range vary.Tokens {
			if vary.Tokens[i] > 0 {
				vary.Tokens[i] += int64(i % 3)
			}
		}
		corpus[name+", token counts varying"] = vary
	}
	for name, tr := range corpus {
		n, narrow := build(tr, false)
		w, narrowToo := build(tr, true)
		if !narrow || narrowToo {
			t.Fatalf("%s: narrow layout %v, then %v with opGroupsWide", name, narrow, narrowToo)
		}
		if !reflect.DeepEqual(n, w) {
			t.Errorf("%s: op groups differ:\nnarrow %+v\nwide   %+v", name, n, w)
		}
		for x := range n.perToken {
			if n.perToken[x] && n.n[x] > 0 {
				perToken++
			}
		}
	}
	if perToken == 0 {
		t.Error("no group of the corpus has ns per token: the rates were not compared")
	}
	if tokenLists == 0 || tokenLists == len(corpus) {
		t.Errorf("%d of %d narrow layouts kept token counts: want both kinds compared", tokenLists, len(corpus))
	}
}
