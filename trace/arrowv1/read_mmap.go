//go:build unix

package arrowv1

import (
	"io"
	"os"
	"syscall"
)

// MapFile returns the whole contents of f, from its start, memory-mapped
// read-only where it can be (a regular, non-empty file), else read into
// memory. Read copies what
// it decodes and keeps nothing of its input, so release (which unmaps) may
// be called as soon as Read returns; data must not be used after it.
//
// A page-cached file is then decoded without first being copied: the cost
// of reading it is the cost of touching its pages. The mapping is taken
// at f's size when MapFile is called; bytes appended later are not seen.
// If the file is truncated while mapped, touching the lost pages faults:
// run Read with debug.SetPanicOnFault(true) to turn that into a panic
// that can be recovered.
func MapFile(f *os.File) (data []byte, release func(), err error) {
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if size := st.Size(); st.Mode().IsRegular() && size > 0 && size == int64(int(size)) {
		if data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED); err == nil {
			return data, func() { syscall.Munmap(data) }, nil
		}
	}
	f.Seek(0, io.SeekStart) // a pipe cannot: what is left of it is read
	data, err = io.ReadAll(f)
	return data, func() {}, err
}
