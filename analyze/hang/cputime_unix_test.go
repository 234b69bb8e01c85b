//go:build unix

package hang

import "syscall"

// cpuTime returns the CPU time the process has used so far, in ns, or -1
// when unknown. Benchmarks report it beside wall time: on a shared machine
// it moves less with what else runs.
func cpuTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
