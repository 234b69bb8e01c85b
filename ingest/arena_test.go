package ingest

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// TestOpenDumpArena reads the real Flight Recorder dumps of a hung
// 16-rank job whole, with their rows built in a trace.ColumnArena (the
// threshold lowered to 1 file) and without, and checks that the two
// reads agree on everything: the merged trace, the files, the warnings,
// the process groups and recorder state, the clocks. It also checks that
// only pickled dumps get an arena.
func TestOpenDumpArena(t *testing.T) {
	dir := "../../shared/data/flight_recorder/gpu_error_1st"
	if _, err := os.Stat(dir); err != nil {
		t.Skip("../shared/data not present")
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "_dump_*"))
	inputs := make([]input, len(paths))
	for i, p := range paths {
		inputs[i] = input{path: p, source: -1}
	}
	if dumpArena(inputs) != nil {
		t.Fatalf("an arena for %d dumps, under arenaFiles (%d)", len(paths), arenaFiles)
	}
	plain, err := Open([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func(n int) { arenaFiles = n }(arenaFiles)
	arenaFiles = 1
	if dumpArena(inputs) == nil {
		t.Fatal("no arena for the dumps with arenaFiles 1")
	}
	arrow := filepath.Join(t.TempDir(), "t.arrow")
	if err := os.WriteFile(arrow, arrowFile(t, plain.Trace, arrowv1.Options{}), 0o644); err != nil {
		t.Fatal(err)
	}
	if dumpArena([]input{{path: arrow, source: -1}}) != nil {
		t.Fatal("an arena for an Arrow file")
	}
	arena, err := Open([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := trace.Diff(plain.Trace, arena.Trace); d != "" {
		t.Fatalf("merged traces differ: %s", d)
	}
	if !reflect.DeepEqual(plain.Files, arena.Files) || !reflect.DeepEqual(plain.Warnings, arena.Warnings) ||
		!reflect.DeepEqual(plain.Comms, arena.Comms) || !reflect.DeepEqual(plain.Clocks, arena.Clocks) {
		t.Fatal("the reads with and without the arena differ beyond the trace")
	}
	if plain.Trace.Len() == 0 {
		t.Fatal("no rows read")
	}
}
