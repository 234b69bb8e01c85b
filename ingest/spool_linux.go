package ingest

import (
	"os"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether f is a terminal (not /dev/null, another
// character device a trace may be read from).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// fsInMemory reports whether dir is on a file system held in memory
// (tmpfs, ramfs): what /tmp is by default on Debian 13, Fedora and Arch.
func fsInMemory(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	return st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC
}
