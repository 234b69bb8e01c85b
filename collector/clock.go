package collector

import (
	"sync/atomic"
	"time"

	"github.com/ppprof/ppprof/trace"
)

// Clock is the time base a Recorder stamps events with. Now returns
// nanoseconds on the trace's time base; it is called on the hot path and
// must be cheap and safe for concurrent use.
//
// The clocks are HostClock, a *VirtualClock and a *CUDAClock. A CUDAClock
// also times device work with CUDA events; the others stamp the host time at
// which Begin and End are called.
type Clock interface {
	Name() trace.Clock
	Now() int64
}

// hostClock is the host's monotonic clock expressed as Unix nanoseconds: the
// wall time at process start plus the monotonic time elapsed since. It never
// goes backwards, and ranks on hosts whose wall clocks are synchronised
// (NTP, PTP) share one time base.
type hostClock struct {
	wall0 int64     // Unix ns at mono0
	mono0 time.Time // carries a monotonic reading
}

var theHostClock = func() *hostClock {
	t := time.Now()
	return &hostClock{wall0: t.UnixNano(), mono0: t}
}()

// HostClock returns the host clock: Unix nanoseconds that advance with the
// monotonic clock (wall time at process start plus monotonic time since), so
// it never steps backwards when NTP adjusts the wall clock. Every Recorder in
// a process that uses it shares one time base.
func HostClock() Clock { return theHostClock }

func (c *hostClock) Name() trace.Clock { return trace.ClockHost }

// Now is a monotonic clock read: time.Since reads only the runtime's
// monotonic clock when its argument carries a monotonic reading.
func (c *hostClock) Now() int64 { return c.wall0 + int64(time.Since(c.mono0)) }

// VirtualClock is a clock the caller drives: a simulator, a replay, or a
// test. Its time only changes through Set and Advance. It is safe for
// concurrent use.
// Make one with NewVirtualClock.
type VirtualClock struct {
	ns *atomic.Int64 // in C memory when the C ABI reads it (ringapi.CMemory)
}

// NewVirtualClock returns a virtual clock reading startNs.
func NewVirtualClock(startNs int64) *VirtualClock {
	c := &VirtualClock{ns: newClockCell()}
	c.ns.Store(startNs)
	return c
}

// Name returns trace.ClockVirtual.
func (c *VirtualClock) Name() trace.Clock { return trace.ClockVirtual }

// Now returns the time last set, in nanoseconds.
func (c *VirtualClock) Now() int64 { return c.ns.Load() }

// Set sets the time to ns.
func (c *VirtualClock) Set(ns int64) { c.ns.Store(ns) }

// Advance moves the time forward by d and returns the new time.
func (c *VirtualClock) Advance(d time.Duration) int64 { return c.ns.Add(int64(d)) }
