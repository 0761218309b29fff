package runtime

import (
	"math"
	"strconv"
)

// DType is the element type of a tensor.
type DType uint8

// The dtypes govllm computes with. Activations are F32; weights may be any.
const (
	DTypeInvalid DType = iota
	F32
	BF16
	F16
	// GGML's block formats (package quant decodes them). Only contiguous
	// weights use them. Q8_0: blocks of 32 weights, an f16 scale and 32
	// int8 (34 bytes); the k-quants have super-blocks of 256.
	Q8_0
	Q4_0
	Q4_1
	Q5_0
	Q5_1
	Q4_K
	Q5_K
	Q6_K
	Q2_K
	Q3_K
	IQ4_NL
	IQ4_XS
	I32 // token ids (argmax's output), never a weight
)

var dtypeNames = [...]string{DTypeInvalid: "invalid", F32: "f32", BF16: "bf16", F16: "f16", Q8_0: "q8_0",
	Q4_0: "q4_0", Q4_1: "q4_1", Q5_0: "q5_0", Q5_1: "q5_1", Q4_K: "q4_k", Q5_K: "q5_k", Q6_K: "q6_k", Q2_K: "q2_k", Q3_K: "q3_k", IQ4_NL: "iq4_nl", IQ4_XS: "iq4_xs", I32: "i32"}

// blocks is indexed by dtype (an array, not a map: kernels ask per row).
var blocks = [...][2]int{Q8_0: {32, 34}, Q4_0: {32, 18}, Q4_1: {32, 20}, Q5_0: {32, 22}, Q5_1: {32, 24},
	Q4_K: {256, 144}, Q5_K: {256, 176}, Q6_K: {256, 210}, Q2_K: {256, 84}, Q3_K: {256, 110}, IQ4_NL: {32, 18}, IQ4_XS: {256, 136}}

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return "dtype(" + strconv.Itoa(int(d)) + ")"
}

// Size is the number of bytes of one element, 0 for block formats.
func (d DType) Size() int {
	switch d {
	case F32, I32:
		return 4
	case BF16, F16:
		return 2
	}
	return 0
}

// Block is (elements, bytes) of one block: (1, Size) for plain dtypes.
func (d DType) Block() (elems, bytes int) {
	if int(d) < len(blocks) && blocks[d][0] != 0 {
		return blocks[d][0], blocks[d][1]
	}
	return 1, d.Size()
}

// ByteLen is the number of bytes of n elements (n a multiple of the block).
func (d DType) ByteLen(n int) int {
	e, b := d.Block()
	if e == 0 {
		return 0
	}
	return n / e * b
}

// DTypes lists the dtypes of weights and activations in a stable order
// (I32, an index type, is not one).
var DTypes = []DType{F32, BF16, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS}

// Quantized reports whether d is a block format.
func (d DType) Quantized() bool { return int(d) < len(blocks) && blocks[d][0] != 0 }

// BF16ToF32 widens a bfloat16 bit pattern.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 narrows with round-to-nearest-even, keeping NaN a NaN.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// F16ToF32 widens an IEEE 754 half-precision bit pattern.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal half: normalise into a float32 exponent.
	e := uint32(113)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}

// F32ToF16 narrows with round-to-nearest-even.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff:
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp > 142: // overflow to infinity
		return sign | 0x7c00
	case exp < 102: // underflow to zero
		return sign
	case exp < 113: // subnormal half
		mant |= 0x800000
		shift := uint32(126 - exp)
		half := mant >> shift
		rem := mant & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(exp-112)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++
	}
	return sign | uint16(half)
}
