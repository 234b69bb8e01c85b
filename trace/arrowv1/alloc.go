package arrowv1

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// limitAllocator is an allocator that refuses to hold more than limit bytes
// at once. arrow-go sizes a decompressed buffer by the length stored in the
// file, so a corrupt length could otherwise ask for terabytes; past the
// limit, Allocate panics with errAllocLimit, which arrow-go's reader
// recovers and reports as a read error.
type limitAllocator struct {
	mem   memory.Allocator
	limit int64
	live  int64
}

// errAllocLimit is the panic value of an allocation over the limit.
type errAllocLimit struct{ want, live, limit int64 }

// Error describes the refused allocation.
func (e errAllocLimit) Error() string {
	return fmt.Sprintf("allocating %d bytes with %d in use would pass the %d-byte limit for this input (corrupt length?)", e.want, e.live, e.limit)
}

// readLimit is the most memory a read of n input bytes may hold in
// decoded buffers at once: generous for real traces (one batch is decoded
// at a time) and small enough that a corrupt length cannot exhaust memory.
func readLimit(n int) int64 { return 64<<20 + 64*int64(n) }

// grow accounts for size more bytes, panicking past the limit.
func (a *limitAllocator) grow(size int64) {
	if size < 0 || size > a.limit-a.live {
		panic(errAllocLimit{want: size, live: a.live, limit: a.limit})
	}
	a.live += size
}

// Allocate allocates size bytes, or panics past the limit.
func (a *limitAllocator) Allocate(size int) []byte {
	a.grow(int64(size))
	return a.mem.Allocate(size)
}

// Reallocate resizes b to size bytes, or panics past the limit.
func (a *limitAllocator) Reallocate(size int, b []byte) []byte {
	if size > len(b) {
		a.grow(int64(size - len(b)))
	} else {
		a.live -= int64(len(b) - size)
	}
	return a.mem.Reallocate(size, b)
}

// Free releases b.
func (a *limitAllocator) Free(b []byte) {
	a.live -= int64(len(b))
	a.mem.Free(b)
}
