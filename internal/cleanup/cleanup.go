// Package cleanup keeps the list of temporary files and directories a
// run is writing (copies of standard input, outputs not yet renamed into
// place, Parquet files being written), so that a signal ending the
// process can remove them all (RemoveAll) before it dies. Each owner
// removes or forgets its own when it is done with them.
package cleanup

import (
	"os"
	"sync"
)

var (
	mu    sync.Mutex
	paths = map[string]bool{}
)

// Track records path, a file or directory, as temporary: RemoveAll
// removes it until Remove or Forget is called.
func Track(path string) {
	mu.Lock()
	paths[path] = true
	mu.Unlock()
}

// Remove removes path (and what a directory holds) and forgets it.
func Remove(path string) {
	mu.Lock()
	defer mu.Unlock()
	os.RemoveAll(path)
	delete(paths, path)
}

// Forget stops tracking path without removing it: it was renamed into
// place, or kept.
func Forget(path string) {
	mu.Lock()
	delete(paths, path)
	mu.Unlock()
}

// RemoveAll removes every path tracked and not removed or forgotten yet:
// for a process about to die of a signal. Readers still holding a file
// open or mapped keep reading it; it is gone once they close it.
func RemoveAll() {
	mu.Lock()
	defer mu.Unlock()
	for p := range paths {
		os.RemoveAll(p)
		delete(paths, p)
	}
}

// Tracked returns the paths tracked now, in no order (for the tests).
func Tracked() []string {
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for p := range paths {
		out = append(out, p)
	}
	return out
}
