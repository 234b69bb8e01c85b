package analyze

import (
	"math"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// TestStageTimesAddUp checks that the stage times come in step, pipeline
// and stage order (windows are cut on every core), that the segments tile
// every window and that, summed per cause and averaged over windows, they
// are the stage summary's busy time and idle split.
func TestStageTimesAddUp(t *testing.T) {
	cfgs := map[string]sim.Config{
		"1f1b-p2p": {Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, P2PLatencyUs: 50, P2PGbps: 100, Jitter: 0.1, Seed: 3},
		"interleaved-tp": {Schedule: "interleaved", Stages: 4, MicroBatches: 8, Steps: 2, TP: 2, DP: 2,
			P2PLatencyUs: 20, P2PGbps: 400, SlowStage: 3, SlowFactor: 1.3, VarSeqLen: true, Seed: 5},
		"zb-h1": {Schedule: "zb-h1", Stages: 4, MicroBatches: 6, P2PLatencyUs: 10},
	}
	for name, c := range cfgs {
		t.Run(name, func(t *testing.T) {
			tr, err := sim.Run(c)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Run(tr, Options{Step: AllSteps})
			if err != nil {
				t.Fatal(err)
			}
			sts := StageTimes(tr, Options{Step: AllSteps})
			p := len(rep.Stages)
			if len(sts) != p*len(rep.Steps) {
				t.Fatalf("%d stage times, want %d", len(sts), p*len(rep.Steps))
			}
			sum := make([][6]float64, p)
			for i, st := range sts {
				if i > 0 {
					a := sts[i-1]
					if a.Step > st.Step || a.Step == st.Step && (a.Pipeline > st.Pipeline || a.Pipeline == st.Pipeline && a.Stage >= st.Stage) {
						t.Fatalf("stage times out of order: (%d, %d, %d) before (%d, %d, %d)", a.Step, a.Pipeline, a.Stage, st.Step, st.Pipeline, st.Stage)
					}
				}
				cur := st.StartNs
				for _, sg := range st.Segments {
					if sg.StartNs != cur || sg.EndNs <= sg.StartNs {
						t.Fatalf("step %d stage %d: segment %+v does not follow %d", st.Step, st.Stage, sg, cur)
					}
					if (sg.Cause == CauseBusy) != (sg.Row >= 0) {
						t.Fatalf("segment %+v: row and cause disagree", sg)
					}
					if sg.Row >= 0 && (int(tr.Stage[sg.Row]) != st.Stage || !tr.Kind[sg.Row].IsCompute()) {
						t.Fatalf("segment %+v charged to row %d of stage %d kind %v", sg, sg.Row, tr.Stage[sg.Row], tr.Kind[sg.Row])
					}
					cur = sg.EndNs
					sum[st.Stage][sg.Cause] += float64(sg.EndNs - sg.StartNs)
				}
				if cur != st.EndNs {
					t.Fatalf("step %d stage %d: segments end at %d, window at %d", st.Step, st.Stage, cur, st.EndNs)
				}
			}
			nw := float64(len(rep.Steps))
			for i, s := range rep.Stages {
				checks := []struct {
					name      string
					got, want float64
				}{
					{"busy", sum[i][CauseBusy], s.BusyMs},
					{"warmup", sum[i][CauseWarmup], s.WarmupMs},
					{"cooldown", sum[i][CauseCooldown], s.CooldownMs},
					{"p2p-wait", sum[i][CauseP2PWait], s.P2PWaitMs},
					{"other", sum[i][CauseOther], s.OtherWaitMs},
				}
				for _, ck := range checks {
					if got := ck.got / nw / 1e6; math.Abs(got-ck.want) > 1e-9*math.Max(1, ck.want) {
						t.Errorf("stage %d %s: %.9f ms per window from segments, %.9f in the report", i, ck.name, got, ck.want)
					}
				}
			}
		})
	}
}

// TestMatchP2P checks the exported matcher on a simulated trace: every op
// matched, peers and labels agreeing.
func TestMatchP2P(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "interleaved", Stages: 4, MicroBatches: 8, Steps: 2, TP: 2})
	if err != nil {
		t.Fatal(err)
	}
	pairs := MatchP2P(tr)
	n := 0
	for _, k := range tr.Kind {
		if k.IsP2P() {
			n++
		}
	}
	if 2*len(pairs) != n {
		t.Fatalf("%d pairs for %d P2P ops", len(pairs), n)
	}
	for _, pr := range pairs {
		if pr.Send < 0 || pr.Recv < 0 {
			t.Fatalf("unmatched %+v", pr)
		}
		s, r := tr.At(pr.Send), tr.At(pr.Recv)
		if s.Peer != r.Rank || r.Peer != s.Rank || s.Kind.Counterpart() != r.Kind || s.MicroBatch != r.MicroBatch || s.Step != r.Step {
			t.Fatalf("pair %+v: send %+v recv %+v", pr, s, r)
		}
	}
	// A send with no receive stays, unmatched.
	cut := &trace.Trace{Meta: tr.Meta}
	for i := 0; i < tr.Len(); i++ {
		if i != pairs[0].Recv {
			cut.AppendRows(tr, i, i+1)
		}
	}
	unmatched := 0
	for _, pr := range MatchP2P(cut) {
		if pr.Recv < 0 {
			unmatched++
		}
	}
	if unmatched == 0 {
		t.Errorf("dropping a receive left no send unmatched")
	}
}
