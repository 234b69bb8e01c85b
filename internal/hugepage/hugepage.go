// Package hugepage asks the kernel to back large allocations with
// transparent huge pages where the system leaves that to the program
// (Linux's THP mode "madvise", the default on many distributions).
//
// Why: on the virtual machines ppprof's benchmarks ran on, a fresh 4 KiB
// page costs 11-40 µs to fault in (3-6 s a GiB of kernel time), a 2 MiB
// page about as much as 16 small ones in all: 0.07 s a GiB
// (`go run ./bench/faultcost` with and without -huge;
// docs/performance-history.md, "Before and after the nineteenth
// session"). The Go runtime leaves its
// heap to the system's mode, so under "madvise" a trace's columns were
// all small pages. Advise marks the whole 2 MiB pages inside a large
// allocation before it is first touched; memory already touched keeps
// its pages (the kernel may merge them later), and the advice changes
// nothing of what the memory holds.
//
// PPPROF_HUGEPAGES=0 turns it off, and so does GODEBUG=disablethp=1 (the
// Go runtime's own switch against huge pages).
package hugepage

import (
	"os"
	"strings"
	"unsafe"
)

// Size is the huge page size advised for.
const Size = 2 << 20

// MinBytes is the least allocation advised: two huge pages, so that at
// least one whole one lies inside it.
const MinBytes = 2 * Size

// Enabled reports whether Advise does anything: on Linux, unless turned
// off by the environment.
var Enabled = supported && os.Getenv("PPPROF_HUGEPAGES") != "0" && !strings.Contains(os.Getenv("GODEBUG"), "disablethp=1")

// Slice advises for the memory of s's capacity (see Advise).
func Slice[T any](s []T) {
	if c := cap(s); c > 0 {
		var z T
		Advise(unsafe.Pointer(unsafe.SliceData(s)), uintptr(c)*unsafe.Sizeof(z))
	}
}

// Advise asks for huge pages for the whole 2 MiB pages inside [p, p+n),
// when n is MinBytes or more. The caller keeps the memory alive.
func Advise(p unsafe.Pointer, n uintptr) {
	if !Enabled || n < MinBytes {
		return
	}
	start := (uintptr(p) + Size - 1) &^ (Size - 1)
	end := (uintptr(p) + n) &^ (Size - 1)
	if end > start {
		advise(start, end-start)
	}
}

// MakeMin is the least memory Make puts in huge pages: half of one.
const MakeMin = Size / 2

// Make returns n zeroed Ts (length and capacity n) whose memory starts on
// a huge-page boundary and is advised before its first touch, to the end
// of its last huge page, when they take MakeMin or more and T's size
// divides Size; when it does not (a struct of 40 bytes), make([]T, n)
// advised (Slice): its whole huge pages only, from MinBytes on; else
// make([]T, n).
//
// Go aligns a large allocation to its 8 KiB pages only, so the memory
// before the first and after the last 2 MiB boundary inside a slab (up to
// 4 MiB of it) stayed in 4 KiB pages, a fault each (half of a 4 MiB slab
// at worst). Make allocates up to the end of the last huge page the
// elements reach, and Size more, and starts at the first boundary: the
// head skipped is never touched, so never backed by memory, and the
// elements lie in whole huge pages, faulted in one at a time. A column of
// 362k int64 rows (2.9 MB), in 4 KiB pages, was 710 faults at 11-40 µs
// each on the VMs of docs/performance.md; it is two. The memory backed is
// up to a huge page more than the elements take (less than twice theirs);
// the Go heap counts up to two huge pages more as allocated.
func Make[T any](n int) []T {
	var z T
	size := int(unsafe.Sizeof(z))
	if !Enabled || size == 0 || n*size < MakeMin {
		return make([]T, n)
	}
	if Size%size != 0 {
		s := make([]T, n)
		Slice(s)
		return s
	}
	whole := (n*size + Size - 1) &^ (Size - 1) // the huge pages the elements reach
	s := make([]T, (whole+Size)/size)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	off := int(((p+Size-1)&^(Size-1) - p) / uintptr(size))
	out := s[off : off+n : off+n]
	advise(uintptr(unsafe.Pointer(unsafe.SliceData(out))), uintptr(whole))
	return out
}
