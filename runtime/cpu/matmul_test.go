package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/quant"
)

// TestMatMulRowBitsIndependentOfBatch: for every weight type, a row of x
// gives the same bits alone (a decode step), in a batch of a few (the
// decode kernels' range) and in a large batch (the tiled prefill kernels),
// at every place in it. Without this a request's greedy output would depend
// on which other requests the server batched it with.
func TestMatMulRowBitsIndependentOfBatch(t *testing.T) {
	eachKernelSet(t, testMatMulRowBitsIndependentOfBatch)
}

func testMatMulRowBitsIndependentOfBatch(t *testing.T) {
	types := []rt.DType{rt.F32, rt.BF16, rt.F16, rt.Q8_0, rt.Q4_0, rt.Q4_1, rt.Q5_0, rt.Q5_1,
		rt.IQ4_NL, rt.IQ4_XS, rt.Q2_K, rt.Q3_K, rt.Q4_K, rt.Q5_K, rt.Q6_K}
	const m, k, n = 21, 512, 70
types:
	for _, dt := range types {
		rng := rand.New(rand.NewPCG(41, uint64(dt)))
		wf := randF32(rng, n*k, 0.05)
		var w *rt.Tensor
		switch dt {
		case rt.F32:
			w, _ = rt.FromF32(wf, n, k)
		case rt.BF16, rt.F16:
			w = rt.New(dt, n, k)
			for i, v := range wf {
				if dt == rt.BF16 {
					w.U16()[i] = rt.F32ToBF16(v)
				} else {
					w.U16()[i] = rt.F32ToF16(v)
				}
			}
		default:
			wq, err := quant.Quantize(dt, wf)
			if err != nil {
				t.Fatal(err)
			}
			w, _ = rt.FromBytes(dt, wq, n, k)
		}
		xs := randF32(rng, m*k, 1)
		x, _ := rt.FromF32(xs, m, k)
		all := rt.New(rt.F32, m, n)
		matMul(all, x, w)
		for _, size := range []int{1, 2, 3, 4, 5, 7, 8, 13} {
			for i := 0; i+size <= m; i += max(1, size/2) {
				part, _ := rt.FromF32(xs[i*k:(i+size)*k], size, k)
				got := rt.New(rt.F32, size, n)
				matMul(got, part, w)
				for r := range size {
					for j := range n {
						a, b := all.F32()[(i+r)*n+j], got.F32()[r*n+j]
						if math.Float32bits(a) != math.Float32bits(b) {
							t.Errorf("%v: row %d col %d is %v in a batch of %d and %v in a batch of %d", dt, i+r, j, a, m, b, size)
							continue types
						}
					}
				}
			}
		}
	}
}
