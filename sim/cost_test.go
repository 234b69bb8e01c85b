package sim

import (
	"math"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

const ms = int64(1e6) // ns

// computeDurations returns, per compute row, its (stage, step, mb, kind)
// and duration, checking every compute row completed.
func forCompute(t *testing.T, tr *trace.Trace, fn func(e trace.Event, dur int64)) {
	t.Helper()
	n := 0
	for _, e := range events(tr) {
		if !e.Kind.IsCompute() {
			continue
		}
		if e.EndNs == trace.NoTime {
			t.Fatalf("pending compute row %+v", e)
		}
		n++
		fn(e, e.EndNs-e.StartNs)
	}
	if n == 0 {
		t.Fatal("no compute rows")
	}
}

func TestSlowStage(t *testing.T) {
	tr := mustRun(t, Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, DP: 2, TP: 2, SlowStage: 1, SlowFactor: 3})
	forCompute(t, tr, func(e trace.Event, d int64) {
		want := map[trace.Kind]int64{trace.F: 1 * ms, trace.B: 2 * ms}[e.Kind]
		if e.Stage == 1 {
			want *= 3
		}
		if d != want {
			t.Errorf("%+v: lasts %d ns, want %d", e, d, want)
		}
	})
}

func TestStragglers(t *testing.T) {
	c := Config{Schedule: "gpipe", Stages: 3, MicroBatches: 4, Steps: 2, DP: 2, SlowStage: -1,
		Stragglers: []Straggler{
			{Step: 1, MicroBatch: 2, Stage: 0, Factor: 4},    // one (step, mb, stage)
			{Step: -1, MicroBatch: 1, Stage: -1, Factor: 2},  // mb1 everywhere, every step
			{Step: -1, MicroBatch: 2, Stage: 0, Factor: 1.5}, // stacks with the first in step 1
		}}
	tr := mustRun(t, c)
	forCompute(t, tr, func(e trace.Event, d int64) {
		f := 1.0
		switch {
		case e.MicroBatch == 1:
			f = 2
		case e.MicroBatch == 2 && e.Stage == 0 && e.Step == 1:
			f = 6
		case e.MicroBatch == 2 && e.Stage == 0:
			f = 1.5
		}
		base := map[trace.Kind]float64{trace.F: 1, trace.B: 2}[e.Kind]
		if want := int64(base * f * 1e6); d != want {
			t.Errorf("%+v: lasts %d ns, want %d", e, d, want)
		}
	})
}

// TestP2PCost: 1024x1x1024 bf16 is 2 MiB; at 100 Gbit/s plus 10 µs a
// transfer takes 10000 + 2097152*8/100 = 177772.16 ns, rounded 177772.
func TestP2PCost(t *testing.T) {
	c := Config{Schedule: "gpipe", Stages: 2, MicroBatches: 1, Hidden: 1024, SeqLen: 1024,
		P2PLatencyUs: 10, P2PGbps: 100}
	tr := mustRun(t, c)
	const xfer = 177772
	for _, e := range events(tr) {
		if !e.Kind.IsP2P() {
			continue
		}
		if e.Bytes != 2097152 || e.Shape != "1024x1x1024" || e.Dtype != "bf16" {
			t.Errorf("%+v: want 2097152 bytes of 1024x1x1024 bf16", e)
		}
		if e.EndNs-e.StartNs != xfer {
			t.Errorf("%+v: transfer %d ns, want %d", e, e.EndNs-e.StartNs, xfer)
		}
	}
	// r0 F0 [0, 1ms]; r1 receives by 1ms+x, F0, B0 (3ms), sends back; r0
	// receives by 4ms+2x and runs B0 (2ms).
	for _, e := range events(tr) {
		if e.Rank == 0 && e.Kind == trace.B && e.EndNs != 6*ms+2*xfer {
			t.Errorf("r0 B0 %+v: want end %d", e, 6*ms+2*xfer)
		}
	}

	// fp32, 2 sequences: 8 MiB, 10000 + 8388608*8/100 = 681088.64 ns.
	c.Dtype, c.MicroBatchSize = "fp32", 2
	for _, e := range events(mustRun(t, c)) {
		if e.Kind.IsP2P() && (e.Bytes != 8388608 || e.Shape != "1024x2x1024" || e.EndNs-e.StartNs != 681089) {
			t.Errorf("%+v: want 8388608 bytes of 1024x2x1024 in 681089 ns", e)
		}
	}

	// Latency alone.
	c = Config{Schedule: "1f1b", Stages: 2, MicroBatches: 2, P2PLatencyUs: 3.5}
	for _, e := range events(mustRun(t, c)) {
		if e.Kind.IsP2P() && e.EndNs-e.StartNs != 3500 {
			t.Errorf("%+v: want 3500 ns", e)
		}
	}
}

func TestJitter(t *testing.T) {
	c := Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, DP: 2, TP: 2, Steps: 2, Jitter: 0.2, Seed: 7}
	tr := mustRun(t, c)
	distinct := map[int64]bool{}
	type key struct {
		pipe  int32
		stage trace.Stage
		step  int64
		mb    trace.MicroBatch
		kind  trace.Kind
	}
	byTP := map[key]int64{}
	forCompute(t, tr, func(e trace.Event, d int64) {
		base := map[trace.Kind]float64{trace.F: 1e6, trace.B: 2e6}[e.Kind]
		if float64(d) < base*0.8-0.5 || float64(d) > base*1.2+0.5 {
			t.Errorf("%+v: %d ns outside [0.8, 1.2] x %v", e, d, base)
		}
		distinct[d] = true
		k := key{e.Pipeline, e.Stage, e.Step, e.MicroBatch, e.Kind}
		if old, ok := byTP[k]; ok && old != d {
			t.Errorf("%+v: TP ranks of one stage differ: %d vs %d", e, old, d)
		}
		byTP[k] = d
	})
	if len(distinct) < 50 {
		t.Errorf("only %d distinct durations", len(distinct))
	}
	// Different pipelines draw their own factors.
	same := 0
	for k, d := range byTP {
		if k.pipe == 0 {
			k.pipe = 1
			if byTP[k] == d {
				same++
			}
		}
	}
	if same > 2 {
		t.Errorf("%d ops last the same in both pipelines", same)
	}
	if d := trace.Diff(tr, mustRun(t, c)); d != "" {
		t.Errorf("same seed, different trace: %s", d)
	}
	c.Seed = 8
	if d := trace.Diff(tr, mustRun(t, c)); d == "" {
		t.Errorf("seeds 7 and 8 gave the same trace")
	}
}

func TestVarSeqLen(t *testing.T) {
	c := Config{Schedule: "1f1b", Stages: 3, MicroBatches: 16, DP: 2, Steps: 2, VarSeqLen: true, Seed: 5,
		SeqLen: 1000, MicroBatchSize: 2, Hidden: 8, PeakFlops: 1e15}
	tr := mustRun(t, c)
	type key struct {
		pipe int32
		step int64
		mb   trace.MicroBatch
	}
	tokens := map[key]int64{}
	distinct := map[int64]bool{}
	forCompute(t, tr, func(e trace.Event, d int64) {
		k := key{e.Pipeline, e.Step, e.MicroBatch}
		if old, ok := tokens[k]; ok && old != e.Tokens {
			t.Errorf("%+v: tokens %d, another stage says %d", e, e.Tokens, old)
		}
		tokens[k] = e.Tokens
		distinct[e.Tokens] = true
		if e.Tokens < 1000 || e.Tokens > 3000 {
			t.Errorf("%+v: tokens outside [500, 1500] x 2", e)
		}
		scale := float64(e.Tokens) / 2000
		base := map[trace.Kind]float64{trace.F: 1e6, trace.B: 2e6}[e.Kind]
		if want := int64(math.Round(base * scale)); d != want {
			t.Errorf("%+v: %d ns, want %d (tokens/(SeqLen*MBS) = %v)", e, d, want, scale)
		}
		if want := 0.5 * 1e15 * base * 1e-9 * scale; math.Abs(e.Flops-want) > 1e-6*want {
			t.Errorf("%+v: flops %v, want %v", e, e.Flops, want)
		}
	})
	if len(distinct) < 10 {
		t.Errorf("only %d distinct token counts over %d micro-batches", len(distinct), len(tokens))
	}
	// Activations follow the micro-batch's length.
	for _, e := range events(tr) {
		if !e.Kind.IsP2P() {
			continue
		}
		sl := tokens[key{e.Pipeline, e.Step, e.MicroBatch}] / 2
		if e.Bytes != sl*2*8*2 {
			t.Errorf("%+v: bytes %d, want %d", e, e.Bytes, sl*2*8*2)
		}
	}
}

func TestComputeCosts(t *testing.T) {
	type want struct {
		stage trace.Stage
		chunk int32
		kind  trace.Kind
		ns    int64
	}
	cases := []struct {
		name  string
		c     Config
		want  []want // every compute row of that (stage, chunk, kind) lasts ns
		noW   bool
		flops map[trace.Kind]float64
	}{
		{
			name: "embed-loss", c: Config{Schedule: "1f1b", Stages: 3, MicroBatches: 3, EmbedMs: 0.5, LossMs: 0.25, PeakFlops: 2e15, ComputeEfficiency: 0.4},
			want: []want{{0, 0, trace.F, 1.5e6}, {1, 0, trace.F, 1e6}, {2, 0, trace.F, 1.25e6}, {0, 0, trace.B, 2e6}, {2, 0, trace.B, 2e6}},
			noW:  true,
		},
		{
			// One chunk costs 1/v; embedding on chunk 0 of stage 0, loss on
			// chunk v-1 of stage p-1.
			name: "interleaved-chunks", c: Config{Schedule: "interleaved", Stages: 2, MicroBatches: 4, EmbedMs: 0.5, LossMs: 0.25},
			want: []want{{0, 0, trace.F, 1e6}, {0, 1, trace.F, 0.5e6}, {1, 0, trace.F, 0.5e6}, {1, 1, trace.F, 0.75e6},
				{0, 0, trace.B, 1e6}, {1, 1, trace.B, 1e6}},
			noW: true,
		},
		{
			name: "zb-h1-split", c: Config{Schedule: "zb-h1", Stages: 3, MicroBatches: 4},
			want: []want{{0, 0, trace.F, 1e6}, {1, 0, trace.B, 1e6}, {2, 0, trace.W, 1e6}},
		},
		{
			name: "zb-h1-wgrad", c: Config{Schedule: "zb-h1", Stages: 3, MicroBatches: 4, BwdMs: 1.5, WgradMs: 0.5},
			want: []want{{1, 0, trace.B, 1.5e6}, {1, 0, trace.W, 0.5e6}},
		},
		{
			name: "1f1b-wgrad-folds-into-B", c: Config{Schedule: "1f1b", Stages: 2, MicroBatches: 2, BwdMs: 1.5, WgradMs: 0.5},
			want: []want{{0, 0, trace.B, 2e6}, {1, 0, trace.B, 2e6}},
			noW:  true,
		},
		{
			name: "flops", c: Config{Schedule: "zb-h1", Stages: 2, MicroBatches: 2, PeakFlops: 1e15, SlowStage: 1, SlowFactor: 2},
			want:  []want{{0, 0, trace.F, 1e6}, {1, 0, trace.F, 2e6}, {1, 0, trace.W, 2e6}},
			flops: map[trace.Kind]float64{trace.F: 5e11, trace.B: 5e11, trace.W: 5e11}, // the slow stage does the same work
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			needSchedule(t, tc.c.Schedule)
			tr := mustRun(t, tc.c)
			seen := make([]bool, len(tc.want))
			forCompute(t, tr, func(e trace.Event, d int64) {
				if tc.noW && e.Kind == trace.W {
					t.Fatalf("%+v: a W row in a schedule without split backward", e)
				}
				for i, w := range tc.want {
					if w.stage == e.Stage && w.chunk == e.Chunk && w.kind == e.Kind {
						seen[i] = true
						if d != w.ns {
							t.Errorf("%+v: lasts %d ns, want %d", e, d, w.ns)
						}
					}
				}
				if f, ok := tc.flops[e.Kind]; ok && math.Abs(e.Flops-f) > 1e-12*f {
					t.Errorf("%+v: flops %v, want %v", e, e.Flops, f)
				}
				if tc.c.PeakFlops == 0 && e.Flops != 0 {
					t.Errorf("%+v: flops without a peak", e)
				}
				if e.Tokens != DefaultSeqLen {
					t.Errorf("%+v: tokens %d, want %d", e, e.Tokens, DefaultSeqLen)
				}
			})
			for i, s := range seen {
				if !s {
					t.Errorf("no row for %+v", tc.want[i])
				}
			}
		})
	}
}
