#include "textflag.h"
#include "simd_amd64.h"

// AVX2 k-quant kernels, for CPUs without AVX-512 VNNI: VPMADDUBSW
// multiplies unsigned weight bytes with signed activation bytes into 16-bit
// pair sums (no saturation: weights are at most 63, activations ±127),
// VPMADDWD weights them by their sub-block scales into 32-bit lane sums,
// and each super-block's sums become floats once. They read the quantized
// activation row as quantizeQ8KSigned writes it (kActBytes a super-block:
// the signed integers, the sub-block sums d·Σq, then d; and for Q6_K its
// sums of each 16 integers).

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


DATA k2m10<>+0(SB)/8, $0x1010101010101010
DATA k2m10<>+8(SB)/8, $0x1010101010101010
DATA k2m10<>+16(SB)/8, $0x1010101010101010
DATA k2m10<>+24(SB)/8, $0x1010101010101010
GLOBL k2m10<>(SB), RODATA|NOPTR, $32

DATA k2m30<>+0(SB)/8, $0x3030303030303030
DATA k2m30<>+8(SB)/8, $0x3030303030303030
DATA k2m30<>+16(SB)/8, $0x3030303030303030
DATA k2m30<>+24(SB)/8, $0x3030303030303030
GLOBL k2m30<>(SB), RODATA|NOPTR, $32

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

// K2SCALESR is K2SCALES into X12, with X9..X11 for temporaries (the
// 4-row kernels hold Y0..Y8).
#define K2SCALESR \
	VMOVDQU 4(SI), X9 \
	VPSHUFB k2shu<>(SB), X9, X10 \
	VPSHUFB k2shv<>(SB), X9, X11 \
	VPAND k2m1<>(SB), X10, X12 \
	VPSRLW $4, X10, X10 \
	VPAND k2m2<>(SB), X10, X10 \
	VPOR X10, X12, X12 \
	VPSRLW $2, X11, X11 \
	VPAND k2m30<>(SB), X11, X11 \
	VPOR X11, X12, X12

// K4R4ROW(SUM, LO, HI): one activation row's products with the chunk's
// two sub-blocks (Y9 low nibbles, Y10 high; scales Y13, Y14) into SUM.
#define K4R4ROW(SUM, LO, HI) \
	VPMADDUBSW LO, Y9, Y11 \
	VPMADDWD Y13, Y11, Y11 \
	VPADDD Y11, SUM, SUM \
	VPMADDUBSW HI, Y10, Y11 \
	VPMADDWD Y14, Y11, Y11 \
	VPADDD Y11, SUM, SUM

#define K4R4CHUNK(C) \
	VMOVDQU 16+32*C(SI), Y9 \
	VPSRLW $4, Y9, Y10 \
	VPAND Y15, Y9, Y9 \
	VPAND Y15, Y10, Y10 \
	VPSHUFB k2bc4<>+64*C(SB), Y8, Y13 \
	VPSHUFB k2bc4<>+64*C+32(SB), Y8, Y14 \
	K4R4ROW(Y4, 64*C(DI), 64*C+32(DI)) \
	K4R4ROW(Y5, 64*C(DI)(R8*1), 64*C+32(DI)(R8*1)) \
	K4R4ROW(Y6, 64*C(DI)(R8*2), 64*C+32(DI)(R8*2)) \
	K4R4ROW(Y7, 64*C(DI)(R14*1), 64*C+32(DI)(R14*1))

// K4R4EPI(ACC, SUM, XSB, D): a super-block's end for one activation row:
// ACC += d·dx·SUM − dmin·Σ min·xsb (Y9 = d, Y12 = dmin·min); SUM = 0.
#define K4R4EPI(ACC, SUM, XSB, D) \
	VCVTDQ2PS SUM, SUM \
	VMULPS D, Y9, Y11 \
	VFMADD231PS Y11, SUM, ACC \
	VMULPS XSB, Y12, Y11 \
	VSUBPS Y11, ACC, ACC \
	VPXOR SUM, SUM, SUM

// K4R4STORE: the four activation rows' sums for this weight row, at R12 +
// r·R13.
#define K4R4STORE \
	HSUM8(Y0, X0, X11) \
	HSUM8(Y1, X1, X11) \
	HSUM8(Y2, X2, X11) \
	HSUM8(Y3, X3, X11) \
	MOVQ R12, BX \
	VMOVSS X0, (BX) \
	ADDQ R13, BX \
	VMOVSS X1, (BX) \
	ADDQ R13, BX \
	VMOVSS X2, (BX) \
	ADDQ R13, BX \
	VMOVSS X3, (BX)

// K6R4ROW(SUM, A): one activation row's products with 32 6-bit values
// (Y12) weighted by their two sub-blocks' scales (Y13) into SUM.
#define K6R4ROW(SUM, A) \
	VPMADDUBSW A, Y12, Y14 \
	VPMADDWD Y13, Y14, Y14 \
	VPADDD Y14, SUM, SUM

#define K6R4ROWS(OFF, I) \
	VPSHUFB k2bc6<>+32*I(SB), Y8, Y13 \
	K6R4ROW(Y4, OFF(DI)) \
	K6R4ROW(Y5, OFF(DI)(R8*1)) \
	K6R4ROW(Y6, OFF(DI)(R8*2)) \
	K6R4ROW(Y7, OFF(DI)(R14*1))

// K6R4HALF(N): half N of the Q6_K block at SI against the four rows.
#define K6R4HALF(N) \
	VPMOVSXBW 192+8*N(SI), X8 \
	VINSERTI128 $1, X8, Y8, Y8 \
	VMOVDQU 64*N(SI), Y9 \
	VMOVDQU 64*N+32(SI), Y10 \
	VMOVDQU 128+32*N(SI), Y11 \
	VPAND Y15, Y9, Y12 \
	VPSLLW $4, Y11, Y13 \
	VPAND k2m30<>(SB), Y13, Y13 \
	VPOR Y13, Y12, Y12 \
	K6R4ROWS(128*N, 0) \
	VPAND Y15, Y10, Y12 \
	VPSLLW $2, Y11, Y13 \
	VPAND k2m30<>(SB), Y13, Y13 \
	VPOR Y13, Y12, Y12 \
	K6R4ROWS(128*N+32, 1) \
	VPSRLW $4, Y9, Y12 \
	VPAND Y15, Y12, Y12 \
	VPAND k2m30<>(SB), Y11, Y13 \
	VPOR Y13, Y12, Y12 \
	K6R4ROWS(128*N+64, 2) \
	VPSRLW $4, Y10, Y12 \
	VPAND Y15, Y12, Y12 \
	VPSRLW $2, Y11, Y13 \
	VPAND k2m30<>(SB), Y13, Y13 \
	VPOR Y13, Y12, Y12 \
	K6R4ROWS(128*N+96, 3)

// K6R4EPI(ACC, SUM, BS, D): a super-block's end for one activation row:
// SUM −= 32·Σ scale·(sub-block sum of x) (Y8 = the 16 scales, BS the
// row's 16 sums), then ACC += d·dx·SUM (Y9 = d); SUM = 0.
#define K6R4EPI(ACC, SUM, BS, D) \
	VPMADDWD BS, Y8, Y14 \
	VPSLLD $5, Y14, Y14 \
	VPSUBD Y14, SUM, SUM \
	VCVTDQ2PS SUM, SUM \
	VMULPS D, Y9, Y14 \
	VFMADD231PS Y14, SUM, ACC \
	VPXOR SUM, SUM, SUM

// The one-row forms: the same instructions for a row as the four-row
// kernels, so that a row's result has the same bits either way.
#define K4R1CHUNK(C) \
	VMOVDQU 16+32*C(SI), Y9 \
	VPSRLW $4, Y9, Y10 \
	VPAND Y15, Y9, Y9 \
	VPAND Y15, Y10, Y10 \
	VPSHUFB k2bc4<>+64*C(SB), Y8, Y13 \
	VPSHUFB k2bc4<>+64*C+32(SB), Y8, Y14 \
	K4R4ROW(Y4, 64*C(DI), 64*C+32(DI))

#define K6R1ROWS(OFF, I) \
	VPSHUFB k2bc6<>+32*I(SB), Y8, Y13 \
	K6R4ROW(Y4, OFF(DI))

#define K6R1HALF(N) \
	VPMOVSXBW 192+8*N(SI), X8 \
	VINSERTI128 $1, X8, Y8, Y8 \
	VMOVDQU 64*N(SI), Y9 \
	VMOVDQU 64*N+32(SI), Y10 \
	VMOVDQU 128+32*N(SI), Y11 \
	VPAND Y15, Y9, Y12 \
	VPSLLW $4, Y11, Y13 \
	VPAND k2m30<>(SB), Y13, Y13 \
	VPOR Y13, Y12, Y12 \
	K6R1ROWS(128*N, 0) \
	VPAND Y15, Y10, Y12 \
	VPSLLW $2, Y11, Y13 \
	VPAND k2m30<>(SB), Y13, Y13 \
	VPOR Y13, Y12, Y12 \
	K6R1ROWS(128*N+32, 1) \
	VPSRLW $4, Y9, Y12 \
	VPAND Y15, Y12, Y12 \
	VPAND k2m30<>(SB), Y11, Y13 \
	VPOR Y13, Y12, Y12 \
	K6R1ROWS(128*N+64, 2) \
	VPSRLW $4, Y10, Y12 \
	VPAND Y15, Y12, Y12 \
	VPSRLW $2, Y11, Y13 \
	VPAND k2m30<>(SB), Y13, Y13 \
	VPOR Y13, Y12, Y12 \
	K6R1ROWS(128*N+96, 3)

// K5R4CHUNK(C, LSH, LN, HSH, HN): Q5_K chunk C: K4R4CHUNK's nibbles (qs at 48)
// with their fifth bits from qh (Y12): bit 2C of each qh byte moved to bit 4
// by LSH $LN for the low nibbles, bit 2C+1 by HSH $HN for the high.
#define K5R4CHUNK(C, LSH, LN, HSH, HN) \
	VMOVDQU 48+32*C(SI), Y9 \
	VPSRLW $4, Y9, Y10 \
	VPAND Y15, Y9, Y9 \
	VPAND Y15, Y10, Y10 \
	LSH $LN, Y12, Y11 \
	VPAND k2m10<>(SB), Y11, Y11 \
	VPOR Y11, Y9, Y9 \
	HSH $HN, Y12, Y11 \
	VPAND k2m10<>(SB), Y11, Y11 \
	VPOR Y11, Y10, Y10 \
	VPSHUFB k2bc4<>+64*C(SB), Y8, Y13 \
	VPSHUFB k2bc4<>+64*C+32(SB), Y8, Y14 \
	K4R4ROW(Y4, 64*C(DI), 64*C+32(DI)) \
	K4R4ROW(Y5, 64*C(DI)(R8*1), 64*C+32(DI)(R8*1)) \
	K4R4ROW(Y6, 64*C(DI)(R8*2), 64*C+32(DI)(R8*2)) \
	K4R4ROW(Y7, 64*C(DI)(R14*1), 64*C+32(DI)(R14*1))

// K5R1CHUNK: K5R4CHUNK for one activation row.
#define K5R1CHUNK(C, LSH, LN, HSH, HN) \
	VMOVDQU 48+32*C(SI), Y9 \
	VPSRLW $4, Y9, Y10 \
	VPAND Y15, Y9, Y9 \
	VPAND Y15, Y10, Y10 \
	LSH $LN, Y12, Y11 \
	VPAND k2m10<>(SB), Y11, Y11 \
	VPOR Y11, Y9, Y9 \
	HSH $HN, Y12, Y11 \
	VPAND k2m10<>(SB), Y11, Y11 \
	VPOR Y11, Y10, Y10 \
	VPSHUFB k2bc4<>+64*C(SB), Y8, Y13 \
	VPSHUFB k2bc4<>+64*C+32(SB), Y8, Y14 \
	K4R4ROW(Y4, 64*C(DI), 64*C+32(DI))

// The four chunks of a Q4_K and of a Q5_K super-block, against four
// activation rows and against one.
#define K4R4CHUNKS \
	K4R4CHUNK(0) \
	K4R4CHUNK(1) \
	K4R4CHUNK(2) \
	K4R4CHUNK(3)

#define K4R1CHUNKS \
	K4R1CHUNK(0) \
	K4R1CHUNK(1) \
	K4R1CHUNK(2) \
	K4R1CHUNK(3)

#define K5R4CHUNKS \
	VMOVDQU 16(SI), Y12 \
	K5R4CHUNK(0, VPSLLW, 4, VPSLLW, 3) \
	K5R4CHUNK(1, VPSLLW, 2, VPSLLW, 1) \
	K5R4CHUNK(2, VPSRLW, 0, VPSRLW, 1) \
	K5R4CHUNK(3, VPSRLW, 2, VPSRLW, 3)

#define K5R1CHUNKS \
	VMOVDQU 16(SI), Y12 \
	K5R1CHUNK(0, VPSLLW, 4, VPSLLW, 3) \
	K5R1CHUNK(1, VPSLLW, 2, VPSLLW, 1) \
	K5R1CHUNK(2, VPSRLW, 0, VPSRLW, 1) \
	K5R1CHUNK(3, VPSRLW, 2, VPSRLW, 3)

// KR4(CHUNKS, BSTEP): q4kRows4AVX2's body, for the super-blocks of BSTEP
// bytes whose four chunks CHUNKS multiplies (Q4_K, Q5_K).
#define KR4(CHUNKS, BSTEP) \
	MOVQ nrows+0(FP), R9 \
	MOVQ w+16(FP), R10 \
	MOVQ rowBytes+24(FP), R11 \
	MOVQ aStride+40(FP), R8 \
	MOVQ out+48(FP), R12 \
	MOVQ outStride+56(FP), R13 \
	LEAQ (R8)(R8*2), R14 \
	MOVL $0x0f0f0f0f, AX \
	MOVD AX, X15 \
	VPBROADCASTD X15, Y15 \
	TESTQ R9, R9 \
	JZ r4done \
r4row: \
	MOVQ R10, SI \
	MOVQ act+32(FP), DI \
	MOVQ nblocks+8(FP), CX \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VPXOR Y4, Y4, Y4 \
	VPXOR Y5, Y5, Y5 \
	VPXOR Y6, Y6, Y6 \
	VPXOR Y7, Y7, Y7 \
r4block: \
	K2SCALESR \
	VPMOVZXBW X12, Y8 \
	VPERMQ $0x44, Y8, Y8 \
	CHUNKS \
	K2SCALESR \
	VPSRLDQ $8, X12, X12 \
	VPMOVZXBD X12, Y12 \
	VCVTDQ2PS Y12, Y12 \
	VPBROADCASTW 2(SI), X10 \
	VCVTPH2PS X10, Y10 \
	VMULPS Y10, Y12, Y12 \
	VPBROADCASTW (SI), X9 \
	VCVTPH2PS X9, Y9 \
	K4R4EPI(Y0, Y4, 256(DI), 320(DI)) \
	K4R4EPI(Y1, Y5, 256(DI)(R8*1), 320(DI)(R8*1)) \
	K4R4EPI(Y2, Y6, 256(DI)(R8*2), 320(DI)(R8*2)) \
	K4R4EPI(Y3, Y7, 256(DI)(R14*1), 320(DI)(R14*1)) \
	ADDQ $BSTEP, SI \
	ADDQ $384, DI \
	DECQ CX \
	JNZ r4block \
	K4R4STORE \
	ADDQ $4, R12 \
	ADDQ R11, R10 \
	DECQ R9 \
	JNZ r4row \
r4done: \
	VZEROUPPER \
	RET

// KR1(CHUNKS, BSTEP): KR4 for one activation row.
#define KR1(CHUNKS, BSTEP) \
	MOVQ nrows+0(FP), R9 \
	MOVQ w+16(FP), R10 \
	MOVQ rowBytes+24(FP), R11 \
	MOVQ out+40(FP), R12 \
	MOVL $0x0f0f0f0f, AX \
	MOVD AX, X15 \
	VPBROADCASTD X15, Y15 \
	TESTQ R9, R9 \
	JZ r1done \
r1row: \
	MOVQ R10, SI \
	MOVQ act+32(FP), DI \
	MOVQ nblocks+8(FP), CX \
	VXORPS Y0, Y0, Y0 \
	VPXOR Y4, Y4, Y4 \
r1block: \
	PREFETCHT0 512(SI) \
	K2SCALESR \
	VPMOVZXBW X12, Y8 \
	VPERMQ $0x44, Y8, Y8 \
	CHUNKS \
	K2SCALESR \
	VPSRLDQ $8, X12, X12 \
	VPMOVZXBD X12, Y12 \
	VCVTDQ2PS Y12, Y12 \
	VPBROADCASTW 2(SI), X10 \
	VCVTPH2PS X10, Y10 \
	VMULPS Y10, Y12, Y12 \
	VPBROADCASTW (SI), X9 \
	VCVTPH2PS X9, Y9 \
	K4R4EPI(Y0, Y4, 256(DI), 320(DI)) \
	ADDQ $BSTEP, SI \
	ADDQ $384, DI \
	DECQ CX \
	JNZ r1block \
	HSUM8(Y0, X0, X11) \
	VMOVSS X0, (R12) \
	ADDQ $4, R12 \
	ADDQ R11, R10 \
	DECQ R9 \
	JNZ r1row \
r1done: \
	VZEROUPPER \
	RET

// func q4kRows4AVX2(nrows, nblocks int, w *byte, rowBytes int, act *byte, aStride int, out *float32, outStride int)
// out[r·outStride + j] (bytes) = Q4_K row j · activation row r, for j <
// nrows and four activation rows (signed integers, aStride bytes apart),
// each weight row decoded once for the four.
TEXT ·q4kRows4AVX2(SB), NOSPLIT, $0-64
	KR4(K4R4CHUNKS, 144)

// func q6kRows4AVX2(nrows, nblocks int, w *byte, rowBytes int, act *byte, aStride int, bsums *int16, bStride int, out *float32, outStride int)
// q4kRows4AVX2 for Q6_K; bsums holds each activation row's sums of its 16
// sub-blocks of 16 (int16s, 32 bytes a super-block, rows bStride bytes
// apart), which take the values' −32 offset back once a super-block.
TEXT ·q6kRows4AVX2(SB), NOSPLIT, $0-80
	MOVQ nrows+0(FP), R9
	MOVQ w+16(FP), R10
	MOVQ rowBytes+24(FP), R11
	MOVQ aStride+40(FP), R8
	MOVQ bStride+56(FP), DX
	MOVQ out+64(FP), R12
	MOVQ outStride+72(FP), R13
	LEAQ (R8)(R8*2), R14
	MOVL $0x0f0f0f0f, AX
	MOVD AX, X15
	VPBROADCASTD X15, Y15
	LEAQ (DX)(DX*2), AX
	TESTQ R9, R9
	JZ s4done
s4row:
	MOVQ R10, SI
	MOVQ act+32(FP), DI
	MOVQ bsums+48(FP), BX
	MOVQ nblocks+8(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
s4block:
	K6R4HALF(0)
	K6R4HALF(1)
	VPMOVSXBW 192(SI), Y8
	VPBROADCASTW 208(SI), X9
	VCVTPH2PS X9, Y9
	K6R4EPI(Y0, Y4, (BX), 320(DI))
	K6R4EPI(Y1, Y5, (BX)(DX*1), 320(DI)(R8*1))
	K6R4EPI(Y2, Y6, (BX)(DX*2), 320(DI)(R8*2))
	K6R4EPI(Y3, Y7, (BX)(AX*1), 320(DI)(R14*1))
	ADDQ $210, SI
	ADDQ $384, DI
	ADDQ $32, BX
	DECQ CX
	JNZ s4block
	K4R4STORE
	ADDQ $4, R12
	ADDQ R11, R10
	DECQ R9
	JNZ s4row
s4done:
	VZEROUPPER
	RET

// func q4kRows1AVX2(nrows, nblocks int, w *byte, rowBytes int, act *byte, out *float32)
// q4kRows4AVX2 for one activation row; out[j] for weight rows j < nrows.
TEXT ·q4kRows1AVX2(SB), NOSPLIT, $0-48
	KR1(K4R1CHUNKS, 144)

// func q6kRows1AVX2(nrows, nblocks int, w *byte, rowBytes int, act *byte, bsums *int16, out *float32)
// q6kRows4AVX2 for one activation row; out[j] for weight rows j < nrows.
TEXT ·q6kRows1AVX2(SB), NOSPLIT, $0-56
	MOVQ nrows+0(FP), R9
	MOVQ w+16(FP), R10
	MOVQ rowBytes+24(FP), R11
	MOVQ out+48(FP), R12
	MOVL $0x0f0f0f0f, AX
	MOVD AX, X15
	VPBROADCASTD X15, Y15
	TESTQ R9, R9
	JZ t1done
t1row:
	MOVQ R10, SI
	MOVQ act+32(FP), DI
	MOVQ bsums+40(FP), BX
	MOVQ nblocks+8(FP), CX
	VXORPS Y0, Y0, Y0
	VPXOR Y4, Y4, Y4
t1block:
	PREFETCHT0 512(SI)
	K6R1HALF(0)
	K6R1HALF(1)
	VPMOVSXBW 192(SI), Y8
	VPBROADCASTW 208(SI), X9
	VCVTPH2PS X9, Y9
	K6R4EPI(Y0, Y4, (BX), 320(DI))
	ADDQ $210, SI
	ADDQ $384, DI
	ADDQ $32, BX
	DECQ CX
	JNZ t1block
	HSUM8(Y0, X0, X11)
	VMOVSS X0, (R12)
	ADDQ $4, R12
	ADDQ R11, R10
	DECQ R9
	JNZ t1row
t1done:
	VZEROUPPER
	RET

// func q5kRows4AVX2(nrows, nblocks int, w *byte, rowBytes int, act *byte, aStride int, out *float32, outStride int)
// out[r·outStride + j] (bytes) = Q5_K row j · activation row r, for j <
// nrows and four activation rows (signed integers, aStride bytes apart),
// each weight row decoded once for the four.
TEXT ·q5kRows4AVX2(SB), NOSPLIT, $0-64
	KR4(K5R4CHUNKS, 176)

// func q5kRows1AVX2(nrows, nblocks int, w *byte, rowBytes int, act *byte, out *float32)
// q5kRows4AVX2 for one activation row; out[j] for weight rows j < nrows.
TEXT ·q5kRows1AVX2(SB), NOSPLIT, $0-48
	KR1(K5R1CHUNKS, 176)
