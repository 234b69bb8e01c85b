package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/ingest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./report -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./report -update rewrites it):\n%s", name, lineDiff(string(want), string(got)))
	}
}

// lineDiff shows the lines that differ, want (-) then got (+).
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, c string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			c = g[i]
		}
		if a != c {
			b.WriteString("-" + a + "\n+" + c + "\n")
		}
	}
	return b.String()
}

func handReport(t *testing.T) *analyze.Report {
	t.Helper()
	tr, _, _, err := ingest.ReadFile("../ingest/testdata/gpipe2.csv")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := analyze.Run(tr, analyze.Options{Step: analyze.AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestGolden renders the hand-worked 2-stage GPipe trace (numbers in
// ingest/testdata/README.md) in every format.
func TestGolden(t *testing.T) {
	rep := handReport(t)
	for _, f := range []Format{Text, Markdown, JSON} {
		var buf bytes.Buffer
		if err := Write(&buf, rep, f); err != nil {
			t.Fatal(err)
		}
		golden(t, "gpipe2.analyze."+string(f), buf.Bytes())
	}
}

// TestJSONContract checks the keys DESIGN.md promises and the hand-worked
// numbers of the 2-stage GPipe trace.
func TestJSONContract(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, handReport(t), JSON); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schema", "job", "step_ms", "utilization", "bubble", "stages", "p2p", "findings"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("key %q missing", k)
		}
	}
	job := doc["job"].(map[string]any)
	for _, k := range []string{"world_size", "pp", "virtual", "microbatches", "steps", "schedule", "events"} {
		if _, ok := job[k]; !ok {
			t.Errorf("job.%s missing", k)
		}
	}
	u := doc["utilization"].(map[string]any)
	if u["compute"] != nil || u["mfu"] != nil {
		t.Errorf("compute and mfu must be null without FLOPs: %v %v", u["compute"], u["mfu"])
	}
	b := doc["bubble"].(map[string]any)
	if m := b["measured"].(float64); m < 1.0/3-1e-12 || m > 1.0/3+1e-12 {
		t.Errorf("bubble.measured %v, want 1/3", m)
	}
	st := doc["stages"].([]any)[0].(map[string]any)
	for _, k := range []string{"stage", "rank", "fwd_ms", "bwd_ms", "busy_ms", "idle_ms", "bubble", "peak_live_microbatches"} {
		if _, ok := st[k]; !ok {
			t.Errorf("stages[0].%s missing", k)
		}
	}
	if st["busy_ms"].(float64) != 6 || st["fwd_ms"].(float64) != 1 {
		t.Errorf("stage 0 busy %v fwd %v, want 6 and 1", st["busy_ms"], st["fwd_ms"])
	}
	p2p := doc["p2p"].(map[string]any)
	if _, ok := p2p["bytes_per_step"]; !ok {
		t.Error("p2p.bytes_per_step missing")
	}
	if p2p["bytes_per_step"].(float64) != 4*8192 {
		t.Errorf("p2p.bytes_per_step %v, want 4 sends of 8192 B", p2p["bytes_per_step"])
	}
}
