//go:build !unix

package ingest

import "os"

// openRead is os.Open (openread_unix.go says why it differs there).
func openRead(path string) (*os.File, error) { return os.Open(path) }
