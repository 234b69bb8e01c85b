//go:build amd64 && !purego

package trace

import "golang.org/x/sys/cpu"

// haveAVX2 tells spans to use the AVX2 kernels of minmax_amd64.s
// (PPPROF_NOSIMD=1 or the purego build tag leave them out).
var haveAVX2 = cpu.X86.HasAVX2 && !noSIMD()

// The kernels (minmax_amd64.s); see their comments for the lengths they
// take.

//go:noescape
func minMaxI64(p *int64, n int) (lo, hi int64)

//go:noescape
func minMaxDeltaI64(p *int64, n int) (lo, hi, dlo, dhi int64)

//go:noescape
func minMaxDiffI64(p, r *int64, n int) (lo, hi int64)

//go:noescape
func minMaxI32(p *int32, n int) (lo, hi int32)

//go:noescape
func minMaxU32(p *uint32, n int) (lo, hi uint32)
