package main

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
)

// setMemoryLimit gives the Go runtime a soft memory limit of 85% of the
// machine's RAM, once, unless GOMEMLIMIT already sets one: a trace that
// nearly fills memory then makes the garbage collector run harder instead
// of letting the heap double past what the machine has (docs/performance.md
// "Memory"). The commands that read traces call it before reading.
var setMemoryLimit = sync.OnceFunc(func() {
	if os.Getenv("GOMEMLIMIT") != "" || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		return
	}
	if total := memTotalBytes(); total > 0 {
		debug.SetMemoryLimit(total / 100 * 85)
	}
})

// memTotalBytes reads MemTotal from /proc/meminfo; 0 when unknown.
func memTotalBytes() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest) // "24576000 kB"
			if len(f) == 0 {
				return 0
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}
