//go:build !cgo

package collector

import "sync/atomic"

// ringMem is a recorder's ring (see ringmem_cgo.go); without cgo it is
// always in Go memory.
type ringMem struct {
	ctl   *ringCtl
	slots []slot
	dev   []devSlot
	cmem  bool
}

func allocRing(n int, cuda bool) *ringMem { return allocGoRing(n, cuda) }

func (m *ringMem) free() {}

func newClockCell() *atomic.Int64 { return new(atomic.Int64) }

func monoOffset(Clock) int64 { return 0 }
