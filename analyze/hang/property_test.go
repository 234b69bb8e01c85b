package hang_test

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

var verdicts = []hang.Verdict{hang.VerdictOK, hang.VerdictDeadlock, hang.VerdictStalled, hang.VerdictMismatch, hang.VerdictIncomplete}

var mismatchKinds = []hang.MismatchKind{hang.MissingSend, hang.MissingRecv, hang.ShapeMismatch, hang.DtypeMismatch,
	hang.BytesMismatch, hang.OrderMismatch, hang.RankAbsent, hang.EarlyExit, hang.OptimizerSkipMismatch,
	hang.CollectiveMismatch, hang.CollectiveDtypeMismatch, hang.CollectiveSizeMismatch, hang.MissingCollective}

// invariants checks what holds for any report of any trace, and returns ""
// or what broke.
func invariants(tr *trace.Trace, rep *hang.Report) string {
	pending := 0
	for i := 0; i < tr.Len(); i++ {
		if !tr.Completed(i) {
			pending++
		}
	}
	switch {
	case !slices.Contains(verdicts, rep.Verdict):
		return fmt.Sprintf("unknown verdict %q", rep.Verdict)
	case len(rep.Blocked) != pending:
		return fmt.Sprintf("%d blocked ops, %d rows with a null end", len(rep.Blocked), pending)
	case pending > 0 && rep.Verdict == hang.VerdictOK:
		return "a run with pending ops reported ok"
	case rep.Verdict == hang.VerdictOK && len(rep.Mismatches) > 0:
		return "ok with mismatches"
	case rep.Verdict == hang.VerdictDeadlock && len(rep.Cycle) == 0:
		return "deadlock without a cycle"
	case rep.RootCause.Summary == "" || rep.RootCause.Reason == "":
		return "empty root cause"
	case rep.Verdict != hang.VerdictOK && (rep.RootCause.Rank < trace.NoRank || int(rep.RootCause.Rank) >= len(rep.Ranks)):
		return fmt.Sprintf("root cause rank %d out of range", rep.RootCause.Rank)
	}
	for _, m := range rep.Mismatches {
		if !slices.Contains(mismatchKinds, m.Kind) || m.Count < 1 || len(m.Ranks) == 0 || m.Detail == "" {
			return fmt.Sprintf("bad mismatch %+v", m)
		}
	}
	for _, n := range rep.Path {
		if n.IsRank() && (n.Rank < 0 || int(n.Rank) >= len(rep.Ranks)) {
			return fmt.Sprintf("path node %+v out of range", n)
		}
	}
	return ""
}

// randomConfig draws a job as sim's own property test does, with one fault.
func randomConfig(rng *rand.Rand) sim.Config {
	kinds := []sim.FaultKind{sim.FaultSkip, sim.FaultShape, sim.FaultDtype, sim.FaultCrash, sim.FaultExit, sim.FaultReorder, sim.FaultOptSkip}
	for {
		c := sim.Config{
			Schedule:     schedule.Names[rng.Intn(len(schedule.Names))],
			Stages:       1 + rng.Intn(5),
			MicroBatches: 1 + rng.Intn(9),
			DP:           1 + rng.Intn(2),
			TP:           1 + rng.Intn(2),
			Steps:        1 + rng.Intn(3),
			FwdMs:        0.1 + rng.Float64(),
			BwdMs:        0.1 + 2*rng.Float64(),
			OptMs:        rng.Float64(),
			Seed:         rng.Int63(),
			SlowStage:    -1,
		}
		if c.Schedule == schedule.InterleavedName {
			c.Stages = max(c.Stages, 2)
			c.MicroBatches = c.Stages * (1 + rng.Intn(3))
		}
		if rng.Intn(2) == 0 {
			c.P2PLatencyUs, c.P2PGbps = 50*rng.Float64(), 10+400*rng.Float64()
		}
		if rng.Intn(3) == 0 {
			c.Jitter, c.VarSeqLen = 0.5*rng.Float64(), true
		}
		f := sim.Fault{Kind: kinds[rng.Intn(len(kinds))], Rank: rng.Intn(c.WorldSize()), Step: rng.Intn(c.Steps), MicroBatch: rng.Intn(c.MicroBatches)}
		if f.Kind == sim.FaultExit || f.Kind == sim.FaultOptSkip {
			f.MicroBatch = -1
		}
		c.Faults = []sim.Fault{f}
		if c.Validate() == nil {
			return c
		}
	}
}

// TestRandomFaults runs seeded random jobs with one random fault each: the
// analyzer never fails, a run that blocked is never ok, a complete dump is
// never incomplete, and a diagnosis other than ok names the faulted rank
// (as the root, or among the candidates when the trace cannot decide).
func TestRandomFaults(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	verdictsSeen := map[hang.Verdict]int{}
	for n := 0; n < 1000; n++ {
		c := randomConfig(rng)
		tr := mustRun(t, c)
		if tr.Len() == 0 {
			continue // the only rank exited before step 0
		}
		rep, err := hang.Run(tr, hang.Options{})
		if err != nil {
			t.Fatalf("config %d %+v: %v", n, c, err)
		}
		verdictsSeen[rep.Verdict]++
		msg := invariants(tr, rep)
		f := c.Faults[0]
		switch {
		case msg != "":
		case rep.Verdict == hang.VerdictIncomplete:
			msg = "a complete dump reported incomplete"
		case rep.Verdict != hang.VerdictOK && rep.RootCause.Rank != trace.Rank(f.Rank) && !slices.Contains(rep.RootCause.Candidates, trace.Rank(f.Rank)):
			msg = fmt.Sprintf("root cause rank %d (candidates %v), fault on rank %d", rep.RootCause.Rank, rep.RootCause.Candidates, f.Rank)
		}
		if msg != "" {
			t.Fatalf("config %d: %s: %s\n%+v\n%s", n, f, msg, c, dump(rep))
		}
	}
	t.Logf("verdicts: %v", verdictsSeen)
}

// addMutationSeeds adds the seeds of the fuzz targets that take a job's
// seed and a mutation script (mutate).
func addMutationSeeds(f *testing.F) {
	f.Add(int64(1), []byte{})
	f.Add(int64(2), []byte{0, 5, 0, 1, 9, 0, 2, 13, 3})
	f.Add(int64(3), []byte{3, 2, 1, 4, 7, 2, 5, 1, 0, 6, 3, 9})
	f.Add(int64(4), []byte{1, 0, 0, 1, 1, 0, 1, 2, 0, 1, 3, 0})
}

// FuzzRun mutates small simulated traces (dropping rows, nulling ends,
// changing peers, labels and sizes) and checks that the analyzer never
// fails on a trace that passes the validity gate and that its report keeps
// the invariants.
func FuzzRun(f *testing.F) {
	addMutationSeeds(f)
	f.Fuzz(func(t *testing.T, seed int64, muts []byte) {
		rng := rand.New(rand.NewSource(seed))
		c := randomConfig(rng)
		c.Stages, c.DP, c.TP = min(c.Stages, 3), 1, 1+int(seed&1)
		if c.Schedule == schedule.InterleavedName {
			c.Stages, c.MicroBatches = 2, 2*(1+rng.Intn(2))
		}
		c.Faults = nil
		if rng.Intn(2) == 0 {
			c = randomConfig(rng)
		}
		tr, err := sim.Run(c)
		if err != nil {
			t.Skip()
		}
		tr = mutate(tr, muts)
		if tr.Len() == 0 || tr.Validate() != nil {
			t.Skip()
		}
		rep, err := hang.Run(tr, hang.Options{WorldSize: int(seed % 7)})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if msg := invariants(tr, rep); msg != "" {
			t.Fatalf("%s\n%s", msg, dump(rep))
		}
	})
}

// mutate applies muts, three bytes each (what, row, value), to a copy of
// tr.
func mutate(tr *trace.Trace, muts []byte) *trace.Trace {
	t := tr.Permute(identity(tr.Len()))
	drop := map[int]bool{}
	kinds := []trace.Kind{trace.SendF, trace.RecvF, trace.SendB, trace.RecvB, trace.F, trace.Opt, hang.KindOptSkip}
	for len(muts) >= 3 && t.Len() > 0 {
		what, i, v := muts[0]%8, int(muts[1])*t.Len()/256, int(muts[2])
		muts = muts[3:]
		switch what {
		case 0:
			drop[i] = true
		case 1:
			t.EndNs[i] = trace.NoTime
		case 2:
			t.StartNs[i], t.EndNs[i] = trace.NoTime, trace.NoTime
		case 3:
			t.Peer[i] = trace.Rank(v % 5)
		case 4:
			t.MicroBatch[i] = trace.MicroBatch(v%6) - 1
		case 5:
			t.Kind[i] = kinds[v%len(kinds)]
			if t.Kind[i].IsP2P() && t.Peer[i] < 0 {
				t.Peer[i] = (t.Rank[i] + 1) % 3
			}
			if !t.Kind[i].IsP2P() {
				t.Peer[i] = trace.NoRank
			}
		case 6:
			t.Bytes[i] = int64(v)
		case 7:
			t.Step[i] = int64(v % 3)
		}
	}
	var keep []int
	for i := 0; i < t.Len(); i++ {
		if !drop[i] {
			keep = append(keep, i)
		}
	}
	return t.Permute(keep)
}
