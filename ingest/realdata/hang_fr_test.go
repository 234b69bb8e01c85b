package realdata_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/trace"
)

// faultLog is what a sample's fault_injection.log says: the ranks where
// the fault was injected and the fault type of each.
type faultLog struct {
	ranks []trace.Rank
	types map[trace.Rank]string
}

var (
	faultRanksRe = regexp.MustCompile(`(?m)^Fault ranks:\s*\[([0-9,\s]*)\]`)
	faultTypeRe  = regexp.MustCompile(`(?m)^Rank (\d+), fault_type: (\w+)`)
)

func readFaultLog(t *testing.T, dir string) faultLog {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "fault_injection.log"))
	if err != nil {
		t.Fatal(err)
	}
	m := faultRanksRe.FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s/fault_injection.log: no 'Fault ranks: [...]' line", dir)
	}
	out := faultLog{types: map[trace.Rank]string{}}
	for _, f := range strings.Split(string(m[1]), ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("fault ranks %q: %v", m[1], err)
		}
		out.ranks = append(out.ranks, trace.Rank(r))
	}
	for _, m := range faultTypeRe.FindAllSubmatch(b, -1) {
		r, _ := strconv.Atoi(string(m[1]))
		out.types[trace.Rank(r)] = string(m[2])
	}
	slices.Sort(out.ranks)
	return out
}

// hangOptions passes ingest's communicator information to the analysis,
// as the CLI does (cmd/ppprof/hang.go).
func hangOptions(c *ingest.Comms) hang.Options {
	var opt hang.Options
	if c == nil {
		return opt
	}
	opt.Groups = map[string]hang.Group{}
	for name, g := range c.Groups {
		opt.Groups[name] = hang.Group{Desc: g.Desc, Ranks: g.Ranks}
	}
	opt.Dumps = map[trace.Rank]hang.Dump{}
	for r, f := range c.FlightRecorder {
		d := hang.Dump{Path: f.Path, Entries: f.Entries, Progress: map[string]hang.GroupProgress{}}
		for k, st := range f.PGStatus {
			d.Progress[k] = hang.GroupProgress{LastEnqueued: st.LastEnqueued, LastStarted: st.LastStarted, LastCompleted: st.LastCompleted}
		}
		opt.Dumps[r] = d
	}
	return opt
}

// TestFlightRecorderHangRootCause diagnoses the two hung Megatron MoE jobs
// of ../shared/data/flight_recorder and checks that the root cause names
// exactly the ranks where fault_injection.log says the fault was injected.
//
// What the dumps show (they hold only the work in flight, all "scheduled":
// the job ran without NCCL timing, so no start was discovered):
//
//   - gpu_error_1st (PP 4 x TP 2 x EP 4 x DP 2; stage 3 is ranks 12-15).
//     Ranks 13 and 15 went on to all-to-all #20537 of their expert group
//     (74: ranks 12-15), so they completed #20530-#20536, which ranks 12
//     and 14 still show pending, as they do the tensor-parallel all-gather
//     #42806 their partners 13 and 15 completed. A collective that other
//     members completed is over for the group: ranks 12 and 14 stopped
//     making progress themselves (their GPUs failed). Rank 12 also never
//     posted #20537, which 13, 14 and 15 wait in (rank 14 posted it but is
//     stuck before it). Stage 2 waits in receives from stage 3, stage 1
//     from stage 2, stage 0 from stage 3 (interleaved chunks wrap around):
//     every chain ends at rank 12 or 14.
//   - lock_gil_1st (PP 2 x TP 4 x EP 8; stage 1 is ranks 8-15). The dumps
//     of ranks 9 and 14 hold nothing in flight: their pg_status says every
//     collective they enqueued completed, and they never enqueued
//     all-to-all #45265 of their expert group (72: ranks 8-15), which the
//     six others wait in (nor the TP reduce-scatter #88684 and all-reduce
//     #15118 their groups wait in). Their host threads stopped issuing
//     work while holding the GIL; stage 0 waits in receives from stage 1.
//
// The root cause's reason follows the fault type: a GPU error leaves work
// pending that the rank's peers completed (stuck_in_collective); a held
// GIL leaves a rank with nothing in flight that never joins (never_joined).
func TestFlightRecorderHangRootCause(t *testing.T) {
	need(t)
	reasons := map[string]string{"GPU_ERROR": "stuck_in_collective", "LOCK_GIL": "never_joined"}
	for _, name := range []string{"gpu_error_1st", "lock_gil_1st"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(data, "flight_recorder", name)
			want := readFaultLog(t, dir)
			res, err := ingest.Open([]string{dir}, ingest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := hang.Run(res.Trace, hangOptions(res.Comms))
			if err != nil {
				t.Fatal(err)
			}
			rc := rep.RootCause
			got := slices.Clone(rc.Candidates)
			if !slices.Contains(got, rc.Rank) {
				got = append(got, rc.Rank)
			}
			slices.Sort(got)
			if rep.Verdict != hang.VerdictStalled || !slices.Contains(want.ranks, rc.Rank) || !slices.Equal(got, want.ranks) {
				t.Fatalf("verdict %s, root rank %d, candidates %v; want stalled naming ranks %v\n%s", rep.Verdict, rc.Rank, rc.Candidates, want.ranks, rc.Summary)
			}
			if r := reasons[want.types[rc.Rank]]; r == "" || rc.Reason != r {
				t.Errorf("reason %q for fault type %q, want %q", rc.Reason, want.types[rc.Rank], r)
			}
			var names []string
			for _, r := range want.ranks {
				names = append(names, strconv.Itoa(int(r)))
			}
			if s := "ranks " + strings.Join(names, ", "); !strings.Contains(rc.Summary, s) {
				t.Errorf("root cause does not name %s: %s", s, rc.Summary)
			}
			// The sentence names the collective, its group and its number.
			if !regexp.MustCompile(`(ALL_TO_ALL|ALL_GATHER|ALL_REDUCE|REDUCE_SCATTER) #\d+ of group \d+ \(\w+\)`).MatchString(rc.Summary) {
				t.Errorf("root cause names no collective: %s", rc.Summary)
			}
			// Each faulty rank shows in the collectives: it never posted
			// one others wait in, or shows pending one others completed.
			for _, r := range want.ranks {
				found := false
				for _, c := range rep.Collectives {
					found = found || slices.Contains(c.Missing, r) ||
						slices.Contains(c.Pending, r) && len(c.Completed) > 0
				}
				if !found {
					t.Errorf("rank %d is in no collective's missing list, nor pending in one others completed", r)
				}
			}
			// And no healthy rank is waited for at the end of a chain.
			for _, rs := range rep.Ranks {
				if rs.Terminal != "" && rs.State != hang.StateRecv && !slices.Contains(want.ranks, rs.Rank) {
					t.Errorf("healthy rank %d is terminal (%s, %s)", rs.Rank, rs.State, rs.Terminal)
				}
			}
		})
	}
}
