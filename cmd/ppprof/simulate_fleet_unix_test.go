//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// TestRankStreamsFewFiles writes a job of more ranks than the process may
// have files open: rankStreams keeps none open between two writes, so
// every rank file is written whole.
func TestRankStreamsFewFiles(t *testing.T) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skip("no RLIMIT_NOFILE:", err)
	}
	c := sim.Config{Schedule: "1f1b", Stages: 4, TP: 4, DP: 8, MicroBatches: 4, Steps: 3, Seed: 1}
	ranks := c.Stages * c.TP * c.DP // 128
	lim := old
	lim.Cur = 96
	if lim.Cur > old.Cur {
		t.Skipf("the soft limit on open files is already %d", old.Cur)
	}
	dir := t.TempDir()
	rs := &rankStreams{dir: dir, opt: arrowv1.Options{Compression: "lz4", BatchRows: 20}, flushRows: 20}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skip("cannot lower RLIMIT_NOFILE:", err)
	}
	_, _, err := sim.Fleet(c, rs.add)
	if cerr := rs.close(); err == nil {
		err = cerr
	}
	if rerr := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatalf("%d ranks with at most %d files open: %v", ranks, lim.Cur, err)
	}
	for r := range ranks {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank-%05d.arrows", r)))
		if err != nil {
			t.Fatal(err)
		}
		res, err := arrowv1.Read(data)
		if err != nil || res.Truncated || res.Trace.Len() == 0 {
			t.Fatalf("rank %d: %v (truncated %v)", r, err, res != nil && res.Truncated)
		}
	}
}
