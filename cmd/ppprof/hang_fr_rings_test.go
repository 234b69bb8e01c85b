package main

import (
	"bytes"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/internal/frdump"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// TestHangFlightRecorderRings diagnoses the Flight Recorder dumps of a
// hung job whose ring buffers wrapped: each rank kept only its last 300
// entries, so the dumps begin at different times (a middle stage issues
// more P2P ops a step than the first). The rank that skipped a
// micro-batch must be found (a deadlock with its next stage), not a rank
// blamed for the entries its ring dropped; a warning says how many P2P
// ops lost their partners that way, and the clocks are aligned on the
// pairs left.
func TestHangFlightRecorderRings(t *testing.T) {
	const p, tp, dp = 4, 2, 2
	bad := trace.Rank((1*dp+1)*tp + 1) // stage 1, replica 1, TP rank 1 (sim.Config.Rank)
	c := frdump.Config{Sim: sim.Config{Schedule: "1f1b", Stages: p, TP: tp, DP: dp, MicroBatches: 8, Steps: 6, P2PLatencyUs: 20,
		Faults: []sim.Fault{{Kind: sim.FaultSkip, Rank: int(bad), Step: 5, MicroBatch: 4}}}, Layers: 2, Entries: 300, SkewNs: 1000}
	dir := t.TempDir()
	if _, entries, err := frdump.Write(dir, c); err != nil || entries != p*tp*dp*300 {
		t.Fatalf("frdump.Write: %d entries, %v (want every ring full: %d)", entries, err, p*tp*dp*300)
	}
	var stderr bytes.Buffer
	rep, err := hangWhole(&hangOptions{paths: []string{dir}, stream: "never", stdout: io.Discard, stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != hang.VerdictDeadlock || !slices.Contains(rep.RootCause.Candidates, bad) && rep.RootCause.Rank != bad {
		t.Errorf("verdict %s, root cause %+v; want a deadlock naming rank %d", rep.Verdict, rep.RootCause, bad)
	}
	if !strings.Contains(stderr.String(), "ring buffer dropped the oldest entries") {
		t.Errorf("no warning about the rings:\n%s", stderr.String())
	}
	// The clock alignment's causality bounds pair what is left: they
	// agree (pairs shifted by a dropped partner would contradict them).
	if strings.Contains(stderr.String(), "contradict") {
		t.Errorf("the causality bounds contradict each other:\n%s", stderr.String())
	}
}

// TestHangFlightRecorderSlowReplica: the replica that hangs is the slower
// one (a slow worker at its stage 0), so the other replica's ranks post
// the last step's data-parallel all-reduce before the slow replica's
// rank at stage 1 skips a micro-batch. The all-reduces the slow replica's
// ranks never posted are consequences: they were still working when the
// fast replica posted them. The first mismatch, the report's "first
// divergence", must be at the rank that skipped; ordered by the fast
// replica's posts, it was a missing all-reduce of the slow replica's last
// stage.
func TestHangFlightRecorderSlowReplica(t *testing.T) {
	const p, tp, dp = 4, 1, 2
	bad := trace.Rank((1*dp + 0) * tp) // stage 1, replica 0 (sim.Config.Rank)
	c := frdump.Config{Sim: sim.Config{Schedule: "1f1b", Stages: p, TP: tp, DP: dp, MicroBatches: 8, Steps: 2, P2PLatencyUs: 20,
		SlowRanks: []sim.SlowRank{{Pipeline: 0, Stage: 0, Factor: 3}},
		Faults:    []sim.Fault{{Kind: sim.FaultSkip, Rank: int(bad), Step: 1, MicroBatch: 6}}}, Layers: 1}
	dir := t.TempDir()
	if _, _, err := frdump.Write(dir, c); err != nil {
		t.Fatal(err)
	}
	rep, err := hangWhole(&hangOptions{paths: []string{dir}, stream: "never", stdout: io.Discard, stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	// The premise: some missing all-reduce was posted by the fast replica
	// before the rank that skipped stopped.
	var early bool
	for _, m := range rep.Mismatches {
		if m.Kind == hang.MissingCollective && m.Collective != nil {
			for _, e := range m.Collective.Ops {
				early = early || e.IssueNs < firstPendingIssue(rep, bad)
			}
		}
	}
	if !early {
		t.Fatalf("no all-reduce of the fast replica posted before rank %d stopped: the test's premise does not hold", bad)
	}
	if len(rep.Mismatches) == 0 {
		t.Fatal("no mismatches")
	}
	if m := rep.Mismatches[0]; !slices.Contains(m.Ranks, bad) {
		t.Errorf("first mismatch %s %v (%s); want one of rank %d, which skipped micro-batch 6", m.Kind, m.Ranks, m.Detail, bad)
	}
}

// firstPendingIssue is the issue time of rank r's first op still pending
// at the dump (the report's blocked ops are in (rank, seq) order).
func firstPendingIssue(rep *hang.Report, r trace.Rank) int64 {
	for _, b := range rep.Blocked {
		if b.Op.Rank == r {
			return b.Op.IssueNs
		}
	}
	return math.MaxInt64
}

// TestReadGCPercent: reads of Flight Recorder dumps collect at GOGC 100
// (their decoding makes garbage), reads of ppprof's Arrow files at 400,
// and so does an input that cannot be sniffed (the read says why).
func TestReadGCPercent(t *testing.T) {
	fr := t.TempDir()
	if _, _, err := frdump.Write(fr, frdump.Config{Sim: sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 2}, Layers: 1}); err != nil {
		t.Fatal(err)
	}
	arrow := t.TempDir()
	if _, stderr, code := ppprof(t, "simulate", "--stages", "2", "--microbatches", "2", "-o", filepath.Join(arrow, "t.arrow")); code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, stderr)
	}
	for _, tc := range []struct {
		paths []string
		want  int
	}{
		{[]string{fr}, 100},
		{[]string{filepath.Join(fr, "_dump_0")}, 100},
		{[]string{arrow}, 400},
		{[]string{filepath.Join(t.TempDir(), "missing")}, 400},
	} {
		if got := readGCPercent(tc.paths); got != tc.want {
			t.Errorf("%v: GOGC %d, want %d", tc.paths, got, tc.want)
		}
	}
}
