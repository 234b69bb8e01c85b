// Command ppprof profiles and diagnoses pipeline-parallel training jobs.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

func main() {
	stop, err := profileFromEnv(os.Getenv("PPPROF_CPUPROFILE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "ppprof:", err)
		os.Exit(exitError)
	}
	code := run(os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if path := os.Getenv("PPPROF_MEMPROFILE"); path != "" {
		if err := writeHeapProfile(path); err != nil {
			fmt.Fprintln(os.Stderr, "ppprof: PPPROF_MEMPROFILE:", err)
		}
	}
	os.Exit(code)
}

// profileFromEnv starts a CPU profile written to path (PPPROF_CPUPROFILE:
// for developers measuring ppprof itself, docs/performance.md) and
// returns what stops it. An empty path profiles nothing.
func profileFromEnv(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("PPPROF_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("PPPROF_CPUPROFILE %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "ppprof: PPPROF_CPUPROFILE:", err)
		}
	}, nil
}

// writeHeapProfile writes the heap profile (PPPROF_MEMPROFILE: the
// allocations sampled over the whole run, and what is still in use at its
// end) to path. A collection first: the profile is as of the last one, and
// a run that keeps what it builds may not have collected since its read.
func writeHeapProfile(path string) error {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
