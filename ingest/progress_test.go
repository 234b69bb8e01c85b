package ingest

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestProgress checks the Progress calls of Open over a directory of two
// rank files: the start, one per file in order, then the merge and the
// clock alignment.
func TestProgress(t *testing.T) {
	dir := t.TempDir()
	var size int64
	for i, rows := range []string{
		"rank,stage,step,kind,seq,issue_ns,start_ns,end_ns\n0,0,0,F,0,0,0,10\n",
		"rank,stage,step,kind,seq,issue_ns,start_ns,end_ns\n1,1,0,F,0,10,10,20\n1,1,0,B,1,20,20,40\n",
	} {
		path := filepath.Join(dir, []string{"a.csv", "b.csv"}[i])
		if err := os.WriteFile(path, []byte(rows), 0o644); err != nil {
			t.Fatal(err)
		}
		size += int64(len(rows))
	}
	var got []Progress
	if _, err := Open([]string{dir}, Options{Progress: func(p Progress) { got = append(got, p) }}); err != nil {
		t.Fatal(err)
	}
	first := int64(len("rank,stage,step,kind,seq,issue_ns,start_ns,end_ns\n0,0,0,F,0,0,0,10\n"))
	want := []Progress{
		{Phase: "reading", FilesTotal: 2, BytesTotal: size},
		{Phase: "reading", Files: 1, FilesTotal: 2, Bytes: first, BytesTotal: size},
		{Phase: "reading", Files: 2, FilesTotal: 2, Bytes: size, BytesTotal: size},
		{Phase: "merging", Files: 2, FilesTotal: 2, Bytes: size, BytesTotal: size},
		{Phase: "aligning clocks", Files: 2, FilesTotal: 2, Bytes: size, BytesTotal: size},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("progress\n got %+v\nwant %+v", got, want)
	}
}
