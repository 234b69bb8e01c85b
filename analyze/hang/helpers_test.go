package hang_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

func mustRun(t testing.TB, c sim.Config) *trace.Trace {
	t.Helper()
	tr, err := sim.Run(c)
	if err != nil {
		t.Fatalf("sim.Run: %v", err)
	}
	return tr
}

func run(t testing.TB, tr *trace.Trace, opt hang.Options) *hang.Report {
	t.Helper()
	rep, err := hang.Run(tr, opt)
	if err != nil {
		t.Fatalf("hang.Run: %v", err)
	}
	return rep
}

// dump summarises a report for failure messages.
func dump(rep *hang.Report) string {
	var b strings.Builder
	rc := rep.RootCause
	fmt.Fprintf(&b, "  verdict %s, cycle %v, path %v\n  root rank %d step %d mb %d %s: %s\n", rep.Verdict, rep.Cycle, rep.Path,
		rc.Rank, rc.Step, rc.MicroBatch, rc.Reason, rc.Summary)
	for _, m := range rep.Mismatches {
		fmt.Fprintf(&b, "  - %s %v step %d mb %d: %s\n", m.Kind, m.Ranks, m.Step, m.MicroBatch, m.Detail)
	}
	return b.String()
}
