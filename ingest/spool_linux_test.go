package ingest

import (
	"os"
	"strings"
	"testing"
)

// TestFSInMemory checks fsInMemory against /proc/mounts: each mount point
// listed (the last mount of a point wins) is held in memory exactly when
// its file system type is tmpfs, devtmpfs or ramfs.
func TestFSInMemory(t *testing.T) {
	data, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Skip(err)
	}
	typeOf := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && !strings.Contains(f[1], `\`) { // no escaped names
			typeOf[f[1]] = f[2]
		}
	}
	mem, disk := 0, 0
	for dir, typ := range typeOf {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		want := typ == "tmpfs" || typ == "ramfs" || typ == "devtmpfs"
		if got := fsInMemory(dir); got != want {
			t.Errorf("fsInMemory(%s) = %v, but it is a %s", dir, got, typ)
		}
		if want {
			mem++
		} else {
			disk++
		}
	}
	if mem == 0 || disk == 0 {
		t.Logf("checked %d mount points in memory and %d not", mem, disk)
	}
	if fsInMemory("/no/such/dir") {
		t.Error("a missing directory is said to be in memory")
	}
}
