package hang_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/report"
	"github.com/ppprof/ppprof/trace"
)

// renderJSON is the JSON rendering of rep (everything a user sees), then
// the text one.
func renderJSON(t testing.TB, rep *hang.Report) string {
	t.Helper()
	var b bytes.Buffer
	for _, f := range []report.Format{report.JSON, report.Text} {
		if err := report.WriteHang(&b, rep, f); err != nil {
			t.Fatalf("WriteHang %s: %v", f, err)
		}
	}
	return b.String()
}

// sameEveryRun runs Run on one input n times and fails unless every report
// renders the same: Go randomizes map iteration on every range, so a result
// that depends on it shows up within a few runs.
func sameEveryRun(t *testing.T, name string, tr *trace.Trace, opt hang.Options, n int) {
	t.Helper()
	first := ""
	for i := 0; i < n; i++ {
		rep, err := hang.Run(tr, opt)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := renderJSON(t, rep)
		if i == 0 {
			first = got
			continue
		}
		if got != first {
			t.Fatalf("%s: run %d differs from run 0:\n%s", name, i, lineDiff(first, got))
		}
	}
}

// TestDeterministicRandomCollectives: the same random collective job (with
// group lists and Flight Recorder dumps) gives the same report every run.
func TestDeterministicRandomCollectives(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	cases := 400
	if testing.Short() {
		cases = 100
	}
	for i := 0; i < cases; i++ {
		tr, opt := randomCollectiveTrace(rng)
		sameEveryRun(t, fmt.Sprintf("random case %d", i), tr, opt, 30)
	}
}

// lineDiff shows the lines where a and b differ, with their line numbers.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out strings.Builder
	for i := 0; i < max(len(al), len(bl)); i++ {
		x, y := "", ""
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			fmt.Fprintf(&out, "%d:\n  - %s\n  + %s\n", i+1, x, y)
		}
	}
	return out.String()
}

// TestDeterministicRandomP2P: the same for the random P2P traces.
func TestDeterministicRandomP2P(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	cases := 500
	if testing.Short() {
		cases = 100
	}
	for i := 0; i < cases; i++ {
		tr, opt := hang.RandomP2PTrace(rng)
		// Sparse rank ids up to 65000 make reports of that many ranks:
		// too slow to render 10 times each.
		if tr.Len() == 0 || slices.Max(tr.Rank) > 100 {
			continue
		}
		sameEveryRun(t, fmt.Sprintf("random P2P case %d", i), tr, opt, 10)
	}
}

// TestProgressKeysSameGroup: rank 1's dump has two progress keys whose
// counters both match group dp (the last number of its rows there, #4),
// and the keys are neither group names nor creation-order ids, so each
// dump's evidence is used alone. Which key is rank 1's dp decides whether
// it completed #3, which rank 0 waits in: the verdict used to follow map
// order. Now a key that is the group's name wins; when none is, neither
// key is used, and rank 1 went on to #4, so it completed #3.
func TestProgressKeysSameGroup(t *testing.T) {
	tr := build(trace.Meta{Schema: 1, WorldSize: 2},
		collOp(0, 0, trace.AllReduce, "dp", 3, 64, 1, none, none),
		collOp(1, 0, trace.AllReduce, "dp", 4, 64, 1, 1, 2),
	)
	groups := map[string]hang.Group{"dp": {Ranks: ranks(0, 1)}}
	done, behind := hang.GroupProgress{LastEnqueued: 4, LastStarted: -1, LastCompleted: 4}, hang.GroupProgress{LastEnqueued: 4, LastStarted: -1, LastCompleted: 2}
	for _, c := range []struct {
		name      string
		keys      map[string]hang.GroupProgress
		completed bool // rank 1 completed #3
		note      string
	}{
		{"neither key is the name", map[string]hang.GroupProgress{"7": behind, "8": done}, true, "match the same group"},
		{"neither key is the name, swapped", map[string]hang.GroupProgress{"7": done, "8": behind}, true, "match the same group"},
		{"the name wins (completed)", map[string]hang.GroupProgress{"dp": done, "7": behind}, true, ""},
		{"the name wins (pending)", map[string]hang.GroupProgress{"dp": behind, "7": done}, false, ""},
	} {
		opt := hang.Options{Groups: groups, Dumps: map[trace.Rank]hang.Dump{
			0: {Entries: 1, Progress: map[string]hang.GroupProgress{"dp": {LastEnqueued: 3, LastStarted: -1, LastCompleted: 2}}},
			1: {Entries: 1, Progress: c.keys},
		}}
		sameEveryRun(t, c.name, tr, opt, 30)
		rep := run(t, tr, opt)
		if len(rep.Collectives) != 1 {
			t.Fatalf("%s: collectives %+v", c.name, rep.Collectives)
		}
		col := rep.Collectives[0]
		gotDone := slices.Equal(col.Completed, ranks(1))
		if gotDone != c.completed || !slices.Equal(col.Pending, ranks(0)) && !slices.Equal(col.Pending, ranks(0, 1)) {
			t.Errorf("%s: #3 completed %v pending %v; want rank 1 completed %v", c.name, col.Completed, col.Pending, c.completed)
		}
		want := "stuck_in_collective" // completed elsewhere: rank 0 stopped itself
		if !c.completed {
			want = "collective_hang" // every member posted it
		}
		if rep.RootCause.Reason != want {
			t.Errorf("%s: root %+v, want %s\n%s", c.name, rep.RootCause, want, dump(rep))
		}
		if notes := strings.Join(rep.Notes, "\n"); c.note != "" && !strings.Contains(notes, c.note) {
			t.Errorf("%s: notes %q lack %q", c.name, rep.Notes, c.note)
		}
	}
}

// TestMissingCollectivesOrder: two groups each have a pending collective a
// member never posted, at the same step and time: the report lists them by
// group name, every run.
func TestMissingCollectivesOrder(t *testing.T) {
	var evs []trace.Event
	names := []string{"g0", "g1", "g2", "g3", "g4", "g5"}
	groups := map[string]hang.Group{}
	for i, g := range names {
		evs = append(evs, collOp(trace.Rank(i), 0, trace.AllReduce, g, 1, 64, 1, none, none))
		groups[g] = hang.Group{Ranks: ranks(trace.Rank(i), 6)}
	}
	evs = append(evs, op(6, 0, trace.F, 0, -1, 0, 0, none))
	tr := build(trace.Meta{Schema: 1, WorldSize: 7}, evs...)
	opt := hang.Options{Groups: groups, Dumps: map[trace.Rank]hang.Dump{6: {Entries: 1}}}
	sameEveryRun(t, "six groups", tr, opt, 30)
	rep := run(t, tr, opt)
	var got []string
	for _, m := range rep.Mismatches {
		if m.Kind == hang.MissingCollective {
			got = append(got, m.Collective.Group)
		}
	}
	if !slices.Equal(got, names) {
		t.Errorf("missing_collective groups %v, want %v", got, names)
	}
}

// TestDeterministicFlightRecorder: the real Flight Recorder dumps of
// ../shared/data (when present) and ingest's samples give the same report
// every run.
func TestDeterministicFlightRecorder(t *testing.T) {
	dirs, _ := filepath.Glob("../../../shared/data/flight_recorder/*")
	dirs = append(dirs, "../../ingest/testdata/fr/proto2", "../../ingest/testdata/fr/proto4")
	ran := 0
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		res, err := ingest.Open([]string{dir}, ingest.Options{})
		if err != nil {
			t.Logf("%s: %v", dir, err)
			continue
		}
		opt := hang.Options{}
		if c := res.Comms; c != nil {
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
		}
		sameEveryRun(t, dir, res.Trace, opt, 30)
		ran++
		if rep, err := hang.Run(res.Trace, opt); err == nil {
			t.Logf("%s: %d ranks, %d dumps: %s %s", dir, len(rep.Ranks), len(opt.Dumps), rep.Verdict, rep.RootCause.Reason)
		}
	}
	if ran == 0 {
		t.Skip("no Flight Recorder samples")
	}
}

// FuzzCollectiveDumps draws a random collective job from seed, rewrites its
// dumps' progress with muts (three bytes each: rank, key, counter), and
// checks that Run does not fail, keeps the invariants, and gives the same
// report on every run.
func FuzzCollectiveDumps(f *testing.F) {
	f.Add(int64(1), []byte{})
	f.Add(int64(2), []byte{0, 1, 2, 1, 1, 2})
	f.Add(int64(3), []byte{0, 0, 3, 0, 1, 3, 0, 2, 3, 1, 7, 0})
	keys := []string{"0", "1", "2", "3", "7", "01", "tp", "x"}
	f.Fuzz(func(t *testing.T, seed int64, muts []byte) {
		tr, opt := randomCollectiveTrace(rand.New(rand.NewSource(seed)))
		if len(muts) > 0 && opt.Dumps == nil {
			opt.Dumps = map[trace.Rank]hang.Dump{}
		}
		for ; len(muts) >= 3; muts = muts[3:] {
			r := trace.Rank(muts[0] % 8)
			d := opt.Dumps[r]
			if d.Progress == nil {
				d.Progress = map[string]hang.GroupProgress{}
			}
			v := int64(muts[2]%6) - 1
			d.Progress[keys[muts[1]%8]] = hang.GroupProgress{LastEnqueued: v, LastStarted: -1, LastCompleted: v - int64(muts[1]>>3%3)}
			d.Entries = max(d.Entries, int(muts[2]>>4))
			opt.Dumps[r] = d
		}
		rep, err := hang.Run(tr, opt)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if s := invariants(tr, rep); s != "" {
			t.Fatalf("%s\n%s", s, dump(rep))
		}
		if s := collectiveInvariants(rep); s != "" {
			t.Fatalf("%s\n%s", s, dump(rep))
		}
		sameEveryRun(t, "fuzz", tr, opt, 5)
	})
}
