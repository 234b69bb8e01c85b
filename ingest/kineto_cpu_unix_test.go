//go:build unix

package ingest

import "syscall"

// benchCPUSeconds is the CPU time (user and system, all threads) this
// process has used so far, or 0 when unknown.
func benchCPUSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
