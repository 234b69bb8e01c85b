package sim

import (
	"math/rand"
	"testing"

	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/trace"
)

// TestRandomConfigs runs seeded random jobs with random faults and checks
// what holds for any trace the simulator writes: it passes the validity
// gate (mustRun), a pending non-send row ends its rank, no step follows a
// hung one, a rank's issue times never go back and its compute never
// overlaps, ops start no earlier than issued, paired ops agree, and a job
// whose only faults are optskip completes.
func TestRandomConfigs(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	kinds := []FaultKind{FaultSkip, FaultShape, FaultDtype, FaultCrash, FaultExit, FaultReorder, FaultOptSkip}
	for n := 0; n < 300; n++ {
		c := Config{
			Schedule:     schedule.Names[rng.Intn(len(schedule.Names))],
			Stages:       1 + rng.Intn(5),
			MicroBatches: 1 + rng.Intn(9),
			DP:           1 + rng.Intn(2),
			TP:           1 + rng.Intn(2),
			Steps:        1 + rng.Intn(3),
			FwdMs:        0.1 + rng.Float64(),
			BwdMs:        0.1 + 2*rng.Float64(),
			OptMs:        rng.Float64(),
			EmbedMs:      rng.Float64() / 4,
			Seed:         rng.Int63(),
			SlowStage:    -1,
		}
		if c.Schedule == schedule.InterleavedName {
			c.Stages = max(c.Stages, 2)
			c.MicroBatches = c.Stages * (1 + rng.Intn(3))
		}
		if rng.Intn(2) == 0 {
			c.WgradMs = rng.Float64()
		}
		if rng.Intn(2) == 0 {
			c.P2PLatencyUs, c.P2PGbps = 50*rng.Float64(), 10+400*rng.Float64()
		}
		if rng.Intn(3) == 0 {
			c.Jitter, c.VarSeqLen = 0.5*rng.Float64(), true
		}
		if rng.Intn(3) == 0 {
			c.SlowStage, c.SlowFactor = rng.Intn(c.Stages), 1+rng.Float64()
		}
		onlyOptSkip := true
		for k := rng.Intn(3); k > 0; k-- {
			f := Fault{Kind: kinds[rng.Intn(len(kinds))], Rank: rng.Intn(c.WorldSize()), Step: rng.Intn(c.Steps), MicroBatch: rng.Intn(c.MicroBatches)}
			if !f.Kind.hasMicroBatch() {
				f.MicroBatch = -1
			}
			if f.check(c.WithDefaults()) != nil {
				continue
			}
			onlyOptSkip = onlyOptSkip && f.Kind == FaultOptSkip
			c.Faults = append(c.Faults, f)
		}
		tr := mustRun(t, c)
		checkInvariants(t, c, tr, onlyOptSkip)
		if t.Failed() {
			t.Fatalf("config %d: %+v", n, c)
		}
	}
}

func checkInvariants(t *testing.T, c Config, tr *trace.Trace, mustComplete bool) {
	t.Helper()
	hung := int64(1 << 62)
	for i := 0; i < tr.Len(); i++ {
		if !tr.Completed(i) {
			hung = min(hung, tr.Step[i])
		}
		if tr.Started(i) && tr.StartNs[i] < tr.IssueNs[i] {
			t.Errorf("row %+v starts before it is issued", tr.At(i))
		}
		if i > 0 && tr.Rank[i] == tr.Rank[i-1] {
			if tr.IssueNs[i] < tr.IssueNs[i-1] {
				t.Errorf("row %+v issued before the rank's previous row", tr.At(i))
			}
		}
	}
	if mustComplete && hung != 1<<62 {
		t.Errorf("a job with only optskip faults hung in step %d", hung)
	}
	last := map[trace.Rank]int64{} // end of the rank's last compute
	for i := 0; i < tr.Len(); i++ {
		if tr.Step[i] > hung {
			t.Errorf("row %+v after hung step %d", tr.At(i), hung)
		}
		if tr.Kind[i].IsCompute() && tr.Completed(i) {
			if tr.StartNs[i] < last[tr.Rank[i]] {
				t.Errorf("compute %+v overlaps the rank's previous compute", tr.At(i))
			}
			last[tr.Rank[i]] = tr.EndNs[i]
		}
	}
	pairs, unmatched := matchP2P(tr)
	for _, p := range pairs {
		if p.send.EndNs != p.recv.EndNs {
			t.Errorf("pair disagrees on its end:\n send %+v\n recv %+v", p.send, p.recv)
		}
		if p.recv.EndNs != trace.NoTime && (p.recv.StartNs < p.send.IssueNs || p.send.Bytes != p.recv.Bytes) {
			t.Errorf("completed pair inconsistent:\n send %+v\n recv %+v", p.send, p.recv)
		}
	}
	for _, u := range unmatched {
		if u.EndNs != trace.NoTime {
			t.Errorf("op %+v completed without a partner", u)
		}
	}
}
