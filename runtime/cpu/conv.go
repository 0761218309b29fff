package cpu

import rt "github.com/govllm/govllm/runtime"

// conv1dCausal: out[t][c] = Σ_j w[c][j] · in[t-(K-1)+j][c], where inputs
// before the sequence come from state. The state then keeps the last K-1
// inputs.
func conv1dCausal(dst, x, w, state *rt.Tensor) {
	T, C, K := x.Dim(0), x.Dim(1), w.Dim(1)
	ws, st := w.F32()[:C*K], state.F32()[:(K-1)*C]
	xr, dr := rowsOf(x), rowsOf(dst)
	input := func(i, c int) float32 { // i indexes the concatenation state ++ x
		if i < K-1 {
			return st[i*C+c]
		}
		return xr[i-(K-1)][c]
	}
	parallelFor(C, 64, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			wc := ws[c*K : (c+1)*K]
			for t := range T {
				var s float32
				for j, wj := range wc {
					s += wj * input(t+j, c)
				}
				dr[t][c] = s
			}
		}
	})
	next := make([]float32, len(st))
	for r := range K - 1 {
		for c := range C {
			next[r*C+c] = input(T+r, c)
		}
	}
	copy(st, next)
}
