package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/sim"
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

// TestProgressWeights: with weights, the bar fills by each step's share
// (worked out by hand below), within a step by its share times how far
// into it; the analysis bars' weights cover their steps and add up to 1.
func TestProgressWeights(t *testing.T) {
	var out bytes.Buffer
	on, p := stepsProgress(nil, true, "analyzing", "passes")
	p.w, p.minShow = &out, 0
	p.weights = []float64{0.6, 0.3, 0.1}
	defer p.done()
	last := func() string {
		s := lockedLine(p, &out)
		return s[strings.LastIndex(s, "\r"):]
	}
	on(0, 3, "windows")
	p.last = time.Time{}
	p.within(1, 4) // 0.6 / 4
	if l := last(); !strings.Contains(l, "[===                     ]  15% 0/3 passes") {
		t.Errorf("a quarter into the first step: %q", l)
	}
	p.last = time.Time{}
	on(1, 3, "stages")
	p.last = time.Time{}
	p.within(1, 2) // 0.6 + 0.3 / 2
	if l := last(); !strings.Contains(l, "[==================      ]  75% 1/3 passes") {
		t.Errorf("half-way into the second step: %q", l)
	}
	p.last = time.Time{}
	on(2, 3, "schedule")
	if l := last(); !strings.Contains(l, " 90% 2/3 passes") {
		t.Errorf("the third step: %q", l)
	}
	// Weights that do not cover the steps are not used.
	p.weights = []float64{0.6, 0.4}
	p.last = time.Time{}
	on(1, 3, "stages")
	if l := last(); !strings.Contains(l, " 33% 1/3 passes") {
		t.Errorf("weights for 2 of 3 steps: %q", l)
	}
	// As many as analyze.Run reports steps.
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 4, Steps: 1})
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	if _, err := analyze.Run(tr, analyze.Options{Step: analyze.AllSteps, Progress: func(_, total int, _ string) { steps = total }}); err != nil {
		t.Fatal(err)
	}
	for _, streamed := range []bool{false, true} {
		w, sum := passWeights(streamed), 0.0
		for _, x := range w {
			sum += x
		}
		if len(w) != steps || sum < 0.999 || sum > 1.001 {
			t.Errorf("streamed %v: %d weights adding up to %v, want %d (analyze.Run's steps) adding up to 1", streamed, len(w), sum, steps)
		}
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
