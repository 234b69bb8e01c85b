package sim

import (
	"reflect"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// fleetTrace runs Fleet on c and gathers its rows into one trace in (rank,
// seq) order.
func fleetTrace(t *testing.T, c Config) *trace.Trace {
	t.Helper()
	all := &trace.Trace{}
	meta, n, err := Fleet(c, func(rows *trace.Trace) error {
		all.Meta = rows.Meta
		all.AppendRows(rows, 0, rows.Len())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if int64(all.Len()) != n {
		t.Fatalf("Fleet says %d rows, emitted %d", n, all.Len())
	}
	if !reflect.DeepEqual(all.Meta, meta) {
		t.Errorf("rows carry metadata %+v, Fleet returned %+v", all.Meta, meta)
	}
	all.SortByRankSeq()
	if err := all.Validate(); err != nil {
		t.Fatal(err)
	}
	return all
}

// TestFleetIsRun checks that without random draws Fleet's rows are Run's,
// for every schedule, with replicas, TP ranks, several steps, an optimizer
// step, P2P costs and a straggler.
func TestFleetIsRun(t *testing.T) {
	for _, sched := range []string{"gpipe", "1f1b", "interleaved", "zb-h1"} {
		c := Config{Schedule: sched, Stages: 4, MicroBatches: 8, Steps: 3, DP: 3, TP: 2, OptMs: 1.5,
			P2PLatencyUs: 20, P2PGbps: 100, PeakFlops: 1e15, Job: "fleet",
			Stragglers: []Straggler{{Step: 1, MicroBatch: 2, Stage: 1, Factor: 2}, {Step: -1, MicroBatch: 5, Stage: -1, Factor: 1.5}}}
		want, err := Run(c)
		if err != nil {
			t.Fatal(err)
		}
		got := fleetTrace(t, c)
		if d := trace.Diff(want, got); d != "" {
			t.Errorf("%s: Fleet differs from Run: %s", sched, d)
		}
	}
}

// TestFleetReplicas checks that with jitter each replica and step draws its
// own (FleetSeed), TP ranks stay copies, and a replica alone is Run with
// its seed.
func TestFleetReplicas(t *testing.T) {
	c := Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, DP: 2, TP: 2, Jitter: 0.2, Seed: 5}
	got := fleetTrace(t, c)
	end := map[[3]int64]int64{} // (step, pipeline, tp) -> last end of stage 3
	for i := range got.Len() {
		if got.Stage[i] == 3 && got.EndNs[i] != trace.NoTime && got.Kind[i] != trace.Opt {
			k := [3]int64{got.Step[i], int64(got.Pipeline[i]), int64(got.TPRank[i])}
			end[k] = max(end[k], got.EndNs[i])
		}
	}
	if end[[3]int64{0, 0, 0}] != end[[3]int64{0, 0, 1}] {
		t.Errorf("TP ranks of one replica differ: %d vs %d", end[[3]int64{0, 0, 0}], end[[3]int64{0, 0, 1}])
	}
	if end[[3]int64{0, 0, 0}] == end[[3]int64{0, 1, 0}] {
		t.Errorf("replicas 0 and 1 have the same jitter")
	}
	one := c
	one.Steps, one.DP, one.TP, one.Seed = 1, 1, 1, FleetSeed(c.Seed, 0, 1)
	want, err := Run(one)
	if err != nil {
		t.Fatal(err)
	}
	var rows []int
	for i := range got.Len() {
		if got.Pipeline[i] == 1 && got.TPRank[i] == 0 && got.Step[i] == 0 && got.Kind[i] != trace.Opt {
			rows = append(rows, i)
		}
	}
	var nw int
	for i := range want.Len() {
		if want.Kind[i] != trace.Opt {
			nw++
		}
	}
	if len(rows) != nw {
		t.Fatalf("replica 1 step 0 has %d rows, alone %d", len(rows), nw)
	}
	k := 0
	for i := range want.Len() {
		if want.Kind[i] == trace.Opt {
			continue
		}
		g := rows[k]
		k++
		if got.StartNs[g] != want.StartNs[i] || got.EndNs[g] != want.EndNs[i] || got.Kind[g] != want.Kind[i] {
			t.Fatalf("row %d: fleet %v, alone %v", i, got.At(g), want.At(i))
		}
	}
}

// TestFleetRefuses checks that slow workers are refused.
func TestFleetRefuses(t *testing.T) {
	c := Config{Schedule: "1f1b", Stages: 2, MicroBatches: 2, SlowRanks: []SlowRank{{Pipeline: 0, Stage: 0, Factor: 2}}}
	if _, _, err := Fleet(c, func(*trace.Trace) error { return nil }); err == nil {
		t.Error("no error for a slow worker")
	}
}

// TestFleetFaultsIsRun checks that with faults (every kind, on several
// ranks, TP lanes and replicas, in several steps; two at once) Fleet's rows
// are Run's: a hung job's trace ends in the step that hung, OPT rows
// posted with no start. An optimizer step of OptMs > 0 is left out: Run
// starts a rank that skipped it (OPT_SKIP) on its next step OptMs before
// the others, Fleet starts every rank of a step at once.
func TestFleetFaultsIsRun(t *testing.T) {
	kinds := []FaultKind{FaultSkip, FaultShape, FaultDtype, FaultCrash, FaultExit, FaultReorder, FaultOptSkip}
	for _, sched := range []string{"gpipe", "1f1b", "interleaved", "zb-h1"} {
		c := Config{Schedule: sched, Stages: 4, MicroBatches: 8, Steps: 3, DP: 3, TP: 2,
			P2PLatencyUs: 20, P2PGbps: 100, Job: "fleet"}
		for i, k := range kinds {
			for _, r := range []int{0, 9, 23} {
				f := Fault{Kind: k, Rank: r, Step: (i + r) % 3, MicroBatch: (i + r) % 7}
				if !k.hasMicroBatch() {
					f.MicroBatch = -1
				}
				fc := c
				fc.Faults = []Fault{f}
				if r == 9 {
					fc.Faults = append(fc.Faults, Fault{Kind: FaultOptSkip, Rank: 2, Step: 1, MicroBatch: -1})
				}
				want, err := Run(fc)
				if err != nil {
					t.Fatal(err)
				}
				got := fleetTrace(t, fc)
				if d := trace.Diff(want, got); d != "" {
					t.Errorf("%s %v: Fleet differs from Run: %s", sched, fc.Faults, d)
				}
			}
		}
	}
}
