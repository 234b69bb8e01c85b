//go:build unix

package arrowv1

import (
	"io"
	"os"
	"sync"
	"syscall"
)

// mmapMin is the smallest file MapFile maps. Mapping costs a system call
// and, on unmapping, a TLB shootdown on every core running the process:
// for the small files of a many-rank job (hundreds of KB each, read by
// several goroutines), reading into a reused buffer is faster.
const mmapMin = 4 << 20

// MapFile returns the whole contents of f, from its start: memory-mapped
// read-only for a regular file of mmapMin bytes or more, else read into a
// buffer that release recycles. Read copies what it decodes and keeps
// nothing of its input, so release may be called as soon as Read returns;
// data must not be used after it.
//
// A large page-cached file is then decoded without first being copied: the
// cost of reading it is the cost of touching its pages. The mapping is
// taken at f's size when MapFile is called; bytes appended later are not
// seen. If the file is truncated while mapped, touching the lost pages
// faults: run Read with debug.SetPanicOnFault(true) to turn that into a
// panic that can be recovered.
func MapFile(f *os.File) (data []byte, release func(), err error) {
	return mapFile(f, mmapMin)
}

// MapFileSparse is MapFile mapping a regular file of any size (not only
// of mmapMin bytes or more): for a reader that touches a small part of a
// file (ReadRows with an Index), so that only the pages it touches are
// read, not the whole file.
func MapFileSparse(f *os.File) (data []byte, release func(), err error) {
	return mapFile(f, 1)
}

// mapFile is MapFile mapping regular files of at least least bytes.
func mapFile(f *os.File, least int64) (data []byte, release func(), err error) {
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	if st.Mode().IsRegular() && size >= least && size == int64(int(size)) {
		if data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED); err == nil {
			return data, func() { syscall.Munmap(data) }, nil
		}
	}
	f.Seek(0, io.SeekStart) // a pipe cannot: what is left of it is read
	if !st.Mode().IsRegular() || size <= 0 || size >= mmapMin {
		data, err = io.ReadAll(f)
		return data, func() {}, err
	}
	// A small regular file: one read into a recycled buffer (one byte
	// more, to see it end).
	bp, _ := readBufs.Get().(*[]byte)
	if bp == nil || int64(cap(*bp)) < size+1 {
		b := make([]byte, 0, max(size+1, 256<<10))
		bp = &b
	}
	buf := (*bp)[:size+1]
	n, err := io.ReadFull(f, buf)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	if err == nil && n == len(buf) {
		// The file grew since Stat: read the rest the plain way.
		rest, rerr := io.ReadAll(f)
		out := append(append([]byte(nil), buf...), rest...)
		readBufs.Put(bp)
		return out, func() {}, rerr
	}
	return buf[:n], func() { readBufs.Put(bp) }, err
}

// readBufs recycles MapFile's buffers for small files.
var readBufs sync.Pool
