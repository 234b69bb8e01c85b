package report

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// hangCases are the diagnoses the golden files hold, named after their
// input: the hand-written hang2.csv (no metadata), a simulated skip on a
// DP x TP job, and a clean run.
var hangCases = []struct {
	name string
	load func(t *testing.T) *trace.Trace
}{
	{"hang2", func(t *testing.T) *trace.Trace {
		tr, _, _, err := ingest.ReadFile("../ingest/testdata/hang2.csv")
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}},
	{"1f1b-p4-m8-dp2-tp2-skip-r9-s1-mb5", simulated(sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, DP: 2, TP: 2, Steps: 2,
		Faults: []sim.Fault{{Kind: sim.FaultSkip, Rank: 9, Step: 1, MicroBatch: 5}}})},
	{"gpipe-p2-m4-shape-r0-s0-mb1", simulated(sim.Config{Schedule: "gpipe", Stages: 2, MicroBatches: 4,
		Faults: []sim.Fault{{Kind: sim.FaultShape, Rank: 0, Step: 0, MicroBatch: 1}}})},
	{"zb-h1-p3-m6-clean", simulated(sim.Config{Schedule: "zb-h1", Stages: 3, MicroBatches: 6})},
}

func simulated(c sim.Config) func(t *testing.T) *trace.Trace {
	return func(t *testing.T) *trace.Trace {
		tr, err := sim.Run(c)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
}

func diagnose(t *testing.T, tr *trace.Trace) *hang.Report {
	t.Helper()
	rep, err := hang.Run(tr, hang.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestHangGolden renders each case as text and JSON and compares with
// testdata/NAME.hang.{text,json} (go test ./report -update rewrites them).
func TestHangGolden(t *testing.T) {
	for _, c := range hangCases {
		t.Run(c.name, func(t *testing.T) {
			rep := diagnose(t, c.load(t))
			for _, f := range []Format{Text, JSON} {
				var b bytes.Buffer
				if err := WriteHang(&b, rep, f); err != nil {
					t.Fatal(err)
				}
				golden(t, c.name+".hang."+string(f), b.Bytes())
			}
		})
	}
}

// TestHangJSONContract checks the keys and types DESIGN.md fixes for `hang
// --format json`, on a deadlock (every list filled) and on a clean run
// (empty lists are [], not null).
func TestHangJSONContract(t *testing.T) {
	for _, c := range []int{1, 3} {
		rep := diagnose(t, hangCases[c].load(t))
		var b bytes.Buffer
		if err := WriteHang(&b, rep, JSON); err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
			t.Fatalf("%v\n%s", err, b.String())
		}
		if doc["schema"] != "ppprof.hang/v1" {
			t.Errorf("schema %v", doc["schema"])
		}
		if v, _ := doc["verdict"].(string); !slices.Contains([]string{"ok", "deadlock", "stalled", "mismatch", "incomplete"}, v) {
			t.Errorf("verdict %v", doc["verdict"])
		}
		need := func(obj any, where string, keys ...string) {
			m, ok := obj.(map[string]any)
			if !ok {
				t.Errorf("%s: not an object: %v", where, obj)
				return
			}
			for _, k := range keys {
				if _, ok := m[k]; !ok {
					t.Errorf("%s: no key %q", where, k)
				}
			}
		}
		need(doc["root_cause"], "root_cause", "rank", "summary")
		for _, list := range []string{"blocked", "cycle", "mismatches"} {
			if _, ok := doc[list].([]any); !ok {
				t.Errorf("%s is %T, want a list", list, doc[list])
			}
		}
		for _, x := range doc["blocked"].([]any) {
			need(x, "blocked[]", "rank", "kind", "peer", "step", "microbatch", "seq", "since_ns")
		}
		for _, x := range doc["mismatches"].([]any) {
			need(x, "mismatches[]", "kind", "ranks", "step", "microbatch", "detail")
			if _, ok := x.(map[string]any)["ranks"].([]any); !ok {
				t.Errorf("mismatch ranks not a list: %v", x)
			}
		}
		if c == 1 {
			if doc["verdict"] != "deadlock" || len(doc["cycle"].([]any)) == 0 || len(doc["blocked"].([]any)) == 0 {
				t.Errorf("skip case: verdict %v cycle %v", doc["verdict"], doc["cycle"])
			}
			if rc := doc["root_cause"].(map[string]any); rc["rank"] != float64(9) || !strings.Contains(rc["summary"].(string), "skipped micro-batch 5 of step 1") {
				t.Errorf("root_cause %v", rc)
			}
		}
	}
}

func TestWriteHangFormat(t *testing.T) {
	rep := diagnose(t, hangCases[0].load(t))
	if err := WriteHang(&bytes.Buffer{}, rep, Markdown); err == nil {
		t.Error("markdown accepted")
	}
	var b bytes.Buffer
	if err := WriteHang(&b, rep, ""); err != nil || !strings.HasPrefix(b.String(), "Job: ") {
		t.Errorf("default format: %v %q", err, b.String())
	}
}
