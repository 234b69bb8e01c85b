package collector

import (
	"unsafe"
)

// allocGoRing allocates a ring in Go memory.
func allocGoRing(n int, cuda bool) *ringMem {
	m := &ringMem{ctl: new(ringCtl), slots: make([]slot, n)}
	if cuda {
		m.dev = make([]devSlot, n)
	}
	return m
}

// goLayout returns sizes and offsets of the Go ring types, in the order of
// cLayout.
func goLayout() []uintptr {
	var s slot
	var d devSlot
	var c ringCtl
	return []uintptr{
		unsafe.Sizeof(s), unsafe.Offsetof(s.issueNs), unsafe.Offsetof(s.startNs), unsafe.Offsetof(s.step),
		unsafe.Offsetof(s.bytes), unsafe.Offsetof(s.tokens), unsafe.Offsetof(s.flops), unsafe.Offsetof(s.endNs),
		unsafe.Offsetof(s.memBytes), unsafe.Offsetof(s.shape), unsafe.Offsetof(s.dtype), unsafe.Offsetof(s.mb),
		unsafe.Offsetof(s.chunk), unsafe.Offsetof(s.peer), unsafe.Offsetof(s.kind), unsafe.Offsetof(s.endKind),
		unsafe.Offsetof(s.flags),
		unsafe.Sizeof(d), unsafe.Offsetof(d.startEv), unsafe.Offsetof(d.endEv),
		unsafe.Sizeof(c), unsafe.Offsetof(c.head), unsafe.Offsetof(c.closed), unsafe.Offsetof(c.inflight),
		unsafe.Offsetof(c.dropped), unsafe.Offsetof(c.rejected), unsafe.Offsetof(c.devErrs),
		unsafe.Offsetof(c.virtualPtr), unsafe.Offsetof(c.mask), unsafe.Offsetof(c.size), unsafe.Offsetof(c.rank),
		unsafe.Offsetof(c.clock), unsafe.Offsetof(c.monoOffset), unsafe.Offsetof(c.cuda), unsafe.Offsetof(c.slots),
		unsafe.Offsetof(c.dev),
	}
}
