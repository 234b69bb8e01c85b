package ingest

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/ppprof/ppprof/internal/cleanup"
)

// Stdin names standard input among the paths given to Spool.
const Stdin = "-"

// spooled maps each path Spool copied to the file it is read from; nil
// (the usual case) when none is. Replaced whole under spoolMu, read
// without a lock by every open.
var (
	spooled atomic.Pointer[map[string]string]
	spoolMu sync.Mutex
)

// local returns the file path is read from: its copy when Spool made
// one, else path itself.
func local(path string) string {
	if m := spooled.Load(); m != nil {
		if p, ok := (*m)[path]; ok {
			return p
		}
	}
	return path
}

// isSpooled reports whether path is read from a copy Spool made.
func isSpooled(path string) bool { return local(path) != path }

// statPath is os.Stat of the file path is read from.
func statPath(path string) (os.FileInfo, error) { return os.Stat(local(path)) }

// Local returns the file path is read from: the temporary copy Spool
// made of it, or path itself. For a caller reading a named input with
// the os package.
func Local(path string) string { return local(path) }

// Spool copies each of paths that can be read only once into a
// temporary file that the readers of this package read in its place:
// Stdin ("-") from stdin, a pipe (a named one, or /dev/fd/N as a shell's
// <(command) gives), a character device or a socket. Every reader reads a
// file more than once (its format is sniffed, an Arrow file's rows are
// counted before they are read), which such an input cannot be; and the
// copy can be mapped. The input keeps its name: errors, warnings and
// FileInfo.Path say "-" or "/dev/fd/63", not the copy's path. The copy is
// named as the input ends (stdin for "-"), in a directory of its own
// under TMPDIR when it is set; else /tmp, or /var/tmp when /tmp is held in
// memory (makeSpoolDir).
//
// copied, when not nil, is called as the copies grow (every MiB or so),
// with the input being copied and the bytes copied so far of every input:
// for a progress line while a large trace is piped in.
//
// release removes the copies and forgets them; it is never nil, and is
// to be called when the reading is done, on error too. A path that is a
// regular file, a directory or a pattern, or that does not exist, is left
// to the readers (their errors name it).
func Spool(paths []string, stdin *os.File, copied func(path string, total int64)) (release func(), err error) {
	var made []string            // directories, to remove
	names := map[string]string{} // path -> its copy
	release = func() {
		if len(names) > 0 {
			editSpooled(func(m map[string]string) {
				for n, c := range names {
					if m[n] == c { // not spooled again since
						delete(m, n)
					}
				}
			})
		}
		for _, d := range made {
			cleanup.Remove(d)
		}
		made, names = nil, map[string]string{}
	}
	seen := map[string]bool{}
	var total int64 // bytes copied
	for _, p := range paths {
		if seen[p] {
			continue // named twice: one copy serves both
		}
		seen[p] = true
		var src io.Reader
		base := filepath.Base(p)
		if p == Stdin {
			if stdin == nil {
				return release, &FileError{Path: p, Err: errors.New("standard input is not available")}
			}
			if isTerminal(stdin) {
				return release, &FileError{Path: p, Err: errors.New("standard input is a terminal, not a trace: pipe one in (ppprof analyze - < trace.arrow) or name its files")}
			}
			src, base = stdin, "stdin"
		} else {
			st, err := os.Stat(p)
			if err != nil || st.Mode().IsRegular() || st.IsDir() {
				continue
			}
			f, err := os.Open(p)
			if err != nil {
				return release, &FileError{Path: p, Err: osReason(err)}
			}
			defer f.Close()
			src = f
		}
		dir, err := makeSpoolDir()
		if err != nil {
			return release, &FileError{Path: p, Err: fmt.Errorf("cannot copy it to a temporary file (it can be read only once): %v; set TMPDIR to a writable directory", err)}
		}
		made = append(made, dir)
		cleanup.Track(dir) // removed by a signal that ends the process, too
		dst := filepath.Join(dir, base)
		if err := copyTo(dst, src, p, &total, copied); err != nil {
			return release, &FileError{Path: p, Err: fmt.Errorf("copying it to %s (it can be read only once): %v; set TMPDIR to a directory with room", dst, err)}
		}
		editSpooled(func(m map[string]string) { m[p] = dst })
		names[p] = dst
	}
	return release, nil
}

// inMemory reports whether a directory is on a file system held in
// memory (a variable for the tests).
var inMemory = fsInMemory

// diskTemp is where large temporary files go when /tmp is held in memory
// (systemd's file hierarchy; a variable for the tests).
var diskTemp = "/var/tmp"

// makeSpoolDir makes the directory of a copy: under TMPDIR when it is
// set; else under /tmp, unless /tmp is held in memory (a tmpfs: the
// default on Debian 13, Fedora, Arch) and /var/tmp is not and can be
// written. A trace's copy in a tmpfs takes the memory the analysis plans
// for, and a tmpfs is sized to half of it: a large trace would not fit.
func makeSpoolDir() (string, error) {
	tmp := os.TempDir()
	if os.Getenv("TMPDIR") == "" && inMemory(tmp) && !inMemory(diskTemp) {
		if dir, err := os.MkdirTemp(diskTemp, "ppprof-input-"); err == nil {
			return dir, nil
		}
	}
	return os.MkdirTemp(tmp, "ppprof-input-")
}

// editSpooled replaces the spooled map by a copy that edit changed (nil
// when it is left empty): readers load it without a lock.
func editSpooled(edit func(map[string]string)) {
	spoolMu.Lock()
	defer spoolMu.Unlock()
	next := map[string]string{}
	if m := spooled.Load(); m != nil {
		maps.Copy(next, *m)
	}
	edit(next)
	if len(next) == 0 {
		spooled.Store(nil)
	} else {
		spooled.Store(&next)
	}
}

// copyTo writes what src (the input named name) holds into a new file at
// path, adding the bytes to total and telling copied (when not nil).
func copyTo(path string, src io.Reader, name string, total *int64, copied func(string, int64)) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, err := f.Write(buf[:n]); err != nil {
				f.Close()
				return err
			}
			*total += int64(n)
			if copied != nil {
				copied(name, *total)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			f.Close()
			return rerr
		}
	}
	return f.Close()
}
