//go:build linux

// Command faultcost measures what fresh memory costs this host: it maps
// anonymous memory 128 MiB at a time, touches every page, keeps it, and
// prints the time and kernel time of each step, up to -gb GiB in all
// (with -huge, each mapping asks for transparent huge pages first).
//
//	go run ./bench/faultcost -gb 12
//
// On the 2-core VM of docs/performance.md a 4 KiB page faulted in cost
// about 1.5 µs for the first 5-6 GiB a process touched and 15-22 µs
// (3.7-5.7 s a GiB) beyond, with huge pages as without: the host, not the
// guest's page faults, sets the price of the memory past what it has at
// hand (docs/performance-history.md, "Before and after the eighteenth
// session"). On the AMD EPYC VM of the nineteenth session a small page
// cost about 11 µs from the first (3 s a GiB), and a huge one 0.06-0.08 s
// a GiB for the first 2-6 GiB: why ppprof asks for huge pages
// (internal/hugepage). Twentieth session, the same host: with -huge, the
// first 1-2 GiB at 0.07 s a GiB, then 2.2-2.7 s a GiB; run again at once,
// 0.07 s a GiB for all 8 GiB. Memory the guest freed moments before is
// still backed by the host; memory it has not used lately is not, and the
// host's backing is the price. Twenty-sixth session: the host is a
// Firecracker VM whose kernel reports the memory the guest frees to the
// host at once (free page reporting, /sys/module/page_reporting:
// min_free_ms 0), 3.5-4.0 s a GiB in small pages and 2.2-4.6 in huge ones
// that afternoon. internal/benchtable measures the same (its "fresh"
// section) beside the figures it explains.
package main

import (
	"flag"
	"fmt"
	"os"
	"syscall"

	"github.com/ppprof/ppprof/internal/freshmem"
)

func main() {
	gb := flag.Int("gb", 8, "GiB to touch in all")
	huge := flag.Bool("huge", false, "madvise(MADV_HUGEPAGE) each mapping")
	flag.Parse()
	const step = 128 << 20
	var keep []freshmem.Touched
	for i := 0; i < *gb*8; i++ {
		s0, f0 := usage()
		m, err := freshmem.Touch(step, *huge)
		if err != nil {
			fmt.Fprintln(os.Stderr, "faultcost:", err)
			os.Exit(1)
		}
		keep = append(keep, m)
		s1, f1 := usage()
		wall := m.Took
		fmt.Printf("%6.2f GiB touched: 128 MiB in %7.1f ms (kernel %7.1f ms, %6d faults), %5.2f s/GiB\n",
			float64(i+1)/8, wall.Seconds()*1e3, float64(s1-s0)/1e6, f1-f0, wall.Seconds()*8)
	}
}

// usage returns the process's kernel time (ns) and minor faults so far.
func usage() (int64, int64) {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0, 0
	}
	return r.Stime.Nano(), r.Minflt
}
