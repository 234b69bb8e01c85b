//go:build !unix

package arrowv1

import (
	"io"
	"os"
)

// MapFile returns the whole contents of f, from its start, read into
// memory (no memory mapping on this system); release does nothing. See the
// unix version.
func MapFile(f *os.File) (data []byte, release func(), err error) {
	f.Seek(0, io.SeekStart) // a pipe cannot: what is left of it is read
	data, err = io.ReadAll(f)
	return data, func() {}, err
}

// MapFileSparse is MapFile (see the unix version).
func MapFileSparse(f *os.File) (data []byte, release func(), err error) { return MapFile(f) }
