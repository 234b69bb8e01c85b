package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/ingest"
)

// TestWarnLimiter: of 12 warnings that differ only in their numbers,
// warnShow are printed and one line counts the other 7; a warning of
// another kind is printed; "P2P" is a word, not a number.
func TestWarnLimiter(t *testing.T) {
	var out bytes.Buffer
	cleared := 0
	l := newWarnLimiter(&out, func() { cleared++ })
	for r := range 12 {
		l.warn(ingest.Warning{Path: fmt.Sprintf("_dump_%d", r), Message: fmt.Sprintf("direction of %d P2P ops inferred", 100+r)})
	}
	l.warn(ingest.Warning{Path: "_dump_3", Message: "no pipeline-parallel group in pg_config: stage 0 assumed"})
	l.flush()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != warnShow+2 {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), warnShow+2, out.String())
	}
	if lines[0] != "ppprof: warning: _dump_0: direction of 100 P2P ops inferred" || !strings.Contains(lines[warnShow], "stage 0 assumed") {
		t.Errorf("printed:\n%s", out.String())
	}
	want := `ppprof: warning: 7 more warnings like "direction of N P2P ops inferred" not shown (12 of this kind in all)`
	if lines[warnShow+1] != want {
		t.Errorf("last line %q, want %q", lines[warnShow+1], want)
	}
	if cleared != warnShow+2 {
		t.Errorf("the progress bar was cleared %d times, want before each of %d lines", cleared, warnShow+2)
	}
	// A second flush prints nothing more.
	n := out.Len()
	l.flush()
	if out.Len() != n {
		t.Errorf("a second flush printed %q", out.String()[n:])
	}
}
