package report

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// pqFile is one Parquet file read back column by column.
type pqFile struct {
	names []string
	i32   map[string][]int32
	i64   map[string][]int64 // nullable columns: only the non-null values
	defs  map[string][]int16 // definition levels of nullable columns
	str   map[string][]string
	f64   map[string][]float64
	meta  map[string]string
	rows  int
}

func readPQ(t *testing.T, path string) *pqFile {
	t.Helper()
	r, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	defer r.Close()
	out := &pqFile{i32: map[string][]int32{}, i64: map[string][]int64{}, defs: map[string][]int16{}, str: map[string][]string{}, f64: map[string][]float64{},
		meta: map[string]string{}, rows: int(r.NumRows())}
	for _, kv := range r.MetaData().KeyValueMetadata() {
		v := ""
		if kv.Value != nil {
			v = *kv.Value
		}
		out.meta[kv.Key] = v
	}
	sc := r.MetaData().Schema
	n := out.rows
	for g := 0; g < r.NumRowGroups(); g++ {
		rg := r.RowGroup(g)
		for c := 0; c < sc.NumColumns(); c++ {
			name := sc.Column(c).Name()
			if g == 0 {
				out.names = append(out.names, name)
			}
			cr, err := rg.Column(c)
			if err != nil {
				t.Fatal(err)
			}
			def := make([]int16, n)
			switch cr := cr.(type) {
			case *file.Int32ColumnChunkReader:
				v := make([]int32, n)
				_, k, err := cr.ReadBatch(int64(n), v, def, nil)
				if err != nil {
					t.Fatal(err)
				}
				out.i32[name] = v[:k]
			case *file.Int64ColumnChunkReader:
				v := make([]int64, n)
				_, k, err := cr.ReadBatch(int64(n), v, def, nil)
				if err != nil {
					t.Fatal(err)
				}
				out.i64[name], out.defs[name] = v[:k], def
			case *file.Float64ColumnChunkReader:
				v := make([]float64, n)
				_, k, err := cr.ReadBatch(int64(n), v, def, nil)
				if err != nil {
					t.Fatal(err)
				}
				out.f64[name] = v[:k]
			case *file.ByteArrayColumnChunkReader:
				v := make([]parquet.ByteArray, n)
				_, k, err := cr.ReadBatch(int64(n), v, def, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range v[:k] {
					out.str[name] = append(out.str[name], string(b))
				}
			}
		}
	}
	return out
}

// TestParquetPartitions writes a hung job's trace and reads every file
// back: one per (step, rank) under step=S/rank=R, the event model's columns
// without the partition columns, nulls where times are null, the job's
// metadata in each file.
func TestParquetPartitions(t *testing.T) {
	f, err := sim.ParseFault("crash:rank=2,step=1,mb=5")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := sim.Run(sim.Config{Job: "pq <job>", Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2, TP: 1,
		P2PLatencyUs: 10, Faults: []sim.Fault{f}})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "events")
	if err := WriteParquet(dir, tr); err != nil {
		t.Fatal(err)
	}
	parts, err := filepath.Glob(filepath.Join(dir, "step=*", "rank=*", "part-0.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	// Expected rows per partition, from the columns.
	want := map[string]int{}
	nulls := map[string]int{}
	for i := 0; i < tr.Len(); i++ {
		key := fmt.Sprintf("step=%d/rank=%d", tr.Step[i], tr.Rank[i])
		want[key]++
		if tr.EndNs[i] == trace.NoTime {
			nulls[key]++
		}
	}
	if len(parts) != len(want) {
		t.Fatalf("%d files, want %d (one per step and rank)", len(parts), len(want))
	}
	total, totalNulls := 0, 0
	for _, p := range parts {
		rel, _ := filepath.Rel(dir, filepath.Dir(p))
		key := filepath.ToSlash(rel)
		pf := readPQ(t, p)
		if pf.rows != want[key] {
			t.Errorf("%s: %d rows, want %d", key, pf.rows, want[key])
		}
		total += pf.rows
		var cols []string
		cols = append(cols, pf.names...)
		wantCols := []string{"job", "pipeline", "stage", "tp_rank", "chunk", "microbatch", "kind", "seq", "issue_ns",
			"start_ns", "end_ns", "duration_ns", "peer", "bytes", "shape", "dtype", "tokens", "flops", "mem_bytes"}
		if strings.Join(cols, ",") != strings.Join(wantCols, ",") {
			t.Fatalf("%s: columns %v", key, cols)
		}
		// seq increases; kinds and jobs are the trace's.
		seq := pf.i64["seq"]
		if !sort.SliceIsSorted(seq, func(a, b int) bool { return seq[a] < seq[b] }) {
			t.Errorf("%s: seq not increasing", key)
		}
		if pf.str["job"][0] != "pq <job>" || pf.meta["job"] != "pq <job>" || pf.meta["ppprof.parquet"] != ParquetSchemaVersion || pf.meta["schedule"] != "1f1b" {
			t.Errorf("%s: job %q, metadata %v", key, pf.str["job"][0], pf.meta)
		}
		n := 0
		for _, d := range pf.defs["end_ns"] {
			if d == 0 {
				n++
			}
		}
		if n != nulls[key] || len(pf.i64["end_ns"]) != pf.rows-n {
			t.Errorf("%s: %d null end_ns (%d values), want %d", key, n, len(pf.i64["end_ns"]), nulls[key])
		}
		totalNulls += n
	}
	if total != tr.Len() || totalNulls == 0 {
		t.Errorf("%d rows in all, %d null ends; the trace has %d rows", total, totalNulls, tr.Len())
	}
	// Exact values: rank 0's first row.
	pf := readPQ(t, filepath.Join(dir, "step=0", "rank=0", "part-0.parquet"))
	if pf.i64["start_ns"][0] != tr.StartNs[0] || pf.str["kind"][0] != tr.Kind[0].String() || pf.i32["microbatch"][0] != int32(tr.MicroBatch[0]) ||
		pf.i64["duration_ns"][0] != tr.EndNs[0]-tr.StartNs[0] {
		t.Errorf("rank 0's first row: start %d kind %s mb %d; trace %+v", pf.i64["start_ns"][0], pf.str["kind"][0], pf.i32["microbatch"][0], tr.At(0))
	}
	// A second export into the same directory is refused.
	if err := WriteParquet(dir, tr); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("export into a non-empty directory: %v", err)
	}
}
