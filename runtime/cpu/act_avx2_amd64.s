#include "textflag.h"

// AVX2 forms of act_amd64.s's kernels, for CPUs without AVX-512. AVX2 has
// no VSCALEFPS: 2^n is added into the exponent, with the exponent argument
// clamped to [-125, 126] so that the result stays a normal float (σ is then
// 0 or 1 to far below the tests' tolerance).

// Constants for exp: Y7 = -log2(e), Y8..Y14 = ln2^k/k! (k = 1..7), Y15 = 1,
// Y2 = 126, Y3 = -125.
#define EXPCONSTS2 \
	MOVL $0xbfb8aa3b, AX \
	MOVD AX, X7 \
	VPBROADCASTD X7, Y7 \
	MOVL $0x3f317218, AX \
	MOVD AX, X8 \
	VPBROADCASTD X8, Y8 \
	MOVL $0x3e75fdf0, AX \
	MOVD AX, X9 \
	VPBROADCASTD X9, Y9 \
	MOVL $0x3d635847, AX \
	MOVD AX, X10 \
	VPBROADCASTD X10, Y10 \
	MOVL $0x3c1d955b, AX \
	MOVD AX, X11 \
	VPBROADCASTD X11, Y11 \
	MOVL $0x3aaec3ff, AX \
	MOVD AX, X12 \
	VPBROADCASTD X12, Y12 \
	MOVL $0x39218489, AX \
	MOVD AX, X13 \
	VPBROADCASTD X13, Y13 \
	MOVL $0x377fe5fe, AX \
	MOVD AX, X14 \
	VPBROADCASTD X14, Y14 \
	MOVL $0x3f800000, AX \
	MOVD AX, X15 \
	VPBROADCASTD X15, Y15 \
	MOVL $0x42fc0000, AX \
	MOVD AX, X2 \
	VPBROADCASTD X2, Y2 \
	MOVL $0xc2fa0000, AX \
	MOVD AX, X3 \
	VPBROADCASTD X3, Y3

// SIGMOID2(X, OUT): OUT = 1/(1+exp(-X)) as SIGMOID does, 2^n by exponent
// addition (a NaN stays NaN: the clamps return it); uses Y4..Y6.
#define SIGMOID2(X, OUT) \
	VMULPS Y7, X, Y4 \
	VMINPS Y4, Y2, Y4 \
	VMAXPS Y4, Y3, Y4 \
	VROUNDPS $0, Y4, Y5 \
	VSUBPS Y5, Y4, Y4 \
	VMOVAPS Y14, Y6 \
	VFMADD213PS Y13, Y4, Y6 \
	VFMADD213PS Y12, Y4, Y6 \
	VFMADD213PS Y11, Y4, Y6 \
	VFMADD213PS Y10, Y4, Y6 \
	VFMADD213PS Y9, Y4, Y6 \
	VFMADD213PS Y8, Y4, Y6 \
	VFMADD213PS Y15, Y4, Y6 \
	VCVTPS2DQ Y5, Y5 \
	VPSLLD $23, Y5, Y5 \
	VPADDD Y5, Y6, Y6 \
	VADDPS Y15, Y6, Y6 \
	VDIVPS Y6, Y15, OUT

// func sigmoidAVX2(dst, x *float32, n int)   n a multiple of 8
TEXT ·sigmoidAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	EXPCONSTS2
sg2loop:
	CMPQ CX, $8
	JLT sg2done
	VMOVUPS (SI), Y0
	SIGMOID2(Y0, Y1)
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP sg2loop
sg2done:
	VZEROUPPER
	RET

// func swigluAVX2(dst, gate, up *float32, n int)   dst = gate·σ(gate)·up (up nil: 1)
TEXT ·swigluAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	EXPCONSTS2
sw2loop:
	CMPQ CX, $8
	JLT sw2done
	VMOVUPS (SI), Y0
	SIGMOID2(Y0, Y1)
	VMULPS Y1, Y0, Y1
	TESTQ DX, DX
	JZ sw2store
	VMULPS (DX), Y1, Y1
	ADDQ $32, DX
sw2store:
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP sw2loop
sw2done:
	VZEROUPPER
	RET

// func sigmoidMulAVX2(dst, x, gate *float32, n int)   dst = x·σ(gate)
TEXT ·sigmoidMulAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ gate+16(FP), DX
	MOVQ n+24(FP), CX
	EXPCONSTS2
sm2loop:
	CMPQ CX, $8
	JLT sm2done
	VMOVUPS (DX), Y0
	SIGMOID2(Y0, Y1)
	VMULPS (SI), Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	SUBQ $8, CX
	JMP sm2loop
sm2done:
	VZEROUPPER
	RET

// func fmaVecAVX2(dst, a, b *float32, n int)   dst += a·b elementwise
TEXT ·fmaVecAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
fv2loop:
	CMPQ CX, $8
	JLT fv2done
	VMOVUPS (SI), Y0
	VMOVUPS (DI), Y1
	VFMADD231PS (DX), Y0, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	SUBQ $8, CX
	JMP fv2loop
fv2done:
	VZEROUPPER
	RET

// func addVecAVX2(dst, a, b *float32, n int)   dst = a + b
TEXT ·addVecAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
av2loop:
	CMPQ CX, $8
	JLT av2done
	VMOVUPS (SI), Y0
	VADDPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	SUBQ $8, CX
	JMP av2loop
av2done:
	VZEROUPPER
	RET
