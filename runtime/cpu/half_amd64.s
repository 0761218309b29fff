#include "textflag.h"
#include "simd_amd64.h"

// BF16 and F16 weights widened to f32 in registers (exact) and multiplied
// with f32 activations: the same kernels for both, but for the widening.
#define WIDEN_BF16(ADDR, Z) \
	VPMOVZXWD ADDR, Z \
	VPSLLD $16, Z, Z

#define WIDEN_F16(ADDR, Z) \
	VCVTPH2PS ADDR, Z

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

// H16DECODE: out[j] = weight row j (k halves, k a multiple of 32, rows
// contiguous) · the one activation row x, streaming the weights once.
#define H16DECODE(WIDEN) \
	MOVQ nrows+0(FP), R9 \
	MOVQ w+8(FP), SI \
	MOVQ out+32(FP), R12 \
	TESTQ R9, R9 \
	JZ ddone \
drow: \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	MOVQ x+24(FP), DI \
	MOVQ k+16(FP), CX \
dloop: \
	PREFETCHT0 512(SI) \
	WIDEN((SI), Z4) \
	WIDEN(32(SI), Z5) \
	VFMADD231PS (DI), Z4, Z0 \
	VFMADD231PS 64(DI), Z5, Z1 \
	ADDQ $64, SI \
	ADDQ $128, DI \
	SUBQ $32, CX \
	JNZ dloop \
	VADDPS Z1, Z0, Z0 \
	HSUM(Z0, Y0, X0) \
	VMOVSS X0, (R12) \
	ADDQ $4, R12 \
	DECQ R9 \
	JNZ drow \
ddone: \
	VZEROUPPER \
	RET

// func bf16RowsAVX512(w *uint16, k int, x *float32, rows, xStride int, out *float32, outStride int)
TEXT ·bf16RowsAVX512(SB), NOSPLIT, $0-56
	H16ROWS(WIDEN_BF16)

// func f16RowsAVX512(w *uint16, k int, x *float32, rows, xStride int, out *float32, outStride int)
TEXT ·f16RowsAVX512(SB), NOSPLIT, $0-56
	H16ROWS(WIDEN_F16)

// func bf16DecodeAVX512(nrows int, w *uint16, k int, x *float32, out *float32)
TEXT ·bf16DecodeAVX512(SB), NOSPLIT, $0-40
	H16DECODE(WIDEN_BF16)

// func f16DecodeAVX512(nrows int, w *uint16, k int, x *float32, out *float32)
TEXT ·f16DecodeAVX512(SB), NOSPLIT, $0-40
	H16DECODE(WIDEN_F16)
