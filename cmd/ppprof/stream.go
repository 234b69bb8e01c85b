package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/trace"
)

// Memory per event, measured (docs/performance.md "Memory"): what analyze
// needs per event of a trace it holds whole (the model and the analysis'
// scratch: 282-326 bytes measured).
const analysedBytesPerEvent = 320

// maxChunkRows caps a chunk's rows: smaller chunks keep the columns of one
// (reused from chunk to chunk) in the caches and the kernel out of the way.
// Measured on the 24.7M-event fleet trace (replicas of 0.77M rows),
// --stream always, 3 runs each: chunks of one replica (this cap) 7.8 s
// [6.7-8.1], peak RSS 1.4 GB; of two (2M rows) 8.1 s [7.1-8.2], 1.7 GB; of
// ten (a tenth of 23.5 GiB, no cap) 9.8 s [9.7-10.2], 3.9 GB. A chunk
// still holds at least one replica.
const maxChunkRows = 1 << 20

// Under --stream auto, analyze can also stream an input that fits in
// memory when it holds at least autoStreamRows events (0: never) and its
// files make at least autoStreamChunks chunks: for speed and memory.
// From the fourth session to the tenth it did so from 16M events, when a
// job of many pipeline replicas streamed faster than it read whole (24.7M
// events: 5.1 s against 6.6). The fifth session made whole reads faster
// (collections paused while the files are decoded, strings as ids), and
// in the tenth, on the same 24.7M-event trace, streamed (auto) took
// 8.0-9.4 s, 13.6-15.2 s of CPU, 0.73-0.76 GB; read whole 6.4-7.5 s,
// 8.6-10.1 s of CPU, 3.5 GB: auto streamed for memory only from then.
// Streaming has since cost less CPU (a replay reused from window to
// window, chunks packed without the columns no pass reads, into shared
// huge-page slabs): in the twenty-second session, three pairs in turns,
// 24.7M events streamed 4.2-4.4 s, 7.8-8.1 s of CPU, 0.54 GB against
// 5.3-6.5 s, 9.5-11.6 s of CPU, 3.46 GB whole; 12.3M events 2.1-2.2 s
// against 2.2-2.9 s; 6.0M events 1.16-1.22 s against 0.97-1.10 s
// (docs/performance-history.md "Before and after the twenty-second
// session"). So the rule is back, from 16M events. Variables for the
// tests.
var (
	autoStreamRows   int64 = 16_000_000
	autoStreamChunks       = 4
)

// streamPlan is how analyze reads its input.
type streamPlan struct {
	stream    bool
	chunkRows int   // rows per chunk (ingest.OpenChunks)
	cutRows   int   // a replica of more rows is cut between steps (ingest.Chunks.CutSteps; analyze only): see cutRowsOf
	packBytes int64 // memory for chunks kept packed between passes (analyze.Options.PackBytes)
	ram       int64 // the memory planned for (--max-memory, else the machine's)
	mode      string
	// optional: auto streams for speed, not for memory: if the input
	// makes fewer than autoStreamChunks chunks, or cannot be opened in
	// chunks at all, it is read whole after all.
	optional bool
	rows     int64 // events counted by auto (0 for the other modes); a lower bound when stream is set by it (ingest.CountRowsOver)
	exact    bool  // rows counted from Arrow batch headers, not guessed
	// oneStep: auto streams one step of ppprof's Arrow files whatever the
	// number of chunks (optional is set too: input that cannot be
	// chunked is read whole).
	oneStep bool
}

// planStream decides, for --stream mode, whether to read paths a few
// pipeline replicas at a time. auto streams when the input's events (counted
// from Arrow headers, ingest.CountRows) would need more than half the
// memory (--max-memory, else the machine's RAM) analysed whole. Chunks are
// a tenth of that memory's worth of events, at most maxChunkRows; up to
// two fifths of it hold chunks packed between passes (trace.Packer, 11-12
// bytes per event) together with the lists the medians keep (12 bytes a
// compute op): a fleet job of up to about memory/60 events is read once.
//
// Under auto, a trace of Arrow files with at least autoStreamRows events
// (when not 0) that fits is streamed too, optionally
// (streamPlan.optional).
func planStream(paths []string, mode, maxMemory string, maps bool) (streamPlan, error) {
	return planStreamFast(paths, mode, maxMemory, maps, analysedBytesPerEvent, autoStreamRows)
}

// planStreamFast is planStreamFor, and under auto an input of Arrow files
// of at least rows events (0: never) that fits is streamed too,
// optionally (streamPlan.optional; openChunksAuto reads it whole after all
// when it makes fewer than autoStreamChunks chunks).
func planStreamFast(paths []string, mode, maxMemory string, maps bool, perEvent, rows int64) (streamPlan, error) {
	p, err := planStreamFor(paths, mode, maxMemory, maps, perEvent)
	if err == nil && mode == "auto" && !maps && !p.stream && p.exact && rows > 0 && p.rows >= rows {
		p.stream, p.optional = true, true
	}
	return p, err
}

// forStep makes an auto plan stream one step of ppprof's Arrow files, a
// file per rank or so, whether or not the trace fits: streamed, only that
// step's record batches are decoded whole (ingest.Chunks.ChunkStep,
// ReadStep), in however many chunks: 1.3 s instead of 8.4 for one step of
// a 38.6M-event, one-replica trace (docs/performance.md). A single file
// (of every rank, its steps' rows apart) would be decoded twice: it is
// read whole. The stream is optional: input that cannot be chunked is read
// whole after all.
func (p *streamPlan) forStep(paths []string, step int64, maps bool) {
	if step < 0 || p.mode != "auto" || p.stream && !p.optional || !p.exact || maps {
		return
	}
	if n, err := ingest.CountFiles(paths); err == nil && n > 1 {
		p.stream, p.optional, p.oneStep = true, true, true
	}
}

// cutRowsOf is the most events of a pipeline replica that a streamed
// analyze reads as one chunk, with ram bytes of memory at perEvent bytes
// an event: the whole memory's worth. A larger replica is cut between
// steps, a last resort: cut chunks cost more to read (a batch across a cut
// is decoded twice, each chunk's rows copied once more), and re-read by
// every pass when they do not fit packed: the 302M-event fleet trace
// (replicas of 9.4M events) with --max-memory 4G took 212 s cut (at a
// quarter of the memory's worth) against 130 s whole, for 3.8 GB peak
// against 4.4 (docs/performance-history.md "Before and after the seventh
// session").
func cutRowsOf(ram, perEvent int64) int { return int(ram / perEvent) }

// planStreamFor is planStream for a command that needs perEvent bytes per
// event of a trace it holds whole.
func planStreamFor(paths []string, mode, maxMemory string, maps bool, perEvent int64) (streamPlan, error) {
	ram := memTotalBytes()
	if ram <= 0 {
		ram = 8 << 30
	}
	if maxMemory != "" {
		n, err := parseBytes(maxMemory)
		if err != nil {
			return streamPlan{}, fmt.Errorf("--max-memory: %w", err)
		}
		ram = n
	}
	p := streamPlan{mode: mode, chunkRows: int(min(ram/10/perEvent, maxChunkRows)), cutRows: cutRowsOf(ram, perEvent), packBytes: ram / 5 * 2, ram: ram}
	switch mode {
	case "never":
		return p, nil
	case "always":
		if maps {
			return p, errors.New("--stream always: --map applies to other tools' formats, which are read whole")
		}
		p.stream = true
		return p, nil
	case "auto":
		if maps {
			return p, nil
		}
		// Counted only as far as the decision needs: a fleet trace many
		// times the memory is streamed after its first few hundred files.
		// (Counted to the memory's worth even when autoStreamRows would
		// decide sooner: a streamed plan that is only optional is not cut
		// between steps and may be read whole after all.)
		rows, exact, err := ingest.CountRowsOver(paths, ram/2/perEvent)
		if err != nil {
			return p, nil // Open says what is wrong
		}
		p.rows, p.exact = rows, exact
		p.stream = rows*perEvent > ram/2
		return p, nil
	}
	return p, fmt.Errorf("--stream %q: want auto, always or never", mode)
}

// cutAs is told how many replicas a streamed analyze cut between steps and
// how many chunks it then reads: a hook for the tests.
var cutAs = func(cut, chunks int) {}

// analyzeStreamed is analyze of a trace read in chunks (ingest.OpenChunks,
// analyze.RunChunks). Under --stream auto, input that cannot be chunked
// (other tools' formats) is read whole after all.
func analyzeStreamed(opts *analyzeOptions, step int64, plan streamPlan) (*analyze.Report, error) {
	ch, whole, err := openChunksAuto(opts.paths, plan, opts.stderr, opts.quiet, opts.noWarn)
	if whole {
		return analyzeWhole(opts, step)
	}
	readAs("streamed")
	if err != nil {
		return nil, err
	}
	if !plan.optional {
		// A pipeline replica too large for a chunk is read a few steps at
		// a time (rank files whose steps never decrease).
		bar := newProgress(opts.stderr, "indexing steps", 0, "files", opts.quiet)
		cutAs(ch.CutSteps(plan.cutRows, plan.chunkRows, func(done, total int) {
			bar.update(func() { bar.total, bar.cur = int64(total), int64(done) })
		}), ch.NumChunks())
		bar.done()
	}
	if err := checkChunksFit(ch, opts.paths, "its files cannot be cut between steps (Arrow rank files, not gzip-compressed, whose steps never decrease can)"); err != nil {
		return nil, err
	}
	// Chunks are unpacked or read again by each pass: what they allocate
	// is garbage as soon as the pass moves on. Collect at a quarter of the
	// default's growth, so the heap stays within 1.25x what is live
	// (packed chunks, the chunk at hand, per-window results) rather than
	// 2x; the packed chunks are not scanned (no pointers but their
	// dictionaries), so collections stay cheap.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	onPass, bar := analyzeProgress(opts.stderr, opts.quiet, true)
	defer bar.done()
	rep, err := analyze.RunChunks(ch, analyze.Options{Step: step, Progress: onPass, ChunkProgress: bar.within, PackBytes: plan.packBytes})
	if err != nil {
		return nil, fmt.Errorf("analyzing %s: %w", describePaths(opts.paths), err)
	}
	return rep, nil
}

// openChunksAuto opens paths as chunks of plan.chunkRows events for
// analyze or hang (with progress on stderr; no warnings with noWarn).
// whole is true when the command reads its input whole after all: input
// that cannot be chunked (other tools' formats) under --stream auto, and
// an optional stream (streamPlan.optional: for speed, not for memory) of
// fewer than autoStreamChunks chunks, not worth streaming, or that could
// not be opened, whose whole read then says what is wrong, as without
// streaming. An optional stream's warnings are held back until it
// streams: printed once either way.
func openChunksAuto(paths []string, plan streamPlan, stderr io.Writer, quiet, noWarn bool) (ch *ingest.Chunks, whole bool, err error) {
	setMemoryLimit()
	opt, prog := readingOptions(stderr, quiet)
	if noWarn {
		opt.Warn = nil
	}
	warn := opt.Warn
	if plan.optional {
		opt.Warn = nil // printed below, unless read whole after all
	}
	ch, err = ingest.OpenChunks(paths, plan.chunkRows, opt)
	prog.done()
	if plan.optional && (err != nil || ch.NumChunks() < autoStreamChunks && !plan.oneStep) {
		return nil, true, nil
	}
	if errors.Is(err, ingest.ErrNotChunkable) {
		if plan.mode == "auto" {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("--stream always: %w: use --stream never", err)
	}
	if err != nil {
		return nil, false, err
	}
	if plan.optional && warn != nil {
		for _, w := range ch.Warnings {
			warn(w)
		}
		prog.done() // the warnings held back
	}
	return ch, false, nil
}

// openChunks opens paths as chunks of plan.chunkRows events for a
// streamed command (with progress on stderr). whole is true when the
// input cannot be chunked (other tools' formats) and --stream is auto:
// the command reads it whole after all. Under always that is an error.
func openChunks(paths []string, plan streamPlan, stderr io.Writer, quiet bool) (ch *ingest.Chunks, whole bool, err error) {
	setMemoryLimit()
	opt, prog := readingOptions(stderr, quiet)
	ch, err = ingest.OpenChunks(paths, plan.chunkRows, opt)
	prog.done()
	if errors.Is(err, ingest.ErrNotChunkable) {
		if plan.mode == "auto" {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("--stream always: %w: use --stream never", err)
	}
	return ch, false, err
}

// readStep reads step's events of paths a few pipeline replicas at a time
// (ingest.Chunks.ReadStep), with progress on stderr, and returns them with
// the chunks, for a command that also streams the trace. whole is true
// when the input cannot be chunked and --stream is auto: the caller reads
// it whole after all.
func readStep(paths []string, step int64, plan streamPlan, stderr io.Writer, quiet bool) (t *trace.Trace, ch *ingest.Chunks, whole bool, err error) {
	ch, whole, err = openChunks(paths, plan, stderr, quiet)
	if whole || err != nil {
		return nil, nil, whole, err
	}
	if err := checkChunksFit(ch, paths, "one step is read a pipeline replica at a time (the replica's events of the step whole, the others' shape columns)"); err != nil {
		return nil, nil, false, err
	}
	bar := newProgress(stderr, fmt.Sprintf("reading step %d", step), int64(ch.NumChunks()), "chunks", quiet)
	t, err = ch.ReadStep(step, func(done, total int) { bar.set(int64(done)) })
	bar.done()
	if err != nil {
		return nil, nil, false, err
	}
	return t, ch, false, nil
}

// checkChunksFit fails when a chunk of ch (a pipeline replica, or part of
// one) holds more events than the machine's memory takes in the model
// alone: reading it would end in the out-of-memory killer. why says why
// it could not be smaller.
func checkChunksFit(ch *ingest.Chunks, paths []string, why string) error {
	ram := machineMemory()
	if ram <= 0 {
		return nil
	}
	for i := range ch.NumChunks() {
		if n := int64(ch.Rows(i)); n*trace.RowBytes > ram {
			return fmt.Errorf("%s: a pipeline replica of %d events needs at least %s read at once (%d bytes an event), more than this machine's %s of memory: %s",
				describePaths(paths), n, gib(n*trace.RowBytes), trace.RowBytes, gib(ram), why)
		}
	}
	return nil
}

// parseBytes reads a size: a number of bytes with an optional unit K, M, G
// or T (powers of 1024; KB, KiB, MB... read the same), e.g. "8G", "512MiB".
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "IB"), "B")
	shift := 0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		case 'T':
			shift = 40
		}
		if shift > 0 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) || v*float64(int64(1)<<shift) > 1<<62 {
		return 0, fmt.Errorf("%q: want a size such as 8G, 512M or 1073741824", s)
	}
	return int64(v * float64(int64(1)<<shift)), nil
}

// collectOften sets collections to run at a quarter of the default's heap
// growth (GOGC 25) and returns what restores the setting. For the work
// after a trace is read whole (the what-if, the report): the trace is most
// of the live heap and holds no pointers, so a collection costs little,
// while at the default a heap of 4 GB live grows to 8 before one runs.
// The what-if of the 24.7M-event fleet trace peaks at 6.1 GB instead of
// 7.6, in the same time (docs/performance-history.md, "Before and after the
// eleventh session"). A lower GOGC, or off, is left as it is.
func collectOften() (restore func()) {
	old := debug.SetGCPercent(25)
	if old < 25 { // GOGC lower already, or off: as the user asked
		debug.SetGCPercent(old)
	}
	return func() { debug.SetGCPercent(old) }
}
