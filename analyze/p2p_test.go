package analyze

import (
	"math"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

type p2pWant struct {
	from, to int
	kind     string
	sends    float64 // per step per replica
}

func checkBoundaries(t *testing.T, name string, got []Boundary, want []p2pWant, v float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d boundaries %+v, want %d", name, len(got), got, len(want))
	}
	for i, w := range want {
		b := got[i]
		if b.From != w.from || b.To != w.to || b.Kind != w.kind {
			t.Errorf("%s: boundary %d is %d->%d %s, want %d->%d %s", name, i, b.From, b.To, b.Kind, w.from, w.to, w.kind)
		}
		if b.SendsPerStep != w.sends || b.BytesPerStep != w.sends*v || b.ModelBytesPerStep != w.sends*v {
			t.Errorf("%s: %d->%d %s: sends %v bytes %v model %v, want %v sends of %v bytes", name, b.From, b.To, b.Kind,
				b.SendsPerStep, b.BytesPerStep, b.ModelBytesPerStep, w.sends, v)
		}
	}
}

// TestP2PBytesAndBandwidth: 1F1B, p = 4, m = 8, two replicas. Activations
// are 128 x 1 x 64 fp32 = 32768 bytes; each of the 3 activation and 3
// gradient boundaries carries m of them per step per replica. A transfer
// takes round(latency + bytes x 8 / Gbps) ns = round(10000 + 2621.44) =
// 12621 ns, so the achieved bandwidth is 32768 / 12621 GB/s, below the
// link's 12.5 GB/s because of the latency.
func TestP2PBytesAndBandwidth(t *testing.T) {
	const v = 128 * 64 * 4
	_, rep := statsRun(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, DP: 2,
		SeqLen: 128, Hidden: 64, Dtype: "fp32", P2PLatencyUs: 10, P2PGbps: 100})
	checkBoundaries(t, "1f1b", rep.P2P.Boundaries, []p2pWant{
		{0, 1, "activation", 8}, {1, 2, "activation", 8}, {2, 3, "activation", 8},
		{1, 0, "gradient", 8}, {2, 1, "gradient", 8}, {3, 2, "gradient", 8},
	}, v)
	wantGBps := float64(v) / math.Round(10000+v*8/100.0)
	for _, b := range rep.P2P.Boundaries {
		if math.Abs(b.GBps-wantGBps) > 1e-12 {
			t.Errorf("%d->%d: %v GB/s, want %v", b.From, b.To, b.GBps, wantGBps)
		}
	}
	if rep.P2P.BytesPerStep != 6*8*v || rep.P2P.ModelBytesPerStep != 6*8*v {
		t.Errorf("totals %v model %v, want %v", rep.P2P.BytesPerStep, rep.P2P.ModelBytesPerStep, 6*8*v)
	}
	if fs := p2pFindings(nil, rep); len(fs) != 0 {
		t.Errorf("findings %+v: bytes match the model and 10 us latency is not 5%% of the step", fs)
	}
}

// TestP2PInterleavedBoundaries: with v chunks per stage, a boundary s ->
// s+1 carries m x v activations, the wrap-around p-1 -> 0 carries m x (v-1)
// (chunk c of the last stage feeds chunk c+1 of the first); gradients
// mirror it. Each TP rank sends its own copy.
func TestP2PInterleavedBoundaries(t *testing.T) {
	const v = 128 * 64 * 2 // bf16
	_, rep := statsRun(t, sim.Config{Schedule: "interleaved", Stages: 4, MicroBatches: 8, Virtual: 2, DP: 2, TP: 2,
		SeqLen: 128, Hidden: 64})
	const adj, wrap = 8 * 2 * 2, 8 * 1 * 2 // m x chunks x TP
	checkBoundaries(t, "interleaved p4 v2", rep.P2P.Boundaries, []p2pWant{
		{0, 1, "activation", adj}, {1, 2, "activation", adj}, {2, 3, "activation", adj}, {3, 0, "activation", wrap},
		{0, 3, "gradient", wrap}, {1, 0, "gradient", adj}, {2, 1, "gradient", adj}, {3, 2, "gradient", adj},
	}, v)
	// Two stages, three chunks: each direction of the one link carries
	// both an adjacent boundary (3 chunks) and a wrap (2 chunks).
	_, rep = statsRun(t, sim.Config{Schedule: "interleaved", Stages: 2, MicroBatches: 4, Virtual: 3, SeqLen: 128, Hidden: 64})
	checkBoundaries(t, "interleaved p2 v3", rep.P2P.Boundaries, []p2pWant{
		{0, 1, "activation", 12}, {1, 0, "activation", 8}, {0, 1, "gradient", 8}, {1, 0, "gradient", 12},
	}, v)
	if fs := p2pFindings(nil, rep); len(fs) != 0 {
		t.Errorf("findings %+v with free P2P and matching bytes", fs)
	}
}

// TestP2PFreeAndVarSeqLen: free P2P exposes nothing and transfers take no
// time (GBps 0). With VarSeqLen each micro-batch's activation has its own
// first dimension, drawn in [SeqLen/2, 3 SeqLen/2]: the measured bytes still
// equal the model (all shapes known), within m x those bounds.
func TestP2PFreeAndVarSeqLen(t *testing.T) {
	const v = 128 * 64 * 2
	_, rep := statsRun(t, sim.Config{Schedule: "zb-h1", Stages: 3, MicroBatches: 6, Steps: 2, SeqLen: 128, Hidden: 64,
		VarSeqLen: true, Seed: 9, Jitter: 0.1})
	if len(rep.P2P.Boundaries) != 4 {
		t.Fatalf("boundaries %+v, want 4", rep.P2P.Boundaries)
	}
	for _, b := range rep.P2P.Boundaries {
		if b.ExposedMs != 0 || b.GBps != 0 {
			t.Errorf("%d->%d %s: exposed %v GB/s %v with free P2P", b.From, b.To, b.Kind, b.ExposedMs, b.GBps)
		}
		if math.Abs(b.BytesPerStep-b.ModelBytesPerStep) > 1e-6 || b.BytesPerStep < 6*v/2 || b.BytesPerStep > 6*v*3/2 || b.BytesPerStep == 6*v {
			t.Errorf("%d->%d %s: bytes %v model %v, want equal, in [%v, %v], not exactly m x V", b.From, b.To, b.Kind, b.BytesPerStep, b.ModelBytesPerStep, 6*v/2, 6*v*3/2)
		}
	}
	if rep.P2P.ExposedMs != 0 {
		t.Errorf("exposed %v with free P2P", rep.P2P.ExposedMs)
	}
}

// TestP2PExposedFinding uses the GPipe p = 2, m = 2 job of
// TestStatsP2PWaitByHand: stage 0 waits 2L on transfers in its steady gaps
// (all on boundary 1->0, gradients), in a step of 9 + 4L ms. L = 0.5 ms:
// 1 ms of 11 ms, 9% > 5%: a warning costing 1 ms. L = 0.1 ms: 0.2 ms of
// 9.4 ms, 2.1%: nothing.
func TestP2PExposedFinding(t *testing.T) {
	c := sim.Config{Schedule: "gpipe", Stages: 2, MicroBatches: 2, FwdMs: 1, BwdMs: 2, P2PLatencyUs: 500}
	_, rep := statsRun(t, c)
	fs := p2pFindings(nil, rep)
	if len(fs) != 1 || fs[0].Code != CodeP2PExposed || fs[0].Severity != "warning" || math.Abs(fs[0].ImpactMs-1) > 1e-9 {
		t.Fatalf("findings %+v, want one P2P_EXPOSED warning costing 1 ms", fs)
	}
	for _, part := range []string{"stage 0 waits 1 ms", "9.1% of the 11 ms step", "worst boundary 1->0 (gradient) 1 ms"} {
		if !strings.Contains(fs[0].Message, part) {
			t.Errorf("message %q lacks %q", fs[0].Message, part)
		}
	}
	c.P2PLatencyUs = 100
	_, rep = statsRun(t, c)
	if fs := p2pFindings(nil, rep); len(fs) != 0 {
		t.Errorf("findings %+v at 2.1%% exposed", fs)
	}
}

// TestP2PBytesMismatchFinding: halving the bytes column of every P2P row
// (as a runtime that compresses activations would record) leaves the
// shapes' model unchanged: each boundary moves 50% of it.
func TestP2PBytesMismatchFinding(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, SeqLen: 128, Hidden: 64})
	if err != nil {
		t.Fatal(err)
	}
	for i := range tr.Bytes {
		tr.Bytes[i] /= 2
	}
	rep, err := Run(tr, Options{Step: AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	fs := p2pFindings(nil, rep)
	if len(fs) != 1 || fs[0].Code != CodeP2PBytesMismatch || fs[0].Severity != "info" {
		t.Fatalf("findings %+v, want one P2P_BYTES_MISMATCH info", fs)
	}
	if !strings.Contains(fs[0].Message, "50% of the") || !strings.Contains(fs[0].Message, "(4 boundaries differ") {
		t.Errorf("message %q", fs[0].Message)
	}
}

// TestP2PMatchInIssueOrder: sends and receives of a rank pair match in
// issue order, whatever their labels. Rank 0 sends to rank 1 twice (seq 0
// starts 1 ms, seq 1 starts 4 ms) and to rank 2 once; rank 1's receives
// carry swapped micro-batch labels and start at 0 and 2 ms. Transfers:
// max(1, 0) .. 3 and max(4, 2) .. 6; the receive of rank 2 from rank 3 has
// no send and is its own transfer; rank 0's send to rank 2 has no receive.
func TestP2PMatchInIssueOrder(t *testing.T) {
	tr := &trace.Trace{Meta: trace.Meta{Schema: 1}}
	statsP2P(tr, 0, 0, trace.SendF, 1, 0, 1*ms, 3*ms)
	statsP2P(tr, 0, 0, trace.SendF, 2, 5, 2*ms, 2*ms)
	statsP2P(tr, 0, 0, trace.SendF, 1, 1, 4*ms, 6*ms)
	statsP2P(tr, 1, 1, trace.RecvF, 0, 1, 0, 3*ms)
	statsP2P(tr, 1, 1, trace.RecvF, 0, 0, 2*ms, 6*ms)
	statsP2P(tr, 2, 2, trace.RecvB, 3, 0, 7*ms, 8*ms)
	rows := make([]int, tr.Len())
	for i := range rows {
		rows[i] = i
	}
	var sc p2pScratch
	got := matchTransfers(tr, rows, &sc)
	want := []transfer{
		{send: 0, recv: 3, startNs: 1 * ms, endNs: 3 * ms},
		{send: 2, recv: 4, startNs: 4 * ms, endNs: 6 * ms},
		{send: 1, recv: -1, startNs: 2 * ms, endNs: 2 * ms},
		{send: -1, recv: 5, startNs: 7 * ms, endNs: 8 * ms},
	}
	if len(got) != len(want) {
		t.Fatalf("transfers %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("transfer %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestP2PPayloadBytes: V = product of dims x dtype size, as runtimes spell
// them; anything unparsable is unknown, not zero.
func TestP2PPayloadBytes(t *testing.T) {
	cases := []struct {
		shape, dtype string
		want         float64
		ok           bool
	}{
		{"4096x2x8192", "bf16", 4096 * 2 * 8192 * 2, true},
		{"[4, 1024]", "torch.float32", 4 * 1024 * 4, true},
		{"8x8", "fp8", 64, true},
		{"8X8", "FP64", 64 * 8, true},
		{"3*5", "int8", 15, true},
		{"0x7", "fp16", 0, true},
		{"", "bf16", 0, false},
		{"4x1024", "", 0, false},
		{"4x1024", "complex64", 0, false},
		{"4x-1", "bf16", 0, false},
		{"4xbanana", "bf16", 0, false},
		{"99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999x99999999999", "fp64", 0, false},
	}
	for _, c := range cases {
		got, ok := payloadBytes(c.shape, c.dtype)
		if got != c.want || ok != c.ok {
			t.Errorf("payloadBytes(%q, %q) = %v, %v; want %v, %v", c.shape, c.dtype, got, ok, c.want, c.ok)
		}
	}
}
