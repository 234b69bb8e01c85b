package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/ppprof/ppprof/ingest"
)

// openTraces reads and merges paths, printing input warnings to stderr
// unless quiet.
func openTraces(paths []string, quiet bool, stderr io.Writer) (*ingest.Result, error) {
	opt := ingest.Options{}
	if !quiet {
		opt.Warn = func(w ingest.Warning) {
			fmt.Fprintf(stderr, "ppprof: warning: %s: %s\n", w.Path, w.Message)
		}
	}
	return ingest.Open(paths, opt)
}

func describePaths(paths []string) string {
	if len(paths) <= 3 {
		return strings.Join(paths, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(paths[:2], ", "), len(paths)-2)
}
