//go:build linux

package freshmem

import (
	"fmt"
	"syscall"
	"time"
)

// madvHugepage is MADV_HUGEPAGE.
const madvHugepage = 14

// Touch maps n bytes of anonymous memory (asking for transparent huge
// pages first with huge), writes one byte a page, and returns the mapping
// and how long the writes took. Release the mapping with Release.
func Touch(n int, huge bool) (Touched, error) {
	if n <= 0 {
		return Touched{}, fmt.Errorf("freshmem: %d bytes: want more than 0", n)
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return Touched{}, fmt.Errorf("freshmem: mmap %d bytes: %w", n, err)
	}
	if huge {
		if err := syscall.Madvise(b, madvHugepage); err != nil {
			syscall.Munmap(b)
			return Touched{}, fmt.Errorf("freshmem: madvise: %w", err)
		}
	}
	t := time.Now()
	for j := 0; j < len(b); j += PageSize {
		b[j] = 1
	}
	return Touched{B: b, Took: time.Since(t)}, nil
}

// Release unmaps what Touch mapped.
func Release(t Touched) error {
	if t.B == nil {
		return nil
	}
	return syscall.Munmap(t.B)
}
