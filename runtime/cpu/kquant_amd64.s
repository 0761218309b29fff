#include "textflag.h"
#include "simd_amd64.h"

// Lane-to-scale indices for Q6_K: lane l of a pair reads scale l/4.
DATA q6idx<>+0(SB)/4, $0
DATA q6idx<>+4(SB)/4, $0
DATA q6idx<>+8(SB)/4, $0
DATA q6idx<>+12(SB)/4, $0
DATA q6idx<>+16(SB)/4, $1
DATA q6idx<>+20(SB)/4, $1
DATA q6idx<>+24(SB)/4, $1
DATA q6idx<>+28(SB)/4, $1
DATA q6idx<>+32(SB)/4, $2
DATA q6idx<>+36(SB)/4, $2
DATA q6idx<>+40(SB)/4, $2
DATA q6idx<>+44(SB)/4, $2
DATA q6idx<>+48(SB)/4, $3
DATA q6idx<>+52(SB)/4, $3
DATA q6idx<>+56(SB)/4, $3
DATA q6idx<>+60(SB)/4, $3
GLOBL q6idx<>(SB), RODATA|NOPTR, $64


// Q4_K's 6-bit scales and mins, unpacked with byte shuffles: from the 12
// bytes A(0..3) B(4..7) C(8..11), U = [A C B C] and V = [0 A 0 B]; the
// scales are U&63 (A) and C&15 | A>>6<<4, the mins B&63 and C>>4 | B>>6<<4.
DATA k4shu<>+0(SB)/1, $0
DATA k4shu<>+1(SB)/1, $1
DATA k4shu<>+2(SB)/1, $2
DATA k4shu<>+3(SB)/1, $3
DATA k4shu<>+4(SB)/1, $8
DATA k4shu<>+5(SB)/1, $9
DATA k4shu<>+6(SB)/1, $10
DATA k4shu<>+7(SB)/1, $11
DATA k4shu<>+8(SB)/1, $4
DATA k4shu<>+9(SB)/1, $5
DATA k4shu<>+10(SB)/1, $6
DATA k4shu<>+11(SB)/1, $7
DATA k4shu<>+12(SB)/1, $8
DATA k4shu<>+13(SB)/1, $9
DATA k4shu<>+14(SB)/1, $10
DATA k4shu<>+15(SB)/1, $11
GLOBL k4shu<>(SB), RODATA|NOPTR, $16
DATA k4shv<>+0(SB)/1, $128
DATA k4shv<>+1(SB)/1, $128
DATA k4shv<>+2(SB)/1, $128
DATA k4shv<>+3(SB)/1, $128
DATA k4shv<>+4(SB)/1, $0
DATA k4shv<>+5(SB)/1, $1
DATA k4shv<>+6(SB)/1, $2
DATA k4shv<>+7(SB)/1, $3
DATA k4shv<>+8(SB)/1, $128
DATA k4shv<>+9(SB)/1, $128
DATA k4shv<>+10(SB)/1, $128
DATA k4shv<>+11(SB)/1, $128
DATA k4shv<>+12(SB)/1, $4
DATA k4shv<>+13(SB)/1, $5
DATA k4shv<>+14(SB)/1, $6
DATA k4shv<>+15(SB)/1, $7
GLOBL k4shv<>(SB), RODATA|NOPTR, $16
DATA k4m1<>+0(SB)/1, $63
DATA k4m1<>+1(SB)/1, $63
DATA k4m1<>+2(SB)/1, $63
DATA k4m1<>+3(SB)/1, $63
DATA k4m1<>+4(SB)/1, $15
DATA k4m1<>+5(SB)/1, $15
DATA k4m1<>+6(SB)/1, $15
DATA k4m1<>+7(SB)/1, $15
DATA k4m1<>+8(SB)/1, $63
DATA k4m1<>+9(SB)/1, $63
DATA k4m1<>+10(SB)/1, $63
DATA k4m1<>+11(SB)/1, $63
DATA k4m1<>+12(SB)/1, $0
DATA k4m1<>+13(SB)/1, $0
DATA k4m1<>+14(SB)/1, $0
DATA k4m1<>+15(SB)/1, $0
GLOBL k4m1<>(SB), RODATA|NOPTR, $16
DATA k4m2<>+0(SB)/1, $0
DATA k4m2<>+1(SB)/1, $0
DATA k4m2<>+2(SB)/1, $0
DATA k4m2<>+3(SB)/1, $0
DATA k4m2<>+4(SB)/1, $0
DATA k4m2<>+5(SB)/1, $0
DATA k4m2<>+6(SB)/1, $0
DATA k4m2<>+7(SB)/1, $0
DATA k4m2<>+8(SB)/1, $0
DATA k4m2<>+9(SB)/1, $0
DATA k4m2<>+10(SB)/1, $0
DATA k4m2<>+11(SB)/1, $0
DATA k4m2<>+12(SB)/1, $15
DATA k4m2<>+13(SB)/1, $15
DATA k4m2<>+14(SB)/1, $15
DATA k4m2<>+15(SB)/1, $15
GLOBL k4m2<>(SB), RODATA|NOPTR, $16

// Lane-to-scale indices for Q4_K decode: chunk c (64 elements) reads the
// scales of its two 32-element sub-blocks, 2c in lanes 0..7, 2c+1 in 8..15.
DATA k4perm<>+0(SB)/8, $0x0000000000000000
DATA k4perm<>+8(SB)/8, $0x0000000000000000
DATA k4perm<>+16(SB)/8, $0x0000000000000000
DATA k4perm<>+24(SB)/8, $0x0000000000000000
DATA k4perm<>+32(SB)/8, $0x0000000100000001
DATA k4perm<>+40(SB)/8, $0x0000000100000001
DATA k4perm<>+48(SB)/8, $0x0000000100000001
DATA k4perm<>+56(SB)/8, $0x0000000100000001
GLOBL k4perm<>(SB), RODATA|NOPTR, $64

// K4SCALES(M30, NEG1): a Q4_K block's (at SI) scales and mins as int32s
// in Z5 (lanes 0..7, 8..15), d in X6 and the bias vector in Z8: -dmin·min
// of sub-blocks 0..7 in lanes 0..7, d in lane 8, then 0; with the byte
// shuffles in X16..X19, M30 the 0x30 bytes, NEG1 -1.0s and X13 zero.
// kPrepIQ4KAVX512 stores the bias; q4kDecodeAVX512 uses it in registers.
#define K4SCALES(M30, NEG1) \
	VMOVDQU 4(SI), X3 \
	VPSHUFB X16, X3, X1 \
	VPSHUFB X17, X3, X2 \
	VPANDD X18, X1, X3 \
	VPSRLW $4, X1, X1 \
	VPANDD X19, X1, X1 \
	VPORD X1, X3, X3 \
	VPSRLW $2, X2, X2 \
	VPANDD M30, X2, X2 \
	VPORD X2, X3, X3 \
	VPMOVZXBD X3, Z5 \
	VPBROADCASTW (SI), X6 \
	VCVTPH2PS X6, X6 \
	VPBROADCASTW 2(SI), X7 \
	VCVTPH2PS X7, Y7 \
	VMULPS NEG1, Y7, Y7 \
	VEXTRACTI64X4 $1, Z5, Y8 \
	VCVTDQ2PS Y8, Y8 \
	VMULPS Y7, Y8, Y8 \
	VMOVSS X6, X13, X9 \
	VINSERTF64X4 $1, Y9, Z8, Z8

// The decode kernels below compute, per super-block, the same integer lane
// sums as kRowsIAVX512 on prepared rows (exact, so their order does not
// matter) and turn them into floats by the same operations in the same
// order (KDEPI is KIEPI), so that a decode step's row has the bits it would
// have in a batch. They read the activations signed (q), so the weights'
// offset (negc) is not needed.

// KDEPI: the super-block's float epilogue: Z0 += xsb·bias, then
// Z0 += (d_a·d_w)·float(Z10), with R8 at the activation super-block (xsb
// at 256, 16 copies of d_a at 320), Z8 the bias vector and Z23 d_w.
#define KDEPI \
	VMOVUPS 256(R8), Z27 \
	VFMADD231PS Z27, Z8, Z0 \
	VMULPS 320(R8), Z23, Z28 \
	VCVTDQ2PS Z10, Z29 \
	VFMADD231PS Z28, Z29, Z0

// KD4PAIR(QOFF, AOFF, IDX): Q4_K pair at QOFF(SI) (32 bytes, low nibbles
// then high) against the signed activation pair at AOFF(DI), weighted by
// the lane scales (integers, permuted out of Z5 by IDX) into Z10.
#define KD4PAIR(QOFF, AOFF, IDX) \
	VMOVDQU QOFF(SI), Y1 \
	VPSRLW $4, Y1, Y2 \
	VINSERTI64X4 $1, Y2, Z1, Z1 \
	VPANDD Z31, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPDPBUSD AOFF(DI), Z1, Z2 \
	VPERMD Z5, IDX, Z6 \
	VPDPWSSD Z6, Z2, Z10

// func q4kDecodeAVX512(nrows, nblocks int, w *byte, rowBytes int, q *byte, act *byte, out *float32)
// out[j] = Q4_K row j · one activation row (q: its integers signed, 256 a
// super-block; act: the row as quantizeRowsK wrote it), streaming each
// weight byte once.
TEXT ·q4kDecodeAVX512(SB), NOSPLIT, $0-56
	MOVQ nrows+0(FP), R9
	MOVQ w+16(FP), R10
	MOVQ rowBytes+24(FP), R11
	MOVQ out+48(FP), R12
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31
	MOVL $0xbf800000, AX // -1.0 (Y15: HSUM clobbers Y14)
	VPBROADCASTD AX, Y15
	VMOVDQU64 k4shu<>(SB), X16
	VMOVDQU64 k4shv<>(SB), X17
	VMOVDQU64 k4m1<>(SB), X18
	VMOVDQU64 k4m2<>(SB), X19
	MOVL $0x30303030, AX
	VPBROADCASTD AX, X20
	MOVL $2, AX
	VPBROADCASTD AX, Z30
	VMOVDQU32 k4perm<>(SB), Z21
	VPADDD Z30, Z21, Z22
	VPADDD Z30, Z22, Z24
	VPADDD Z30, Z24, Z25
	VXORPS X13, X13, X13
	TESTQ R9, R9
	JZ q4done
q4row:
	MOVQ R10, SI
	MOVQ q+32(FP), DI
	MOVQ act+40(FP), R8
	MOVQ nblocks+8(FP), CX
	VPXORD Z0, Z0, Z0
q4block:
	PREFETCHT0 512(SI)
	PREFETCHT0 576(SI)
	K4SCALES(X20, Y15)
	VBROADCASTSS X6, Z23
	VPXORD Z10, Z10, Z10
	KD4PAIR(16, 0, Z21)
	KD4PAIR(48, 64, Z22)
	KD4PAIR(80, 128, Z24)
	KD4PAIR(112, 192, Z25)
	KDEPI
	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $384, R8
	DECQ CX
	JNZ q4block
	HSUM(Z0, Y0, X0)
	VMOVSS X0, (R12)
	ADDQ $4, R12
	ADDQ R11, R10
	DECQ R9
	JNZ q4row
q4done:
	VZEROUPPER
	RET

// KD6PAIR(P, W, IDX): the pair of Q6_K's unsigned 6-bit values in W
// against the signed activation pair at P(DI), starting from a32's -32·Σ
// of each lane's activations (so the values' -32 offset comes in exactly),
// weighted by the lane scales (Z5 by IDX, as int16s) into Z10.
#define KD6PAIR(P, W, IDX) \
	VMOVDQU32 P(R13), Z7 \
	VPDPBUSD P(DI), W, Z7 \
	VPERMD Z5, IDX, Z6 \
	VPANDD Z12, Z6, Z6 \
	VPDPWSSD Z6, Z7, Z10

// K6HALF(QL, QH, PA, PB, IA, IB): one 128-element half of a Q6_K block
// (64 bytes of low 4 bits at QL, 32 of high 2 bits at QH) as two pairs
// of unsigned 6-bit values (Z1, Z2), as kPrepIQ6KAVX512 decodes them.
#define K6HALF(QL, QH, PA, PB, IA, IB) \
	VMOVDQU64 QL(SI), Z1 \
	VPSRLW $4, Z1, Z2 \
	VPANDD Z31, Z2, Z2 \
	VPANDD Z31, Z1, Z1 \
	VMOVDQU QH(SI), Y3 \
	VPSRLW $2, Y3, Y4 \
	VINSERTI64X4 $1, Y4, Z3, Z3 \
	VPANDD Z30, Z3, Z4 \
	VPORD Z4, Z2, Z2 \
	VPSLLW $4, Z3, Z3 \
	VPANDD Z30, Z3, Z3 \
	VPORD Z3, Z1, Z1 \
	KD6PAIR(PA, Z1, IA) \
	KD6PAIR(PB, Z2, IB)

// func q6kDecodeAVX512(nrows, nblocks int, w *byte, rowBytes int, q *byte, a32 *int32, act *byte, out *float32)
// out[j] = Q6_K row j · one activation row (q: its integers signed; a32:
// -32·Σ of each lane's 4 of them; act: the row as quantizeRowsK wrote it).
TEXT ·q6kDecodeAVX512(SB), NOSPLIT, $0-64
	MOVQ nrows+0(FP), R9
	MOVQ w+16(FP), R10
	MOVQ rowBytes+24(FP), R11
	MOVQ out+56(FP), R12
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31
	MOVL $0x30303030, AX
	VPBROADCASTD AX, Z30
	MOVL $0x0000ffff, AX
	VPBROADCASTD AX, Z12
	MOVL $4, AX
	VPBROADCASTD AX, Z29
	VMOVDQU32 q6idx<>(SB), Z21
	VPADDD Z29, Z21, Z22
	VPADDD Z29, Z22, Z24
	VPADDD Z29, Z24, Z25
	VXORPS X13, X13, X13
	TESTQ R9, R9
	JZ q6done
q6row:
	MOVQ R10, SI
	MOVQ q+32(FP), DI
	MOVQ a32+40(FP), R13
	MOVQ act+48(FP), R8
	MOVQ nblocks+8(FP), CX
	VPXORD Z0, Z0, Z0
q6block:
	PREFETCHT0 512(SI)
	PREFETCHT0 576(SI)
	PREFETCHT0 640(SI)
	VPMOVSXBD 192(SI), Z5    // the 16 scales, signed
	VPBROADCASTW 208(SI), X6
	VCVTPH2PS X6, X6         // d
	VMOVSS X6, X13, X7       // d, 0, 0, 0
	VPXORD Z8, Z8, Z8
	VINSERTF64X4 $1, Y7, Z8, Z8
	VBROADCASTSS X6, Z23
	VPXORD Z10, Z10, Z10
	K6HALF(0, 128, 0, 64, Z21, Z22)
	K6HALF(64, 160, 128, 192, Z24, Z25)
	KDEPI
	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $256, R13
	ADDQ $384, R8
	DECQ CX
	JNZ q6block
	HSUM(Z0, Y0, X0)
	VMOVSS X0, (R12)
	ADDQ $4, R12
	ADDQ R11, R10
	DECQ R9
	JNZ q6row
q6done:
	VZEROUPPER
	RET

// K-quant prefill with integer super-blocks: see kint.go for the layouts.

// NEGCI(W, OUT): OUT = -128·(sum of each lane's 4 signed bytes of W).
#define NEGCI(W, OUT) \
	VPXORD Z3, Z3, Z3 \
	VPDPBUSD W, Z31, Z3 \
	VPXORD OUT, OUT, OUT \
	VPSUBD Z3, OUT, OUT

// KQ(Z, OFF): 16 floats of Z times the inverse scale, as offset bytes at
// OFF(DI).
#define KQ(Z, OFF) \
	VMULPS Z19, Z, Z \
	VCVTPS2DQ Z, Z \
	VPMOVSDB Z, X21 \
	VPXORD X27, X21, X21 \
	VMOVDQU32 X21, OFF(DI)

// KIROW(QA, ACC0, ACC1): one activation row's pair at QA against the two
// weight pairs (Z16/Z17, lane scales Z18/Z19), into the integer sums.
#define KIROW(QA, ACC0, ACC1) \
	VMOVDQU32 QA, Z20 \
	VPXORD Z21, Z21, Z21 \
	VPDPBUSD Z16, Z20, Z21 \
	VPXORD Z22, Z22, Z22 \
	VPDPBUSD Z17, Z20, Z22 \
	VPDPWSSD Z18, Z21, ACC0 \
	VPDPWSSD Z19, Z22, ACC1

#define KILOADW(WOFF, SOFF) \
	VMOVDQU64 WOFF(DX), Z16 \
	VMOVDQU64 WOFF(SI), Z17 \
	VMOVDQU32 SOFF(DX), Z18 \
	VMOVDQU32 SOFF(SI), Z19

#define KIPAIR4(WOFF, SOFF) \
	KILOADW(WOFF, SOFF) \
	KIROW(WOFF(DI), Z8, Z12) \
	KIROW(WOFF(DI)(R10*1), Z9, Z13) \
	KIROW(WOFF(DI)(R10*2), Z10, Z14) \
	KIROW(WOFF(DI)(R14*1), Z11, Z15)

#define KIPAIR1(WOFF, SOFF) \
	KILOADW(WOFF, SOFF) \
	KIROW(WOFF(DI), Z8, Z12)

// KIEPI(XSB, S, IACC0, IACC1, F0, F1): a super-block's integer sums of one
// activation row, scaled (d_w·d_a) into the float sums, plus the weights'
// offsets (Z25/Z26) times the activation's sub-block sums (XSB).
#define KIEPI(XSB, S, IACC0, IACC1, F0, F1) \
	VMOVUPS XSB, Z27 \
	VFMADD231PS Z27, Z25, F0 \
	VFMADD231PS Z27, Z26, F1 \
	VMULPS S, Z23, Z28 \
	VCVTDQ2PS IACC0, Z29 \
	VFMADD231PS Z28, Z29, F0 \
	VMULPS S, Z24, Z28 \
	VCVTDQ2PS IACC1, Z29 \
	VFMADD231PS Z28, Z29, F1

#define KILOADE \
	VBROADCASTSS 608(DX), Z23 \
	VBROADCASTSS 608(SI), Z24 \
	VMOVUPS 576(DX), Z25 \
	VMOVUPS 576(SI), Z26

// func quantizeQ8KAVX512(x *float32, nsb int, dst *byte)
// Each 256 floats of x become 256 offset bytes (q+128, q = round(x/d),
// d = max|x|/127) at dst and d, 16 times, at dst+320; dst advances 384.
TEXT ·quantizeQ8KAVX512(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ nsb+8(FP), CX
	MOVQ dst+16(FP), DI
	TESTQ CX, CX
	JZ kqdone
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z30
	MOVL $0x42fe0000, AX // 127.0
	VMOVD AX, X29
	MOVL $0x80808080, AX
	VPBROADCASTD AX, X27
	VXORPS X28, X28, X28
kqloop:
	VMOVUPS 0(SI), Z0
	VMOVUPS 64(SI), Z1
	VMOVUPS 128(SI), Z2
	VMOVUPS 192(SI), Z3
	VMOVUPS 256(SI), Z4
	VMOVUPS 320(SI), Z5
	VMOVUPS 384(SI), Z6
	VMOVUPS 448(SI), Z7
	VMOVUPS 512(SI), Z8
	VMOVUPS 576(SI), Z9
	VMOVUPS 640(SI), Z10
	VMOVUPS 704(SI), Z11
	VMOVUPS 768(SI), Z12
	VMOVUPS 832(SI), Z13
	VMOVUPS 896(SI), Z14
	VMOVUPS 960(SI), Z15
	VANDPS Z30, Z0, Z16
	VANDPS Z30, Z1, Z17
	VMAXPS Z17, Z16, Z16
	VANDPS Z30, Z2, Z17
	VMAXPS Z17, Z16, Z16
	VANDPS Z30, Z3, Z17
	VMAXPS Z17, Z16, Z16
	VANDPS Z30, Z4, Z17
	VMAXPS Z17, Z16, Z16
	VANDPS Z30, Z5, Z17
	VMAXPS Z17, Z16, Z16
	VANDPS Z30, Z6, Z17
	VMAXPS Z17, Z16, Z16
	VANDPS Z30, Z7, Z17
	VMAXPS Z17, Z16, Z16
	VANDPS Z30, Z8, Z17
	VMAXPS Z17, Z16, Z16
	VANDPS Z30, Z9, Z17
	VMAXPS Z17, Z16, Z16
	VANDPS Z30, Z10, Z17
	VMAXPS Z17, Z16, Z16
	VANDPS Z30, Z11, Z17
	VMAXPS Z17, Z16, Z16
	VANDPS Z30, Z12, Z17
	VMAXPS Z17, Z16, Z16
	VANDPS Z30, Z13, Z17
	VMAXPS Z17, Z16, Z16
	VANDPS Z30, Z14, Z17
	VMAXPS Z17, Z16, Z16
	VANDPS Z30, Z15, Z17
	VMAXPS Z17, Z16, Z16
	VEXTRACTF64X4 $1, Z16, Y17
	VMAXPS Y17, Y16, Y16
	VEXTRACTF32X4 $1, Y16, X17
	VMAXPS X17, X16, X16
	VPERMILPS $0x4e, X16, X17
	VMAXPS X17, X16, X16
	VPERMILPS $0xb1, X16, X17
	VMAXPS X17, X16, X16
	VDIVSS X29, X16, X18     // d = amax / 127
	VDIVSS X16, X29, X19     // id = 127 / amax
	VXORPS X20, X20, X20
	VCMPSS $4, X28, X16, K1  // amax != 0
	VMOVAPS X19, K1, X20
	VBROADCASTSS X20, Z19
	VBROADCASTSS X18, Z18
	VMOVUPS Z18, 320(DI)
	KQ(Z0, 0)
	KQ(Z1, 16)
	KQ(Z2, 32)
	KQ(Z3, 48)
	KQ(Z4, 64)
	KQ(Z5, 80)
	KQ(Z6, 96)
	KQ(Z7, 112)
	KQ(Z8, 128)
	KQ(Z9, 144)
	KQ(Z10, 160)
	KQ(Z11, 176)
	KQ(Z12, 192)
	KQ(Z13, 208)
	KQ(Z14, 224)
	KQ(Z15, 240)
	ADDQ $1024, SI
	ADDQ $384, DI
	DECQ CX
	JNZ kqloop
kqdone:
	VZEROUPPER
	RET

// KI4CHUNK(QOFF, C, IDX): Q4_K chunk C (32 bytes at QOFF(SI)) as 64 bytes
// of 4-bit values, its lane scales (from Z5 by IDX) and their share of
// the offset correction (accumulated in Z20).
#define KI4CHUNK(QOFF, WOFF, SOFF, IDX) \
	VMOVDQU QOFF(SI), Y0 \
	VPANDD Y15, Y0, Y1 \
	VPSRLW $4, Y0, Y2 \
	VPANDD Y15, Y2, Y2 \
	VINSERTI64X4 $1, Y2, Z1, Z1 \
	VMOVDQU64 Z1, WOFF(DI) \
	NEGCI(Z1, Z4) \
	VPERMD Z5, IDX, Z6 \
	VMOVDQU32 Z6, SOFF(DI) \
	VPMULLD Z6, Z4, Z4 \
	VPADDD Z4, Z20, Z20

// func kPrepIQ4KAVX512(w *byte, nblocks int, dst *byte)
// Q4_K blocks of 144 bytes as integer super-blocks of 640 bytes.
TEXT ·kPrepIQ4KAVX512(SB), NOSPLIT, $0-24
	MOVQ w+0(FP), SI
	MOVQ nblocks+8(FP), CX
	MOVQ dst+16(FP), DI
	TESTQ CX, CX
	JZ ki4done
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z31
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Y15
	MOVL $0xbf800000, AX // -1.0
	VPBROADCASTD AX, Y14
	VMOVDQU64 k4shu<>(SB), X16
	VMOVDQU64 k4shv<>(SB), X17
	VMOVDQU64 k4m1<>(SB), X18
	VMOVDQU64 k4m2<>(SB), X19
	MOVL $0x30303030, AX
	VPBROADCASTD AX, X24
	MOVL $2, AX
	VPBROADCASTD AX, Z25
	VMOVDQU32 k4perm<>(SB), Z21
	VPADDD Z25, Z21, Z22
	VPADDD Z25, Z22, Z23
	VPADDD Z25, Z23, Z26
	VXORPS X13, X13, X13
ki4block:
	K4SCALES(X24, Y14)
	VMOVUPS Z8, 576(DI)
	VPXORD Z20, Z20, Z20
	KI4CHUNK(16, 0, 256, Z21)
	KI4CHUNK(48, 64, 320, Z22)
	KI4CHUNK(80, 128, 384, Z23)
	KI4CHUNK(112, 192, 448, Z26)
	VMOVDQU32 Z20, 512(DI)
	ADDQ $144, SI
	ADDQ $640, DI
	DECQ CX
	JNZ ki4block
ki4done:
	VZEROUPPER
	RET

// KI6PAIR(WOFF, SOFF): the pair in Z1 (signed 6-bit values) with the lane
// scales permuted out of Z5 (signed) by Z9, which then moves on by 4.
#define KI6PAIR(WOFF, SOFF) \
	VMOVDQU64 Z1, WOFF(DI) \
	NEGCI(Z1, Z4) \
	VPERMD Z5, Z9, Z6 \
	VPMULLD Z6, Z4, Z4 \
	VPADDD Z4, Z20, Z20 \
	VPANDD Z12, Z6, Z6 \
	VMOVDQU32 Z6, SOFF(DI) \
	VPADDD Z11, Z9, Z9

// KI6HALF(QL, QH): one 128-element half of a Q6_K block as two pairs in
// Z1 then Z2 (values - 32).
#define KI6HALF(QL, QH) \
	VMOVDQU64 QL(SI), Z1 \
	VPSRLW $4, Z1, Z2 \
	VPANDD Z30, Z2, Z2 \
	VPANDD Z30, Z1, Z1 \
	VMOVDQU QH(SI), Y3 \
	VPSRLW $2, Y3, Y4 \
	VINSERTI64X4 $1, Y4, Z3, Z3 \
	VPANDD Z29, Z3, Z4 \
	VPORD Z4, Z2, Z2 \
	VPSLLW $4, Z3, Z3 \
	VPANDD Z29, Z3, Z3 \
	VPORD Z3, Z1, Z1 \
	VPSUBB Z13, Z1, Z1 \
	VPSUBB Z13, Z2, Z2

// func kPrepIQ6KAVX512(w *byte, nblocks int, dst *byte)
// Q6_K blocks of 210 bytes as integer super-blocks of 640 bytes.
TEXT ·kPrepIQ6KAVX512(SB), NOSPLIT, $0-24
	MOVQ w+0(FP), SI
	MOVQ nblocks+8(FP), CX
	MOVQ dst+16(FP), DI
	TESTQ CX, CX
	JZ ki6done
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z31
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z30
	MOVL $0x30303030, AX
	VPBROADCASTD AX, Z29
	MOVL $0x20202020, AX
	VPBROADCASTD AX, Z13
	MOVL $0x0000ffff, AX
	VPBROADCASTD AX, Z12
	MOVL $4, AX
	VPBROADCASTD AX, Z11
	VXORPS X10, X10, X10
ki6block:
	VPMOVSXBD 192(SI), Z5   // the 16 scales, signed
	VPBROADCASTW 208(SI), X6
	VCVTPH2PS X6, X6
	VMOVSS X6, X10, X7       // d, 0, 0, 0
	VPXORD Z8, Z8, Z8
	VINSERTF64X4 $1, Y7, Z8, Z8
	VMOVUPS Z8, 576(DI)
	VPXORD Z20, Z20, Z20
	VMOVDQU32 q6idx<>(SB), Z9
	KI6HALF(0, 128)
	VMOVDQA64 Z2, Z14
	KI6PAIR(0, 256)
	VMOVDQA64 Z14, Z1
	KI6PAIR(64, 320)
	KI6HALF(64, 160)
	VMOVDQA64 Z2, Z14
	KI6PAIR(128, 384)
	VMOVDQA64 Z14, Z1
	KI6PAIR(192, 448)
	VMOVDQU32 Z20, 512(DI)
	ADDQ $210, SI
	ADDQ $640, DI
	DECQ CX
	JNZ ki6block
ki6done:
	VZEROUPPER
	RET

// func kRowsIAVX512(nsb int, prep0, prep1 *byte, a *byte, rows, aStride int, out *float32, outStride int)
// Two prepared weight rows against activation rows (aStride bytes apart);
// row r's results go to out[r·outStride] and out[r·outStride+1] (bytes).
TEXT ·kRowsIAVX512(SB), NOSPLIT, $0-64
	MOVQ act+24(FP), AX
	MOVQ rows+32(FP), R9
	MOVQ aStride+40(FP), R10
	MOVQ out+48(FP), R12
	MOVQ outStride+56(FP), R13
	LEAQ (R10)(R10*2), R14
kifour:
	CMPQ R9, $4
	JLT kione
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
	MOVQ nsb+0(FP), CX
kifoursb:
	VMOVDQU32 512(DX), Z8
	VMOVDQA32 Z8, Z9
	VMOVDQA32 Z8, Z10
	VMOVDQA32 Z8, Z11
	VMOVDQU32 512(SI), Z12
	VMOVDQA32 Z12, Z13
	VMOVDQA32 Z12, Z14
	VMOVDQA32 Z12, Z15
	KIPAIR4(0, 256)
	KIPAIR4(64, 320)
	KIPAIR4(128, 384)
	KIPAIR4(192, 448)
	KILOADE
	KIEPI(256(DI), 320(DI), Z8, Z12, Z0, Z4)
	KIEPI(256(DI)(R10*1), 320(DI)(R10*1), Z9, Z13, Z1, Z5)
	KIEPI(256(DI)(R10*2), 320(DI)(R10*2), Z10, Z14, Z2, Z6)
	KIEPI(256(DI)(R14*1), 320(DI)(R14*1), Z11, Z15, Z3, Z7)
	ADDQ $640, DX
	ADDQ $640, SI
	ADDQ $384, DI
	DECQ CX
	JNZ kifoursb
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
	SUBQ $4, R9
	JMP kifour
kione:
	TESTQ R9, R9
	JZ kidone
	VPXORD Z0, Z0, Z0
	VPXORD Z4, Z4, Z4
	MOVQ prep0+8(FP), DX
	MOVQ prep1+16(FP), SI
	MOVQ AX, DI
	MOVQ nsb+0(FP), CX
kionesb:
	VMOVDQU32 512(DX), Z8
	VMOVDQU32 512(SI), Z12
	KIPAIR1(0, 256)
	KIPAIR1(64, 320)
	KIPAIR1(128, 384)
	KIPAIR1(192, 448)
	KILOADE
	KIEPI(256(DI), 320(DI), Z8, Z12, Z0, Z4)
	ADDQ $640, DX
	ADDQ $640, SI
	ADDQ $384, DI
	DECQ CX
	JNZ kionesb
	HSUM(Z0, Y0, X0)
	HSUM(Z4, Y4, X4)
	VMOVSS X0, (R12)
	VMOVSS X4, 4(R12)
	ADDQ R13, R12
	ADDQ R10, AX
	DECQ R9
	JMP kione
kidone:
	VZEROUPPER
	RET
