// Package freshmem measures what memory costs a process the first time it
// touches it: on the virtual machines ppprof is measured on, that price,
// not the work, sets many of its figures (docs/performance.md, "Memory is
// time here"). bench/faultcost prints it step by step; internal/benchtable
// puts it in the table beside the figures it explains.
package freshmem

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// PageSize is the stride Touch writes at: one byte a 4 KiB page.
const PageSize = 4096

// Touched is anonymous memory mapped and touched by Touch.
type Touched struct {
	B    []byte        // the mapping, every page written once
	Took time.Duration // the time the touching took (the faults)
}

// Reporting describes the kernel's free page reporting (a balloon device
// handing the memory the guest frees back to its host, whose next first
// touch is then a fresh page again), from
// /sys/module/page_reporting/parameters: "" when the kernel has none,
// else its parameters, e.g. "min_free_ms=0 page_reporting_order=9".
func Reporting() string {
	return reportingIn("/sys/module/page_reporting/parameters")
}

func reportingIn(dir string) string {
	var out []string
	for _, name := range []string{"min_free_ms", "page_reporting_order"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		out = append(out, name+"="+strings.TrimSpace(string(b)))
	}
	return strings.Join(out, " ")
}
