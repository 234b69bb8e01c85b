package hang

import (
	"fmt"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

func TestExplore(t *testing.T) {
	amb := 0
	for _, sched := range []string{"gpipe", "1f1b", "zb-h1", "interleaved"} {
		for _, p := range []int{2, 3, 4} {
			m := 2 * p
			for r := 0; r < p; r++ {
				for mb := 0; mb < m; mb++ {
					f := sim.Fault{Kind: sim.FaultCrash, Rank: r, Step: 0, MicroBatch: mb}
					tr, _ := sim.Run(sim.Config{Schedule: sched, Stages: p, MicroBatches: m, P2PLatencyUs: 100, Faults: []sim.Fault{f}})
					rep, _ := Run(tr, Options{})
					if rep.RootCause.Rank != trace.Rank(r) || len(rep.RootCause.Candidates) > 0 {
						amb++
						fmt.Println(sched, p, f, rep.Verdict, rep.RootCause.Rank, rep.RootCause.Candidates, rep.RootCause.Summary)
					}
				}
			}
		}
	}
	fmt.Println("ambiguous or wrong:", amb)
}
