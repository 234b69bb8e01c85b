// Package ringapi connects the collector to its C ABI's hot path
// (collector/capi), which writes the recorder's ring buffer directly from
// C (layout: collector/ring.h). Nothing else should use it.
package ringapi

import "sync/atomic"

// CMemory, when set (by the C ABI, before it opens a recorder), makes
// recorders keep their ring and virtual clocks in C memory, which C code
// may hold and write.
var CMemory atomic.Bool

// Ctl returns the address of a *collector.Recorder's ring control block
// (a ppc_ctl). Set by the collector package.
var Ctl func(recorder any) uintptr

// LabelID interns a shape or dtype string and returns its id (0 for "").
// Set by the collector package.
var LabelID func(s string) uint32
