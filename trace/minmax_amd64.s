//go:build amd64 && !purego

#include "textflag.h"

// AVX2 kernels for spans (pack.go): the least and greatest values of a
// block's column, of its deltas and of its differences from another
// column. Operand order is Go's: VPCMPGTQ A, B, M sets M = B > A;
// VPBLENDVB M, A, B, D sets D = M ? A : B.

// MINQ and MAXQ fold vector V into accumulators LO and HI (M: scratch).
#define MINQ(V, LO, M) VPCMPGTQ V, LO, M; VPBLENDVB M, V, LO, LO
#define MAXQ(V, HI, M) VPCMPGTQ HI, V, M; VPBLENDVB M, V, HI, HI

// REDUCEQ folds the four lanes of Y-register LO (X-register XLO) into its
// lowest, and HI's into its lowest (X4-X7 scratch).
#define REDUCEQ(LO, XLO, HI, XHI) \
	VEXTRACTI128 $1, LO, X4; \
	VPCMPGTQ X4, XLO, X6; \
	VPBLENDVB X6, X4, XLO, XLO; \
	VEXTRACTI128 $1, HI, X5; \
	VPCMPGTQ XHI, X5, X7; \
	VPBLENDVB X7, X5, XHI, XHI; \
	VPSHUFD $0x4e, XLO, X4; \
	VPCMPGTQ X4, XLO, X6; \
	VPBLENDVB X6, X4, XLO, XLO; \
	VPSHUFD $0x4e, XHI, X5; \
	VPCMPGTQ XHI, X5, X7; \
	VPBLENDVB X7, X5, XHI, XHI

// func minMaxI64(p *int64, n int) (lo, hi int64)
// n > 0, a multiple of 8.
TEXT ·minMaxI64(SB), NOSPLIT, $0-32
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	VPBROADCASTQ (SI), Y0
	VMOVDQU Y0, Y1
	VMOVDQU Y0, Y2
	VMOVDQU Y0, Y3

loopI64:
	VMOVDQU (SI), Y8
	VMOVDQU 32(SI), Y9
	MINQ(Y8, Y0, Y10)
	MAXQ(Y8, Y1, Y11)
	MINQ(Y9, Y2, Y12)
	MAXQ(Y9, Y3, Y13)
	ADDQ $64, SI
	SUBQ $8, CX
	JNZ  loopI64

	MINQ(Y2, Y0, Y10)
	MAXQ(Y3, Y1, Y11)
	REDUCEQ(Y0, X0, Y1, X1)
	VMOVQ X0, lo+16(FP)
	VMOVQ X1, hi+24(FP)
	VZEROUPPER
	RET

// func minMaxDeltaI64(p *int64, n int) (lo, hi, dlo, dhi int64)
// The values p[0:n] and their deltas p[i] - p[i-1] (p[-1] is read); n > 0,
// a multiple of 4.
TEXT ·minMaxDeltaI64(SB), NOSPLIT, $0-48
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	VPBROADCASTQ (SI), Y0
	VMOVDQU Y0, Y1
	VMOVQ   (SI), X8
	VMOVQ   -8(SI), X9
	VPSUBQ  X9, X8, X8
	VPBROADCASTQ X8, Y2
	VMOVDQU Y2, Y3

loopDelta:
	VMOVDQU (SI), Y8
	VMOVDQU -8(SI), Y9
	VPSUBQ  Y9, Y8, Y9
	MINQ(Y8, Y0, Y10)
	MAXQ(Y8, Y1, Y11)
	MINQ(Y9, Y2, Y12)
	MAXQ(Y9, Y3, Y13)
	ADDQ $32, SI
	SUBQ $4, CX
	JNZ  loopDelta

	REDUCEQ(Y0, X0, Y1, X1)
	REDUCEQ(Y2, X2, Y3, X3)
	VMOVQ X0, lo+16(FP)
	VMOVQ X1, hi+24(FP)
	VMOVQ X2, dlo+32(FP)
	VMOVQ X3, dhi+40(FP)
	VZEROUPPER
	RET

// func minMaxDiffI64(p, r *int64, n int) (lo, hi int64)
// The differences p[i] - r[i], i < n; n > 0, a multiple of 4.
TEXT ·minMaxDiffI64(SB), NOSPLIT, $0-40
	MOVQ p+0(FP), SI
	MOVQ r+8(FP), DI
	MOVQ n+16(FP), CX
	VMOVQ   (SI), X8
	VMOVQ   (DI), X9
	VPSUBQ  X9, X8, X8
	VPBROADCASTQ X8, Y0
	VMOVDQU Y0, Y1

loopDiff:
	VMOVDQU (SI), Y8
	VMOVDQU (DI), Y9
	VPSUBQ  Y9, Y8, Y8
	MINQ(Y8, Y0, Y10)
	MAXQ(Y8, Y1, Y11)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $4, CX
	JNZ  loopDiff

	REDUCEQ(Y0, X0, Y1, X1)
	VMOVQ X0, lo+24(FP)
	VMOVQ X1, hi+32(FP)
	VZEROUPPER
	RET

// REDUCED folds the eight 32-bit lanes of LO and HI into their lowest with
// MIN and MAX (VPMINSD/VPMAXSD or the unsigned VPMINUD/VPMAXUD).
#define REDUCED(MIN, MAX, LO, XLO, HI, XHI) \
	VEXTRACTI128 $1, LO, X4; \
	MIN X4, XLO, XLO; \
	VEXTRACTI128 $1, HI, X5; \
	MAX X5, XHI, XHI; \
	VPSHUFD $0x4e, XLO, X4; \
	MIN X4, XLO, XLO; \
	VPSHUFD $0x4e, XHI, X5; \
	MAX X5, XHI, XHI; \
	VPSHUFD $0xb1, XLO, X4; \
	MIN X4, XLO, XLO; \
	VPSHUFD $0xb1, XHI, X5; \
	MAX X5, XHI, XHI

// MINMAXD is the body of minMaxI32 and minMaxU32 (p in SI, n in CX; the
// least in AX, the greatest in BX): two chains of eight 32-bit lanes
// each, folded with MIN and MAX (signed or unsigned), LOOP the loop's
// label.
#define MINMAXD(MIN, MAX, LOOP) \
	VPBROADCASTD (SI), Y0; \
	VMOVDQU Y0, Y1; \
	VMOVDQU Y0, Y2; \
	VMOVDQU Y0, Y3; \
LOOP: \
	VMOVDQU (SI), Y8; \
	VMOVDQU 32(SI), Y9; \
	MIN Y8, Y0, Y0; \
	MAX Y8, Y1, Y1; \
	MIN Y9, Y2, Y2; \
	MAX Y9, Y3, Y3; \
	ADDQ $64, SI; \
	SUBQ $16, CX; \
	JNZ  LOOP; \
	MIN Y2, Y0, Y0; \
	MAX Y3, Y1, Y1; \
	REDUCED(MIN, MAX, Y0, X0, Y1, X1); \
	VMOVD X0, AX; \
	VMOVD X1, BX; \
	VZEROUPPER

// func minMaxI32(p *int32, n int) (lo, hi int32)
// n > 0, a multiple of 16.
TEXT ·minMaxI32(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	MINMAXD(VPMINSD, VPMAXSD, loopI32)
	MOVL AX, lo+16(FP)
	MOVL BX, hi+20(FP)
	RET

// func minMaxU32(p *uint32, n int) (lo, hi uint32)
// n > 0, a multiple of 16.
TEXT ·minMaxU32(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	MINMAXD(VPMINUD, VPMAXUD, loopU32)
	MOVL AX, lo+16(FP)
	MOVL BX, hi+20(FP)
	RET
