#include "textflag.h"
#include "simd_amd64.h"

// AVX2 Q8_0 kernels, for CPUs without AVX-512 VNNI. A block's 32 weights
// multiply 32 signed activations by VPMADDUBSW on |w| and x·sign(w) (no
// saturation: |w| ≤ 128, |x| ≤ 127), VPMADDWD by ones sums them into 8
// lanes, and the lanes are weighted by d_w·d_x in floats. They read the
// activations as quantizeQ8X lays them out, made signed (q8Signed): block b
// of a row at 32·b in q, its scale 8 times at 8·b in s.

// kiq4: IQ4_NL's (and IQ4_XS's) grid, in both 128-bit lanes, for VPSHUFB.
DATA kiq4<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA kiq4<>+8(SB)/8, $0x7159453526190d01
DATA kiq4<>+16(SB)/8, $0xf6eaddcfbfad9881
DATA kiq4<>+24(SB)/8, $0x7159453526190d01
GLOBL kiq4<>(SB), RODATA|NOPTR, $32

// IQ4_XS scale unpacking: shift counts for each sub-block's 4 low and 2
// high scale bits, the masks, and the 32 offset.
DATA kxsl<>+0(SB)/8, $0x0000000400000000
DATA kxsl<>+8(SB)/8, $0x0000000c00000008
DATA kxsl<>+16(SB)/8, $0x0000001400000010
DATA kxsl<>+24(SB)/8, $0x0000001c00000018
GLOBL kxsl<>(SB), RODATA|NOPTR, $32
DATA kxsh<>+0(SB)/8, $0x0000000200000000
DATA kxsh<>+8(SB)/8, $0x0000000600000004
DATA kxsh<>+16(SB)/8, $0x0000000a00000008
DATA kxsh<>+24(SB)/8, $0x0000000e0000000c
GLOBL kxsh<>(SB), RODATA|NOPTR, $32
DATA kxs15<>+0(SB)/8, $0x0000000f0000000f
DATA kxs15<>+8(SB)/8, $0x0000000f0000000f
DATA kxs15<>+16(SB)/8, $0x0000000f0000000f
DATA kxs15<>+24(SB)/8, $0x0000000f0000000f
GLOBL kxs15<>(SB), RODATA|NOPTR, $32
DATA kxs3<>+0(SB)/8, $0x0000000300000003
DATA kxs3<>+8(SB)/8, $0x0000000300000003
DATA kxs3<>+16(SB)/8, $0x0000000300000003
DATA kxs3<>+24(SB)/8, $0x0000000300000003
GLOBL kxs3<>(SB), RODATA|NOPTR, $32
DATA kxs32<>+0(SB)/8, $0x0000002000000020
DATA kxs32<>+8(SB)/8, $0x0000002000000020
DATA kxs32<>+16(SB)/8, $0x0000002000000020
DATA kxs32<>+24(SB)/8, $0x0000002000000020
GLOBL kxs32<>(SB), RODATA|NOPTR, $32

// Q8ROW(ACC, Q, S): one activation row's block at Q (scales at S) against
// the weight block (Y5 = w, Y4 = |w|, Y6 = d_w), into ACC.
#define Q8ROW(ACC, Q, S) \
	VMOVDQU Q, Y7 \
	VPSIGNB Y5, Y7, Y7 \
	VPMADDUBSW Y7, Y4, Y7 \
	VPMADDWD Y15, Y7, Y7 \
	VCVTDQ2PS Y7, Y7 \
	VMULPS S, Y6, Y8 \
	VFMADD231PS Y8, Y7, ACC

// Q8WBLOCK: the weight block at SI into Y5, |w| into Y4, d_w into Y6.
#define Q8WBLOCK \
	VMOVDQU 2(SI), Y5 \
	VPSIGNB Y5, Y5, Y4 \
	VPBROADCASTW (SI), X6 \
	VCVTPH2PS X6, Y6

// NIB32(ADDR): the 16 bytes at ADDR as 32 nibbles in element order (low
// nibbles, then high: Q4_0's layout) into Y5; uses X4, Y13 = 0x0f bytes.
#define NIB32(ADDR) \
	VMOVDQU ADDR, X5 \
	VPSRLW $4, X5, X4 \
	VINSERTI128 $1, X4, Y5, Y5 \
	VPAND Y13, Y5, Y5

// Q40WBLOCK: a Q4_0 block at SI (d, then 16 bytes: elements 0..15 in the
// low nibbles, 16..31 in the high, each less 8) into Y5 = w, Y4 = |w|,
// Y6 = d.
#define Q40WBLOCK \
	NIB32(2(SI)) \
	VPSUBB Y12, Y5, Y5 \
	VPSIGNB Y5, Y5, Y4 \
	VPBROADCASTW (SI), X6 \
	VCVTPH2PS X6, Y6

// Q40CONSTS: Y13 = 0x0f bytes, Y12 = 8s, for Q40WBLOCK.
#define Q40CONSTS \
	MOVL $0x0f0f0f0f, BX \
	MOVD BX, X13 \
	VPBROADCASTD X13, Y13 \
	MOVL $0x08080808, BX \
	MOVD BX, X12 \
	VPBROADCASTD X12, Y12

// QNLWBLOCK: an IQ4_NL block at SI (d, then 16 bytes of grid indices laid
// out as Q4_0's nibbles) into Y5 = w, Y4 = |w|, Y6 = d; Y12 holds the grid.
#define QNLWBLOCK \
	NIB32(2(SI)) \
	VPSHUFB Y5, Y12, Y5 \
	VPSIGNB Y5, Y5, Y4 \
	VPBROADCASTW (SI), X6 \
	VCVTPH2PS X6, Y6

// QNLCONSTS: Y13 = 0x0f bytes, Y12 = the grid, for QNLWBLOCK.
#define QNLCONSTS \
	MOVL $0x0f0f0f0f, BX \
	MOVD BX, X13 \
	VPBROADCASTD X13, Y13 \
	VMOVDQU kiq4<>(SB), Y12

// QXSSCALES: the 8 sub-block scales d·(ls − 32) of the IQ4_XS super-block
// at SI to 0(SP) (6-bit ls: 4 bits from scales_l, 2 from scales_h); uses
// Y9, Y10.
#define QXSSCALES \
	VPBROADCASTD 4(SI), Y9 \
	VPSRLVD kxsl<>(SB), Y9, Y9 \
	VPAND kxs15<>(SB), Y9, Y9 \
	VPBROADCASTD 2(SI), Y10 \
	VPSRLVD kxsh<>(SB), Y10, Y10 \
	VPAND kxs3<>(SB), Y10, Y10 \
	VPSLLD $4, Y10, Y10 \
	VPOR Y10, Y9, Y9 \
	VPSUBD kxs32<>(SB), Y9, Y9 \
	VCVTDQ2PS Y9, Y9 \
	VPBROADCASTW (SI), X10 \
	VCVTPH2PS X10, Y10 \
	VMULPS Y10, Y9, Y9 \
	VMOVUPS Y9, (SP)

// QXSWB(J): sub-block J of the IQ4_XS super-block at SI (16 bytes of grid
// indices at 8+16J, laid out as Q4_0's) into Y5 = w, Y4 = |w|, Y6 = its
// scale; Y12 holds the grid, Y13 0x0f bytes.
#define QXSWB(J) \
	NIB32(8+16*J(SI)) \
	VPSHUFB Y5, Y12, Y5 \
	VPSIGNB Y5, Y5, Y4 \
	VBROADCASTSS 4*J(SP), Y6

// Q8ROWS4(OFF) / Q8ROWS1(OFF): the weight block in Y4..Y6 against the
// activation block OFF bytes on (scales OFF on) in four rows / one row.
#define Q8ROWS4(OFF) \
	Q8ROW(Y0, OFF(DI), OFF(BX)) \
	Q8ROW(Y1, OFF(DI)(R8*1), OFF(BX)(DX*1)) \
	Q8ROW(Y2, OFF(DI)(R8*2), OFF(BX)(DX*2)) \
	Q8ROW(Y3, OFF(DI)(R14*1), OFF(BX)(AX*1))

#define Q8ROWS1(OFF) \
	Q8ROW(Y0, OFF(DI), OFF(BX))

// The blocks Q8R4 and Q8R1 step over: one weight block and its products,
// or an IQ4_XS super-block's scales and eight sub-blocks.
#define Q8B4 \
	Q8WBLOCK \
	Q8ROWS4(0)

#define Q8B1 \
	Q8WBLOCK \
	Q8ROWS1(0)

#define Q40B4 \
	Q40WBLOCK \
	Q8ROWS4(0)

#define Q40B1 \
	Q40WBLOCK \
	Q8ROWS1(0)

#define QNLB4 \
	QNLWBLOCK \
	Q8ROWS4(0)

#define QNLB1 \
	QNLWBLOCK \
	Q8ROWS1(0)

#define QXSB4 \
	QXSSCALES \
	QXSWB(0) \
	Q8ROWS4(32*0) \
	QXSWB(1) \
	Q8ROWS4(32*1) \
	QXSWB(2) \
	Q8ROWS4(32*2) \
	QXSWB(3) \
	Q8ROWS4(32*3) \
	QXSWB(4) \
	Q8ROWS4(32*4) \
	QXSWB(5) \
	Q8ROWS4(32*5) \
	QXSWB(6) \
	Q8ROWS4(32*6) \
	QXSWB(7) \
	Q8ROWS4(32*7)

#define QXSB1 \
	QXSSCALES \
	QXSWB(0) \
	Q8ROWS1(32*0) \
	QXSWB(1) \
	Q8ROWS1(32*1) \
	QXSWB(2) \
	Q8ROWS1(32*2) \
	QXSWB(3) \
	Q8ROWS1(32*3) \
	QXSWB(4) \
	Q8ROWS1(32*4) \
	QXSWB(5) \
	Q8ROWS1(32*5) \
	QXSWB(6) \
	Q8ROWS1(32*6) \
	QXSWB(7) \
	Q8ROWS1(32*7)

// Q8R4(BLOCK, WSTEP, ASTEP): q8Rows4AVX2's body over blocks BLOCK of WSTEP
// weight bytes and ASTEP activation bytes (and scale bytes).
#define Q8R4(BLOCK, WSTEP, ASTEP) \
	MOVQ nrows+0(FP), R9 \
	MOVQ w+16(FP), R10 \
	MOVQ rowBytes+24(FP), R11 \
	MOVQ qStride+40(FP), R8 \
	MOVQ sStride+56(FP), DX \
	MOVQ out+64(FP), R12 \
	MOVQ outStride+72(FP), R13 \
	LEAQ (R8)(R8*2), R14 \
	MOVL $0x00010001, AX \
	MOVD AX, X15 \
	VPBROADCASTD X15, Y15 \
	LEAQ (DX)(DX*2), AX \
	TESTQ R9, R9 \
	JZ q4rdone \
q4rrow: \
	MOVQ R10, SI \
	MOVQ q+32(FP), DI \
	MOVQ s+48(FP), BX \
	MOVQ nblocks+8(FP), CX \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
q4rblock: \
	BLOCK \
	ADDQ $WSTEP, SI \
	ADDQ $ASTEP, DI \
	ADDQ $ASTEP, BX \
	DECQ CX \
	JNZ q4rblock \
	HSUM8(Y0, X0, X8) \
	HSUM8(Y1, X1, X8) \
	HSUM8(Y2, X2, X8) \
	HSUM8(Y3, X3, X8) \
	MOVQ R12, BX \
	VMOVSS X0, (BX) \
	ADDQ R13, BX \
	VMOVSS X1, (BX) \
	ADDQ R13, BX \
	VMOVSS X2, (BX) \
	ADDQ R13, BX \
	VMOVSS X3, (BX) \
	ADDQ $4, R12 \
	ADDQ R11, R10 \
	DECQ R9 \
	JNZ q4rrow \
q4rdone: \
	VZEROUPPER \
	RET

// Q8R1(BLOCK, WSTEP, ASTEP): Q8R4 for one activation row.
#define Q8R1(BLOCK, WSTEP, ASTEP) \
	MOVQ nrows+0(FP), R9 \
	MOVQ w+16(FP), R10 \
	MOVQ rowBytes+24(FP), R11 \
	MOVQ out+48(FP), R12 \
	MOVL $0x00010001, AX \
	MOVD AX, X15 \
	VPBROADCASTD X15, Y15 \
	TESTQ R9, R9 \
	JZ q1rdone \
q1rrow: \
	MOVQ R10, SI \
	MOVQ q+32(FP), DI \
	MOVQ s+40(FP), BX \
	MOVQ nblocks+8(FP), CX \
	VXORPS Y0, Y0, Y0 \
q1rblock: \
	PREFETCHT0 512(SI) \
	BLOCK \
	ADDQ $WSTEP, SI \
	ADDQ $ASTEP, DI \
	ADDQ $ASTEP, BX \
	DECQ CX \
	JNZ q1rblock \
	HSUM8(Y0, X0, X8) \
	VMOVSS X0, (R12) \
	ADDQ $4, R12 \
	ADDQ R11, R10 \
	DECQ R9 \
	JNZ q1rrow \
q1rdone: \
	VZEROUPPER \
	RET

// func q8Rows4AVX2(nrows, nblocks int, w *byte, rowBytes int, q *byte, qStride int, s *float32, sStride int, out *float32, outStride int)
// out[r·outStride + j] (bytes) = Q8_0 row j · activation row r for j <
// nrows and four activation rows (q rows qStride bytes apart, s rows
// sStride bytes apart), each weight block loaded once for the four.
TEXT ·q8Rows4AVX2(SB), NOSPLIT, $0-80
	Q8R4(Q8B4, 34, 32)

// func q8Rows1AVX2(nrows, nblocks int, w *byte, rowBytes int, q *byte, s *float32, out *float32)
// q8Rows4AVX2 for one activation row (the same instructions for it, so the
// same bits); out[j] for weight rows j < nrows.
TEXT ·q8Rows1AVX2(SB), NOSPLIT, $0-56
	Q8R1(Q8B1, 34, 32)

// func q40Rows4AVX2(nrows, nblocks int, w *byte, rowBytes int, q *byte, qStride int, s *float32, sStride int, out *float32, outStride int)
// q8Rows4AVX2 for Q4_0 weights.
TEXT ·q40Rows4AVX2(SB), NOSPLIT, $0-80
	Q40CONSTS
	Q8R4(Q40B4, 18, 32)

// func q40Rows1AVX2(nrows, nblocks int, w *byte, rowBytes int, q *byte, s *float32, out *float32)
// q8Rows1AVX2 for Q4_0 weights.
TEXT ·q40Rows1AVX2(SB), NOSPLIT, $0-56
	Q40CONSTS
	Q8R1(Q40B1, 18, 32)

// func qnlRows4AVX2(nrows, nblocks int, w *byte, rowBytes int, q *byte, qStride int, s *float32, sStride int, out *float32, outStride int)
// q8Rows4AVX2 for IQ4_NL weights.
TEXT ·qnlRows4AVX2(SB), NOSPLIT, $0-80
	QNLCONSTS
	Q8R4(QNLB4, 18, 32)

// func qnlRows1AVX2(nrows, nblocks int, w *byte, rowBytes int, q *byte, s *float32, out *float32)
// q8Rows1AVX2 for IQ4_NL weights.
TEXT ·qnlRows1AVX2(SB), NOSPLIT, $0-56
	QNLCONSTS
	Q8R1(QNLB1, 18, 32)

// func qxsRows4AVX2(nrows, nblocks int, w *byte, rowBytes int, q *byte, qStride int, s *float32, sStride int, out *float32, outStride int)
// q8Rows4AVX2 for IQ4_XS weights (nblocks super-blocks of 256): each 32 of
// a super-block as an IQ4_NL block with its own scale.
TEXT ·qxsRows4AVX2(SB), NOSPLIT, $32-80
	QNLCONSTS
	Q8R4(QXSB4, 136, 256)

// func qxsRows1AVX2(nrows, nblocks int, w *byte, rowBytes int, q *byte, s *float32, out *float32)
// q8Rows1AVX2 for IQ4_XS weights.
TEXT ·qxsRows1AVX2(SB), NOSPLIT, $32-56
	QNLCONSTS
	Q8R1(QXSB1, 136, 256)
