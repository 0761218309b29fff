package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	rt "github.com/govllm/govllm/runtime"
)

// TestRoundTrip: decoding what Quantize wrote stays within a fraction of
// each block's range that the bits allow.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 1024)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	bound := map[rt.DType]float64{rt.Q8_0: 0.012, rt.Q4_0: 0.2, rt.Q4_1: 0.2, rt.Q5_0: 0.1, rt.Q5_1: 0.1, rt.Q4_K: 0.25, rt.Q5_K: 0.12, rt.Q6_K: 0.06,
		rt.Q2_K: 0.6, rt.Q3_K: 0.35, rt.IQ4_NL: 0.15, rt.IQ4_XS: 0.15}
	for dt, b := range bound {
		data, err := Quantize(dt, x)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) != dt.ByteLen(len(x)) {
			t.Fatalf("%v: %d bytes", dt, len(data))
		}
		y := make([]float32, len(x))
		DequantRow(dt, data, y)
		var worst, rms float64
		for i := range x {
			d := math.Abs(float64(y[i] - x[i]))
			worst = max(worst, d)
			rms += d * d
		}
		rms = math.Sqrt(rms / float64(len(x)))
		if worst > 3*b || rms > b {
			t.Errorf("%v: max error %.3f, rms %.3f (bound %v)", dt, worst, rms, b)
		}
	}
}

// TestDecodeKnownBlocks decodes blocks written by hand from GGML's layouts.
func TestDecodeKnownBlocks(t *testing.T) {
	// Q4_0: d = 0.5 (f16 0x3800); low nibble of byte 0 is 0 (→ -8), high is
	// 15 (→ 7): elements 0 and 16 are -4 and 3.5.
	q40 := make([]byte, 18)
	q40[0], q40[1] = 0x00, 0x38
	q40[2] = 0xf0
	y := make([]float32, 32)
	DequantRow(rt.Q4_0, q40, y)
	if y[0] != -4 || y[16] != 3.5 || y[1] != -4 {
		t.Fatalf("q4_0: %v", y[:2])
	}
	// Q6_K: d = 1, every scale 2, every quant 33 (ql nibble 1, qh 2 bits
	// 0b10 → 1 | 32): each weight is 1·2·(33−32) = 2.
	q6 := make([]byte, 210)
	for i := range 128 {
		q6[i] = 0x11
	}
	for i := 128; i < 192; i++ {
		q6[i] = 0xaa
	}
	for i := 192; i < 208; i++ {
		q6[i] = 2
	}
	q6[208], q6[209] = 0x00, 0x3c
	y = make([]float32, 256)
	DequantRow(rt.Q6_K, q6, y)
	for i, v := range y {
		if v != 2 {
			t.Fatalf("q6_k element %d = %v", i, v)
		}
	}
	// Q4_K: d = 1, dmin = 1, sub-block 0 scale 3 min 1, quant 5 → 3·5−1.
	q4k := make([]byte, 144)
	q4k[0], q4k[1], q4k[2], q4k[3] = 0x00, 0x3c, 0x00, 0x3c
	q4k[4], q4k[8] = 3, 1
	q4k[16] = 5
	y = make([]float32, 256)
	DequantRow(rt.Q4_K, q4k, y)
	if y[0] != 14 || y[32] != 0 {
		t.Fatalf("q4_k: %v %v", y[0], y[32])
	}
}

// TestTensorEncodes: Tensor gives each dtype's encoding of x in the shape
// asked for, and refuses values that do not fill it.
func TestTensorEncodes(t *testing.T) {
	x := make([]float32, 2*256)
	for i := range x {
		x[i] = float32(i%37) - 18.25
	}
	for _, dt := range []rt.DType{rt.F32, rt.BF16, rt.F16, rt.Q8_0, rt.Q6_K} {
		tt, err := Tensor(dt, x, 2, 256)
		if err != nil {
			t.Fatal(err)
		}
		if tt.DType() != dt || tt.Dim(0) != 2 || tt.Dim(1) != 256 {
			t.Fatalf("%v: got %v %v", dt, tt.DType(), tt.Shape())
		}
		y := make([]float32, len(x))
		switch dt {
		case rt.F32:
			copy(y, tt.F32())
		case rt.BF16, rt.F16:
			for i, h := range tt.U16()[:len(x)] {
				if dt == rt.BF16 {
					y[i] = rt.BF16ToF32(h)
				} else {
					y[i] = rt.F16ToF32(h)
				}
			}
		default:
			DequantRow(dt, tt.Bytes()[:dt.ByteLen(len(x))], y)
		}
		bound := 0.1 // 16-bit rounding of values up to 18.25
		switch {
		case dt == rt.F32:
			bound = 0
		case dt.Quantized():
			bound = 0.5 // Q6_K's step over this range is ~0.57
		}
		for i := range x {
			if d := math.Abs(float64(y[i] - x[i])); d > bound {
				t.Fatalf("%v: element %d is %g, want %g", dt, i, y[i], x[i])
			}
		}
	}
	if _, err := Tensor(rt.BF16, x[:5], 2, 3); err == nil {
		t.Error("5 values for a 2×3 tensor were accepted")
	}
}
