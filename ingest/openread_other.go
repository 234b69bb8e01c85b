//go:build !unix

package ingest

import "os"

// openRead is os.Open (openread_unix.go says why it differs there).
func openRead(path string) (*os.File, error) {
	f, err := os.Open(local(path))
	if pe, ok := err.(*os.PathError); ok {
		pe.Path = path
	}
	return f, err
}
