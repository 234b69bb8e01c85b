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
