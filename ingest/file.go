package ingest

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"sync/atomic"

	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// Warning is something wrong with a file that did not stop it from being
// read: a truncated Arrow stream, a stream the writer never closed, a file
// skipped in a directory because it is not a trace.
type Warning struct {
	Path    string // the file, as named to Open (or found in a directory)
	Message string // what happened, e.g. "truncated stream: kept 7 complete batches (1234 events), lost 5321 of 98765 bytes (5.4%)"
}

// String returns "PATH: MESSAGE".
func (w Warning) String() string { return w.Path + ": " + w.Message }

// FileInfo describes one file that was read.
type FileInfo struct {
	Path       string
	Format     Format       // the format inside, after any decompression
	Compressed bool         // the file was gzip-compressed
	Ranks      []trace.Rank // distinct ranks of its events, increasing
	Events     int          // events read (kept)
	Batches    int          // Arrow record batches read; 0 for CSV and JSONL
	Truncated  bool         // the file was cut off or not closed; what was complete was kept
	BytesLost  int64        // bytes after the last complete batch or line that could not be used
}

// ReadFile reads one trace file of any format Sniff recognises, gzip
// compressed or not, and returns its events ordered by (rank, seq), having
// passed Validate. Warnings say what was tolerated (truncation) and what
// was inferred or could not be mapped; errors are *FileError values naming
// path. The format is decided by content, never by the file name. Chrome
// traces (Kineto, Megatron, plain) are decoded as a stream, never held
// whole in memory. P2P ops whose peer or direction needs other ranks'
// files are completed from this file alone where possible, else left out
// with a warning: name all of a job's files to Open instead.
func ReadFile(path string) (*trace.Trace, FileInfo, []Warning, error) {
	return readFileOpts(path, readOpts{})
}

// readOpts is what reading one file needs from Options.
type readOpts struct {
	rules []Rule
	// head: decode only the first record batch of Arrow input (the
	// part's headRows says how many rows the file holds).
	head bool
	// into: decode Arrow input into these rows (place.go).
	into *rowRange
	// rows: decode only some rows of Arrow input (Chunks cut between
	// steps, steps.go).
	rows *rowsRead
	// mapped: map Arrow files whatever their size for whole reads too
	// (Chunks.MapFiles).
	mapped bool
	// lists: the rank lists of the Flight Recorder dumps read so far, by
	// their text (nil: each dump parses its own).
	lists *rankLists
	// arena: where the Flight Recorder dumps' rows go, for a whole read
	// of many (nil: each part's columns allocated on their own).
	arena *trace.ColumnArena
}

func readFileOpts(path string, opt readOpts) (*trace.Trace, FileInfo, []Warning, error) {
	p, err := readPath(path, opt, nil)
	if err != nil {
		var warns []Warning
		if p != nil {
			warns = p.warns
		}
		return nil, FileInfo{Path: path}, warns, err
	}
	return finishOne(p)
}

// finishOne completes a part read alone (resolve.go) and describes it.
func finishOne(p *part) (*trace.Trace, FileInfo, []Warning, error) {
	parts := []*part{p}
	resolveParts(parts)
	t := p.t
	t.SortByRankSeq()
	if err := t.Validate(); err != nil {
		return nil, p.info, p.warns, &FileError{Path: p.info.Path, Err: err}
	}
	describe(p)
	return t, p.info, p.warns, nil
}

// describe fills the FileInfo fields that depend on the rows.
func describe(p *part) {
	if p.info.Ranks == nil || p.fr == nil {
		p.info.Ranks = p.t.Ranks()
	}
	p.info.Events = p.t.Len()
	if p.info.Events == 0 && p.fr == nil {
		p.warnf("no events")
	}
}

// readPath reads the file at path into a part. prefix, when not nil, is
// the file's first bytes already read (readInput sniffs them first). A
// Chrome trace is streamed from the file; other formats are read whole.
func readPath(path string, opt readOpts, prefix []byte) (*part, error) {
	f, err := openRead(path)
	if err != nil {
		return nil, &FileError{Path: path, Err: osReason(err)}
	}
	defer f.Close()
	return readOpened(path, f, opt, prefix)
}

// readOpened is readPath of the file f, open at path, read up to its
// end; when prefix is not nil, f's first bytes were read into it and f
// is positioned after them (a pipe is read on from there). It does not
// close f. A job's rank files are sniffed and read through one open each
// (a 32768-rank job's opened four times: 0.4 s of CPU in open alone).
func readOpened(path string, f *os.File, opt readOpts, prefix []byte) (*part, error) {
	if prefix == nil {
		if p, ok, err := readArrowFile(path, f, opt); ok {
			return p, err
		}
		buf := make([]byte, sniffLen)
		n, err := io.ReadFull(f, buf)
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			return nil, &FileError{Path: path, Err: osReason(err)}
		}
		prefix = buf[:n]
	}
	format := Sniff(prefix)
	if format.isChrome() {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, &FileError{Path: path, Err: osReason(err)}
		}
		return readChromeFile(path, f, format, opt)
	}
	inPlace := format == FormatArrowFile || format == FormatArrowStream || format == FormatFRPickle
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && inPlace {
		// Arrow and Flight Recorder pickles in a regular file are decoded
		// from its pages in place, or from a recycled buffer (their
		// decoders copy what they keep: a fleet's dumps were 6 GB of fresh
		// memory read into buffers of their own); a file truncated
		// meanwhile faults, which becomes its error (readMappedData;
		// readArrow recovers it first). A pipe cannot be read again from
		// its start: it takes the path below.
		if p, ok := readHeadAt(path, f, st.Size(), opt); ok {
			return p, nil
		}
		data, release, err := mapFor(opt)(f)
		if err != nil {
			return nil, &FileError{Path: path, Err: osReason(err)}
		}
		defer release()
		return readMappedData(path, data, opt)
	}
	data, err := readRest(f, prefix)
	if err != nil {
		return nil, &FileError{Path: path, Err: osReason(err)}
	}
	return readData(path, data, opt)
}

// readMappedData is readData of a mapped file's bytes for a reader that
// does not recover faults itself: a file truncated under the mapping
// faults when its lost pages are touched, which becomes the file's error.
func readMappedData(path string, data []byte, opt readOpts) (p *part, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if _, fault := r.(interface{ Addr() uintptr }); !fault {
			panic(r) // not the mapping's: a bug, not the file's error
		}
		p, err = nil, &FileError{Path: path, Err: fmt.Errorf("read failed: the file changed while it was read (%v)", r)}
	}()
	return readData(path, data, opt)
}

// readRest returns prefix followed by the rest of f, read into one buffer
// sized from f's size when f is a regular file (as os.ReadFile does):
// io.ReadAll grew its buffer a doubling at a time, then the prefix was
// copied in front, three copies of each of 4096 Flight Recorder dumps.
func readRest(f *os.File, prefix []byte) ([]byte, error) {
	size := 0
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() < 1<<40 {
		size = int(st.Size())
	}
	buf := make([]byte, len(prefix), max(size, len(prefix))+512)
	copy(buf, prefix)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // the file grew: room for more
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// mapFor is how a read with opt gets an Arrow file's bytes: mapped
// whatever its size (arrowv1.MapFileSparse) when it touches little of
// the file (the indexed messages of a cut chunk; a head, which decodes
// two record batches and frames the rest from their headers), so the
// rest is never copied; else arrowv1.MapFile (small files read into a
// recycled buffer, as fast for a whole decode). Reading heads and
// counting rows of the 302M-event fleet trace spent 4.5 s of CPU in
// read(2) copying whole 2.2 MB files (docs/performance.md). opt.mapped
// maps whole reads too (Chunks.MapFiles).
func mapFor(opt readOpts) func(*os.File) ([]byte, func(), error) {
	if opt.rows != nil && opt.rows.ix != nil || opt.head || opt.mapped {
		return arrowv1.MapFileSparse
	}
	return arrowv1.MapFile
}

// readHeadAt is the head read of f (size bytes, a regular file) when opt
// asks for one and f holds an Arrow stream arrowv1.ReadHeadAt reads: its
// messages' headers and the bodies decoded, read with pread instead of
// mapped (a page fault costs more than a read on some machines: reading
// the heads of the 302M-event fleet trace's 4096 files through mappings
// took 6 s of CPU; docs/performance.md). ok is false otherwise, f's offset
// unchanged.
func readHeadAt(path string, f *os.File, size int64, opt readOpts) (p *part, ok bool) {
	if !opt.head {
		return nil, false
	}
	res, rows, ok := arrowv1.ReadHeadAt(f, size)
	if !ok {
		return nil, false
	}
	p = &part{info: FileInfo{Path: path, Format: FormatArrowStream}}
	p.setArrow(arrowReadOf(res, rows), opt)
	return p, true
}

// readRowsAt is the read of rows opt.rows of f (size bytes, a regular
// file) through their file's index (a chunk cut between steps) when f
// holds an Arrow stream arrowv1.ReadRowsAt reads: the messages those rows
// need read with pread instead of the file mapped (a chunk of the fleet
// trace reads a few batches of each of 4096 files: 8 s of the what-if's
// CPU went to unmapping them, more to page faults). ok is false
// otherwise, f's offset unchanged: the file is then mapped as before,
// which gives the same rows or says what is wrong.
func readRowsAt(path string, f *os.File, size int64, opt readOpts) (p *part, ok bool) {
	if opt.rows == nil || opt.rows.ix == nil || opt.head || opt.mapped {
		return nil, false
	}
	var res *arrowv1.Result
	if opt.into.holds(opt.rows) {
		// Into the file's rows of the chunk (Chunks.placeSpans).
		res, ok = arrowv1.ReadRowsAtInto(f, size, opt.rows.ix, opt.rows.lo, opt.rows.hi, opt.into.t, opt.into.off)
	} else {
		res, ok = arrowv1.ReadRowsAt(f, size, opt.rows.ix, opt.rows.lo, opt.rows.hi)
	}
	if !ok {
		return nil, false
	}
	rowsReadAt.Add(1)
	p = &part{info: FileInfo{Path: path, Format: FormatArrowStream}}
	p.setArrow(arrowReadOf(res, int64(res.Trace.Len())), opt)
	return p, true
}

// rowsReadAt counts the reads readRowsAt answered (for the tests).
var rowsReadAt atomic.Int64

// readArrowFile reads f, a file not sniffed yet, when it is an Arrow file
// or stream in a regular file (the rank files of a job read again,
// Chunks.Chunk): its contents are read or mapped once (arrowv1.MapFile)
// and sniffed from there, instead of its first bytes being read first.
// ok is false, and f is back at its start, for anything else: readPath
// then sniffs it as it does any file.
func readArrowFile(path string, f *os.File, opt readOpts) (p *part, ok bool, err error) {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, false, nil
	}
	if p, ok := readHeadAt(path, f, st.Size(), opt); ok {
		return p, true, nil
	}
	if p, ok := readRowsAt(path, f, st.Size(), opt); ok {
		return p, true, nil
	}
	data, release, err := mapFor(opt)(f)
	if err != nil {
		return nil, true, &FileError{Path: path, Err: osReason(err)}
	}
	defer release()
	if format := Sniff(data[:min(len(data), sniffLen)]); format != FormatArrowFile && format != FormatArrowStream {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, true, &FileError{Path: path, Err: osReason(err)}
		}
		return nil, false, nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	p, err = readData(path, data, opt)
	return p, true, err
}

// readChromeFile streams a Chrome trace from r, decompressing gzip on the
// fly.
func readChromeFile(path string, r io.Reader, format Format, opt readOpts) (*part, error) {
	info := FileInfo{Path: path, Format: format}
	br := &peekReader{r: r}
	if bytes.HasPrefix(br.peek(2), gzipMagic) {
		info.Compressed = true
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &FileError{Path: path, Err: fmt.Errorf("corrupt gzip data: %v", err)}
		}
		r = zr
	} else {
		r = br
	}
	p, err := readChrome(path, r, format, opt)
	if err != nil {
		return p, &FileError{Path: path, Err: err}
	}
	p.info.Format, p.info.Compressed = info.Format, info.Compressed
	return p, nil
}

// readChrome dispatches a Chrome-trace format to its reader.
func readChrome(path string, r io.Reader, format Format, opt readOpts) (*part, error) {
	if format == FormatMegatron {
		return readMegatron(path, r)
	}
	return readKineto(path, r, kinetoOpts{mapper: newMapper(opt.rules), kineto: format == FormatKineto})
}

// peekReader lets the first bytes of a reader be looked at and read again.
type peekReader struct {
	r   io.Reader
	buf []byte
}

func (p *peekReader) peek(n int) []byte {
	for len(p.buf) < n {
		b := make([]byte, n-len(p.buf))
		m, err := p.r.Read(b)
		p.buf = append(p.buf, b[:m]...)
		if err != nil {
			break
		}
	}
	return p.buf[:min(n, len(p.buf))]
}

func (p *peekReader) Read(b []byte) (int, error) {
	if len(p.buf) > 0 {
		n := copy(b, p.buf)
		p.buf = p.buf[n:]
		return n, nil
	}
	return p.r.Read(b)
}

// osReason drops the path an *fs.PathError repeats, since FileError names
// the file already: "x: no such file or directory", not "x: open x: ...".
func osReason(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readBytes is ReadFile on data already in memory; path only names the
// data in messages.
func readBytes(path string, data []byte) (*trace.Trace, FileInfo, []Warning, error) {
	p, err := readData(path, data, readOpts{})
	if err != nil {
		var warns []Warning
		info := FileInfo{Path: path, Format: FormatUnknown}
		if p != nil {
			warns, info = p.warns, p.info
		}
		return nil, info, warns, err
	}
	return finishOne(p)
}

// readData reads one file's bytes into a part. On error the part, when not
// nil, holds the warnings given before it.
func readData(path string, data []byte, opt readOpts) (*part, error) {
	p := &part{}
	p.info = FileInfo{Path: path, Format: FormatUnknown}
	fail := func(err error) (*part, error) {
		return p, &FileError{Path: path, Err: err}
	}
	if len(data) == 0 {
		return fail(ErrEmpty)
	}

	// 1. Decompress. A gzip stream that ends early keeps what came out of
	// it: the format reader below decides what of that is complete.
	gzipCut := false
	if bytes.HasPrefix(data, gzipMagic) {
		p.info.Compressed = true
		inner, err := gunzipPrefix(data, -1)
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF) && len(inner) > 0:
			gzipCut = true
			p.warnf("truncated gzip data: the compressed stream ends early (%d bytes decompressed)", len(inner))
		case errors.Is(err, io.ErrUnexpectedEOF):
			return fail(errors.New("truncated gzip data: nothing could be decompressed"))
		case err != nil:
			return fail(fmt.Errorf("corrupt gzip data: %v", err))
		}
		if len(inner) == 0 {
			return fail(fmt.Errorf("%w (after gzip decompression)", ErrEmpty))
		}
		data = inner
	}

	// 2. Recognise the content and read it.
	prefix := data
	if len(prefix) > sniffLen {
		prefix = prefix[:sniffLen]
	}
	p.info.Format = Sniff(prefix)
	var t *trace.Trace
	var err error
	switch f := p.info.Format; f {
	case FormatArrowFile, FormatArrowStream:
		var ar arrowRead
		ar, err = readArrow(data, opt.head, opt.into, opt.rows)
		if err == nil {
			p.setArrow(ar, opt)
			t = ar.trace
		}
	case FormatCSV, FormatJSONL:
		var lost int64
		var dropped int
		t, lost, dropped, err = readText(f, data, gzipCut)
		if dropped > 0 {
			p.info.Truncated = true
			p.info.BytesLost = lost
			p.warnf("incomplete last line %d dropped (%d bytes): the file ends in the middle of a row", dropped, lost)
		}
	case FormatKineto, FormatMegatron, FormatChromeTrace, FormatFRPickle, FormatFRJSON:
		var q *part
		if f.isChrome() {
			q, err = readChrome(path, bytes.NewReader(data), f, opt)
		} else {
			q, err = readFlightRecorder(path, data, f == FormatFRJSON, opt.lists, opt.arena)
		}
		if err == nil {
			q.warns = append(p.warns, q.warns...)
			q.info.Format, q.info.Compressed = f, p.info.Compressed
			q.info.Truncated = q.info.Truncated || gzipCut
			return q, nil
		}
	case FormatUnknown:
		if corruptArrow(data) {
			err = errors.New("corrupt Arrow stream: it starts with the Arrow continuation marker, but its first message is not a valid schema")
			break
		}
		fallthrough
	default:
		err = fmt.Errorf("%w (unrecognised content: starts with %s)", ErrNotTrace, describePrefix(data))
	}
	if err != nil {
		return fail(err)
	}
	p.info.Truncated = p.info.Truncated || gzipCut
	p.t = t
	return p, nil
}

// readText reads CSV or JSONL. When the text does not end with a newline
// and its last line is what fails to parse (or the gzip stream around it was
// cut off), that line is dropped as the remains of an interrupted write:
// dropped is its line number and lost its length in bytes.
func readText(f Format, data []byte, cut bool) (t *trace.Trace, lost int64, dropped int, err error) {
	read := func(b []byte) (*trace.Trace, error) {
		if f == FormatCSV {
			return ReadCSV(bytes.NewReader(b))
		}
		return ReadJSONL(bytes.NewReader(b))
	}
	last := bytes.LastIndexByte(data, '\n')
	unterminated := last < len(data)-1
	lastLine := bytes.Count(data, []byte{'\n'}) + 1
	if cut && unterminated {
		t, err = read(data[:last+1])
		return t, int64(len(data) - last - 1), lastLine, err
	}
	t, err = read(data)
	var pe *ParseError
	var re *trace.RowError
	if err != nil && unterminated && last >= 0 && errors.As(err, &pe) && pe.Line == lastLine && !errors.As(err, &re) {
		if t2, err2 := read(data[:last+1]); err2 == nil {
			return t2, int64(len(data) - last - 1), lastLine, nil
		}
	}
	return t, 0, 0, err
}
