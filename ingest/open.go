package ingest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// Options configures Open.
type Options struct {
	// Warn, when set, is called with each warning as Open comes to it, in
	// the order of the files, from the goroutine that called Open. Warnings
	// are also returned in Result.Warnings.
	Warn func(w Warning)

	// Rules map annotation names of profiler traces (Kineto, plain Chrome
	// traces) to events, before the built-in profiles; see ParseRule.
	Rules []Rule

	// NoAlign keeps every file's timestamps as written: no clock offsets
	// are estimated between the files of other tools (see Result.Clocks).
	NoAlign bool

	// Progress, when set, is called with how far Open has got (see
	// Progress), from the goroutine that called Open.
	Progress func(Progress)
}

// Result is what Open read.
type Result struct {
	Trace    *trace.Trace // every file's events merged, ordered by (rank, seq), validated
	Files    []FileInfo   // the files read, in the order they were named and found
	Warnings []Warning    // every warning, in file order

	// Comms holds the process groups and Flight Recorder state the files
	// describe (nil when none do).
	Comms *Comms

	// Clocks says, for each file of another tool's format (Kineto,
	// Megatron, Chrome, Flight Recorder), the offset added to its times to
	// put every file on one time base, and how it was found. Empty when
	// fewer than two such files were read.
	Clocks []ClockOffset
}

// Open reads every trace named by paths and merges them into one trace.
//
// Each path is a file, a directory or a filepath.Glob pattern (tried as a
// pattern only when no file of that name exists). A directory stands for
// the regular files directly inside it, in name order: subdirectories are
// not entered and hidden files (names starting with '.') are skipped.
//
// A file named directly must be a trace. Files found through a directory or
// a pattern are skipped, with a warning, when they are empty, when their
// content is not a trace, or when they are Arrow data cut off before the end
// of its schema (a rank that died before writing anything); but a directory
// or pattern that yields no trace file is an error, as is a pattern that
// matches nothing. A Megatron timeline's side file (meta.yaml,
// meta-NAME.yaml) found in a directory is read with the timeline, not as a
// trace. The same file named twice is read once.
//
// After reading, the steps that need every file run (resolveParts): P2P
// peers by stage adjacency, Flight Recorder pipelines, and the clock
// alignment of other tools' files (align.go, unless opt.NoAlign).
//
// Files are read in parallel; the result does not depend on it. Formats
// are recognised by content (see Sniff), never by name. The files' events
// are merged with trace.Merge: two files may not hold the same rank, and
// where two files set the same metadata key they must agree. The merged
// trace is ordered by (rank, seq) and has passed Validate; a trace with no
// events at all is an error.
//
// Errors name the file (a *FileError, *RankConflictError, or a metadata
// conflict naming both files) and never leave a partial Result.
func Open(paths []string, opt Options) (*Result, error) {
	if len(paths) == 0 {
		return nil, errors.New("no trace files named")
	}
	// 1. Expand directories and patterns into files.
	inputs, sources, err := expand(paths)
	if err != nil {
		return nil, err
	}

	// 2. Read the files in parallel, handling each result in order: Arrow
	// files into their rows of one trace where they can be counted first.
	//
	// The placed trace's columns are made before its files are decoded
	// into them, and collections are off from then until the files are
	// decoded (pauseGC; a memory limit, GOMEMLIMIT or the one ppprof
	// sets, still applies, and the decode makes little garbage). When the
	// string columns were string headers, a collection started by that
	// allocation scanned them while the files were decoded into them: the
	// scan mapped every untouched page to the kernel's shared zero page,
	// and the decode's first store then faulted again to copy it (a
	// write-protect fault and a TLB shootdown per page: a fifth of the CPU
	// of a whole read of a 4096-rank trace). The columns hold no pointers
	// since (trace.Str) and the pause no longer changes the time measured;
	// it keeps a collection that would free nothing out of the decode, and
	// the columns safe from that cost should a pointer column come back.
	gc := pauseGC()
	defer gc.resume()
	big := placeRows(inputs)
	if big == nil {
		gc.resume()
	}
	if afterPlace != nil {
		afterPlace()
	}
	res := &Result{}
	var read []*part
	found := make([]int, len(sources))
	emit := func(ws []Warning) {
		for _, w := range ws {
			res.Warnings = append(res.Warnings, w)
			if opt.Warn != nil {
				opt.Warn(w)
			}
		}
	}
	ro := readOpts{rules: opt.Rules, lists: &rankLists{}, arena: dumpArena(inputs)}
	prog := newProgressReporter(opt.Progress, inputs)
	k := 0
	err = readAll(inputs, ro, func(in input, r readResult) error {
		prog.read(k)
		k++
		if r.err != nil || r.skipped {
			emit(r.warns)
			return r.err
		}
		if in.source >= 0 {
			found[in.source]++
		}
		read = append(read, r.p)
		return nil
	})
	gc.resume()
	if err != nil {
		return nil, err
	}

	// 2b. What needs every file: peers, pipelines, then per-file checks.
	prog.phase("merging")
	resolveParts(read)
	var parts []*trace.Trace
	var partInto []*rowRange
	var partFile []int // index into res.Files of each part
	comms := &Comms{}
	// Arrow files were validated as they were read, and resolveParts
	// leaves them alone (it completes other tools' files): only the others
	// are checked again here, and the merged trace only when one of them
	// is in it.
	allArrow := true
	isArrow := func(p *part) bool {
		return (p.info.Format == FormatArrowFile || p.info.Format == FormatArrowStream) && !p.external && len(p.pending) == 0
	}
	// Each part sorted (resolveParts may have added rows) and, but for
	// Arrow files, checked: on every core (4096 Flight Recorder dumps took
	// 3.4 s of one core here), the first error in the parts' order
	// reported as before.
	invalid := make([]error, len(read))
	eachParallel(len(read), func(i int) {
		p := read[i]
		p.t.SortByRankSeq()
		if !isArrow(p) {
			invalid[i] = p.t.Validate()
		}
	})
	for i, p := range read {
		arrow := isArrow(p)
		allArrow = allArrow && arrow
		if err := invalid[i]; err != nil {
			emit(p.warns)
			return nil, &FileError{Path: p.info.Path, Err: err}
		}
		describe(p)
		emit(p.warns)
		comms.merge(p.comms)
		partFile = append(partFile, len(res.Files))
		res.Files = append(res.Files, p.info)
		parts = append(parts, p.t)
		partInto = append(partInto, p.into)
	}
	if len(comms.Groups) > 0 || len(comms.FlightRecorder) > 0 {
		res.Comms = comms
	}
	for i, s := range sources {
		if found[i] == 0 {
			return nil, &FileError{Path: s.path, Err: fmt.Errorf("no trace files %s (%s)", s.kind, s.note)}
		}
	}

	// 3. One job's files hold disjoint ranks.
	owner := map[trace.Rank]int{}
	for fi, f := range res.Files {
		for _, r := range f.Ranks {
			if prev, ok := owner[r]; ok {
				return nil, &RankConflictError{Rank: r, PathA: res.Files[prev].Path, PathB: f.Path}
			}
			owner[r] = fi
		}
	}

	// 4. Merge and validate.
	var t *trace.Trace
	if len(parts) == 1 {
		t = parts[0]
	} else {
		if tiles(big, parts, partInto) {
			t, err = mergePlaced(big, parts)
		} else {
			t, err = mergeParts(parts)
		}
		big = nil
		var mc *trace.MetaConflictError
		if errors.As(err, &mc) {
			return nil, &metaConflictError{
				pathA: res.Files[partFile[mc.APart]].Path, pathB: res.Files[partFile[mc.BPart]].Path, err: mc}
		}
		if err != nil {
			return nil, fmt.Errorf("merging %d files: %w", len(parts), err)
		}
	}
	var drops *windowDrop
	if !opt.NoAlign {
		prog.phase("aligning clocks")
		var ws []Warning
		res.Clocks, ws, drops = alignClocks(t, read)
		emit(ws)
	} else {
		drops = windowDrops(t, read, nil)
	}
	if drops != nil {
		t = drops.apply(t)
		emit([]Warning{drops.warn})
	}
	// With only Arrow files: disjoint ranks (checked above), each validated.
	if err := validateMerged(t, allArrow); err != nil {
		var re *trace.RowError
		if errors.As(err, &re) {
			if fi, ok := owner[re.Rank]; ok {
				return nil, &FileError{Path: res.Files[fi].Path, Err: err}
			}
		}
		return nil, fmt.Errorf("merged trace: %w", err)
	}
	if t.Len() == 0 {
		return nil, fmt.Errorf("no events in %s", plural(len(res.Files), "file"))
	}
	res.Trace = t
	return res, nil
}

// metaConflictError is a trace.MetaConflictError with the two files named.
type metaConflictError struct {
	pathA, pathB string
	err          *trace.MetaConflictError
}

func (e *metaConflictError) Error() string {
	return fmt.Sprintf("files disagree on metadata %s: %q in %s, %q in %s (are they from the same job?)",
		e.err.Key, e.err.A, e.pathA, e.err.B, e.pathB)
}

func (e *metaConflictError) Unwrap() error { return e.err }

// dumpArena returns the arena a whole read of many Flight Recorder dumps
// builds their rows in (trace.ColumnArena: huge pages for the 1 GB of
// parts a 4096-rank job's dumps make, instead of a fault per 4 KiB), or
// nil: for fewer than arenaFiles inputs, or when the first is not a
// pickled dump. Its slabs are sized for frEntryBytes bytes of dump an
// entry (a fleet job's dumps: about 160).
func dumpArena(inputs []input) *trace.ColumnArena {
	if len(inputs) < arenaFiles || sniffFile(inputs[0].path) != FormatFRPickle {
		return nil
	}
	return trace.NewColumnArena(int(inputsSize(inputs) / frEntryBytes))
}

// arenaFiles is the fewest inputs dumpArena builds an arena for (a var:
// tests lower it).
var arenaFiles = 256

const frEntryBytes = 160

// input is one file to read.
type input struct {
	path   string
	source int       // index of the directory or pattern it came from; -1 when named directly
	into   *rowRange // where an Arrow file's rows go (place.go); nil for a trace of its own
	rows   *rowsRead // only some rows of an Arrow file (steps.go); nil for all
}

// source is a directory or pattern that must yield at least one trace file.
type source struct {
	path string
	kind string // "in the directory", "matching the pattern"
	note string // what else was there, for the error
}

// expand turns paths into the files to read, in a deterministic order:
// paths in the order given, directory entries and pattern matches in name
// order. A file reached twice is kept at its first place.
func expand(paths []string) ([]input, []source, error) {
	var inputs []input
	var sources []source
	seen := map[string]bool{}
	add := func(path string, src int) {
		key := filepath.Clean(path)
		if abs, err := filepath.Abs(path); err == nil {
			key = abs
		}
		if !seen[key] {
			seen[key] = true
			inputs = append(inputs, input{path: path, source: src})
		}
	}
	// addDir lists dir; it adds the files and registers dir as a source.
	addDir := func(dir string, src int) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return &FileError{Path: dir, Err: osReason(err)}
		}
		if src < 0 {
			src = len(sources)
			sources = append(sources, source{path: dir, kind: "in the directory"})
		}
		var hidden, subdirs, files int
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if strings.HasPrefix(e.Name(), ".") {
				hidden++
				continue
			}
			st, err := os.Stat(p) // follows symlinks
			if err != nil || !st.Mode().IsRegular() {
				subdirs++
				continue
			}
			files++
			add(p, src)
		}
		if sources[src].note == "" {
			sources[src].note = fmt.Sprintf("%s; %s and %s skipped; subdirectories are not read",
				plural(files, "file"), plural(hidden, "hidden entry"), plural(subdirs, "other entry"))
		}
		return nil
	}
	for _, p := range paths {
		st, err := statPath(p)
		switch {
		case err == nil && st.IsDir():
			if err := addDir(p, -1); err != nil {
				return nil, nil, err
			}
		case err == nil:
			add(p, -1)
		case errors.Is(err, os.ErrNotExist) && strings.ContainsAny(p, "*?["):
			matches, gerr := filepath.Glob(p)
			if gerr != nil {
				return nil, nil, &FileError{Path: p, Err: fmt.Errorf("bad pattern: %v", gerr)}
			}
			if len(matches) == 0 {
				return nil, nil, &FileError{Path: p, Err: errors.New("the pattern matches no files")}
			}
			src := len(sources)
			sources = append(sources, source{path: p, kind: "matching the pattern",
				note: plural(len(matches), "match") + ", none a trace"})
			for _, m := range matches {
				mst, err := os.Stat(m)
				if err != nil {
					continue
				}
				switch {
				case mst.IsDir():
					if err := addDir(m, src); err != nil {
						return nil, nil, err
					}
				case mst.Mode().IsRegular():
					add(m, src)
				}
				// A pipe or device a pattern matches is skipped, as in a
				// directory: it cannot be read more than once, and opening
				// one nobody writes would wait forever (name it alone: Spool).
			}
		default:
			return nil, nil, &FileError{Path: p, Err: osReason(err)}
		}
	}
	return inputs, sources, nil
}

// readResult is the outcome of reading one input.
type readResult struct {
	p       *part
	warns   []Warning // of a skipped or failed file
	skipped bool      // found in a directory or pattern and not a trace
	err     error
}

// eachParallel calls fn(i) for every i in [0, n), on up to GOMAXPROCS
// goroutines taking the next i as they finish one, and returns when all
// calls have.
func eachParallel(n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// readAll reads inputs on up to GOMAXPROCS goroutines and calls handle for
// each in input order, on the calling goroutine, as soon as it and all
// inputs before it are read. It stops at the first error handle returns.
// The readers stay at most readAhead inputs ahead of handle: what they
// read waits for it in memory (and a handler that recycles what it is
// done with, OpenChunks, keeps the readers in the same memory).
func readAll(inputs []input, opt readOpts, handle func(input, readResult) error) error {
	results := make([]readResult, len(inputs))
	done := make([]chan struct{}, len(inputs))
	for i := range done {
		done[i] = make(chan struct{})
	}
	var stop atomic.Bool
	var mu sync.Mutex
	handled := 0 // inputs handled; guarded by mu
	moved := sync.NewCond(&mu)
	ahead := readAhead * runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	wg.Go(func() {
		eachParallel(len(inputs), func(i int) {
			mu.Lock()
			for i >= handled+ahead && !stop.Load() { // input handled is never waited for
				moved.Wait()
			}
			mu.Unlock()
			if !stop.Load() {
				results[i] = readInput(inputs[i], opt)
			}
			close(done[i])
		})
	})
	defer wg.Wait()
	for i, in := range inputs {
		<-done[i]
		err := handle(in, results[i])
		results[i] = readResult{} // let the handler own the trace
		mu.Lock()
		handled = i + 1
		if err != nil {
			stop.Store(true)
		}
		moved.Broadcast()
		mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// readAhead is how many inputs per core readAll's readers may read before
// they are handled.
const readAhead = 4

// sniffBufs recycles readInput's prefix buffers.
var sniffBufs = sync.Pool{New: func() any { b := make([]byte, sniffLen); return &b }}

// readInput reads one file. A file found through a directory or pattern is
// first sniffed from its first bytes, so a large file that is not a trace
// (a core dump beside the rank files) is skipped without being read whole.
func readInput(in input, opt readOpts) readResult {
	opt.into, opt.rows = in.into, in.rows
	fail := func(p *part, err error) readResult {
		r := readResult{err: err}
		if p != nil {
			r.warns = p.warns
		}
		return r
	}
	if in.source < 0 {
		p, err := readPath(in.path, opt, nil)
		if err != nil {
			return fail(p, err)
		}
		return readResult{p: p}
	}
	skip := func(why string) readResult {
		return readResult{skipped: true, warns: []Warning{{Path: in.path, Message: "skipped: " + why}}}
	}
	if isMegatronMeta(in.path) {
		return readResult{skipped: true}
	}
	if in.into != nil {
		// placeRows found an Arrow file of rows here: read it without
		// sniffing first (an open and a read less, for each of a job's
		// rank files). A file that changed since fails that read, and is
		// sniffed and read again as any other, for the same result.
		if p, err := readPath(in.path, opt, nil); err == nil {
			return readResult{p: p}
		}
	}
	f, err := openRead(in.path)
	if err != nil {
		return readResult{err: &FileError{Path: in.path, Err: osReason(err)}}
	}
	defer f.Close()
	// The prefix is only sniffed (readOpened copies what it keeps of it).
	bp := sniffBufs.Get().(*[]byte)
	defer sniffBufs.Put(bp)
	prefix := (*bp)[:sniffLen]
	n, err := io.ReadFull(f, prefix)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return readResult{err: &FileError{Path: in.path, Err: osReason(err)}}
	}
	prefix = prefix[:n]
	if n == 0 {
		return skip("empty file")
	}
	if Sniff(prefix) == FormatUnknown && !corruptArrow(prefix) {
		return skip(fmt.Sprintf("not a trace (unrecognised content: starts with %s)", describePrefix(prefix)))
	}
	p, err := readOpened(in.path, f, opt, prefix)
	if errors.Is(err, arrowv1.ErrNoSchema) {
		// A rank that died before writing its schema left no events and no
		// metadata: beside other ranks' files that is an absent rank, not a
		// reason to refuse the rest.
		return skip("Arrow data cut off before the end of its schema: no events")
	}
	if err != nil {
		return fail(p, err)
	}
	return readResult{p: p}
}

// plural says "1 file", "3 files", "0 matches".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	switch {
	case strings.HasSuffix(noun, "ch"):
		noun += "es"
	case strings.HasSuffix(noun, "y"):
		noun = noun[:len(noun)-1] + "ies"
	default:
		noun += "s"
	}
	return fmt.Sprintf("%d %s", n, noun)
}

// validateMerged checks the merged trace for what merging and aligning
// clocks can have broken: nothing when every file was an Arrow file
// (validated as read, untouched since, ranks disjoint); else the times
// (trace.ValidateTimes). Every part was validated (Arrow files as read,
// the others after resolveParts), their ranks are disjoint, and a rank's
// rows come from one part, in order: what the merge copies is valid;
// alignment then shifted the times of other tools' files, and a shift may
// wrap around. (The whole Validate again took 1.4 s of one core for a
// 16384-rank job's Flight Recorder dumps.)
func validateMerged(t *trace.Trace, allArrow bool) error {
	if allArrow {
		return nil
	}
	return t.ValidateTimes()
}
