package cpu

import rt "github.com/govllm/govllm/runtime"

// conv1dCausal: out[t][c] = Σ_j w[c][j] · in[t-(K-1)+j][c], where inputs
// before the sequence come from state. The state then keeps the last K-1
// inputs.
func conv1dCausal(dst, x, w, state *rt.Tensor) {
	T, C, K := x.Dim(0), x.Dim(1), w.Dim(1)
	ws, st := w.F32()[:C*K], state.F32()[:(K-1)*C]
	// Taps transposed to [K][C], so that each tap is one vector multiply-add
	// over the channels of an input row.
	taps := getF32(K * C)
	for c := range C {
		for j := range K {
			taps.f[j*C+c] = ws[c*K+j]
		}
	}
	input := func(i int) []float32 { // row i of the concatenation state ++ x
		if i < K-1 {
			return st[i*C : (i+1)*C]
		}
		return row(x, i-(K-1))
	}
	parallelFor(T, max(1, 4096/C), func(lo, hi int) {
		for t := lo; t < hi; t++ {
			d := row(dst, t)
			clear(d)
			for j := range K {
				fmaVec(d, taps.f[j*C:(j+1)*C], input(t+j))
			}
		}
	})
	putF32(taps)
	// The state keeps the last K-1 inputs; rows shift up when T < K-1.
	next := getF32(len(st))
	for r := range K - 1 {
		copy(next.f[r*C:(r+1)*C], input(T+r))
	}
	copy(st, next.f)
	putF32(next)
}
