package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/partition"
	"github.com/ppprof/ppprof/sim"
)

// whatIfCases are the simulated jobs of the what-if goldens, named by their
// parameters.
var whatIfCases = []struct {
	name string
	c    sim.Config
}{
	{"1f1b-p4-m8-dp2-slowstage3", sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, DP: 2, Hidden: 1024,
		P2PLatencyUs: 20, P2PGbps: 400, OptMs: 0.5, SlowStage: 3, SlowFactor: 1.5}},
	{"1f1b-p4-m8-dp2-slowrank-p1s2", sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, DP: 2, Hidden: 1024,
		P2PLatencyUs: 20, P2PGbps: 400, OptMs: 0.5, SlowRanks: []sim.SlowRank{{Pipeline: 1, Stage: 2, Factor: 1.5}}}},
}

// TestWhatIfGolden: text, Markdown and JSON of the what-if on simulated
// jobs, against testdata/NAME.whatif.{text,markdown,json}.
func TestWhatIfGolden(t *testing.T) {
	for _, tc := range whatIfCases {
		tr, err := sim.Run(tc.c)
		if err != nil {
			t.Fatal(err)
		}
		res, err := analyze.RunWhatIf(tr, analyze.WhatIfOptions{Step: analyze.AllSteps})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []Format{Text, Markdown, JSON} {
			var b bytes.Buffer
			if err := WriteWhatIf(&b, res, f); err != nil {
				t.Fatal(err)
			}
			golden(t, fmt.Sprintf("%s.whatif.%s", tc.name, f), b.Bytes())
		}
		var b bytes.Buffer
		if err := WriteWhatIfHTML(&b, res); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.name+".whatif.html", b.Bytes())
	}
}

// TestWhatIfJSONContract: the keys DESIGN.md fixes, and null for a
// scenario that cannot be predicted.
func TestWhatIfJSONContract(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := analyze.RunWhatIf(tr, analyze.WhatIfOptions{Step: analyze.AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteWhatIf(&b, res, JSON); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema    string                       `json:"schema"`
		StepMs    *float64                     `json:"step_ms"`
		Scenarios []map[string]json.RawMessage `json:"scenarios"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != "ppprof.whatif/v1" || doc.StepMs == nil || *doc.StepMs <= 0 || len(doc.Scenarios) != len(analyze.ScenarioNames) {
		t.Fatalf("doc %s", b.String())
	}
	for i, sc := range doc.Scenarios {
		for _, k := range []string{"name", "step_ms", "speedup", "detail"} {
			if _, ok := sc[k]; !ok {
				t.Errorf("scenario %d lacks %q", i, k)
			}
		}
		if name := strings.Trim(string(sc["name"]), `"`); name != analyze.ScenarioNames[i] {
			t.Errorf("scenario %d is %s, want %s", i, name, analyze.ScenarioNames[i])
		}
		if strings.Trim(string(sc["name"]), `"`) == analyze.ScenarioSlowWorkerFixed && string(sc["step_ms"]) != "null" {
			t.Errorf("slow_worker_fixed on one replica: step_ms %s, want null", sc["step_ms"])
		}
	}
	if err := WriteWhatIf(&b, res, "pdf"); err == nil {
		t.Errorf("format pdf: no error")
	}
}

// TestPartitionGolden: a 12-layer model with embedding and loss on 4
// stages under 1F1B with a memory limit.
func TestPartitionGolden(t *testing.T) {
	in := "layer,fwd_ms,bwd_ms,act_bytes\nembedding,0.5,0.5,0\n"
	for i := range 12 {
		in += fmt.Sprintf("block.%d,%g,%g,%d\n", i, 1+0.1*float64(i%3), 2+0.2*float64(i%3), 64<<20)
	}
	in += "loss,4,2,33554432\n"
	m, err := partition.ReadCSV(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	res, err := partition.Solve(m, partition.Options{Stages: 4, MicroBatches: 8, MemLimitBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []Format{Text, JSON} {
		var b bytes.Buffer
		if err := WritePartition(&b, res, f); err != nil {
			t.Fatal(err)
		}
		golden(t, fmt.Sprintf("l12-p4-m8-1f1b-mem1g.partition.%s", f), b.Bytes())
	}
}
