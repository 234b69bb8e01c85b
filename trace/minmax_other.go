//go:build !amd64 || purego

package trace

// haveAVX2 is false off amd64 (and with the purego tag): spans runs its
// Go loops.
var haveAVX2 = false

func minMaxI64(p *int64, n int) (lo, hi int64)                { panic("no AVX2") }
func minMaxDeltaI64(p *int64, n int) (lo, hi, dlo, dhi int64) { panic("no AVX2") }
func minMaxDiffI64(p, r *int64, n int) (lo, hi int64)         { panic("no AVX2") }
func minMaxI32(p *int32, n int) (lo, hi int32)                { panic("no AVX2") }
func minMaxU32(p *uint32, n int) (lo, hi uint32)              { panic("no AVX2") }
