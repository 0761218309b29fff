package cpu

import rt "github.com/govllm/govllm/runtime"

// conv1dCausal: out[t][c] = Σ_j w[c][j] · in[t-(K-1)+j][c], where inputs
// before the sequence come from state. The state then keeps the last K-1
// inputs.
func conv1dCausal(dst, x, w, state *rt.Tensor, silu bool) {
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
	a := convTasks.get()
	*a = convTask{dst: dst, x: x, st: st, taps: taps.f, c: C, k: K, silu: silu}
	parallelTask(T, max(1, 4096/C), a)
	putF32(taps)
	// The state keeps the last K-1 inputs; rows shift up when T < K-1.
	next := getF32(len(st))
	for r := range K - 1 {
		copy(next.f[r*C:(r+1)*C], a.input(T+r))
	}
	copy(st, next.f)
	putF32(next)
	convTasks.put(a)
}

type convTask struct {
	dst, x   *rt.Tensor
	st, taps []float32
	c, k     int
	silu     bool
}

// input is row i of the concatenation state ++ x.
func (a *convTask) input(i int) []float32 {
	if i < a.k-1 {
		return a.st[i*a.c : (i+1)*a.c]
	}
	return row(a.x, i-(a.k-1))
}

var convTasks taskPool[convTask]

func (a *convTask) run(lo, hi int) {
	for t := lo; t < hi; t++ {
		d := row(a.dst, t)
		clear(d)
		for j := range a.k {
			fmaVec(d, a.taps[j*a.c:(j+1)*a.c], a.input(t+j))
		}
		if a.silu {
			swigluVec(d, d, nil)
		}
	}
}

// conv1dSlots runs the one-token convolution of each row against its slot's
// state. The model takes this op on the GPU, where one launch per sequence
// is the cost; here it is the same work as a call per sequence.
func conv1dSlots(dst, x, w, states *rt.Tensor, slots []int32, silu bool) {
	for i, s := range slots {
		d, _ := dst.Slice(0, i, i+1)
		xi, _ := x.Slice(0, i, i+1)
		st, _ := states.Index(int(s))
		conv1dCausal(d, xi, w, st, silu)
	}
}
