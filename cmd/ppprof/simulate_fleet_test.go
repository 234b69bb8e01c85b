package main

import (
	"path/filepath"
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
	if _, _, code := ppprof(t, append(args, "--fleet", "--fault", "skip:rank=0,step=0,mb=0", "-o", t.TempDir())...); code == 0 {
		t.Errorf("--fleet with a fault: exit 0")
	}
}
