//go:build duckdb

package duckdbtest

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/report"
	"github.com/ppprof/ppprof/sim"
)

// sqlRow is one row of docs/sql/busy_bubble.sql (64-bit integers come as
// strings).
type sqlRow struct {
	Step          string   `json:"step"`
	Pipeline      int      `json:"pipeline"`
	Stage         int      `json:"stage"`
	BusyNs        string   `json:"busy_ns"`
	StartNs       *string  `json:"start_ns"`
	EndNs         *string  `json:"end_ns"`
	Complete      bool     `json:"complete"`
	Bubble        *float64 `json:"bubble"`
	OverallBubble *float64 `json:"overall_bubble"`
}

// query runs docs/sql/busy_bubble.sql on the Parquet export in dir, after
// the statements before.
func query(t *testing.T, dir string, before ...string) []sqlRow {
	t.Helper()
	mods := os.Getenv("PPPROF_DUCKDB_DIR")
	if mods == "" {
		t.Skip("PPPROF_DUCKDB_DIR not set (npm install --prefix DIR @duckdb/node-api)")
	}
	// Node resolves an ES module's imports from the script's directory:
	// run a copy of query.mjs from beside node_modules.
	script, err := os.ReadFile("query.mjs")
	if err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(mods, "ppprof-query.mjs")
	if err := os.WriteFile(run, script, 0o644); err != nil {
		t.Fatal(err)
	}
	sql, err := filepath.Abs("../../docs/sql/busy_bubble.sql")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("node", append([]string{run, dir, sql}, before...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("node: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("node: %v", err)
	}
	var rows []sqlRow
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return rows
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestBusyBubbleSQL exports simulated traces to Parquet, runs the SQL with
// DuckDB and compares every window's per-stage busy time, span,
// completeness and bubble, and the overall bubble, with analyze.Run.
func TestBusyBubbleSQL(t *testing.T) {
	hung := sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 3, DP: 2,
		Faults: []sim.Fault{{Kind: sim.FaultSkip, Rank: 2, Step: 2, MicroBatch: 3}}}
	for name, c := range map[string]sim.Config{
		"1f1b-jitter": {Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 3, DP: 2, TP: 2, Jitter: 0.2, P2PLatencyUs: 20, P2PGbps: 100, OptMs: 1, Seed: 3},
		"interleaved": {Schedule: "interleaved", Stages: 4, MicroBatches: 8, Steps: 2, DP: 2, TP: 2, Jitter: 0.1, P2PLatencyUs: 5, Seed: 4},
		"zb-h1":       {Schedule: "zb-h1", Stages: 3, MicroBatches: 6, Steps: 2, Jitter: 0.1, Seed: 5},
		"hung":        hung,
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := sim.Run(c)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "pq")
			if err := report.WriteParquet(dir, tr); err != nil {
				t.Fatal(err)
			}
			rep, err := analyze.Run(tr, analyze.Options{Step: analyze.AllSteps})
			if err != nil {
				t.Fatal(err)
			}
			rows := query(t, dir)
			compare(t, rep, rows)
		})
	}
}

// TestBusyBubbleSQLSteps: with ppprof_first_step and ppprof_last_step set,
// or ppprof_dir naming one step's directory (a fleet job's export is
// queried a few steps at a time), the SQL gives the windows of those steps
// only, and the overall bubble over them: what analyze says of the
// trace's rows of those steps.
func TestBusyBubbleSQLSteps(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 4, DP: 2, TP: 2, Jitter: 0.2,
		P2PLatencyUs: 20, P2PGbps: 100, OptMs: 1, Seed: 6})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "pq")
	if err := report.WriteParquet(dir, tr); err != nil {
		t.Fatal(err)
	}
	// The by-step layout (export --parquet-partition step) reads the same.
	byStep := filepath.Join(t.TempDir(), "by-step")
	w, err := report.NewParquetWriter(byStep, report.ByStep)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(tr); err != nil {
		t.Fatal(err)
	}
	whole, err := analyze.Run(tr, analyze.Options{Step: analyze.AllSteps})
	if err != nil {
		t.Fatal(err)
	}
	compare(t, whole, query(t, byStep))
	for _, r := range [][2]int64{{1, 2}, {3, 3}} {
		var rows []int
		for i := range tr.Len() {
			if tr.Step[i] >= r[0] && tr.Step[i] <= r[1] {
				rows = append(rows, i)
			}
		}
		rep, err := analyze.Run(tr.Permute(rows), analyze.Options{Step: analyze.AllSteps})
		if err != nil {
			t.Fatal(err)
		}
		got := query(t, dir, fmt.Sprintf("SET VARIABLE ppprof_first_step = %d", r[0]), fmt.Sprintf("SET VARIABLE ppprof_last_step = %d", r[1]))
		if len(got) != int(r[1]-r[0]+1)*2*4 {
			t.Errorf("steps %d-%d: %d rows, want %d (steps x 2 pipelines x 4 stages)", r[0], r[1], len(got), (r[1]-r[0]+1)*2*4)
		}
		compare(t, rep, got)
		if r[0] == r[1] {
			got := query(t, filepath.Join(dir, fmt.Sprintf("step=%d", r[0])))
			if len(got) != 2*4 {
				t.Errorf("DIR/step=%d: %d rows, want 8 (2 pipelines x 4 stages)", r[0], len(got))
			}
			compare(t, rep, got)
		}
	}
}

// compare checks the SQL's rows against the report.
func compare(t *testing.T, rep *analyze.Report, rows []sqlRow) {
	t.Helper()
	type key struct {
		step int64
		pipe int32
	}
	wins := map[key]analyze.StepWindow{}
	for _, w := range rep.Steps {
		wins[key{w.Step, w.Pipeline}] = w
	}
	seen := map[key]bool{}
	for _, r := range rows {
		k := key{atoi(t, r.Step), int32(r.Pipeline)}
		w, ok := wins[k]
		if !ok {
			t.Fatalf("SQL has window %+v, analyze does not", k)
		}
		seen[k] = true
		if r.Stage >= len(w.BusyNs) || atoi(t, r.BusyNs) != w.BusyNs[r.Stage] {
			t.Errorf("window %+v stage %d: SQL busy %s ns, analyze %v", k, r.Stage, r.BusyNs, w.BusyNs)
		}
		if r.Complete != w.Complete {
			t.Errorf("window %+v: SQL complete %v, analyze %v", k, r.Complete, w.Complete)
		}
		if !w.Complete {
			continue
		}
		if atoi(t, *r.StartNs) != w.StartNs || atoi(t, *r.EndNs) != w.EndNs {
			t.Errorf("window %+v: SQL %s-%s, analyze %d-%d", k, *r.StartNs, *r.EndNs, w.StartNs, w.EndNs)
		}
		if r.Bubble == nil || !near(*r.Bubble, w.Bubble) {
			t.Errorf("window %+v: SQL bubble %v, analyze %v", k, r.Bubble, w.Bubble)
		}
		if r.OverallBubble == nil || !near(*r.OverallBubble, rep.Utilization.Bubble) {
			t.Errorf("SQL overall bubble %v, analyze %v", r.OverallBubble, rep.Utilization.Bubble)
		}
	}
	for k := range wins {
		if !seen[k] {
			t.Errorf("analyze has window %+v, SQL does not", k)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }
