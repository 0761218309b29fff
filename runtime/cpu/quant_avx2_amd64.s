#include "textflag.h"

DATA kqabs<>+0(SB)/4, $0x7fffffff
GLOBL kqabs<>(SB), RODATA|NOPTR, $4
DATA kq127<>+0(SB)/4, $0x42fe0000
GLOBL kq127<>(SB), RODATA|NOPTR, $4

// kqperm: VPERMD's order that undoes VPACKSSDW/VPACKSSWB's lane interleave.
DATA kqperm<>+0(SB)/8, $0x0000000400000000
DATA kqperm<>+8(SB)/8, $0x0000000500000001
DATA kqperm<>+16(SB)/8, $0x0000000600000002
DATA kqperm<>+24(SB)/8, $0x0000000700000003
GLOBL kqperm<>(SB), RODATA|NOPTR, $32

// KQCONSTS: Y15 = the abs mask, Y12 = 127s, Y11 = −127s, Y10 = kqperm.
#define KQCONSTS \
	VBROADCASTSS kqabs<>(SB), Y15 \
	MOVL $127, AX \
	MOVD AX, X12 \
	VPBROADCASTD X12, Y12 \
	MOVL $-127, AX \
	MOVD AX, X11 \
	VPBROADCASTD X11, Y11 \
	VMOVDQU kqperm<>(SB), Y10

// KQAMAX: Y0 = the max of Y0's lanes (the block's max|x| by lane) in every
// lane, made NaN where Y1 (the lanes' NaN masks) has any NaN: VMAXPS keeps
// a NaN only from its second operand, so the mask is or-ed in after the
// reduction; uses X2.
#define KQAMAX \
	VEXTRACTF128 $1, Y0, X2 \
	VMAXPS X2, X0, X0 \
	VPERMILPS $0x4e, X0, X2 \
	VMAXPS X2, X0, X0 \
	VPERMILPS $0xb1, X0, X2 \
	VMAXPS X2, X0, X0 \
	VEXTRACTF128 $1, Y1, X2 \
	VORPS X2, X1, X1 \
	VPERMILPS $0x4e, X1, X2 \
	VORPS X2, X1, X1 \
	VPERMILPS $0xb1, X1, X2 \
	VORPS X2, X1, X1 \
	VORPS X1, X0, X0 \
	VBROADCASTSS X0, Y0

// KQSUM16(A, B, OFF): the sum of the 16 int32s of A and B as an int16 at
// OFF(BX), and added into R8 (the sub-block's sum); clobbers X14, AX.
#define KQSUM16(A, B, OFF) \
	VPADDD A, B, Y14 \
	VEXTRACTI128 $1, Y14, X13 \
	VPADDD X13, X14, X14 \
	VPHADDD X14, X14, X14 \
	VPHADDD X14, X14, X14 \
	MOVQ X14, AX \
	MOVW AX, OFF(BX) \
	MOVLQSX AX, AX \
	ADDQ AX, R8

// KQPACK(A, B, C, D, OFF): 32 int32s (A..D, in order) clamped to ±127 and
// stored as signed bytes at OFF(DI).
#define KQPACK(A, B, C, D, OFF) \
	VPMAXSD Y11, A, A \
	VPMINSD Y12, A, A \
	VPMAXSD Y11, B, B \
	VPMINSD Y12, B, B \
	VPMAXSD Y11, C, C \
	VPMINSD Y12, C, C \
	VPMAXSD Y11, D, D \
	VPMINSD Y12, D, D \
	VPACKSSDW B, A, Y13 \
	VPACKSSDW D, C, Y14 \
	VPACKSSWB Y14, Y13, Y13 \
	VPERMD Y13, Y10, Y13 \
	VMOVDQU Y13, OFF(DI)

// func quantizeQ8KSignedAVX2(x *float32, nsb int, act *byte, bs *int16)
// quantizeQ8KGo, kSums and kSigned in one pass, with their bits: per
// super-block of 256, d = max|x|/127 (NaN if any x is), q = round-to-even(x·
// 127/max|x|) clamped to ±127 as signed bytes, the sub-block sums d·Σq of
// each 32 (then 8 zeros), 16 copies of d, and each 16's Σq in bs.
TEXT ·quantizeQ8KSignedAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ nsb+8(FP), CX
	MOVQ act+16(FP), DI
	MOVQ bs+24(FP), BX
	KQCONSTS
	TESTQ CX, CX
	JZ kqdone
kqsb:
	// max|x| and whether any x is NaN, over the 256
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	MOVQ $0, DX
kqmax:
	VMOVUPS (SI)(DX*1), Y2
	VCMPPS $3, Y2, Y2, Y3
	VORPS Y3, Y1, Y1
	VANDPS Y15, Y2, Y2
	VMAXPS Y2, Y0, Y0
	ADDQ $32, DX
	CMPQ DX, $1024
	JLT kqmax
	KQAMAX
	VBROADCASTSS kq127<>(SB), Y1
	VDIVPS Y1, Y0, Y2                // d = amax/127
	VDIVPS Y0, Y1, Y3                // 127/amax
	VXORPS Y4, Y4, Y4
	VCMPPS $4, Y4, Y0, Y4            // amax != 0 (true for NaN)
	VANDPS Y4, Y3, Y3                // id
	VMOVUPS Y2, 320(DI)
	VMOVUPS Y2, 352(DI)
	VXORPS Y4, Y4, Y4
	VMOVUPS Y4, 288(DI)
	// 8 sub-blocks of 32
	MOVQ DI, R9
	MOVQ $0, DX
kqsub:
	VMULPS (SI), Y3, Y4
	VMULPS 32(SI), Y3, Y5
	VMULPS 64(SI), Y3, Y6
	VMULPS 96(SI), Y3, Y7
	VCVTPS2DQ Y4, Y4
	VCVTPS2DQ Y5, Y5
	VCVTPS2DQ Y6, Y6
	VCVTPS2DQ Y7, Y7
	KQPACK(Y4, Y5, Y6, Y7, 0)
	MOVQ $0, R8
	KQSUM16(Y4, Y5, 0)
	KQSUM16(Y6, Y7, 2)
	VCVTSI2SSQ R8, X8, X8
	VMULSS X2, X8, X8
	VMOVSS X8, 256(R9)(DX*4)
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $4, BX
	INCQ DX
	CMPQ DX, $8
	JLT kqsub
	ADDQ $128, DI                    // past xsb and d (DI moved 256)
	DECQ CX
	JNZ kqsb
kqdone:
	VZEROUPPER
	RET

// func quantizeQ8XSignedAVX2(x *float32, nb int, q *byte, s *float32)
// quantizeQ8XGo then q8Signed in one pass, with their bits: per block of
// 32, d = max|x|/127 (NaN if any x is), q = round-to-even(x·127/max|x|)
// (0 where max|x| is 0 or NaN) clamped to ±127 as signed bytes at 32·b in
// q, and d 8 times at 8·b in s.
TEXT ·quantizeQ8XSignedAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ s+24(FP), BX
	KQCONSTS
	VBROADCASTSS kq127<>(SB), Y9
	TESTQ CX, CX
	JZ qxdone
qxblock:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VCMPPS $3, Y4, Y4, Y1
	VCMPPS $3, Y5, Y5, Y2
	VORPS Y2, Y1, Y1
	VCMPPS $3, Y6, Y6, Y2
	VORPS Y2, Y1, Y1
	VCMPPS $3, Y7, Y7, Y2
	VORPS Y2, Y1, Y1
	VANDPS Y15, Y4, Y0
	VANDPS Y15, Y5, Y2
	VMAXPS Y2, Y0, Y0
	VANDPS Y15, Y6, Y2
	VMAXPS Y2, Y0, Y0
	VANDPS Y15, Y7, Y2
	VMAXPS Y2, Y0, Y0
	KQAMAX
	VDIVPS Y9, Y0, Y2                // d = amax/127
	VDIVPS Y0, Y9, Y3                // 127/amax
	VXORPS Y1, Y1, Y1
	VCMPPS $0x1e, Y1, Y0, Y1         // amax > 0 (false for NaN)
	VANDPS Y1, Y3, Y3                // id
	VMOVUPS Y2, (BX)
	VMULPS Y4, Y3, Y4
	VMULPS Y5, Y3, Y5
	VMULPS Y6, Y3, Y6
	VMULPS Y7, Y3, Y7
	VCVTPS2DQ Y4, Y4
	VCVTPS2DQ Y5, Y5
	VCVTPS2DQ Y6, Y6
	VCVTPS2DQ Y7, Y7
	KQPACK(Y4, Y5, Y6, Y7, 0)
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $32, BX
	DECQ CX
	JNZ qxblock
qxdone:
	VZEROUPPER
	RET
