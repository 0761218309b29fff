package cpu

import rt "github.com/govllm/govllm/runtime"

// matMul computes dst[M, N] = x[M, K] · w[N, K]ᵀ. Work is split over the
// output columns: each weight row is widened to f32 once and then dotted
// with every activation row, so a weight is read once per call whatever M.
// dot is the inner loop that an assembly kernel will replace.
func matMul(dst, x, w *rt.Tensor) {
	m, k, n := x.Dim(0), x.Dim(1), w.Dim(0)
	xr, dr := rowsOf(x), rowsOf(dst)
	grain := max(1, 16384/max(1, m*k))
	parallelFor(n, grain, func(lo, hi int) {
		buf := make([]float32, k)
		for j := lo; j < hi; j++ {
			wr := weightRow(w, j, buf)
			for i := range m {
				dr[i][j] = dot(xr[i], wr)
			}
		}
	})
}

// dot is the f32 inner product with four partial sums.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func embedding(dst, table *rt.Tensor, ids []int32) {
	parallelFor(len(ids), 64, func(lo, hi int) {
		buf := make([]float32, table.Dim(1))
		for i := lo; i < hi; i++ {
			copy(row(dst, i), weightRow(table, int(ids[i]), buf))
		}
	})
}
