package ingest

import (
	"os"
	"sync"
)

// The rows CountRows counted of each Arrow file, kept for placeRows: a
// command checks that its input fits in memory (CountRows), then reads it
// whole (Open), and each counted every file's record batches (an open,
// a stat and about four reads a file: 4% of a whole read of a 4096-rank
// job's files). placeRows takes a file's count from here when the file
// still has the size and modification time it had when counted. A count
// that is stale all the same (a file rewritten to the same size within
// the file system's time resolution) is only a wrong plan: a file that
// does not read as placed is read again on its own (place.go).
var countMemo struct {
	sync.Mutex
	files map[string]countedFile // by path, from the latest CountRowsOver
}

type countedFile struct {
	size, mtime int64 // os.FileInfo's Size and ModTime().UnixNano()
	rows        int64
}

// rememberCounts replaces the memo with the Arrow files counted exactly.
func rememberCounts(inputs []input, counts []int64, exact, counted []bool, stats []os.FileInfo) {
	m := make(map[string]countedFile, len(inputs))
	for i, in := range inputs {
		if counted[i] && exact[i] && stats[i] != nil {
			m[local(in.path)] = countedFile{size: stats[i].Size(), mtime: stats[i].ModTime().UnixNano(), rows: counts[i]}
		}
	}
	countMemo.Lock()
	countMemo.files = m
	countMemo.Unlock()
}

// rememberedRows returns the rows and size CountRows counted of the Arrow
// file at path, when it is still as it was then.
func rememberedRows(path string) (rows, size int64, ok bool) {
	countMemo.Lock()
	c, ok := countMemo.files[local(path)]
	countMemo.Unlock()
	if !ok {
		return 0, 0, false
	}
	st, err := statPath(path)
	if err != nil || !st.Mode().IsRegular() || st.Size() != c.size || st.ModTime().UnixNano() != c.mtime {
		return 0, 0, false
	}
	return c.rows, c.size, true
}
