#include "textflag.h"
#include "simd_amd64.h"

// AVX2 BF16/F16 matmul kernels, for CPUs without AVX-512: weights widened
// to f32 in registers (exact), times f32 activations. Every kernel gives an
// (activation row, weight row) pair its own accumulator, one FMA per 8
// columns in order, reduced by HSUM8, so a row's bits are the same
// whichever kernel (batch size) takes it.

#define WIDEN2_BF16(ADDR, Y) \
	VPMOVZXWD ADDR, Y \
	VPSLLD $16, Y, Y

#define WIDEN2_F16(ADDR, Y) \
	VCVTPH2PS ADDR, Y

// F32TILE2: the 6×2 half of a 6×4 f32 tile: out[r·outStride + c] = x row r
// · w row c for r < 6 and the two w rows at SI, (SI)(R8*1); 12 sums in
// registers, each a single accumulator over k reduced by HSUM8.
#define F32TILE2 \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7 \
	VXORPS Y8, Y8, Y8 \
	VXORPS Y9, Y9, Y9 \
	VXORPS Y10, Y10, Y10 \
	VXORPS Y11, Y11, Y11 \
	MOVQ x+24(FP), DI \
	LEAQ (DI)(R10*4), DX \
	MOVQ k+16(FP), CX \
	MOVQ SI, BX \
f2loop: \
	VMOVUPS (BX), Y12 \
	VMOVUPS (BX)(R8*1), Y13 \
	VMOVUPS (DI), Y14 \
	VFMADD231PS Y12, Y14, Y0 \
	VFMADD231PS Y13, Y14, Y1 \
	VMOVUPS (DI)(R10*1), Y14 \
	VFMADD231PS Y12, Y14, Y2 \
	VFMADD231PS Y13, Y14, Y3 \
	VMOVUPS (DI)(R10*2), Y14 \
	VFMADD231PS Y12, Y14, Y4 \
	VFMADD231PS Y13, Y14, Y5 \
	VMOVUPS (DI)(R14*1), Y14 \
	VFMADD231PS Y12, Y14, Y6 \
	VFMADD231PS Y13, Y14, Y7 \
	VMOVUPS (DX), Y14 \
	VFMADD231PS Y12, Y14, Y8 \
	VFMADD231PS Y13, Y14, Y9 \
	VMOVUPS (DX)(R10*1), Y14 \
	VFMADD231PS Y12, Y14, Y10 \
	VFMADD231PS Y13, Y14, Y11 \
	ADDQ $32, BX \
	ADDQ $32, DI \
	ADDQ $32, DX \
	SUBQ $8, CX \
	JNZ f2loop \
	HSUM8(Y0, X0, X15) \
	HSUM8(Y1, X1, X15) \
	HSUM8(Y2, X2, X15) \
	HSUM8(Y3, X3, X15) \
	HSUM8(Y4, X4, X15) \
	HSUM8(Y5, X5, X15) \
	HSUM8(Y6, X6, X15) \
	HSUM8(Y7, X7, X15) \
	HSUM8(Y8, X8, X15) \
	HSUM8(Y9, X9, X15) \
	HSUM8(Y10, X10, X15) \
	HSUM8(Y11, X11, X15) \
	MOVQ R12, BX \
	VMOVSS X0, (BX) \
	VMOVSS X1, 4(BX) \
	ADDQ R13, BX \
	VMOVSS X2, (BX) \
	VMOVSS X3, 4(BX) \
	ADDQ R13, BX \
	VMOVSS X4, (BX) \
	VMOVSS X5, 4(BX) \
	ADDQ R13, BX \
	VMOVSS X6, (BX) \
	VMOVSS X7, 4(BX) \
	ADDQ R13, BX \
	VMOVSS X8, (BX) \
	VMOVSS X9, 4(BX) \
	ADDQ R13, BX \
	VMOVSS X10, (BX) \
	VMOVSS X11, 4(BX)

// H2R4W2: out[r·outStride + c] for 4 activation rows (xStride bytes apart)
// and weight rows c of each pair (k halves apart), npairs pairs.
#define H2R4W2(WIDEN) \
	MOVQ w+0(FP), R11 \
	MOVQ k+8(FP), R8 \
	SHLQ $1, R8 \
	MOVQ npairs+16(FP), R9 \
	MOVQ xStride+32(FP), R10 \
	MOVQ out+40(FP), R12 \
	MOVQ outStride+48(FP), R13 \
	LEAQ (R10)(R10*2), R14 \
	TESTQ R9, R9 \
	JZ p4done \
p4pair: \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7 \
	MOVQ R11, SI \
	MOVQ x+24(FP), DI \
	MOVQ k+8(FP), CX \
p4loop: \
	WIDEN((SI), Y8) \
	WIDEN((SI)(R8*1), Y9) \
	VMOVUPS (DI), Y10 \
	VFMADD231PS Y8, Y10, Y0 \
	VFMADD231PS Y9, Y10, Y1 \
	VMOVUPS (DI)(R10*1), Y10 \
	VFMADD231PS Y8, Y10, Y2 \
	VFMADD231PS Y9, Y10, Y3 \
	VMOVUPS (DI)(R10*2), Y10 \
	VFMADD231PS Y8, Y10, Y4 \
	VFMADD231PS Y9, Y10, Y5 \
	VMOVUPS (DI)(R14*1), Y10 \
	VFMADD231PS Y8, Y10, Y6 \
	VFMADD231PS Y9, Y10, Y7 \
	ADDQ $16, SI \
	ADDQ $32, DI \
	SUBQ $8, CX \
	JNZ p4loop \
	HSUM8(Y0, X0, X15) \
	HSUM8(Y1, X1, X15) \
	HSUM8(Y2, X2, X15) \
	HSUM8(Y3, X3, X15) \
	HSUM8(Y4, X4, X15) \
	HSUM8(Y5, X5, X15) \
	HSUM8(Y6, X6, X15) \
	HSUM8(Y7, X7, X15) \
	MOVQ R12, BX \
	VMOVSS X0, (BX) \
	VMOVSS X1, 4(BX) \
	ADDQ R13, BX \
	VMOVSS X2, (BX) \
	VMOVSS X3, 4(BX) \
	ADDQ R13, BX \
	VMOVSS X4, (BX) \
	VMOVSS X5, 4(BX) \
	ADDQ R13, BX \
	VMOVSS X6, (BX) \
	VMOVSS X7, 4(BX) \
	ADDQ $8, R12 \
	LEAQ (R11)(R8*2), R11 \
	DECQ R9 \
	JNZ p4pair \
p4done: \
	VZEROUPPER \
	RET

// H2R4W1: one weight row against 4 activation rows: out[r·outStride].
#define H2R4W1(WIDEN) \
	MOVQ w+0(FP), SI \
	MOVQ k+8(FP), CX \
	MOVQ x+16(FP), DI \
	MOVQ xStride+24(FP), R10 \
	MOVQ out+32(FP), R12 \
	MOVQ outStride+40(FP), R13 \
	LEAQ (R10)(R10*2), R14 \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y6, Y6, Y6 \
o4loop: \
	WIDEN((SI), Y8) \
	VMOVUPS (DI), Y10 \
	VFMADD231PS Y8, Y10, Y0 \
	VMOVUPS (DI)(R10*1), Y10 \
	VFMADD231PS Y8, Y10, Y2 \
	VMOVUPS (DI)(R10*2), Y10 \
	VFMADD231PS Y8, Y10, Y4 \
	VMOVUPS (DI)(R14*1), Y10 \
	VFMADD231PS Y8, Y10, Y6 \
	ADDQ $16, SI \
	ADDQ $32, DI \
	SUBQ $8, CX \
	JNZ o4loop \
	HSUM8(Y0, X0, X15) \
	HSUM8(Y2, X2, X15) \
	HSUM8(Y4, X4, X15) \
	HSUM8(Y6, X6, X15) \
	VMOVSS X0, (R12) \
	ADDQ R13, R12 \
	VMOVSS X2, (R12) \
	ADDQ R13, R12 \
	VMOVSS X4, (R12) \
	ADDQ R13, R12 \
	VMOVSS X6, (R12) \
	VZEROUPPER \
	RET

// H2R1W4: one activation row against nquads quads of weight rows (k
// halves apart): out[j] for j < 4·nquads.
#define H2R1W4(WIDEN) \
	MOVQ w+0(FP), R11 \
	MOVQ k+8(FP), R8 \
	SHLQ $1, R8 \
	LEAQ (R8)(R8*2), R14 \
	MOVQ nquads+16(FP), R9 \
	MOVQ out+32(FP), R12 \
	TESTQ R9, R9 \
	JZ q1done \
q1quad: \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	MOVQ R11, SI \
	MOVQ x+24(FP), DI \
	MOVQ k+8(FP), CX \
q1loop: \
	PREFETCHT0 256(SI) \
	VMOVUPS (DI), Y10 \
	WIDEN((SI), Y8) \
	VFMADD231PS Y8, Y10, Y0 \
	WIDEN((SI)(R8*1), Y9) \
	VFMADD231PS Y9, Y10, Y1 \
	WIDEN((SI)(R8*2), Y8) \
	VFMADD231PS Y8, Y10, Y2 \
	WIDEN((SI)(R14*1), Y9) \
	VFMADD231PS Y9, Y10, Y3 \
	ADDQ $16, SI \
	ADDQ $32, DI \
	SUBQ $8, CX \
	JNZ q1loop \
	HSUM8(Y0, X0, X15) \
	HSUM8(Y1, X1, X15) \
	HSUM8(Y2, X2, X15) \
	HSUM8(Y3, X3, X15) \
	VMOVSS X0, (R12) \
	VMOVSS X1, 4(R12) \
	VMOVSS X2, 8(R12) \
	VMOVSS X3, 12(R12) \
	ADDQ $16, R12 \
	LEAQ (R11)(R8*4), R11 \
	DECQ R9 \
	JNZ q1quad \
q1done: \
	VZEROUPPER \
	RET

// H2R1W1: one activation row against nrows weight rows, one at a time.
#define H2R1W1(WIDEN) \
	MOVQ w+0(FP), SI \
	MOVQ nrows+16(FP), R9 \
	MOVQ out+32(FP), R12 \
	TESTQ R9, R9 \
	JZ s1done \
s1row: \
	VXORPS Y0, Y0, Y0 \
	MOVQ x+24(FP), DI \
	MOVQ k+8(FP), CX \
s1loop: \
	VMOVUPS (DI), Y10 \
	WIDEN((SI), Y8) \
	VFMADD231PS Y8, Y10, Y0 \
	ADDQ $16, SI \
	ADDQ $32, DI \
	SUBQ $8, CX \
	JNZ s1loop \
	HSUM8(Y0, X0, X15) \
	VMOVSS X0, (R12) \
	ADDQ $4, R12 \
	DECQ R9 \
	JNZ s1row \
s1done: \
	VZEROUPPER \
	RET

// func bf16R4W2AVX2(w *uint16, k, npairs int, x *float32, xStride int, out *float32, outStride int)
TEXT ·bf16R4W2AVX2(SB), NOSPLIT, $0-56
	H2R4W2(WIDEN2_BF16)

// func bf16R4W1AVX2(w *uint16, k int, x *float32, xStride int, out *float32, outStride int)
TEXT ·bf16R4W1AVX2(SB), NOSPLIT, $0-48
	H2R4W1(WIDEN2_BF16)

// func bf16R1W4AVX2(w *uint16, k, nquads int, x *float32, out *float32)
TEXT ·bf16R1W4AVX2(SB), NOSPLIT, $0-40
	H2R1W4(WIDEN2_BF16)

// func bf16R1W1AVX2(w *uint16, k, nrows int, x *float32, out *float32)
TEXT ·bf16R1W1AVX2(SB), NOSPLIT, $0-40
	H2R1W1(WIDEN2_BF16)

// func f16R4W2AVX2(w *uint16, k, npairs int, x *float32, xStride int, out *float32, outStride int)
TEXT ·f16R4W2AVX2(SB), NOSPLIT, $0-56
	H2R4W2(WIDEN2_F16)

// func f16R4W1AVX2(w *uint16, k int, x *float32, xStride int, out *float32, outStride int)
TEXT ·f16R4W1AVX2(SB), NOSPLIT, $0-48
	H2R4W1(WIDEN2_F16)

// func f16R1W4AVX2(w *uint16, k, nquads int, x *float32, out *float32)
TEXT ·f16R1W4AVX2(SB), NOSPLIT, $0-40
	H2R1W4(WIDEN2_F16)

// func f16R1W1AVX2(w *uint16, k, nrows int, x *float32, out *float32)
TEXT ·f16R1W1AVX2(SB), NOSPLIT, $0-40
	H2R1W1(WIDEN2_F16)

// func f32Tile64AVX2(w *float32, wStride, k int, x *float32, xStride int, out *float32, outStride int)
// f32Tile64AVX512's 6×4 tile (strides in bytes; k a multiple of 8) as two
// 6×2 halves, AVX2 having 16 registers.
TEXT ·f32Tile64AVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ wStride+8(FP), R8
	MOVQ xStride+32(FP), R10
	MOVQ out+40(FP), R12
	MOVQ outStride+48(FP), R13
	LEAQ (R10)(R10*2), R14
	MOVQ $2, R9
f2half:
	F32TILE2
	LEAQ (SI)(R8*2), SI
	ADDQ $8, R12
	DECQ R9
	JNZ f2half
	VZEROUPPER
	RET
