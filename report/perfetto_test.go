package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

type chromeEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat"`
	Ph   string         `json:"ph"`
	Ts   json.Number    `json:"ts"`
	Dur  json.Number    `json:"dur"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	ID   int            `json:"id"`
	Bp   string         `json:"bp"`
	Args map[string]any `json:"args"`
}

// nsOf parses a µs timestamp with three decimals back to ns, exactly.
func nsOf(t *testing.T, n json.Number) int64 {
	t.Helper()
	s := string(n)
	whole, frac, _ := strings.Cut(s, ".")
	for len(frac) < 3 {
		frac += "0"
	}
	v, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		t.Fatalf("timestamp %q: %v", s, err)
	}
	return v
}

func decodeChrome(t *testing.T, tr *trace.Trace) []chromeEvent {
	t.Helper()
	var buf bytes.Buffer
	if err := WritePerfetto(&buf, tr); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []chromeEvent     `json:"traceEvents"`
		OtherData   map[string]string `json:"otherData"`
	}
	dec := json.NewDecoder(&buf)
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("decoding the Chrome trace: %v", err)
	}
	if doc.OtherData["generator"] != "ppprof" {
		t.Errorf("otherData %v", doc.OtherData)
	}
	return doc.TraceEvents
}

// TestPerfetto checks the Chrome trace of an interleaved job with TP: a
// named process per rank, one slice per op with exact times and its
// labels, slices that nest on every track, and one flow per matched
// send/receive pair, each end inside its op's slice.
func TestPerfetto(t *testing.T) {
	tr, err := sim.Run(sim.Config{Job: "perfetto", Schedule: "interleaved", Stages: 4, MicroBatches: 8, Steps: 2, TP: 2,
		P2PLatencyUs: 40, P2PGbps: 100})
	if err != nil {
		t.Fatal(err)
	}
	evs := decodeChrome(t, tr)
	names := map[int]string{}
	type slice struct{ s, e int64 }
	tracks := map[[2]int][]slice{}
	slices := 0
	var sendArgs map[string]any
	for _, ev := range evs {
		switch ev.Ph {
		case "M":
			if ev.Name == "process_name" {
				names[ev.Pid] = ev.Args["name"].(string)
			}
		case "X":
			slices++
			s, d := nsOf(t, ev.Ts), nsOf(t, ev.Dur)
			tracks[[2]int{ev.Pid, ev.Tid}] = append(tracks[[2]int{ev.Pid, ev.Tid}], slice{s, s + d})
			if strings.HasPrefix(ev.Name, "SEND_F") && sendArgs == nil {
				sendArgs = ev.Args
			}
		}
	}
	ranks := tr.Ranks()
	if len(names) != len(ranks) {
		t.Errorf("%d named processes for %d ranks", len(names), len(ranks))
	}
	if n := names[3]; !strings.Contains(n, "rank 3") || !strings.Contains(n, "stage 1") || !strings.Contains(n, "tp 1") {
		t.Errorf("process 3 is named %q", n)
	}
	if slices != tr.Len() {
		t.Errorf("%d slices for %d ops", slices, tr.Len())
	}
	for _, k := range []string{"step", "microbatch", "chunk", "bytes", "shape", "dtype", "peer", "seq"} {
		if _, ok := sendArgs[k]; !ok {
			t.Errorf("a send's args lack %q: %v", k, sendArgs)
		}
	}
	// Slices nest on every track: sorted by start, none overlaps the next.
	for key, ss := range tracks {
		for i := 1; i < len(ss); i++ {
			if ss[i].s < ss[i-1].e {
				t.Fatalf("track %v: slice [%d, %d) overlaps [%d, %d)", key, ss[i].s, ss[i].e, ss[i-1].s, ss[i-1].e)
			}
		}
	}
	inside := func(pid, tid int, ts int64) bool {
		for _, s := range tracks[[2]int{pid, tid}] {
			if s.s <= ts && ts <= s.e {
				return true
			}
		}
		return false
	}
	starts := map[int]chromeEvent{}
	flows := 0
	for _, ev := range evs {
		switch ev.Ph {
		case "s":
			starts[ev.ID] = ev
			if !inside(ev.Pid, ev.Tid, nsOf(t, ev.Ts)) {
				t.Errorf("flow %d starts outside a slice of (%d, %d)", ev.ID, ev.Pid, ev.Tid)
			}
		case "f":
			flows++
			s, ok := starts[ev.ID]
			if !ok || ev.Bp != "e" {
				t.Fatalf("flow end %d without a start (bp %q)", ev.ID, ev.Bp)
			}
			if !inside(ev.Pid, ev.Tid, nsOf(t, ev.Ts)) {
				t.Errorf("flow %d ends outside a slice of (%d, %d)", ev.ID, ev.Pid, ev.Tid)
			}
			if s.Pid == ev.Pid {
				t.Errorf("flow %d from rank %d to itself", ev.ID, s.Pid)
			}
		}
	}
	if pairs := len(analyze.MatchP2P(tr)); flows != pairs || flows == 0 {
		t.Errorf("%d flows for %d matched pairs", flows, pairs)
	}
	// Exact times: the first op of rank 0.
	for _, ev := range evs {
		if ev.Ph == "X" && ev.Pid == 0 && ev.Tid == tidCompute {
			if got := nsOf(t, ev.Ts); got != tr.StartNs[0] {
				t.Errorf("first compute slice of rank 0 at %d ns, the trace says %d", got, tr.StartNs[0])
			}
			break
		}
	}
}

// TestPerfettoPending draws a hung trace's never-ended ops to the dump time,
// marked.
func TestPerfettoPending(t *testing.T) {
	f, err := sim.ParseFault("skip:rank=1,step=0,mb=1")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, Faults: []sim.Fault{f}})
	if err != nil {
		t.Fatal(err)
	}
	tr.Meta.Job = `"quoted" </script> job`
	pending := 0
	for _, ev := range decodeChrome(t, tr) {
		if ev.Ph == "X" && ev.Args["pending"] == true {
			pending++
			if !strings.HasSuffix(ev.Name, "(pending)") {
				t.Errorf("pending slice named %q", ev.Name)
			}
		}
	}
	want := 0
	for i := range tr.EndNs {
		if tr.EndNs[i] == trace.NoTime && (tr.StartNs[i] != trace.NoTime || tr.IssueNs[i] != trace.NoTime) {
			want++
		}
	}
	if pending != want || want == 0 {
		t.Errorf("%d pending slices, want %d", pending, want)
	}
	if got := fmt.Sprint(usTime(-1500)); got != "-1.500" {
		t.Errorf("usTime(-1500) = %s", got)
	}
}
