#include "textflag.h"
#include "simd_amd64.h"

// BF16 and F16 weights widened to f32 in registers (exact) and multiplied
// with f32 activations: the same kernels for both, but for the widening.
#define WIDEN_BF16(ADDR, Z) \
	VPMOVZXWD ADDR, Z \
	VPSLLD $16, Z, Z

#define WIDEN_F16(ADDR, Z) \
	VCVTPH2PS ADDR, Z

// F32 rows need no widening (H16TILE serves f32 attention scores too).
#define LOAD_F32(ADDR, Z) \
	VMOVUPS ADDR, Z

// H16ROWS: out[r·outStride] = weight row w (k halves, k a multiple of 16)
// · activation row r (xStride bytes apart), four activation rows at a
// time. Strides are in bytes.
#define H16ROWS(WIDEN) \
	MOVQ x+16(FP), AX \
	MOVQ rows+24(FP), R9 \
	MOVQ xStride+32(FP), R10 \
	MOVQ out+40(FP), R12 \
	MOVQ outStride+48(FP), R13 \
	LEAQ (R10)(R10*2), R14 \
four: \
	CMPQ R9, $4 \
	JLT one \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
	MOVQ w+0(FP), SI \
	MOVQ AX, DI \
	MOVQ k+8(FP), CX \
fourloop: \
	WIDEN((SI), Z4) \
	VFMADD231PS (DI), Z4, Z0 \
	VFMADD231PS (DI)(R10*1), Z4, Z1 \
	VFMADD231PS (DI)(R10*2), Z4, Z2 \
	VFMADD231PS (DI)(R14*1), Z4, Z3 \
	ADDQ $32, SI \
	ADDQ $64, DI \
	SUBQ $16, CX \
	JNZ fourloop \
	HSUM(Z0, Y0, X0) \
	HSUM(Z1, Y1, X1) \
	HSUM(Z2, Y2, X2) \
	HSUM(Z3, Y3, X3) \
	VMOVSS X0, (R12) \
	ADDQ R13, R12 \
	VMOVSS X1, (R12) \
	ADDQ R13, R12 \
	VMOVSS X2, (R12) \
	ADDQ R13, R12 \
	VMOVSS X3, (R12) \
	ADDQ R13, R12 \
	LEAQ (AX)(R10*4), AX \
	SUBQ $4, R9 \
	JMP four \
one: \
	TESTQ R9, R9 \
	JZ done \
	VPXORD Z0, Z0, Z0 \
	MOVQ w+0(FP), SI \
	MOVQ AX, DI \
	MOVQ k+8(FP), CX \
oneloop: \
	WIDEN((SI), Z4) \
	VFMADD231PS (DI), Z4, Z0 \
	ADDQ $32, SI \
	ADDQ $64, DI \
	SUBQ $16, CX \
	JNZ oneloop \
	HSUM(Z0, Y0, X0) \
	VMOVSS X0, (R12) \
	ADDQ R13, R12 \
	ADDQ R10, AX \
	DECQ R9 \
	JMP one \
done: \
	VZEROUPPER \
	RET

// RED4: the four row sums of accumulators A..D (one activation row against
// four weight rows), stored at OUT, each summed in HSUM's order (halves,
// quarters, then pairs) so that a row's results do not depend on whether it
// fell in a tile or went through H16ROWS (a batch's composition must not
// change its rows' bits). XA..XD must be X0–X15 (VHADDPS has no EVEX form);
// clobbers Z24.
#define RED4(ZA, ZB, ZC, ZD, YSA, YSB, YSC, YSD, YA, YB, YC, YD, XA, XB, XC, XD, OUT) \
	VEXTRACTF64X4 $1, ZA, Y24 \
	VADDPS Y24, YSA, YA \
	VEXTRACTF64X4 $1, ZB, Y24 \
	VADDPS Y24, YSB, YB \
	VEXTRACTF64X4 $1, ZC, Y24 \
	VADDPS Y24, YSC, YC \
	VEXTRACTF64X4 $1, ZD, Y24 \
	VADDPS Y24, YSD, YD \
	VEXTRACTF32X4 $1, YA, X24 \
	VADDPS X24, XA, XA \
	VEXTRACTF32X4 $1, YB, X24 \
	VADDPS X24, XB, XB \
	VEXTRACTF32X4 $1, YC, X24 \
	VADDPS X24, XC, XC \
	VEXTRACTF32X4 $1, YD, X24 \
	VADDPS X24, XD, XD \
	VHADDPS XB, XA, XA \
	VHADDPS XD, XC, XC \
	VHADDPS XC, XA, XA \
	VMOVUPS XA, OUT

// ROW4: accumulators A..D += activation row X (Z register) times the four
// widened weight rows Z24..Z27.
#define ROW4(X, A, B, C, D) \
	VFMADD231PS Z24, X, A \
	VFMADD231PS Z25, X, B \
	VFMADD231PS Z26, X, C \
	VFMADD231PS Z27, X, D

// H16TILE: a 6×4 tile, out[r·outStride + c] = activation row r · weight
// row c for r < 6, c < 4, with the 24 sums in registers: each 16 weights of
// a row are widened once for six rows and each 16 activations loaded once
// for four, so that the loop is bound by its multiplies, not its loads (the
// one-weight-row kernel above loads once per multiply). Strides in bytes;
// k a multiple of 16; WSTEP is the bytes of 16 weights.
#define H16TILE(WIDEN, WSTEP) \
	MOVQ w+0(FP), SI \
	MOVQ wStride+8(FP), R8 \
	MOVQ k+16(FP), CX \
	MOVQ x+24(FP), DI \
	MOVQ xStride+32(FP), R10 \
	MOVQ out+40(FP), R12 \
	MOVQ outStride+48(FP), R13 \
	LEAQ (R8)(R8*2), BX \
	LEAQ (R10)(R10*2), R14 \
	LEAQ (DI)(R10*4), DX \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
	VPXORD Z4, Z4, Z4 \
	VPXORD Z5, Z5, Z5 \
	VPXORD Z6, Z6, Z6 \
	VPXORD Z7, Z7, Z7 \
	VPXORD Z8, Z8, Z8 \
	VPXORD Z9, Z9, Z9 \
	VPXORD Z10, Z10, Z10 \
	VPXORD Z11, Z11, Z11 \
	VPXORD Z12, Z12, Z12 \
	VPXORD Z13, Z13, Z13 \
	VPXORD Z14, Z14, Z14 \
	VPXORD Z15, Z15, Z15 \
	VPXORD Z16, Z16, Z16 \
	VPXORD Z17, Z17, Z17 \
	VPXORD Z18, Z18, Z18 \
	VPXORD Z19, Z19, Z19 \
	VPXORD Z20, Z20, Z20 \
	VPXORD Z21, Z21, Z21 \
	VPXORD Z22, Z22, Z22 \
	VPXORD Z23, Z23, Z23 \
tloop: \
	WIDEN((SI), Z24) \
	WIDEN((SI)(R8*1), Z25) \
	WIDEN((SI)(R8*2), Z26) \
	WIDEN((SI)(BX*1), Z27) \
	VMOVUPS (DI), Z28 \
	VMOVUPS (DI)(R10*1), Z29 \
	VMOVUPS (DI)(R10*2), Z30 \
	VMOVUPS (DI)(R14*1), Z31 \
	ROW4(Z28, Z0, Z1, Z2, Z3) \
	ROW4(Z29, Z4, Z5, Z6, Z7) \
	VMOVUPS (DX), Z28 \
	VMOVUPS (DX)(R10*1), Z29 \
	ROW4(Z30, Z8, Z9, Z10, Z11) \
	ROW4(Z31, Z12, Z13, Z14, Z15) \
	ROW4(Z28, Z16, Z17, Z18, Z19) \
	ROW4(Z29, Z20, Z21, Z22, Z23) \
	ADDQ $WSTEP, SI \
	ADDQ $64, DI \
	ADDQ $64, DX \
	SUBQ $16, CX \
	JNZ tloop \
	RED4(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, Y0, Y1, Y2, Y3, X0, X1, X2, X3, (R12)) \
	ADDQ R13, R12 \
	RED4(Z4, Z5, Z6, Z7, Y4, Y5, Y6, Y7, Y4, Y5, Y6, Y7, X4, X5, X6, X7, (R12)) \
	ADDQ R13, R12 \
	RED4(Z8, Z9, Z10, Z11, Y8, Y9, Y10, Y11, Y8, Y9, Y10, Y11, X8, X9, X10, X11, (R12)) \
	ADDQ R13, R12 \
	RED4(Z12, Z13, Z14, Z15, Y12, Y13, Y14, Y15, Y12, Y13, Y14, Y15, X12, X13, X14, X15, (R12)) \
	ADDQ R13, R12 \
	RED4(Z16, Z17, Z18, Z19, Y16, Y17, Y18, Y19, Y0, Y1, Y2, Y3, X0, X1, X2, X3, (R12)) \
	ADDQ R13, R12 \
	RED4(Z20, Z21, Z22, Z23, Y20, Y21, Y22, Y23, Y4, Y5, Y6, Y7, X4, X5, X6, X7, (R12)) \
	VZEROUPPER \
	RET

// H16TAIL: the rows (1 to 5) past a pass's last 6×4 tile against the same
// four weight rows, two activation rows at a time (then one): out[r·outStride
// + c] for r < rows, c < 4. Each sum is one accumulator over k in steps of 16,
// reduced by RED4, as in the tile and H16ROWS, so a row's bits are the same
// whichever kernel takes it. The weight rows are reread from L1 per pair.
#define H16TAIL(WIDEN, WSTEP) \
	MOVQ wStride+8(FP), R8 \
	MOVQ x+24(FP), AX \
	MOVQ xStride+32(FP), R10 \
	MOVQ out+40(FP), R12 \
	MOVQ outStride+48(FP), R13 \
	MOVQ rows+56(FP), R9 \
	LEAQ (R8)(R8*2), BX \
tpair: \
	CMPQ R9, $2 \
	JLT tsingle \
	MOVQ w+0(FP), SI \
	MOVQ AX, DI \
	MOVQ k+16(FP), CX \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
	VPXORD Z4, Z4, Z4 \
	VPXORD Z5, Z5, Z5 \
	VPXORD Z6, Z6, Z6 \
	VPXORD Z7, Z7, Z7 \
tploop: \
	WIDEN((SI), Z24) \
	WIDEN((SI)(R8*1), Z25) \
	WIDEN((SI)(R8*2), Z26) \
	WIDEN((SI)(BX*1), Z27) \
	VMOVUPS (DI), Z28 \
	VMOVUPS (DI)(R10*1), Z29 \
	ROW4(Z28, Z0, Z1, Z2, Z3) \
	ROW4(Z29, Z4, Z5, Z6, Z7) \
	ADDQ $WSTEP, SI \
	ADDQ $64, DI \
	SUBQ $16, CX \
	JNZ tploop \
	RED4(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, Y0, Y1, Y2, Y3, X0, X1, X2, X3, (R12)) \
	ADDQ R13, R12 \
	RED4(Z4, Z5, Z6, Z7, Y4, Y5, Y6, Y7, Y4, Y5, Y6, Y7, X4, X5, X6, X7, (R12)) \
	ADDQ R13, R12 \
	LEAQ (AX)(R10*2), AX \
	SUBQ $2, R9 \
	JMP tpair \
tsingle: \
	TESTQ R9, R9 \
	JZ tdone \
	MOVQ w+0(FP), SI \
	MOVQ AX, DI \
	MOVQ k+16(FP), CX \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
tsloop: \
	WIDEN((SI), Z24) \
	WIDEN((SI)(R8*1), Z25) \
	WIDEN((SI)(R8*2), Z26) \
	WIDEN((SI)(BX*1), Z27) \
	VMOVUPS (DI), Z28 \
	ROW4(Z28, Z0, Z1, Z2, Z3) \
	ADDQ $WSTEP, SI \
	ADDQ $64, DI \
	SUBQ $16, CX \
	JNZ tsloop \
	RED4(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, Y0, Y1, Y2, Y3, X0, X1, X2, X3, (R12)) \
tdone: \
	VZEROUPPER \
	RET

// func bf16RowsAVX512(w *uint16, k int, x *float32, rows, xStride int, out *float32, outStride int)
TEXT ·bf16RowsAVX512(SB), NOSPLIT, $0-56
	H16ROWS(WIDEN_BF16)

// func f16RowsAVX512(w *uint16, k int, x *float32, rows, xStride int, out *float32, outStride int)
TEXT ·f16RowsAVX512(SB), NOSPLIT, $0-56
	H16ROWS(WIDEN_F16)

// func bf16Tile64AVX512(w *uint16, wStride, k int, x *float32, xStride int, out *float32, outStride int)
TEXT ·bf16Tile64AVX512(SB), NOSPLIT, $0-56
	H16TILE(WIDEN_BF16, 32)

// func f16Tile64AVX512(w *uint16, wStride, k int, x *float32, xStride int, out *float32, outStride int)
TEXT ·f16Tile64AVX512(SB), NOSPLIT, $0-56
	H16TILE(WIDEN_F16, 32)

// func f32Tile64AVX512(w *float32, wStride, k int, x *float32, xStride int, out *float32, outStride int)
TEXT ·f32Tile64AVX512(SB), NOSPLIT, $0-56
	H16TILE(LOAD_F32, 64)

// func bf16Tail64AVX512(w *uint16, wStride, k int, x *float32, xStride int, out *float32, outStride, rows int)
TEXT ·bf16Tail64AVX512(SB), NOSPLIT, $0-64
	H16TAIL(WIDEN_BF16, 32)

// func f16Tail64AVX512(w *uint16, wStride, k int, x *float32, xStride int, out *float32, outStride, rows int)
TEXT ·f16Tail64AVX512(SB), NOSPLIT, $0-64
	H16TAIL(WIDEN_F16, 32)
