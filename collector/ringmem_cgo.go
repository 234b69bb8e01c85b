//go:build cgo

package collector

/*
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ring.h"

static void* ppc_alloc(size_t n) {
	void* p = 0;
	if (posix_memalign(&p, 128, n) != 0) return 0;
	memset(p, 0, n);
	return p;
}

static int64_t ppc_mono(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

// ppc_layout fills out with the sizes and offsets TestRingLayout compares
// with the Go types.
static void ppc_layout(size_t* out) {
	size_t i = 0;
	out[i++] = sizeof(ppc_slot);
	out[i++] = offsetof(ppc_slot, issue_ns);
	out[i++] = offsetof(ppc_slot, start_ns);
	out[i++] = offsetof(ppc_slot, step);
	out[i++] = offsetof(ppc_slot, bytes);
	out[i++] = offsetof(ppc_slot, tokens);
	out[i++] = offsetof(ppc_slot, flops);
	out[i++] = offsetof(ppc_slot, end_ns);
	out[i++] = offsetof(ppc_slot, mem_bytes);
	out[i++] = offsetof(ppc_slot, shape);
	out[i++] = offsetof(ppc_slot, dtype);
	out[i++] = offsetof(ppc_slot, mb);
	out[i++] = offsetof(ppc_slot, chunk);
	out[i++] = offsetof(ppc_slot, peer);
	out[i++] = offsetof(ppc_slot, kind);
	out[i++] = offsetof(ppc_slot, end_kind);
	out[i++] = offsetof(ppc_slot, flags);
	out[i++] = sizeof(ppc_dev);
	out[i++] = offsetof(ppc_dev, start_ev);
	out[i++] = offsetof(ppc_dev, end_ev);
	out[i++] = sizeof(ppc_ctl);
	out[i++] = offsetof(ppc_ctl, head);
	out[i++] = offsetof(ppc_ctl, closed);
	out[i++] = offsetof(ppc_ctl, inflight);
	out[i++] = offsetof(ppc_ctl, dropped);
	out[i++] = offsetof(ppc_ctl, rejected);
	out[i++] = offsetof(ppc_ctl, dev_errors);
	out[i++] = offsetof(ppc_ctl, virtual_ptr);
	out[i++] = offsetof(ppc_ctl, mask);
	out[i++] = offsetof(ppc_ctl, size);
	out[i++] = offsetof(ppc_ctl, rank);
	out[i++] = offsetof(ppc_ctl, clock);
	out[i++] = offsetof(ppc_ctl, mono_offset);
	out[i++] = offsetof(ppc_ctl, cuda);
	out[i++] = offsetof(ppc_ctl, slots);
	out[i++] = offsetof(ppc_ctl, dev);
}
*/
import "C"

import (
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/ppprof/ppprof/collector/internal/ringapi"
)

// ringMem is a recorder's ring: its control block, slots and (CUDA) device
// slots, in Go memory, or in C memory when the C ABI records into it.
type ringMem struct {
	ctl   *ringCtl
	slots []slot
	dev   []devSlot
	cmem  bool
	ptrs  []unsafe.Pointer // C allocations, freed by free
}

// allocRing allocates a ring of n slots (device slots too when cuda),
// in C memory when ringapi.CMemory is set.
func allocRing(n int, cuda bool) *ringMem {
	if !ringapi.CMemory.Load() {
		return allocGoRing(n, cuda)
	}
	m := &ringMem{cmem: true}
	alloc := func(size uintptr) unsafe.Pointer {
		p := C.ppc_alloc(C.size_t(size))
		if p == nil {
			panic("collector: out of memory allocating the ring")
		}
		m.ptrs = append(m.ptrs, p)
		return p
	}
	m.ctl = (*ringCtl)(alloc(unsafe.Sizeof(ringCtl{})))
	m.slots = unsafe.Slice((*slot)(alloc(uintptr(n)*unsafe.Sizeof(slot{}))), n)
	m.ctl.slots = uintptr(unsafe.Pointer(&m.slots[0]))
	if cuda {
		m.dev = unsafe.Slice((*devSlot)(alloc(uintptr(n)*unsafe.Sizeof(devSlot{}))), n)
		m.ctl.dev = uintptr(unsafe.Pointer(&m.dev[0]))
	}
	return m
}

// free releases C memory, except the control block: a C caller may still
// hold its address (it sees closed set and touches nothing else).
func (m *ringMem) free() {
	if !m.cmem {
		return
	}
	for _, p := range m.ptrs[1:] {
		C.free(p)
	}
	m.ptrs = m.ptrs[:1]
	m.slots, m.dev = nil, nil
}

// newClockCell returns the storage of a virtual clock: C memory when the
// C ABI may read it (never freed: 8 bytes a clock).
func newClockCell() *atomic.Int64 {
	if !ringapi.CMemory.Load() {
		return new(atomic.Int64)
	}
	return (*atomic.Int64)(C.ppc_alloc(8))
}

// monoOffset returns host-clock time minus CLOCK_MONOTONIC, so that C code
// stamps events on the same time base as clock.Now (to within the
// narrowest of a few paired reads).
func monoOffset(clock Clock) int64 {
	best, off := int64(math.MaxInt64), int64(0)
	for i := 0; i < 8; i++ {
		a := int64(C.ppc_mono())
		h := clock.Now()
		b := int64(C.ppc_mono())
		if b-a < best {
			best, off = b-a, h-(a+b)/2
		}
	}
	return off
}

// cLayout returns sizes and offsets of the C ring types, in ppc_layout's
// order, for TestRingLayout.
func cLayout() []uintptr {
	var out [64]C.size_t
	C.ppc_layout(&out[0])
	res := make([]uintptr, 36)
	for i := range res {
		res[i] = uintptr(out[i])
	}
	return res
}
