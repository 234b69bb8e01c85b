//go:build unix

package ingest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ppprof/ppprof/trace/arrowv1"
)

// TestSpoolFIFO reads a rank's stream and a directory of another rank's
// through a named pipe, as a shell's <(command) gives one: Open reads
// the pipe once (every reader opens a file more than once: unspooled, the
// second open waits for a writer that is gone), keeps its name, and
// merges it with the directory.
func TestSpoolFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(t.TempDir(), "rank-00000.arrows")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	r0, r1 := fEvents(0, 30), fEvents(1, 20)
	writeFile(t, dir, "rank-00001.arrows", arrowStream(t, r1, arrowv1.Options{}))
	data := arrowStream(t, r0, arrowv1.Options{BatchRows: 4})
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		f.Write(data)
		f.Close()
	}()
	release, err := Spool([]string{fifo, dir}, nil, nil)
	defer release()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(Local(fifo)) != "rank-00000.arrows" {
		t.Errorf("the pipe's copy is %s, want it named as the pipe", Local(fifo))
	}
	type result struct {
		res *Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := Open([]string{fifo, dir}, Options{})
		done <- result{res, err}
	}()
	var got result
	select {
	case got = <-done:
	case <-time.After(time.Minute):
		// A reader opening the pipe again waits for a writer: be one at
		// each of its opens, so that the test fails instead of hanging.
		for {
			select {
			case <-done:
				t.Fatal("Open waited for the pipe's writer: it opened the pipe, not its copy")
			case <-time.After(10 * time.Millisecond):
				if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
			}
		}
	}
	res, err := got.res, got.err
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 2 || res.Files[0].Path != fifo || res.Files[0].Events != 30 || res.Files[1].Events != 20 {
		t.Fatalf("files %+v", res.Files)
	}
	if n := res.Trace.Len(); n != 50 || len(res.Trace.Ranks()) != 2 {
		t.Errorf("%d events of ranks %v, want 50 of 0 and 1", n, res.Trace.Ranks())
	}
}

// TestGlobSkipsFIFO checks that a named pipe a pattern matches is
// skipped, as in a directory, instead of opened (which would wait for a
// writer that never comes).
func TestGlobSkipsFIFO(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "rank-00001.arrows", arrowStream(t, fEvents(1, 20), arrowv1.Options{}))
	if err := syscall.Mkfifo(filepath.Join(dir, "rank-00000.arrows"), 0o600); err != nil {
		t.Skip(err)
	}
	done := make(chan error, 1)
	var res *Result
	go func() {
		var err error
		res, err = Open([]string{filepath.Join(dir, "*.arrows")}, Options{})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		f, err := os.OpenFile(filepath.Join(dir, "rank-00000.arrows"), os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			f.Close()
		}
		t.Fatal("Open of a pattern waited on the pipe it matched")
	}
	if len(res.Files) != 1 || res.Trace.Len() != 20 {
		t.Errorf("files %+v, %d events: want rank 1's file alone, 20 events", res.Files, res.Trace.Len())
	}
}
