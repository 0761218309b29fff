package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func near(a, b float32, tol float64) bool {
	return math.Abs(float64(a-b)) <= tol*(1+math.Abs(float64(b)))
}

// TestF32KernelsAgree holds the vector kernels to their Go forms at
// lengths around the vector widths and with strided matrices.
func TestF32KernelsAgree(t *testing.T) { eachKernelSet(t, testF32KernelsAgree) }

// eachKernelSet runs f with the CPU's kernels and, where it has AVX-512,
// again with AVX2's, so that both sets are tested on such a machine.
func eachKernelSet(t *testing.T, f func(t *testing.T)) {
	f(t)
	if hasAVX512 && hasAVX2 {
		avx512, vnni := hasAVX512, hasVNNI
		hasAVX512, hasVNNI, vecWidth = false, false, widthOf(false, true)
		defer func() { hasAVX512, hasVNNI, vecWidth = avx512, vnni, widthOf(avx512, true) }()
		t.Run("avx2", f)
	}
}

func testF32KernelsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 15, 16, 17, 64, 100, 128, 130, 256, 300} {
		x, y := randF32(rng, n, 1), randF32(rng, n, 1)
		if !near(dot(x, y), dotGo(x, y), 1e-5) {
			t.Errorf("dot n=%d: %v vs %v", n, dot(x, y), dotGo(x, y))
		}
		ya, yg := slices.Clone(y), slices.Clone(y)
		axpy(0.7, x, ya)
		axpyGo(0.7, x, yg)
		scal(1.3, ya)
		scalGo(1.3, yg)
		for i := range ya {
			if !near(ya[i], yg[i], 1e-6) {
				t.Fatalf("axpy/scal n=%d at %d: %v vs %v", n, i, ya[i], yg[i])
			}
		}
		for _, m := range []int{1, 3, 16} {
			stride := n + 5
			mat := randF32(rng, m*stride, 1)
			coef := randF32(rng, m, 1)
			oa, og := slices.Clone(y), slices.Clone(y)
			mvAcc(oa, coef, mat, stride)
			mvAccGo(og, coef, mat, stride)
			for i := range oa {
				if !near(oa[i], og[i], 1e-5) {
					t.Fatalf("mvAcc n=%d m=%d at %d: %v vs %v", n, m, i, oa[i], og[i])
				}
			}
			ma, mg := slices.Clone(mat), slices.Clone(mat)
			ger(ma, stride, coef, x)
			gerGo(mg, stride, coef, x)
			for i := range ma {
				if !near(ma[i], mg[i], 1e-6) {
					t.Fatalf("ger n=%d m=%d at %d: %v vs %v", n, m, i, ma[i], mg[i])
				}
			}
			coef2 := randF32(rng, m, 1)
			oa, og = slices.Clone(y), slices.Clone(y)
			o2a, o2g := slices.Clone(x), slices.Clone(x)
			mvAcc2(oa, o2a, coef, coef2, mat, stride)
			mvAcc2Go(og, o2g, coef, coef2, mat, stride)
			for i := range oa {
				if !near(oa[i], og[i], 1e-5) || !near(o2a[i], o2g[i], 1e-5) {
					t.Fatalf("mvAcc2 n=%d m=%d at %d: %v %v vs %v %v", n, m, i, oa[i], o2a[i], og[i], o2g[i])
				}
			}
			ma, mg = slices.Clone(mat), slices.Clone(mat)
			gerScale(ma, stride, 0.9, coef, x)
			gerScaleGo(mg, stride, 0.9, coef, x)
			for i := range ma {
				if !near(ma[i], mg[i], 1e-6) {
					t.Fatalf("gerScale n=%d m=%d at %d: %v vs %v", n, m, i, ma[i], mg[i])
				}
			}
		}
	}
}

func BenchmarkDot(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	x, y := randF32(rng, 1024, 1), randF32(rng, 1024, 1)
	var s float32
	for b.Loop() {
		s += dot(x, y)
	}
	b.ReportMetric(1024*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
}

// TestActivationKernelsAgree holds the vectorised exp-based activations to
// math.Exp's, over the range activations take and beyond (saturation).
func TestActivationKernelsAgree(t *testing.T) { eachKernelSet(t, testActivationKernelsAgree) }

func testActivationKernelsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{5, 16, 33, 1000} {
		x, y := randF32(rng, n, 6), randF32(rng, n, 1)
		x[0], x[n-1] = 120, -120
		if n > 16 {
			x[8], x[9], x[10] = 88, -88, -87.5 // the AVX2 form's clamps
		}
		check := func(name string, got, want []float32) {
			for i := range got {
				if !near(got[i], want[i], 2e-6) {
					t.Fatalf("%s n=%d at %d (x=%v): %v vs %v", name, n, i, x[i], got[i], want[i])
				}
			}
		}
		a, g := make([]float32, n), make([]float32, n)
		sigmoidVec(a, x)
		sigmoidVecGo(g, x)
		check("sigmoid", a, g)
		swigluVec(a, x, y)
		swigluVecGo(g, x, y)
		check("swiglu", a, g)
		swigluVec(a, x, nil)
		swigluVecGo(g, x, nil)
		check("silu", a, g)
		sigmoidMulVec(a, y, x)
		sigmoidMulVecGo(g, y, x)
		check("sigmoid_mul", a, g)
		addVec(a, x, y)
		addVecGo(g, x, y)
		check("add", a, g)
		fmaVec(a, x, y)
		fmaVecGo(g, x, y)
		check("fma", a, g)
	}
}

// TestGemmAccAgrees holds gemmAcc to its Go form over tile remainders
// (rows around multiples of 6, columns of 64 and not) and padded strides.
func TestGemmAccAgrees(t *testing.T) { eachKernelSet(t, testGemmAccAgrees) }

func testGemmAccAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range [][3]int{{1, 64, 1}, {6, 64, 3}, {7, 128, 64}, {13, 192, 5}, {64, 128, 128}, {5, 48, 9}, {12, 16, 2}, {7, 40, 3}} {
		m, n, k := s[0], s[1], s[2]
		lda, ldb, ldc := k+3, n+16, n+32
		a, b := randF32(rng, m*lda, 1), randF32(rng, k*ldb, 1)
		c := randF32(rng, m*ldc, 1)
		got, want := slices.Clone(c), slices.Clone(c)
		gemmAcc(m, n, k, a, lda, b, ldb, got, ldc)
		gemmAccGo(m, n, k, a, lda, b, ldb, want, ldc)
		for i := range got {
			if !near(got[i], want[i], 1e-5) {
				t.Fatalf("gemmAcc m=%d n=%d k=%d at %d: %v, Go form %v", m, n, k, i, got[i], want[i])
			}
		}
	}
}
