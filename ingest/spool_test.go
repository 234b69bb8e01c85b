package ingest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// pipeOf returns the read end of a pipe that yields data, then ends.
func pipeOf(t *testing.T, data []byte) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		w.Write(data)
		w.Close()
	}()
	t.Cleanup(func() { r.Close() })
	return r
}

// TestSpoolStdin reads a two-rank trace piped into standard input, named
// twice: Open reads it as it reads the same bytes from a file, names it
// "-", copies it once (what the progress callback says), and release
// removes the copy.
func TestSpoolStdin(t *testing.T) {
	tr := fEvents(0, 30)
	r1 := fEvents(1, 20)
	tr.AppendRows(r1, 0, r1.Len())
	data := arrowStream(t, tr, arrowv1.Options{BatchRows: 7})
	file := writeFile(t, t.TempDir(), "both.arrows", data)
	want, err := Open([]string{file}, Options{})
	if err != nil {
		t.Fatal(err)
	}

	var lastPath string
	var lastTotal int64
	release, err := Spool([]string{Stdin, Stdin}, pipeOf(t, data), func(path string, total int64) {
		lastPath, lastTotal = path, total
	})
	if err != nil {
		t.Fatal(err)
	}
	if lastPath != Stdin || lastTotal != int64(len(data)) {
		t.Errorf("progress said %d bytes of %q copied, want %d of %q (copied once)", lastTotal, lastPath, len(data), Stdin)
	}
	copied := Local(Stdin)
	if copied == Stdin || filepath.Base(copied) != "stdin" {
		t.Fatalf("standard input read from %q", copied)
	}
	got, err := Open([]string{Stdin}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := trace.Diff(want.Trace, got.Trace); d != "" {
		t.Error(d)
	}
	if len(got.Files) != 1 || got.Files[0].Path != Stdin || got.Files[0].Events != 50 {
		t.Errorf("files %+v, want one, %q, 50 events", got.Files, Stdin)
	}
	release()
	if Local(Stdin) != Stdin {
		t.Errorf("after release, - is still read from %q", Local(Stdin))
	}
	if _, err := os.Stat(filepath.Dir(copied)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the copy's directory is left behind: %v", err)
	}
	if _, err := Open([]string{Stdin}, Options{}); err == nil {
		t.Error("- read after release")
	}
}

// TestSpoolNames checks that a piped input keeps its name in what the
// readers say of it: a warning about a cut stream, and the error of
// bytes that are no trace.
func TestSpoolNames(t *testing.T) {
	data, ends := streamBatches(t, fEvents(1, 40), 5)
	cut := (ends[5] + ends[6]) / 2
	release, err := Spool([]string{Stdin}, pipeOf(t, data[:cut]), nil)
	defer release()
	if err != nil {
		t.Fatal(err)
	}
	var warned []Warning
	res, err := Open([]string{Stdin}, Options{Warn: func(w Warning) { warned = append(warned, w) }})
	if err != nil {
		t.Fatal(err)
	}
	lost := cut - ends[5]
	want := Warning{Path: Stdin, Message: fmt.Sprintf("truncated stream: kept 5 complete batches (25 events), lost %d of %d bytes (%.1f%%)",
		lost, cut, 100*float64(lost)/float64(cut))}
	if len(warned) != 1 || warned[0] != want || res.Trace.Len() != 25 {
		t.Fatalf("%d events, warnings %v\nwant 25 events, %v", res.Trace.Len(), warned, want)
	}
	release()

	release, err = Spool([]string{Stdin}, pipeOf(t, []byte("rank,step\n1,x\n")), nil)
	defer release()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open([]string{Stdin}, Options{})
	var fe *FileError
	if !errors.As(err, &fe) || fe.Path != Stdin || strings.Contains(err.Error(), "ppprof-input-") {
		t.Errorf("error %v: want one naming -, not the copy", err)
	}
}

// TestSpoolLeaves checks that files, directories and missing paths are
// read where they are, and that a missing standard input is an error.
func TestSpoolLeaves(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "a.arrows", arrowStream(t, fEvents(0, 3), arrowv1.Options{}))
	paths := []string{file, dir, filepath.Join(dir, "missing"), filepath.Join(dir, "*.arrows")}
	release, err := Spool(paths, nil, nil)
	defer release()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if Local(p) != p {
			t.Errorf("%s read from %s", p, Local(p))
		}
	}
	if _, err := Spool([]string{Stdin}, nil, nil); err == nil {
		t.Error("- spooled with no standard input")
	}
}

// TestSpoolDir: with TMPDIR not set and /tmp held in memory, the copy is
// made on disk (/var/tmp, here a test directory), unless that is held in
// memory too or cannot be written; TMPDIR, when set, is used whatever it
// is on.
func TestSpoolDir(t *testing.T) {
	data := []byte("rank,step\n")
	disk, set := t.TempDir(), t.TempDir()
	oldMem, oldDisk := inMemory, diskTemp
	defer func() { inMemory, diskTemp = oldMem, oldDisk }()
	cases := []struct {
		name   string
		tmpdir string
		mem    func(string) bool
		disk   string
		want   string // the copy's parent directory
	}{
		{"tmpfs /tmp", "", func(d string) bool { return d == os.TempDir() }, disk, disk},
		{"/tmp on disk", "", func(string) bool { return false }, disk, os.TempDir()},
		{"both in memory", "", func(string) bool { return true }, disk, os.TempDir()},
		{"disk not writable", "", func(d string) bool { return d == os.TempDir() }, filepath.Join(disk, "missing"), os.TempDir()},
		{"TMPDIR set", set, func(string) bool { return true }, disk, set},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("TMPDIR", c.tmpdir)
			inMemory, diskTemp = c.mem, c.disk
			release, err := Spool([]string{Stdin}, pipeOf(t, data), nil)
			defer release()
			if err != nil {
				t.Fatal(err)
			}
			copied := Local(Stdin)
			if got := filepath.Dir(filepath.Dir(copied)); got != filepath.Clean(c.want) {
				t.Errorf("copied to %s, want under %s", copied, c.want)
			}
			if got, err := os.ReadFile(copied); err != nil || string(got) != string(data) {
				t.Errorf("the copy holds %q (%v)", got, err)
			}
		})
	}
}
