package ingest

import (
	"errors"
	"fmt"

	"github.com/ppprof/ppprof/trace"
)

// ErrNotTrace says a file's content is not any trace format ingest knows.
// Errors wrapping it name the file and show how its content starts.
var ErrNotTrace = errors.New("not a trace")

// ErrEmpty says a file holds no bytes at all.
var ErrEmpty = errors.New("empty file")

// ErrUnsupported says a file is a trace in a format ingest recognises but
// cannot read yet (Kineto JSON).
var ErrUnsupported = errors.New("unsupported trace format")

// FileError wraps an error with the path of the file it came from. Its
// message is "PATH: reason".
type FileError struct {
	Path string
	Err  error
}

// Error returns "PATH: reason".
func (e *FileError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *FileError) Unwrap() error { return e.Err }

// ParseError says which line (1-based) and, when known, which column of a
// CSV or JSONL file is bad: `line 17, column "end_ns": "abc" is not an
// integer`.
type ParseError struct {
	Line   int
	Column string // a column name from trace.Columns, or "" for the whole line
	Err    error
}

// Error returns `line N, column "C": reason`, or `line N: reason` when no
// one column is at fault.
func (e *ParseError) Error() string {
	if e.Column != "" {
		return fmt.Sprintf("line %d, column %q: %v", e.Line, e.Column, e.Err)
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

// Unwrap returns the underlying error (a *trace.RowError when the row failed
// the validity gate).
func (e *ParseError) Unwrap() error { return e.Err }

// RankConflictError says two files both hold events of the same rank, so
// they cannot be one job's per-rank files (the same rank dumped twice, or
// traces of two jobs mixed up).
type RankConflictError struct {
	Rank         trace.Rank
	PathA, PathB string // the two files, in the order Open read them
}

// Error names the rank and both files.
func (e *RankConflictError) Error() string {
	return fmt.Sprintf("rank %d is in two files: %s and %s (one job's files must hold disjoint ranks)", e.Rank, e.PathA, e.PathB)
}
