package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/ppprof/ppprof/ingest"
)

// progress draws a one-line progress bar on stderr while a long command
// runs: reading files, analysing, simulating. It draws only when stderr is
// a terminal and --quiet is not given, so CI logs and redirected output
// never see it; otherwise every method does nothing. The line is redrawn at
// most every progressEvery and erased by done (or before a warning is
// printed, see clear).
type progress struct {
	w       io.Writer // nil: disabled
	label   string
	unit    string
	mu      sync.Mutex
	total   int64
	cur     int64
	sub     float64   // how far into the step after cur, 0 to 1: the bar's fill and percentage count it (within)
	weights []float64 // when it has total entries, each step's share of the bar (steps of unequal length), else equal shares
	note    string    // what is being done now, after the numbers
	bytes   int64     // when > 0, a rate in MB/s is shown
	start   time.Time
	last    time.Time
	drawn   bool
	minShow time.Duration // nothing is drawn before the command has run this long
	flush   func()        // called by done: prints what warnings were held back (readingOptions)
	idle    *time.Timer   // redraws the line when nothing has moved it for progressIdle (tick)
	cleared bool          // erased for other output (clear): tick waits for the next update
}

// progressEvery is the longest the bar goes without a redraw while it moves.
const progressEvery = 100 * time.Millisecond

// progressIdle is the longest the line goes without a redraw while the
// bar is live: the elapsed time it shows keeps counting when the work
// does not report for a while (a fleet trace's chunk takes seconds),
// and the bar first appears at minShow even when its first update came
// earlier and the next comes much later.
const progressIdle = time.Second

// newProgress returns a progress bar for label, counting up to total
// (0: unknown) in unit, on w when w is a terminal and quiet is false.
func newProgress(w io.Writer, label string, total int64, unit string, quiet bool) *progress {
	p := &progress{label: label, total: total, unit: unit, start: time.Now(), minShow: 500 * time.Millisecond}
	if !quiet && isTerminal(w) {
		p.w = w
	}
	return p
}

// isTerminal reports whether w is a character device (a terminal), not a
// file, pipe or buffer.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// set moves the bar to n of total.
func (p *progress) set(n int64) { p.update(func() { p.cur = n }) }

// update applies change and redraws if it is time to.
func (p *progress) update(change func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil {
		return
	}
	change()
	p.cleared = false
	if p.idle == nil {
		p.idle = time.AfterFunc(max(p.minShow-time.Since(p.start), progressEvery), p.tick)
	}
	now := time.Now()
	if now.Sub(p.start) < p.minShow || now.Sub(p.last) < progressEvery && p.cur < p.total {
		return
	}
	p.last = now
	p.draw(now)
}

// tick redraws the line if nothing has for progressIdle (and the bar is
// due: minShow), and runs again until the bar is done.
func (p *progress) tick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil {
		return
	}
	now := time.Now()
	if !p.cleared && now.Sub(p.start) >= p.minShow && now.Sub(p.last) >= progressIdle-progressEvery {
		p.last = now
		p.draw(now)
	}
	p.idle.Reset(progressIdle)
}

// within moves the bar c/n of the way into the step after cur (c of n
// chunks of an analysis pass done: analyze.Options.ChunkProgress). It
// never moves it back within a step.
func (p *progress) within(c, n int) {
	if n > 0 {
		p.update(func() { p.sub = max(p.sub, float64(c)/float64(n)) })
	}
}

// draw writes the line: label, bar, count, rate, note.
func (p *progress) draw(now time.Time) {
	var b strings.Builder
	fmt.Fprintf(&b, "\r%s ", p.label)
	if p.total > 0 {
		const width = 24
		frac := min((float64(p.cur)+min(p.sub, 1))/float64(p.total), 1)
		if int64(len(p.weights)) == p.total {
			frac = 0
			for i, w := range p.weights {
				switch {
				case int64(i) < p.cur:
					frac += w
				case int64(i) == p.cur:
					frac += w * min(p.sub, 1)
				}
			}
			frac = min(frac, 1)
		}
		fill := int(frac * width)
		b.WriteString("[" + strings.Repeat("=", fill) + strings.Repeat(" ", width-fill) + "] ")
		fmt.Fprintf(&b, "%3.0f%% %d/%d %s", 100*frac, p.cur, p.total, p.unit)
	} else {
		fmt.Fprintf(&b, "%d %s", p.cur, p.unit)
	}
	if secs := now.Sub(p.start).Seconds(); p.bytes > 0 && secs > 0 {
		fmt.Fprintf(&b, ", %.0f MB/s", float64(p.bytes)/1e6/secs)
	}
	fmt.Fprintf(&b, ", %s", now.Sub(p.start).Truncate(time.Second))
	if p.note != "" {
		b.WriteString(", " + p.note)
	}
	b.WriteString("\x1b[K") // erase what a longer previous line left
	io.WriteString(p.w, b.String())
	p.drawn = true
}

// clear erases the line, if drawn, so that other output starts clean; the
// next update draws it again (the idle redraws wait for it: they would
// race with the output that follows).
func (p *progress) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleared = true
	if p.w != nil && p.drawn {
		io.WriteString(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// done erases the bar for good.
func (p *progress) done() {
	p.clear()
	p.mu.Lock()
	p.w = nil
	if p.idle != nil {
		p.idle.Stop()
	}
	p.mu.Unlock()
	if p.flush != nil {
		p.flush()
	}
}

// openWithProgress reads and merges paths (--map rules applied to profiler
// traces) for a command that reads its input whole, with a progress bar
// over the files read (their count and bytes) on stderr when it is a
// terminal and quiet is false, and input warnings printed unless quiet
// (they erase the bar first). It sets the memory limit and the collector's
// pace for the read (setMemoryLimit, readGCPercent).
func openWithProgress(paths, rules []string, quiet bool, stderr io.Writer) (*ingest.Result, error) {
	setMemoryLimit()
	parsed, err := parseMapRules(rules)
	if err != nil {
		return nil, err
	}
	opt, prog := readingOptions(stderr, quiet)
	defer prog.done()
	opt.Rules = parsed
	defer debug.SetGCPercent(debug.SetGCPercent(readGCPercent(paths)))
	return ingest.Open(paths, opt)
}

// readGCPercent is the GOGC a whole read of paths runs with. Reading
// ppprof's Arrow files builds the trace and keeps it: collections free
// little while the heap grows, so they run a quarter as often (400; the
// memory limit of setMemoryLimit still bounds the heap). Decoding Flight
// Recorder pickles (or JSON) makes garbage: at 400 it piled up to the
// memory limit (a 16384-rank job's dumps: 19.3 GB peak, 65 s of kernel
// time, 132 s) where 100 keeps twice the live heap (10.7 GB, 31 s, 111 s;
// 4096 ranks: 2.9 GB instead of 5.2-5.8, in about the same time).
func readGCPercent(paths []string) int {
	switch ingest.FirstFormat(paths) {
	case ingest.FormatFRPickle, ingest.FormatFRJSON:
		return 100
	}
	return 400
}

// readingOptions returns ingest options that draw the files read as a
// progress bar on stderr (when it is a terminal and quiet is false) and
// print warnings unless quiet, erasing the bar first; and the bar, to be
// done when reading ends.
func readingOptions(stderr io.Writer, quiet bool) (ingest.Options, *progress) {
	prog := newProgress(stderr, "reading", 0, "files", quiet)
	var opt ingest.Options
	opt.Progress = func(p ingest.Progress) {
		prog.update(func() {
			prog.total, prog.cur, prog.bytes = int64(p.FilesTotal), int64(p.Files), p.Bytes
			prog.note = ""
			if p.Phase != "reading" {
				prog.note = p.Phase
			}
		})
	}
	if !quiet {
		l := newWarnLimiter(stderr, prog.clear)
		opt.Warn = l.warn
		prog.flush = l.flush
	}
	return opt, prog
}

// analyzeProgress returns an analyze.Options.Progress that draws the
// passes of analyze.Run as a bar, and the bar (to be done when Run
// returns).
//
// The bar fills by each pass' usual share of the time (passWeights), not
// by the count of passes: a streamed analysis spends half its time in the
// first pass, reading and packing every chunk.
func analyzeProgress(stderr io.Writer, quiet, streamed bool) (func(done, total int, pass string), *progress) {
	on, prog := stepsProgress(stderr, quiet, "analyzing", "passes")
	prog.weights = passWeights(streamed)
	return on, prog
}

// passWeights is the share of the time of each of analyze.Run's progress
// steps (windows, stages, schedule, replay, findings, done) for a trace
// read whole or streamed, as measured on the 24.7M-event fleet trace
// (twenty-second session, docs/performance.md "Progress"): read whole,
// grouping and measuring the windows takes 0.9 s and the three visits
// 1.3, 0.9 and 1.3 s; streamed, the first step reads and packs every
// chunk (1.9 s), the visits take 0.7, 0.4 and 0.9.
func passWeights(streamed bool) []float64 {
	if streamed {
		return []float64{0.48, 0.18, 0.11, 0.23, 0, 0}
	}
	return []float64{0.20, 0.29, 0.21, 0.30, 0, 0}
}

// countProgress is stepsProgress for work that names no step (hang.Run's
// phases, for one).
func countProgress(stderr io.Writer, quiet bool, label, unit string) (func(done, total int), *progress) {
	on, prog := stepsProgress(stderr, quiet, label, unit)
	return func(done, total int) { on(done, total, "") }, prog
}

// stepsProgress returns a callback that draws done of total steps (in
// unit), the one under way named, as a bar labelled label (the phases of
// analyze.RunWhatIf, for one), and the bar, to be done when the work
// returns.
func stepsProgress(stderr io.Writer, quiet bool, label, unit string) (func(done, total int, name string), *progress) {
	prog := newProgress(stderr, label, 0, unit, quiet)
	return func(done, total int, name string) {
		prog.update(func() {
			if int64(done) != prog.cur {
				prog.sub = 0 // the next step: within starts it again
			}
			prog.total, prog.cur, prog.note = int64(total), int64(done), name
		})
	}, prog
}
