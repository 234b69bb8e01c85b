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

// lockedLine is what a bar drew, read under the bar's lock (its idle
// redraws run on a timer's goroutine).
func lockedLine(p *progress, out *bytes.Buffer) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return out.String()
}

// TestProgressWithin: within moves the bar into the step after cur,
// never back, and the next step starts it again.
func TestProgressWithin(t *testing.T) {
	var out bytes.Buffer
	on, p := stepsProgress(nil, true, "analyzing", "passes")
	p.w, p.minShow = &out, 0 // as on a terminal, drawn at once
	defer p.done()
	last := func() string {
		s := lockedLine(p, &out)
		return s[strings.LastIndex(s, "\r"):]
	}
	on(1, 4, "stages")
	p.last = time.Time{} // redraw now
	p.within(2, 4)       // 1.5 of 4 steps
	if l := last(); !strings.Contains(l, " 38% 1/4 passes") {
		t.Errorf("half-way into the second step: %q", l)
	}
	p.last = time.Time{}
	p.within(1, 4) // a later visit of the same pass starts over: not drawn back
	if l := last(); !strings.Contains(l, " 38% 1/4 passes") {
		t.Errorf("moved back: %q", l)
	}
	p.last = time.Time{}
	on(2, 4, "schedule")
	if l := last(); !strings.Contains(l, " 50% 2/4 passes, ") || !strings.HasSuffix(l, ", schedule\x1b[K") {
		t.Errorf("the next step: %q", l)
	}
}

// TestProgressIdle: a bar whose work stops reporting is drawn again (its
// elapsed time counting) without an update: first once it is due, when
// its first update came before, then every progressIdle; not after done.
func TestProgressIdle(t *testing.T) {
	var out bytes.Buffer
	p := &progress{w: &out, label: "analyzing", unit: "passes", total: 6, start: time.Now(), minShow: 50 * time.Millisecond}
	p.update(func() { p.note = "windows (chunk 1/32)" }) // before minShow: not drawn
	if s := lockedLine(p, &out); s != "" {
		t.Fatalf("drawn before minShow: %q", s)
	}
	waitFor := func(what string, ok func(string) bool) string {
		deadline := time.Now().Add(10 * progressIdle)
		for {
			s := lockedLine(p, &out)
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: never drawn; line %q", what, s)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	s := waitFor("first draw", func(s string) bool { return strings.Contains(s, "windows (chunk 1/32)") })
	if !strings.Contains(s, "  0% 0/6 passes, 0s, windows") {
		t.Errorf("first draw %q", s)
	}
	waitFor("idle redraw", func(s string) bool { return strings.Count(s, "\ranalyzing") >= 2 })
	// Erased for a warning: not drawn again until the work reports.
	p.clear()
	cleared := lockedLine(p, &out)
	time.Sleep(progressIdle + 200*time.Millisecond)
	if s := lockedLine(p, &out); s != cleared {
		t.Errorf("drawn after clear without an update: %q", s[len(cleared):])
	}
	p.update(func() { p.note = "windows (chunk 2/32)" })
	waitFor("redraw after clear and an update", func(s string) bool { return strings.Contains(s, "chunk 2/32") })
	p.done()
	done := lockedLine(p, &out)
	time.Sleep(progressIdle + 200*time.Millisecond)
	if s := lockedLine(p, &out); s != done {
		t.Errorf("drawn after done: %q", s[len(done):])
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
