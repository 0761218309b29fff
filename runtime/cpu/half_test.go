package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	rt "github.com/govllm/govllm/runtime"
)

// TestHalfMatMulAgrees holds the BF16/F16 kernels (decode and prefill) to
// the Go path: rows widened to f32 and dotted in Go.
func TestHalfMatMulAgrees(t *testing.T) { eachKernelSet(t, testHalfMatMulAgrees) }

func testHalfMatMulAgrees(t *testing.T) {
	if !hasAVX512 && !hasAVX2 {
		t.Skip("no AVX2: only the Go path runs here")
	}
	rng := rand.New(rand.NewPCG(13, 14))
	for _, dt := range []rt.DType{rt.BF16, rt.F16} {
		for _, shape := range [][3]int{{1, 32, 3}, {1, 1024, 70}, {3, 96, 5}, {7, 1024, 33}, {70, 64, 9}, {6, 32, 4}, {13, 1024, 11}, {131, 2048, 10}, {64, 96, 8}} {
			m, k, n := shape[0], shape[1], shape[2]
			w := rt.New(dt, n, k)
			for i, v := range randF32(rng, n*k, 0.1) {
				if dt == rt.BF16 {
					w.U16()[i] = rt.F32ToBF16(v)
				} else {
					w.U16()[i] = rt.F32ToF16(v)
				}
			}
			xv := randF32(rng, m*k, 1)
			x, _ := rt.FromF32(xv, m, k)
			if !halfSupported(dt, k) {
				t.Fatalf("%v k=%d: no kernel", dt, k)
			}
			got := rt.New(rt.F32, m, n)
			matMul(got, x, w)
			buf := make([]float32, k)
			for j := range n {
				wr := weightRow(w, j, buf)
				for i := range m {
					want := dotGo(xv[i*k:(i+1)*k], wr)
					if g := got.F32()[i*n+j]; !near(g, want, 1e-4) {
						t.Fatalf("%v %v: out[%d,%d] = %v, Go path %v", dt, shape, i, j, g, want)
					}
				}
			}
		}
	}
}

// TestHalfMatMulRowBitsIndependentOfBatch: a row's result has the same bits
// whether it falls in a 6×4 tile or in the rows after the last tile, so that
// a request's output does not depend on what it was batched with.
func TestHalfMatMulRowBitsIndependentOfBatch(t *testing.T) {
	eachKernelSet(t, testHalfMatMulRowBitsIndependentOfBatch)
}

func testHalfMatMulRowBitsIndependentOfBatch(t *testing.T) {
	if !hasAVX512 && !hasAVX2 {
		t.Skip("no AVX2: only the Go path runs here")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	m, k, n := 13, 256, 10
	w := rt.New(rt.BF16, n, k)
	for i, v := range randF32(rng, n*k, 0.1) {
		w.U16()[i] = rt.F32ToBF16(v)
	}
	xv := randF32(rng, m*k, 1)
	x, _ := rt.FromF32(xv, m, k)
	all := rt.New(rt.F32, m, n)
	matMul(all, x, w)
	// Batches of 1 to 12 rows take every tail at every place in the batch
	// (AVX-512: the 6-row tiles' remainders, in 2×4 tails; AVX2: the 4-row
	// kernel's), and one row is a decode step.
	for size := 1; size < m; size++ {
		for i := 0; i+size <= m; i++ {
			part, _ := rt.FromF32(xv[i*k:(i+size)*k], size, k)
			got := rt.New(rt.F32, size, n)
			matMul(got, part, w)
			for r := range size {
				for j := range n {
					if a, b := all.F32()[(i+r)*n+j], got.F32()[r*n+j]; math.Float32bits(a) != math.Float32bits(b) {
						t.Fatalf("row %d col %d: %v in a batch of %d, %v in a batch of %d", i+r, j, a, m, b, size)
					}
				}
			}
		}
	}
}
