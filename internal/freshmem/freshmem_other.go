//go:build !linux

package freshmem

import "errors"

// Touch is Linux's only (anonymous mappings and madvise).
func Touch(n int, huge bool) (Touched, error) {
	return Touched{}, errors.New("freshmem: not supported on this system")
}

// Release does nothing off Linux.
func Release(t Touched) error { return nil }
