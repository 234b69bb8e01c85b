package report

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/ppprof/ppprof/internal/cleanup"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// TestParquetPartial: an export leaves only complete .parquet files (no
// file under its temporary name), a file being written is not under its
// name (a query of the directory would fail on a file with no footer), a
// file whose write fails leaves nothing, and the files being written are
// listed for a signal's cleanup (internal/cleanup).
func TestParquetPartial(t *testing.T) {
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 4, Steps: 2})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	if err := WriteParquet(dir, tr); err != nil {
		t.Fatal(err)
	}
	files := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
			if strings.HasPrefix(d.Name(), ".") || !strings.HasSuffix(d.Name(), ".parquet") {
				t.Errorf("left %s", p)
			}
		}
		return nil
	})
	if files == 0 {
		t.Fatal("no file written")
	}

	// The final name is a directory with a file in it: the rename fails.
	bad := filepath.Join(t.TempDir(), "x.parquet")
	if err := os.MkdirAll(filepath.Join(bad, "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := NewParquetWriter(filepath.Join(t.TempDir(), "w"), ByStepRank)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]int, tr.Len())
	for i := range rows {
		rows[i] = i
	}
	err = writeParquetFile(bad, w.cols, w.sc, w.props, metadata.NewKeyValueMetadata(), tr, rows, &pqScratch{})
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("writing over a directory: %v, want an error naming it", err)
	}
	if _, err := os.Stat(partialName(bad)); !os.IsNotExist(err) {
		t.Errorf("the partial file is left: %v", err)
	}
	for _, k := range cleanup.Tracked() {
		t.Errorf("still listed as being written: %v", k)
	}

	// While a file is written, its name holds nothing: a column probes
	// the directory as its values are read.
	final := filepath.Join(t.TempDir(), "z.parquet")
	probed := false
	probe := pqCol{name: "probe", typ: parquet.Types.Int32, i32: func(*trace.Trace, int) int32 {
		if !probed {
			probed = true
			if _, err := os.Stat(final); !os.IsNotExist(err) {
				t.Errorf("%s exists while it is written (%v)", final, err)
			}
			if _, err := os.Stat(partialName(final)); err != nil {
				t.Errorf("no partial file while it is written: %v", err)
			}
		}
		return 0
	}}
	cols := append(append([]pqCol(nil), w.cols...), probe)
	sc, err := parquetSchema(cols)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeParquetFile(final, cols, sc, w.props, metadata.NewKeyValueMetadata(), tr, rows, &pqScratch{}); err != nil {
		t.Fatal(err)
	}
	if !probed {
		t.Fatal("the probe column was not written")
	}
	if _, err := os.Stat(final); err != nil {
		t.Errorf("not renamed into place: %v", err)
	}

	// A file being written (listed, not renamed yet) is removed.
	being := filepath.Join(t.TempDir(), ".y.parquet.partial")
	if err := os.WriteFile(being, []byte("PAR1"), 0o644); err != nil {
		t.Fatal(err)
	}
	cleanup.Track(being)
	cleanup.RemoveAll()
	if _, err := os.Stat(being); !os.IsNotExist(err) {
		t.Errorf("RemoveAll left %s: %v", being, err)
	}
}
