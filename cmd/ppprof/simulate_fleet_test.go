package main

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestSimulateFleet checks that simulate --fleet writes one stream per rank
// and that, without random draws, analyze reads the same job from them as
// from simulate's usual per-rank streams.
func TestSimulateFleet(t *testing.T) {
	fleet, plain := t.TempDir(), t.TempDir()
	args := []string{"simulate", "--schedule", "interleaved", "--stages", "4", "--microbatches", "8", "--steps", "3",
		"--dp", "2", "--tp", "2", "--p2p-latency-us", "20", "--opt-ms", "1", "--compression", "lz4"}
	if _, stderr, code := ppprof(t, append(args, "--fleet", "--fleet-batch-rows", "100", "-o", fleet)...); code != 0 {
		t.Fatalf("simulate --fleet: exit %d: %s", code, stderr)
	}
	if _, stderr, code := ppprof(t, append(args, "-o", plain)...); code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(fleet, "rank-*.arrows"))
	if len(files) != 16 {
		t.Fatalf("%d rank files, want 16", len(files))
	}
	a, b := analyzeJSON(t, fleet), analyzeJSON(t, plain)
	if a.Job != b.Job || a.StepMs != b.StepMs || a.Bubble.Measured != b.Bubble.Measured || a.Utilization.Balance != b.Utilization.Balance {
		t.Errorf("fleet: %+v %v %v; plain: %+v %v %v", a.Job, a.StepMs, a.Bubble.Measured, b.Job, b.StepMs, b.Bubble.Measured)
	}
	if _, stderr, code := ppprof(t, append(args, "--fleet", "-o", filepath.Join(fleet, "rank-00000.arrows"))...); code == 0 {
		t.Errorf("--fleet with a file: exit 0 (%s)", stderr)
	}
	if _, _, code := ppprof(t, append(args, "--fleet", "--slow-worker", "pipeline=0,stage=1,factor=2", "-o", t.TempDir())...); code == 0 {
		t.Errorf("--fleet with a slow worker: exit 0")
	}

	// A fault: the fleet's hung job is simulate's, and hang says the same
	// of both.
	for _, fault := range []string{"crash:rank=5,step=1,mb=3", "skip:rank=9,step=2,mb=0", "exit:rank=14,step=1"} {
		fleet, plain := t.TempDir(), t.TempDir()
		fargs := append(slices.Clone(args), "--fault", fault)
		if _, stderr, code := ppprof(t, append(fargs, "--fleet", "--fleet-batch-rows", "100", "-o", fleet)...); code != 0 {
			t.Fatalf("simulate --fleet --fault %s: exit %d: %s", fault, code, stderr)
		}
		if _, stderr, code := ppprof(t, append(fargs, "-o", plain)...); code != 0 {
			t.Fatalf("simulate --fault %s: exit %d: %s", fault, code, stderr)
		}
		a, _, ca := ppprof(t, "hang", "--format", "json", fleet)
		b, _, cb := ppprof(t, "hang", "--format", "json", plain)
		if ca != exitHangFound || cb != exitHangFound || a != b {
			t.Errorf("--fault %s: hang exits %d (fleet) and %d, same report %v", fault, ca, cb, a == b)
		}
	}
}
