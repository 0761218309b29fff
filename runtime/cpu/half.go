package cpu

import rt "github.com/govllm/govllm/runtime"

// halfSupported reports whether matMulHalf has kernels for weights of dt
// with rows of k elements.
func halfSupported(dt rt.DType, k int) bool {
	return hasAVX512 && (dt == rt.BF16 || dt == rt.F16) && k%32 == 0
}

// matMulHalf is matMul for BF16/F16 weights: each weight row is widened in
// registers, never stored as f32. Decode streams the rows once; prefill runs
// each row against blocks of activation rows that stay in L2.
func matMulHalf(dst, x, w *rt.Tensor) {
	m, k, n := x.Dim(0), x.Dim(1), w.Dim(0)
	f16 := w.DType() == rt.F16
	wh := w.U16()
	d := dst.F32()
	ds := dst.Strides()[0]
	xs := x.Strides()[0]
	xf := x.F32()
	if m == 1 {
		parallelFor(n, 64, func(lo, hi int) {
			halfDecode(f16, wh[lo*k:hi*k], k, xf[:k], d[lo:hi])
		})
		return
	}
	rowBlock := max(4, min(m, (256<<10)/(4*k)))
	grain := max(1, 16384/max(1, m*k))
	parallelFor(n, grain, func(lo, hi int) {
		for r0 := 0; r0 < m; r0 += rowBlock {
			rows := min(rowBlock, m-r0)
			for j := lo; j < hi; j++ {
				halfRows(f16, wh[j*k:(j+1)*k], xf[r0*xs:], rows, xs, d[r0*ds+j:], ds)
			}
		}
	})
}
