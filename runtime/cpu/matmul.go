package cpu

import rt "github.com/govllm/govllm/runtime"

// matMul computes dst[M, N] = x[M, K] · w[N, K]ᵀ. Work is split over the
// output columns: each weight row is widened to f32 once and then dotted
// with every activation row, so a weight is read once per call whatever M.
// dot is the inner loop that an assembly kernel will replace.
func matMul(dst, x, w *rt.Tensor) {
	switch {
	case w.DType() == rt.Q8_0:
		matMulQ8(dst, x, w)
		return
	case kQuantSupported(w.DType()) && x.Dim(1)%256 == 0:
		matMulK(dst, x, w)
		return
	case halfSupported(w.DType(), x.Dim(1)) && x.RowsContiguous():
		matMulHalf(dst, x, w)
		return
	}
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

func embedding(dst, table *rt.Tensor, ids []int32) {
	parallelFor(len(ids), 64, func(lo, hi int) {
		buf := make([]float32, table.Dim(1))
		for i := lo; i < hi; i++ {
			copy(row(dst, i), weightRow(table, int(ids[i]), buf))
		}
	})
}
