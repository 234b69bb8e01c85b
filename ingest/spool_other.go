//go:build !linux

package ingest

import "os"

// isTerminal reports whether f is a character device: a terminal, most
// likely (the Linux version asks the terminal driver).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// fsInMemory reports whether dir is on a file system held in memory:
// false, not known here.
func fsInMemory(string) bool { return false }
