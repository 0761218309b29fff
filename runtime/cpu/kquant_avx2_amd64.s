#include "textflag.h"

// AVX2 k-quant kernels, for CPUs without AVX-512 VNNI: VPMADDUBSW
// multiplies unsigned weight bytes with signed activation bytes into 16-bit
// pair sums (no saturation: weights are at most 63, activations ±127),
// VPMADDWD weights them by their sub-block scales into 32-bit lane sums,
// and each super-block's sums become floats once. They read the quantized
// activation row as quantizeRowsK writes it (kActBytes a super-block: the
// integers +128, the sub-block sums d·Σq, then d).

// k2bc4: VPSHUFB masks that broadcast word j (a Q4_K sub-block's scale,
// both 128-bit lanes holding words 0..7) over the register, for j = 0..7.

DATA k2bc4<>+0(SB)/8, $0x0100010001000100
DATA k2bc4<>+8(SB)/8, $0x0100010001000100
DATA k2bc4<>+16(SB)/8, $0x0100010001000100
DATA k2bc4<>+24(SB)/8, $0x0100010001000100
DATA k2bc4<>+32(SB)/8, $0x0302030203020302
DATA k2bc4<>+40(SB)/8, $0x0302030203020302
DATA k2bc4<>+48(SB)/8, $0x0302030203020302
DATA k2bc4<>+56(SB)/8, $0x0302030203020302
DATA k2bc4<>+64(SB)/8, $0x0504050405040504
DATA k2bc4<>+72(SB)/8, $0x0504050405040504
DATA k2bc4<>+80(SB)/8, $0x0504050405040504
DATA k2bc4<>+88(SB)/8, $0x0504050405040504
DATA k2bc4<>+96(SB)/8, $0x0706070607060706
DATA k2bc4<>+104(SB)/8, $0x0706070607060706
DATA k2bc4<>+112(SB)/8, $0x0706070607060706
DATA k2bc4<>+120(SB)/8, $0x0706070607060706
DATA k2bc4<>+128(SB)/8, $0x0908090809080908
DATA k2bc4<>+136(SB)/8, $0x0908090809080908
DATA k2bc4<>+144(SB)/8, $0x0908090809080908
DATA k2bc4<>+152(SB)/8, $0x0908090809080908
DATA k2bc4<>+160(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA k2bc4<>+168(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA k2bc4<>+176(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA k2bc4<>+184(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA k2bc4<>+192(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA k2bc4<>+200(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA k2bc4<>+208(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA k2bc4<>+216(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA k2bc4<>+224(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA k2bc4<>+232(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA k2bc4<>+240(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA k2bc4<>+248(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL k2bc4<>(SB), RODATA|NOPTR, $256

// k2bc6: for Q6_K, register i of a 128-element half covers sub-blocks
// 2i (low lane) and 2i+1 (high lane): word 2i over the low lane, 2i+1 over
// the high, for i = 0..3.
DATA k2bc6<>+0(SB)/8, $0x0100010001000100
DATA k2bc6<>+8(SB)/8, $0x0100010001000100
DATA k2bc6<>+16(SB)/8, $0x0302030203020302
DATA k2bc6<>+24(SB)/8, $0x0302030203020302
DATA k2bc6<>+32(SB)/8, $0x0504050405040504
DATA k2bc6<>+40(SB)/8, $0x0504050405040504
DATA k2bc6<>+48(SB)/8, $0x0706070607060706
DATA k2bc6<>+56(SB)/8, $0x0706070607060706
DATA k2bc6<>+64(SB)/8, $0x0908090809080908
DATA k2bc6<>+72(SB)/8, $0x0908090809080908
DATA k2bc6<>+80(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA k2bc6<>+88(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA k2bc6<>+96(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA k2bc6<>+104(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA k2bc6<>+112(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA k2bc6<>+120(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL k2bc6<>(SB), RODATA|NOPTR, $128


// Q4_K's 6-bit scales and mins unpacked as in kquant_amd64.s (k4shu..k4m2):
// bytes 0..7 the scales, 8..15 the mins.
DATA k2shu<>+0(SB)/1, $0
DATA k2shu<>+1(SB)/1, $1
DATA k2shu<>+2(SB)/1, $2
DATA k2shu<>+3(SB)/1, $3
DATA k2shu<>+4(SB)/1, $8
DATA k2shu<>+5(SB)/1, $9
DATA k2shu<>+6(SB)/1, $10
DATA k2shu<>+7(SB)/1, $11
DATA k2shu<>+8(SB)/1, $4
DATA k2shu<>+9(SB)/1, $5
DATA k2shu<>+10(SB)/1, $6
DATA k2shu<>+11(SB)/1, $7
DATA k2shu<>+12(SB)/1, $8
DATA k2shu<>+13(SB)/1, $9
DATA k2shu<>+14(SB)/1, $10
DATA k2shu<>+15(SB)/1, $11
GLOBL k2shu<>(SB), RODATA|NOPTR, $16
DATA k2shv<>+0(SB)/1, $128
DATA k2shv<>+1(SB)/1, $128
DATA k2shv<>+2(SB)/1, $128
DATA k2shv<>+3(SB)/1, $128
DATA k2shv<>+4(SB)/1, $0
DATA k2shv<>+5(SB)/1, $1
DATA k2shv<>+6(SB)/1, $2
DATA k2shv<>+7(SB)/1, $3
DATA k2shv<>+8(SB)/1, $128
DATA k2shv<>+9(SB)/1, $128
DATA k2shv<>+10(SB)/1, $128
DATA k2shv<>+11(SB)/1, $128
DATA k2shv<>+12(SB)/1, $4
DATA k2shv<>+13(SB)/1, $5
DATA k2shv<>+14(SB)/1, $6
DATA k2shv<>+15(SB)/1, $7
GLOBL k2shv<>(SB), RODATA|NOPTR, $16
DATA k2m1<>+0(SB)/1, $63
DATA k2m1<>+1(SB)/1, $63
DATA k2m1<>+2(SB)/1, $63
DATA k2m1<>+3(SB)/1, $63
DATA k2m1<>+4(SB)/1, $15
DATA k2m1<>+5(SB)/1, $15
DATA k2m1<>+6(SB)/1, $15
DATA k2m1<>+7(SB)/1, $15
DATA k2m1<>+8(SB)/1, $63
DATA k2m1<>+9(SB)/1, $63
DATA k2m1<>+10(SB)/1, $63
DATA k2m1<>+11(SB)/1, $63
DATA k2m1<>+12(SB)/1, $0
DATA k2m1<>+13(SB)/1, $0
DATA k2m1<>+14(SB)/1, $0
DATA k2m1<>+15(SB)/1, $0
GLOBL k2m1<>(SB), RODATA|NOPTR, $16
DATA k2m2<>+0(SB)/1, $0
DATA k2m2<>+1(SB)/1, $0
DATA k2m2<>+2(SB)/1, $0
DATA k2m2<>+3(SB)/1, $0
DATA k2m2<>+4(SB)/1, $0
DATA k2m2<>+5(SB)/1, $0
DATA k2m2<>+6(SB)/1, $0
DATA k2m2<>+7(SB)/1, $0
DATA k2m2<>+8(SB)/1, $0
DATA k2m2<>+9(SB)/1, $0
DATA k2m2<>+10(SB)/1, $0
DATA k2m2<>+11(SB)/1, $0
DATA k2m2<>+12(SB)/1, $15
DATA k2m2<>+13(SB)/1, $15
DATA k2m2<>+14(SB)/1, $15
DATA k2m2<>+15(SB)/1, $15
GLOBL k2m2<>(SB), RODATA|NOPTR, $16

// K2SCALES: X5 = the 8 scales (bytes 0..7) and 8 mins (8..15) of the
// Q4_K super-block at SI; clobbers X2..X4.
#define K2SCALES \
	VMOVDQU 4(SI), X2 \
	VPSHUFB k2shu<>(SB), X2, X3 \
	VPSHUFB k2shv<>(SB), X2, X4 \
	VPAND k2m1<>(SB), X3, X5 \
	VPSRLW $4, X3, X3 \
	VPAND k2m2<>(SB), X3, X3 \
	VPOR X3, X5, X5 \
	VPSRLW $2, X4, X4 \
	VPAND X13, X4, X4 \
	VPOR X4, X5, X5

// K2CHUNK(C): the 64 elements of chunk C (32 bytes of qs: low nibbles,
// sub-block 2C, then high, 2C+1) into the lane sums Y6.
#define K2CHUNK(C) \
	VMOVDQU 16+32*C(SI), Y2 \
	VPSRLW $4, Y2, Y3 \
	VPAND Y15, Y2, Y2 \
	VPAND Y15, Y3, Y3 \
	VPXOR 64*C(DI), Y14, Y4 \
	VPMADDUBSW Y4, Y2, Y2 \
	VPXOR 64*C+32(DI), Y14, Y4 \
	VPMADDUBSW Y4, Y3, Y3 \
	VPSHUFB k2bc4<>+64*C(SB), Y7, Y4 \
	VPMADDWD Y4, Y2, Y2 \
	VPSHUFB k2bc4<>+64*C+32(SB), Y7, Y4 \
	VPMADDWD Y4, Y3, Y3 \
	VPADDD Y2, Y6, Y6 \
	VPADDD Y3, Y6, Y6

// K6DOT(XOFF, I): Y5 holds 32 unsigned 6-bit values of a Q6_K half; their
// products with the activations at XOFF, less 32·x for the offset, weighted
// by the scales of sub-blocks 2I and 2I+1 of the half (Y7), into Y8.
#define K6DOT(XOFF, I) \
	VPXOR XOFF(DI), Y14, Y6 \
	VPMADDUBSW Y6, Y5, Y5 \
	VPMADDUBSW Y6, Y12, Y6 \
	VPSUBW Y6, Y5, Y5 \
	VPSHUFB k2bc6<>+32*I(SB), Y7, Y6 \
	VPMADDWD Y6, Y5, Y5 \
	VPADDD Y5, Y8, Y8

// K6HALF2(N): the 128-element half N of the Q6_K block at SI (64 bytes of
// low 4 bits, 32 of high 2 bits, 8 scales).
#define K6HALF2(N) \
	VPMOVSXBW 192+8*N(SI), X7 \
	VINSERTI128 $1, X7, Y7, Y7 \
	VMOVDQU 64*N(SI), Y2 \
	VMOVDQU 64*N+32(SI), Y3 \
	VMOVDQU 128+32*N(SI), Y4 \
	VPAND Y15, Y2, Y5 \
	VPSLLW $4, Y4, Y6 \
	VPAND Y13, Y6, Y6 \
	VPOR Y6, Y5, Y5 \
	K6DOT(128*N, 0) \
	VPAND Y15, Y3, Y5 \
	VPSLLW $2, Y4, Y6 \
	VPAND Y13, Y6, Y6 \
	VPOR Y6, Y5, Y5 \
	K6DOT(128*N+32, 1) \
	VPSRLW $4, Y2, Y5 \
	VPAND Y15, Y5, Y5 \
	VPAND Y13, Y4, Y6 \
	VPOR Y6, Y5, Y5 \
	K6DOT(128*N+64, 2) \
	VPSRLW $4, Y3, Y5 \
	VPAND Y15, Y5, Y5 \
	VPSRLW $2, Y4, Y6 \
	VPAND Y13, Y6, Y6 \
	VPOR Y6, Y5, Y5 \
	K6DOT(128*N+96, 3)

// func q4kDecodeAVX2(nrows, nblocks int, w *byte, rowBytes int, act *byte, out *float32)
// out[j] = Q4_K row j · one quantized activation row, streaming each
// weight byte once: per super-block, d·dx·Σ scale·(q·x) − dmin·Σ min·(dx·Σx).
TEXT ·q4kDecodeAVX2(SB), NOSPLIT, $0-48
	MOVQ nrows+0(FP), R9
	MOVQ w+16(FP), R10
	MOVQ rowBytes+24(FP), R11
	MOVQ out+40(FP), R12
	MOVL $0x0f0f0f0f, AX
	MOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x80808080, AX
	MOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x30303030, AX
	MOVD AX, X13
	VPBROADCASTD X13, Y13
	TESTQ R9, R9
	JZ q4done
q4row:
	MOVQ R10, SI
	MOVQ act+32(FP), DI
	MOVQ nblocks+8(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
q4block:
	PREFETCHT0 512(SI)
	K2SCALES
	VPMOVZXBW X5, Y7
	VPERMQ $0x44, Y7, Y7
	VPSRLDQ $8, X5, X5
	VPMOVZXBD X5, Y5
	VCVTDQ2PS Y5, Y5
	VMULPS 256(DI), Y5, Y5
	VPBROADCASTW 2(SI), X2
	VCVTPH2PS X2, Y2
	VFMADD231PS Y5, Y2, Y1
	VPXOR Y6, Y6, Y6
	K2CHUNK(0)
	K2CHUNK(1)
	K2CHUNK(2)
	K2CHUNK(3)
	VCVTDQ2PS Y6, Y6
	VPBROADCASTW (SI), X2
	VCVTPH2PS X2, Y2
	VMULPS 320(DI), Y2, Y2
	VFMADD231PS Y6, Y2, Y0
	ADDQ $144, SI
	ADDQ $384, DI
	DECQ CX
	JNZ q4block
	VSUBPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VMOVSS X0, (R12)
	ADDQ $4, R12
	ADDQ R11, R10
	DECQ R9
	JNZ q4row
q4done:
	VZEROUPPER
	RET

// func q6kDecodeAVX2(nrows, nblocks int, w *byte, rowBytes int, act *byte, out *float32)
// out[j] = Q6_K row j · one quantized activation row: per super-block,
// d·dx·Σ scale·((q−32)·x).
TEXT ·q6kDecodeAVX2(SB), NOSPLIT, $0-48
	MOVQ nrows+0(FP), R9
	MOVQ w+16(FP), R10
	MOVQ rowBytes+24(FP), R11
	MOVQ out+40(FP), R12
	MOVL $0x0f0f0f0f, AX
	MOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x80808080, AX
	MOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x30303030, AX
	MOVD AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0x20202020, AX
	MOVD AX, X12
	VPBROADCASTD X12, Y12
	TESTQ R9, R9
	JZ q6done
q6row:
	MOVQ R10, SI
	MOVQ act+32(FP), DI
	MOVQ nblocks+8(FP), CX
	VXORPS Y0, Y0, Y0
q6block:
	PREFETCHT0 512(SI)
	VPXOR Y8, Y8, Y8
	K6HALF2(0)
	K6HALF2(1)
	VCVTDQ2PS Y8, Y8
	VPBROADCASTW 208(SI), X2
	VCVTPH2PS X2, Y2
	VMULPS 320(DI), Y2, Y2
	VFMADD231PS Y8, Y2, Y0
	ADDQ $210, SI
	ADDQ $384, DI
	DECQ CX
	JNZ q6block
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VMOVSS X0, (R12)
	ADDQ $4, R12
	ADDQ R11, R10
	DECQ R9
	JNZ q6row
q6done:
	VZEROUPPER
	RET
