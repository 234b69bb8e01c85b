package trace

import (
	"os"
	"unsafe"
)

// noSIMD reports whether PPPROF_NOSIMD asks for the Go loops only (to
// compare, or to rule the kernels out when something looks wrong).
func noSIMD() bool { return os.Getenv("PPPROF_NOSIMD") == "1" }

// vectorRows is the least block spansVector takes: below it the Go loops
// cost no more than entering a kernel.
const vectorRows = 64

// spansVector is spans by the AVX2 kernels (haveAVX2), for 64-bit columns
// and, without deltas, 32-bit ones; ok is false for the others, which
// spans then runs in Go. len(v) >= vectorRows.
func spansVector[T ~int32 | ~int64 | ~uint16 | ~uint32](v []T, delta bool) (lo, hi, dlo, dhi int64, ok bool) {
	var zero T
	n := len(v)
	switch unsafe.Sizeof(zero) {
	case 8: // ~int64
		p := unsafe.Slice((*int64)(unsafe.Pointer(&v[0])), n)
		if !delta {
			m := n &^ 7
			lo, hi = minMaxI64(&p[0], m)
			for _, x := range p[m:] {
				lo, hi = min(lo, x), max(hi, x)
			}
			return lo, hi, 0, 0, true
		}
		// Rows 1 to m with their deltas, then row 0's value and the
		// rows after m.
		m := (n - 1) &^ 3
		lo, hi, dlo, dhi = minMaxDeltaI64(&p[1], m)
		lo, hi = min(lo, p[0]), max(hi, p[0])
		for i := m + 1; i < n; i++ {
			x, d := p[i], p[i]-p[i-1]
			lo, hi = min(lo, x), max(hi, x)
			dlo, dhi = min(dlo, d), max(dhi, d)
		}
		return lo, hi, dlo, dhi, true
	case 4:
		if delta {
			return 0, 0, 0, 0, false
		}
		m := n &^ 15
		if zero-1 < zero { // signed: ~int32
			p := unsafe.Slice((*int32)(unsafe.Pointer(&v[0])), n)
			l, h := minMaxI32(&p[0], m)
			for _, x := range p[m:] {
				l, h = min(l, x), max(h, x)
			}
			return int64(l), int64(h), 0, 0, true
		}
		p := unsafe.Slice((*uint32)(unsafe.Pointer(&v[0])), n)
		l, h := minMaxU32(&p[0], m)
		for _, x := range p[m:] {
			l, h = min(l, x), max(h, x)
		}
		return int64(l), int64(h), 0, 0, true
	}
	return 0, 0, 0, 0, false
}

// refSpan returns the least and greatest v[i] - ref[i] (as int64,
// wrapping); len(ref) >= len(v) > 0.
func refSpan[T ~int32 | ~int64 | ~uint16 | ~uint32](v, ref []T) (lo, hi int64) {
	n := len(v)
	ref = ref[:n]
	i := 0
	if haveAVX2 && n >= vectorRows && unsafe.Sizeof(v[0]) == 8 {
		m := n &^ 3
		lo, hi = minMaxDiffI64((*int64)(unsafe.Pointer(&v[0])), (*int64)(unsafe.Pointer(&ref[0])), m)
		i = m
	} else {
		lo = int64(v[0]) - int64(ref[0])
		hi = lo
	}
	for ; i < n; i++ {
		r := int64(v[i]) - int64(ref[i])
		lo, hi = min(lo, r), max(hi, r)
	}
	return lo, hi
}
