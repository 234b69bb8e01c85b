package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/ppprof/ppprof/trace"
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
// passed Validate. Warnings say what was tolerated (truncation); errors are
// *FileError values naming path. The format is decided by content, never by
// the file name.
func ReadFile(path string) (*trace.Trace, FileInfo, []Warning, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, FileInfo{Path: path}, nil, &FileError{Path: path, Err: osReason(err)}
	}
	return readBytes(path, data)
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
	info := FileInfo{Path: path, Format: FormatUnknown}
	var warns []Warning
	warn := func(format string, args ...any) {
		warns = append(warns, Warning{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	fail := func(err error) (*trace.Trace, FileInfo, []Warning, error) {
		return nil, info, warns, &FileError{Path: path, Err: err}
	}
	if len(data) == 0 {
		return fail(ErrEmpty)
	}

	// 1. Decompress. A gzip stream that ends early keeps what came out of
	// it: the format reader below decides what of that is complete.
	gzipCut := false
	if bytes.HasPrefix(data, gzipMagic) {
		info.Compressed = true
		inner, err := gunzipPrefix(data, -1)
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF) && len(inner) > 0:
			gzipCut = true
			warn("truncated gzip data: the compressed stream ends early (%d bytes decompressed)", len(inner))
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
	info.Format = Sniff(prefix)
	var t *trace.Trace
	var err error
	switch info.Format {
	case FormatArrowFile, FormatArrowStream:
		var ar arrowRead
		ar, err = readArrow(data)
		if err == nil {
			t = ar.trace
			info.Batches = ar.batches
			info.Truncated = ar.truncated
			info.BytesLost = ar.bytesLost
			if ar.warning != "" {
				warn("%s", ar.warning)
			}
		}
	case FormatCSV, FormatJSONL:
		var lost int64
		var dropped int
		t, lost, dropped, err = readText(info.Format, data, gzipCut)
		if dropped > 0 {
			info.Truncated = true
			info.BytesLost = lost
			warn("incomplete last line %d dropped (%d bytes): the file ends in the middle of a row", dropped, lost)
		}
	case FormatKineto:
		err = fmt.Errorf("%w: Kineto traces are not supported yet", ErrUnsupported)
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

	// 3. Describe what was read.
	info.Truncated = info.Truncated || gzipCut
	t.SortByRankSeq()
	info.Ranks = t.Ranks()
	info.Events = t.Len()
	if info.Events == 0 {
		warn("no events")
	}
	return t, info, warns, nil
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
