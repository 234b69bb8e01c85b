package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// TestProgressOnlyOnTerminals checks that the bar is off for buffers,
// files and with --quiet, and on for a character device.
func TestProgressOnlyOnTerminals(t *testing.T) {
	if p := newProgress(&bytes.Buffer{}, "x", 10, "files", false); p.w != nil {
		t.Error("progress drawn into a buffer")
	}
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if p := newProgress(f, "x", 10, "files", false); p.w != nil {
		t.Error("progress drawn into a regular file")
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer null.Close()
	if p := newProgress(null, "x", 10, "files", false); p.w == nil {
		t.Error("no progress on a character device")
	}
	if p := newProgress(null, "x", 10, "files", true); p.w != nil {
		t.Error("progress despite quiet")
	}
}

// TestProgressLine checks what the bar draws and that done erases it.
func TestProgressLine(t *testing.T) {
	var out bytes.Buffer
	p := &progress{w: &out, label: "reading", unit: "files", total: 4, start: time.Now()}
	p.update(func() { p.cur, p.bytes, p.note = 2, 0, "merging" })
	line := out.String()
	for _, want := range []string{"\rreading [", "50% 2/4 files", ", merging", "\x1b[K"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	out.Reset()
	p.update(func() { p.cur = 3 }) // within progressEvery: not redrawn
	if out.Len() != 0 {
		t.Errorf("redrawn too soon: %q", out.String())
	}
	p.done()
	if out.String() != "\r\x1b[K" {
		t.Errorf("done wrote %q", out.String())
	}
	p.set(4) // after done: nothing
	if out.String() != "\r\x1b[K" {
		t.Errorf("drawn after done: %q", out.String())
	}
}

// TestMemTotal checks that the machine's memory is read where there is a
// /proc/meminfo.
func TestMemTotal(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo")
	}
	if n := memTotalBytes(); n < 1<<20 {
		t.Errorf("MemTotal %d bytes", n)
	}
}
