#include "textflag.h"
#include "simd_amd64.h"

// func quantizeQ8XAVX512(x *float32, nb int, q *byte, s *float32)
TEXT ·quantizeQ8XAVX512(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ s+24(FP), DX
	TESTQ CX, CX
	JZ qdone
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z30
	MOVL $0x42fe0000, AX // 127.0
	VMOVD AX, X13
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Y27
	VXORPS X12, X12, X12
qloop:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	VANDPS Z30, Z0, Z2
	VANDPS Z30, Z1, Z3
	VMAXPS Z3, Z2, Z2
	VEXTRACTF64X4 $1, Z2, Y3
	VMAXPS Y3, Y2, Y2
	VEXTRACTF128 $1, Y2, X3
	VMAXPS X3, X2, X2
	VPERMILPS $0x4e, X2, X3
	VMAXPS X3, X2, X2
	VPERMILPS $0xb1, X2, X3
	VMAXPS X3, X2, X2
	VDIVSS X13, X2, X4      // d = amax / 127
	VDIVSS X2, X13, X5      // id = 127 / amax
	VCMPSS $4, X12, X2, X7  // amax != 0
	VANDPS X7, X5, X5
	VBROADCASTSS X5, Z5
	VMULPS Z5, Z0, Z0
	VMULPS Z5, Z1, Z1
	VCVTPS2DQ Z0, Z0
	VCVTPS2DQ Z1, Z1
	VPMOVSDB Z0, X0
	VPMOVSDB Z1, X1
	VINSERTI128 $1, X1, Y0, Y0
	VPXORD Y27, Y0, Y0
	VMOVDQU Y0, (DI)
	VBROADCASTSS X4, Y4
	VMOVUPS Y4, (DX)
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $32, DX
	DECQ CX
	JNZ qloop
qdone:
	VZEROUPPER
	RET

// func q8PrepAVX512(w *byte, np int, dst *byte)
TEXT ·q8PrepAVX512(SB), NOSPLIT, $0-24
	MOVQ w+0(FP), SI
	MOVQ np+8(FP), CX
	MOVQ dst+16(FP), DI
	TESTQ CX, CX
	JZ pdone
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z31
ploop:
	VMOVDQU 2(SI), Y1
	VINSERTI64X4 $1, 36(SI), Z1, Z1
	VMOVDQU64 Z1, (DI)
	VPXORD Z2, Z2, Z2
	VPDPBUSD Z1, Z31, Z2
	VPXORD Z3, Z3, Z3
	VPSUBD Z2, Z3, Z3
	VMOVDQU32 Z3, 64(DI)
	VPBROADCASTW (SI), X4
	VPBROADCASTW 34(SI), X5
	VINSERTI128 $1, X5, Y4, Y4
	VCVTPH2PS Y4, Z4
	VMOVUPS Z4, 128(DI)
	ADDQ $68, SI
	ADDQ $192, DI
	DECQ CX
	JNZ ploop
pdone:
	VZEROUPPER
	RET

// ROW(q, s, tq, ti, ts, acc): one activation row's pair against the
// prepared pair at DX (negC in Z4, ws in Z5).
#define ROW(QADDR, SADDR, TQ, TI, TS, ACC) \
	VMOVDQU32 QADDR, TQ \
	VMOVDQA32 Z4, TI \
	VPDPBUSD (DX), TQ, TI \
	VCVTDQ2PS TI, TI \
	VMULPS SADDR, Z5, TS \
	VFMADD231PS TS, TI, ACC

// func q8RowsAVX512(np int, prep *byte, q *byte, s *float32, rows, qStride, sStride int, out *float32, outStride int)
// Strides are in bytes.
TEXT ·q8RowsAVX512(SB), NOSPLIT, $0-72
	MOVQ prep+8(FP), SI
	MOVQ q+16(FP), AX
	MOVQ s+24(FP), BX
	MOVQ rows+32(FP), R9
	MOVQ qStride+40(FP), R10
	MOVQ sStride+48(FP), R11
	MOVQ out+56(FP), R12
	MOVQ outStride+64(FP), R13
	LEAQ (R10)(R10*2), R14
	LEAQ (R11)(R11*2), R15
four:
	CMPQ R9, $4
	JLT one
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ SI, DX
	MOVQ AX, DI
	MOVQ BX, R8
	MOVQ np+0(FP), CX
fourpair:
	VMOVDQU32 64(DX), Z4
	VMOVUPS 128(DX), Z5
	ROW((DI), (R8), Z6, Z7, Z8, Z0)
	ROW((DI)(R10*1), (R8)(R11*1), Z9, Z10, Z11, Z1)
	ROW((DI)(R10*2), (R8)(R11*2), Z12, Z13, Z15, Z2)
	ROW((DI)(R14*1), (R8)(R15*1), Z16, Z17, Z18, Z3)
	ADDQ $192, DX
	ADDQ $64, DI
	ADDQ $64, R8
	DECQ CX
	JNZ fourpair
	HSUM(Z0, Y0, X0)
	HSUM(Z1, Y1, X1)
	HSUM(Z2, Y2, X2)
	HSUM(Z3, Y3, X3)
	VMOVSS X0, (R12)
	ADDQ R13, R12
	VMOVSS X1, (R12)
	ADDQ R13, R12
	VMOVSS X2, (R12)
	ADDQ R13, R12
	VMOVSS X3, (R12)
	ADDQ R13, R12
	LEAQ (AX)(R10*4), AX
	LEAQ (BX)(R11*4), BX
	SUBQ $4, R9
	JMP four
one:
	TESTQ R9, R9
	JZ rdone
	VPXORD Z0, Z0, Z0
	MOVQ SI, DX
	MOVQ AX, DI
	MOVQ BX, R8
	MOVQ np+0(FP), CX
onepair:
	VMOVDQU32 64(DX), Z4
	VMOVUPS 128(DX), Z5
	ROW((DI), (R8), Z6, Z7, Z8, Z0)
	ADDQ $192, DX
	ADDQ $64, DI
	ADDQ $64, R8
	DECQ CX
	JNZ onepair
	HSUM(Z0, Y0, X0)
	VMOVSS X0, (R12)
	ADDQ R13, R12
	ADDQ R10, AX
	ADDQ R11, BX
	DECQ R9
	JMP one
rdone:
	VZEROUPPER
	RET

// ROW2(q, s, tx, ts, ti0, ti1, tm0, tm1, acc0, acc1): one activation row's
// pair against two prepared pairs (w in Z8/Z9, negC in Z10/Z11, ws in
// Z12/Z13).
#define ROW2(QADDR, SADDR, TX, TS, TI0, TI1, TM0, TM1, ACC0, ACC1) \
	VMOVDQU32 QADDR, TX \
	VMOVUPS SADDR, TS \
	VMOVDQA32 Z10, TI0 \
	VMOVDQA32 Z11, TI1 \
	VPDPBUSD Z8, TX, TI0 \
	VPDPBUSD Z9, TX, TI1 \
	VCVTDQ2PS TI0, TI0 \
	VCVTDQ2PS TI1, TI1 \
	VMULPS TS, Z12, TM0 \
	VMULPS TS, Z13, TM1 \
	VFMADD231PS TM0, TI0, ACC0 \
	VFMADD231PS TM1, TI1, ACC1

#define LOADW2 \
	VMOVDQU64 (DX), Z8 \
	VMOVDQU64 (SI), Z9 \
	VMOVDQU32 64(DX), Z10 \
	VMOVDQU32 64(SI), Z11 \
	VMOVUPS 128(DX), Z12 \
	VMOVUPS 128(SI), Z13

// func q8Rows2AVX512(np int, prep0, prep1 *byte, q *byte, s *float32, rows, qStride, sStride int, out *float32, outStride int)
// Two prepared weight rows against activation rows; row r's results go
// to out[r·outStride] and out[r·outStride+1]. Strides are in bytes.
TEXT ·q8Rows2AVX512(SB), NOSPLIT, $0-80
	MOVQ q+24(FP), AX
	MOVQ s+32(FP), BX
	MOVQ rows+40(FP), R9
	MOVQ qStride+48(FP), R10
	MOVQ sStride+56(FP), R11
	MOVQ out+64(FP), R12
	MOVQ outStride+72(FP), R13
	LEAQ (R10)(R10*2), R14
	LEAQ (R11)(R11*2), R15
r2four:
	CMPQ R9, $4
	JLT r2one
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ prep0+8(FP), DX
	MOVQ prep1+16(FP), SI
	MOVQ AX, DI
	MOVQ BX, R8
	MOVQ np+0(FP), CX
r2fourpair:
	LOADW2
	ROW2((DI), (R8), Z14, Z15, Z16, Z17, Z18, Z19, Z0, Z4)
	ROW2((DI)(R10*1), (R8)(R11*1), Z20, Z21, Z22, Z23, Z24, Z25, Z1, Z5)
	ROW2((DI)(R10*2), (R8)(R11*2), Z14, Z15, Z16, Z17, Z18, Z19, Z2, Z6)
	ROW2((DI)(R14*1), (R8)(R15*1), Z20, Z21, Z22, Z23, Z24, Z25, Z3, Z7)
	ADDQ $192, DX
	ADDQ $192, SI
	ADDQ $64, DI
	ADDQ $64, R8
	DECQ CX
	JNZ r2fourpair
	HSUM(Z0, Y0, X0)
	HSUM(Z1, Y1, X1)
	HSUM(Z2, Y2, X2)
	HSUM(Z3, Y3, X3)
	HSUM(Z4, Y4, X4)
	HSUM(Z5, Y5, X5)
	HSUM(Z6, Y6, X6)
	HSUM(Z7, Y7, X7)
	VMOVSS X0, (R12)
	VMOVSS X4, 4(R12)
	ADDQ R13, R12
	VMOVSS X1, (R12)
	VMOVSS X5, 4(R12)
	ADDQ R13, R12
	VMOVSS X2, (R12)
	VMOVSS X6, 4(R12)
	ADDQ R13, R12
	VMOVSS X3, (R12)
	VMOVSS X7, 4(R12)
	ADDQ R13, R12
	LEAQ (AX)(R10*4), AX
	LEAQ (BX)(R11*4), BX
	SUBQ $4, R9
	JMP r2four
r2one:
	TESTQ R9, R9
	JZ r2done
	VPXORD Z0, Z0, Z0
	VPXORD Z4, Z4, Z4
	MOVQ prep0+8(FP), DX
	MOVQ prep1+16(FP), SI
	MOVQ AX, DI
	MOVQ BX, R8
	MOVQ np+0(FP), CX
r2onepair:
	LOADW2
	ROW2((DI), (R8), Z14, Z15, Z16, Z17, Z18, Z19, Z0, Z4)
	ADDQ $192, DX
	ADDQ $192, SI
	ADDQ $64, DI
	ADDQ $64, R8
	DECQ CX
	JNZ r2onepair
	HSUM(Z0, Y0, X0)
	HSUM(Z4, Y4, X4)
	VMOVSS X0, (R12)
	VMOVSS X4, 4(R12)
	ADDQ R13, R12
	ADDQ R10, AX
	ADDQ R11, BX
	DECQ R9
	JMP r2one
r2done:
	VZEROUPPER
	RET

// func q8DecodeAVX512(nrows, np int, w *byte, rowBytes int, q *byte, s *float32, out *float32)
// out[j] = Q8_0 weight row j (np pairs of blocks, rowBytes apart) · the one
// quantized activation row, streaming the weights once.
TEXT ·q8DecodeAVX512(SB), NOSPLIT, $0-56
	MOVQ nrows+0(FP), R9
	MOVQ w+16(FP), R10
	MOVQ rowBytes+24(FP), R11
	MOVQ out+48(FP), R12
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z31
	TESTQ R9, R9
	JZ ddone
drow:
	MOVQ R10, SI
	MOVQ q+32(FP), DI
	MOVQ s+40(FP), R8
	MOVQ np+8(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z10, Z10, Z10
dpair:
	PREFETCHT0 512(SI)
	VMOVDQU 2(SI), Y1
	VINSERTI64X4 $1, 36(SI), Z1, Z1
	VMOVDQU32 (DI), Z3
	VPXORD Z2, Z2, Z2
	VPDPBUSD Z1, Z3, Z2
	VPXORD Z4, Z4, Z4
	VPDPBUSD Z1, Z31, Z4
	VPSUBD Z4, Z2, Z2
	VCVTDQ2PS Z2, Z2
	VPBROADCASTW (SI), X5
	VPBROADCASTW 34(SI), X6
	VINSERTI128 $1, X6, Y5, Y5
	VCVTPH2PS Y5, Z5
	VMULPS (R8), Z5, Z5
	VFMADD231PS Z5, Z2, Z0
	ADDQ $68, SI
	ADDQ $64, DI
	ADDQ $64, R8
	DECQ CX
	JNZ dpair
	HSUM(Z0, Y0, X0)
	VMOVSS X0, (R12)
	ADDQ $4, R12
	ADDQ R11, R10
	DECQ R9
	JNZ drow
ddone:
	VZEROUPPER
	RET

// D4ROW(QA, SA, ACC): one activation row's pair (QA, scales SA) against
// the weight pair in Z1 (-128·Σw in Z4, weight scales in Z5).
#define D4ROW(QA, SA, ACC) \
	VMOVDQU32 QA, Z3 \
	VMOVDQA32 Z4, Z2 \
	VPDPBUSD Z1, Z3, Z2 \
	VCVTDQ2PS Z2, Z2 \
	VMULPS SA, Z5, Z6 \
	VFMADD231PS Z6, Z2, ACC

// func q8Decode4AVX512(nrows, np int, w *byte, rowBytes int, q *byte, s *float32, stride int, out *float32, outStride int)
// out[r·outStride + 4j] (bytes) = Q8_0 weight row j · activation row r, for
// four activation rows (q and s rows stride bytes apart), streaming the
// weights once: decode of a few sequences without preparing rows.
TEXT ·q8Decode4AVX512(SB), NOSPLIT, $0-72
	MOVQ nrows+0(FP), R9
	MOVQ w+16(FP), R10
	MOVQ rowBytes+24(FP), R11
	MOVQ stride+48(FP), R13
	LEAQ (R13)(R13*2), R14
	MOVQ out+56(FP), R12
	MOVQ outStride+64(FP), R15
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z31
	TESTQ R9, R9
	JZ d4done
d4row:
	MOVQ R10, SI
	MOVQ q+32(FP), DI
	MOVQ s+40(FP), R8
	MOVQ np+8(FP), CX
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
d4pair:
	PREFETCHT0 512(SI)
	VMOVDQU 2(SI), Y1
	VINSERTI64X4 $1, 36(SI), Z1, Z1
	VPXORD Z7, Z7, Z7
	VPDPBUSD Z1, Z31, Z7
	VPXORD Z4, Z4, Z4
	VPSUBD Z7, Z4, Z4
	VPBROADCASTW (SI), X5
	VPBROADCASTW 34(SI), X6
	VINSERTI128 $1, X6, Y5, Y5
	VCVTPH2PS Y5, Z5
	D4ROW((DI), (R8), Z10)
	D4ROW((DI)(R13*1), (R8)(R13*1), Z11)
	D4ROW((DI)(R13*2), (R8)(R13*2), Z12)
	D4ROW((DI)(R14*1), (R8)(R14*1), Z13)
	ADDQ $68, SI
	ADDQ $64, DI
	ADDQ $64, R8
	DECQ CX
	JNZ d4pair
	HSUM(Z10, Y10, X10)
	HSUM(Z11, Y11, X11)
	HSUM(Z12, Y12, X12)
	HSUM(Z13, Y13, X13)
	MOVQ R12, AX
	VMOVSS X10, (AX)
	ADDQ R15, AX
	VMOVSS X11, (AX)
	ADDQ R15, AX
	VMOVSS X12, (AX)
	ADDQ R15, AX
	VMOVSS X13, (AX)
	ADDQ $4, R12
	ADDQ R11, R10
	DECQ R9
	JNZ d4row
d4done:
	VZEROUPPER
	RET
