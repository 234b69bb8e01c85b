package ingest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// gpipe2 reads the CSV fixture.
func gpipe2(t testing.TB) *trace.Trace {
	t.Helper()
	f, err := os.Open("testdata/gpipe2.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := ReadCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// rankSlice returns the rows of rank r (t is ordered by rank).
func rankSlice(t *trace.Trace, r trace.Rank) *trace.Trace {
	from, to := -1, 0
	for i := 0; i < t.Len(); i++ {
		if t.Rank[i] == r {
			if from < 0 {
				from = i
			}
			to = i + 1
		}
	}
	if from < 0 {
		return t.Slice(0, 0)
	}
	return t.Slice(from, to)
}

func csvBytes(t testing.TB, tr *trace.Trace) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteCSV(&b, tr); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jsonlBytes(t testing.TB, tr *trace.Trace) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteJSONL(&b, tr); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestOpenDirectoryMixed opens a directory holding one rank as CSV and the
// other as gzip-compressed JSONL with misleading names, beside files that
// are not traces, hidden files and a subdirectory.
func TestOpenDirectoryMixed(t *testing.T) {
	want := gpipe2(t)
	dir := t.TempDir()
	writeFile(t, dir, "b.txt", csvBytes(t, rankSlice(want, 0)))
	writeFile(t, dir, "a.csv", gzipBytes(t, jsonlBytes(t, rankSlice(want, 1))))
	writeFile(t, dir, "README", []byte("rank dumps of job 42\n"))
	writeFile(t, dir, "empty.log", nil)
	writeFile(t, dir, ".hidden.csv", []byte("not,read\n"))
	writeFile(t, dir, "sub/rank-9.csv", csvBytes(t, rankSlice(want, 0))) // not entered: would clash on rank 0

	var warned []string
	res, err := Open([]string{dir}, Options{Warn: func(w Warning) { warned = append(warned, w.String()) }})
	if err != nil {
		t.Fatal(err)
	}
	if d := trace.Diff(want, res.Trace); d != "" {
		t.Errorf("merged trace differs from the fixture: %s", d)
	}
	var files []string
	for _, f := range res.Files {
		files = append(files, filepath.Base(f.Path)+":"+string(f.Format)+":"+rankList(f.Ranks))
	}
	if got, w := strings.Join(files, " "), "a.csv:jsonl:1 b.txt:csv:0"; got != w {
		t.Errorf("files %s, want %s", got, w)
	}
	if !res.Files[0].Compressed || res.Files[1].Compressed {
		t.Errorf("compressed flags %v %v, want true false", res.Files[0].Compressed, res.Files[1].Compressed)
	}
	wantWarn := []string{
		filepath.Join(dir, "README") + `: skipped: not a trace (unrecognised content: starts with "rank dumps of jo"...)`,
		filepath.Join(dir, "empty.log") + ": skipped: empty file",
	}
	if strings.Join(warned, "\n") != strings.Join(wantWarn, "\n") {
		t.Errorf("warnings\n%s\nwant\n%s", strings.Join(warned, "\n"), strings.Join(wantWarn, "\n"))
	}
	if len(res.Warnings) != len(warned) {
		t.Errorf("Result.Warnings has %d, Warn saw %d", len(res.Warnings), len(warned))
	}
}

func rankList(rs []trace.Rank) string {
	var s []string
	for _, r := range rs {
		s = append(s, strings.TrimSpace(string(rune('0'+r))))
	}
	return strings.Join(s, ",")
}

// TestOpenGlobAndDedupe opens a pattern and a file it also matches: the
// file is read once, in pattern order.
func TestOpenGlobAndDedupe(t *testing.T) {
	want := gpipe2(t)
	dir := t.TempDir()
	p0 := writeFile(t, dir, "r0.csv", csvBytes(t, rankSlice(want, 0)))
	writeFile(t, dir, "r1.csv", csvBytes(t, rankSlice(want, 1)))
	res, err := Open([]string{filepath.Join(dir, "r*.csv"), p0}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 2 || res.Files[0].Path != p0 {
		t.Fatalf("files %+v", res.Files)
	}
	if d := trace.Diff(want, res.Trace); d != "" {
		t.Error(d)
	}
}

// TestOpenErrors checks that each kind of bad input is an error naming the
// file and the reason.
func TestOpenErrors(t *testing.T) {
	fix := gpipe2(t)
	dir := t.TempDir()
	r0 := csvBytes(t, rankSlice(fix, 0))
	files := map[string][]byte{
		"r0.csv":         r0,
		"r0-again.jsonl": jsonlBytes(t, rankSlice(fix, 0)),
		"empty.csv":      nil,
		"notes.txt":      []byte("hello\n"),
		"kineto.json":    []byte(`{"schemaVersion": 1, "traceEvents": []}`),
		"badcell.csv":    []byte("rank,stage,step,kind,seq,start_ns,end_ns\n0,0,0,F,0,0,1\n0,0,0,F,1,1,two\n"),
		"corrupt.csv.gz": badChecksum(gzipBytes(t, r0)),
		"header.csv":     []byte("rank,stage,step,kind,seq,start_ns,end_ns\n"),
		"onlytext/a.txt": []byte("just notes\n"),
	}
	for name, data := range files {
		writeFile(t, dir, name, data)
	}
	if err := os.Mkdir(filepath.Join(dir, "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	tests := []struct {
		name  string
		paths []string
		want  string
	}{
		{"nonexistent", []string{p("nope.arrows")}, p("nope.arrows") + ": no such file or directory"},
		{"pattern matches nothing", []string{p("*.arrows")}, p("*.arrows") + ": the pattern matches no files"},
		{"bad pattern", []string{p("[x")}, p("[x") + ": bad pattern: syntax error in pattern"},
		{"empty file", []string{p("empty.csv")}, p("empty.csv") + ": empty file"},
		{"not a trace", []string{p("notes.txt")}, p("notes.txt") + `: not a trace (unrecognised content: starts with "hello\n")`},
		{"kineto without events", []string{p("kineto.json")}, "no events in 1 file"},
		{"bad cell", []string{p("badcell.csv")}, p("badcell.csv") + `: line 3, column "end_ns": "two" is not an integer`},
		{"corrupt gzip", []string{p("corrupt.csv.gz")}, p("corrupt.csv.gz") + ": corrupt gzip data: gzip: invalid checksum"},
		{"same rank twice", []string{p("r0.csv"), p("r0-again.jsonl")}, "rank 0 is in two files: " + p("r0.csv") + " and " + p("r0-again.jsonl") + " (one job's files must hold disjoint ranks)"},
		{"empty directory", []string{p("emptydir")}, p("emptydir") + ": no trace files in the directory (0 files; 0 hidden entries and 0 other entries skipped; subdirectories are not read)"},
		{"directory of notes", []string{p("onlytext")}, p("onlytext") + ": no trace files in the directory (1 file; 0 hidden entries and 0 other entries skipped; subdirectories are not read)"},
		{"pattern of notes", []string{p("*.txt")}, p("*.txt") + ": no trace files matching the pattern (1 match, none a trace)"},
		{"no events", []string{p("header.csv")}, "no events in 1 file"},
		{"nothing named", nil, "no trace files named"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Open(tc.paths, Options{})
			if err == nil {
				t.Fatalf("no error; read %d events", res.Trace.Len())
			}
			if err.Error() != tc.want {
				t.Errorf("got  %s\nwant %s", err, tc.want)
			}
		})
	}
	var rc *RankConflictError
	if _, err := Open([]string{p("r0.csv"), p("r0-again.jsonl")}, Options{}); !errors.As(err, &rc) || rc.Rank != 0 {
		t.Errorf("same rank twice: %v is not a *RankConflictError for rank 0", err)
	}
	if _, err := Open([]string{p("notes.txt")}, Options{}); !errors.Is(err, ErrNotTrace) {
		t.Errorf("not a trace: %v is not ErrNotTrace", err)
	}
	var fe *FileError
	if _, err := Open([]string{p("badcell.csv")}, Options{}); !errors.As(err, &fe) || fe.Path != p("badcell.csv") {
		t.Errorf("bad cell: %v is not a *FileError for the file", err)
	}
}

// TestReadFileTextTruncated checks that a text trace cut off mid-line, plain
// or inside gzip, keeps its complete lines and warns.
func TestReadFileTextTruncated(t *testing.T) {
	full := csvBytes(t, gpipe2(t))
	cut := full[:len(full)-10] // ends inside the last row
	dir := t.TempDir()
	tests := []struct {
		name string
		data []byte
		warn []string
	}{
		{"plain", cut, []string{"incomplete last line 19 dropped (%d bytes): the file ends in the middle of a row"}},
		{"gzip", gzipBytes(t, full)[:len(gzipBytes(t, full))/2], []string{
			"truncated gzip data: the compressed stream ends early (%d bytes decompressed)",
			"incomplete last line %d dropped (%d bytes): the file ends in the middle of a row"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, dir, tc.name, tc.data)
			tr, info, warns, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The plain cut keeps 17 of 18 rows; how many rows half the gzip
			// data holds depends on the compressor.
			if tr.Len() == 0 || tr.Len() > 17 || tc.name == "plain" && tr.Len() != 17 || !info.Truncated || info.BytesLost <= 0 {
				t.Errorf("%d events, truncated %v, lost %d: want 17 events (plain) or some, truncated, bytes lost", tr.Len(), info.Truncated, info.BytesLost)
			}
			if len(warns) != len(tc.warn) {
				t.Fatalf("warnings %v, want %d", warns, len(tc.warn))
			}
			for i, w := range warns {
				if !matchesPattern(w.Message, tc.warn[i]) || w.Path != path {
					t.Errorf("warning %q, want %q for %s", w, tc.warn[i], path)
				}
			}
		})
	}
	// A complete file whose last row is bad but ends with a newline is an
	// error, not a truncation.
	bad := append(append([]byte{}, cut...), '\n')
	if _, _, _, err := ReadFile(writeFile(t, dir, "bad", bad)); err == nil || !strings.Contains(err.Error(), "line 19") {
		t.Errorf("terminated bad last line: %v, want an error on line 19", err)
	}
}

// matchesPattern reports whether s matches format with each %d standing for
// a run of digits.
func matchesPattern(s, format string) bool {
	parts := strings.Split(format, "%d")
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, p := range parts[1:] {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 || !strings.HasPrefix(s[i:], p) {
			return false
		}
		s = s[i+len(p):]
	}
	return s == ""
}

// badChecksum flips a bit of a gzip file's CRC-32 trailer.
func badChecksum(z []byte) []byte {
	z[len(z)-8] ^= 1
	return z
}
