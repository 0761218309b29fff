#include "textflag.h"

// Constants for exp: Z20 = -log2(e), Z21..Z27 = ln2^k/k! (k = 1..7), Z28 = 1.
#define EXPCONSTS \
	MOVL $0xbfb8aa3b, AX \
	VPBROADCASTD AX, Z20 \
	MOVL $0x3f317218, AX \
	VPBROADCASTD AX, Z21 \
	MOVL $0x3e75fdf0, AX \
	VPBROADCASTD AX, Z22 \
	MOVL $0x3d635847, AX \
	VPBROADCASTD AX, Z23 \
	MOVL $0x3c1d955b, AX \
	VPBROADCASTD AX, Z24 \
	MOVL $0x3aaec3ff, AX \
	VPBROADCASTD AX, Z25 \
	MOVL $0x39218489, AX \
	VPBROADCASTD AX, Z26 \
	MOVL $0x377fe5fe, AX \
	VPBROADCASTD AX, Z27 \
	MOVL $0x3f800000, AX \
	VPBROADCASTD AX, Z28

// SIGMOID(X, OUT): OUT = 1/(1+exp(-X)), with exp(-X) = 2^n·p(f) for
// -X·log2(e) = n + f, |f| ≤ ½, p the degree-7 Taylor polynomial of 2^f;
// VSCALEFPS takes overflow to inf and underflow to 0, so no clamping.
// Uses Z29..Z31.
#define SIGMOID(X, OUT) \
	VMULPS Z20, X, Z29 \
	VRNDSCALEPS $0, Z29, Z30 \
	VSUBPS Z30, Z29, Z29 \
	VMOVAPS Z27, Z31 \
	VFMADD213PS Z26, Z29, Z31 \
	VFMADD213PS Z25, Z29, Z31 \
	VFMADD213PS Z24, Z29, Z31 \
	VFMADD213PS Z23, Z29, Z31 \
	VFMADD213PS Z22, Z29, Z31 \
	VFMADD213PS Z21, Z29, Z31 \
	VFMADD213PS Z28, Z29, Z31 \
	VSCALEFPS Z30, Z31, Z31 \
	VADDPS Z28, Z31, Z31 \
	VDIVPS Z31, Z28, OUT

// func sigmoidAVX512(dst, x *float32, n int)   n a multiple of 16
TEXT ·sigmoidAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	EXPCONSTS
sgloop:
	CMPQ CX, $16
	JLT sgdone
	VMOVUPS (SI), Z0
	SIGMOID(Z0, Z1)
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP sgloop
sgdone:
	VZEROUPPER
	RET

// func swigluAVX512(dst, gate, up *float32, n int)   dst = gate·σ(gate)·up (up nil: 1)
TEXT ·swigluAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	EXPCONSTS
swloop:
	CMPQ CX, $16
	JLT swdone
	VMOVUPS (SI), Z0
	SIGMOID(Z0, Z1)
	VMULPS Z1, Z0, Z1
	TESTQ DX, DX
	JZ swstore
	VMULPS (DX), Z1, Z1
	ADDQ $64, DX
swstore:
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP swloop
swdone:
	VZEROUPPER
	RET

// func sigmoidMulAVX512(dst, x, gate *float32, n int)   dst = x·σ(gate)
TEXT ·sigmoidMulAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ gate+16(FP), DX
	MOVQ n+24(FP), CX
	EXPCONSTS
smloop:
	CMPQ CX, $16
	JLT smdone
	VMOVUPS (DX), Z0
	SIGMOID(Z0, Z1)
	VMULPS (SI), Z1, Z1
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	SUBQ $16, CX
	JMP smloop
smdone:
	VZEROUPPER
	RET

// func fmaVecAVX512(dst, a, b *float32, n int)   dst += a·b elementwise
TEXT ·fmaVecAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
fvloop:
	CMPQ CX, $16
	JLT fvdone
	VMOVUPS (SI), Z0
	VMOVUPS (DI), Z1
	VFMADD231PS (DX), Z0, Z1
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	SUBQ $16, CX
	JMP fvloop
fvdone:
	VZEROUPPER
	RET

// func addVecAVX512(dst, a, b *float32, n int)   dst = a + b
TEXT ·addVecAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
avloop:
	CMPQ CX, $16
	JLT avdone
	VMOVUPS (SI), Z0
	VADDPS (DX), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	SUBQ $16, CX
	JMP avloop
avdone:
	VZEROUPPER
	RET
