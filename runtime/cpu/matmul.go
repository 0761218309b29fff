package cpu

import rt "github.com/govllm/govllm/runtime"

// matMul computes dst[M, N] = x[M, K] · w[N, K]ᵀ. Work is split over the
// output columns: each weight row is widened to f32 once and then dotted
// with every activation row, so a weight is read once per call whatever M.
// dot is the inner loop that an assembly kernel will replace.
func matMul(dst, x, w *rt.Tensor) {
	switch {
	case w.DType() == rt.Q8_0, q8Family(w.DType()) && q8AVX2OK():
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
	t := matMulTasks.get()
	*t = matMulTask{dst: dst, x: x, w: w}
	parallelTask(n, max(1, 16384/max(1, m*k)), t)
	matMulTasks.put(t)
}

// matMulTask is matMul's loop over weight rows lo..hi (a pooled struct, not
// a closure, which would be allocated on every call).
type matMulTask struct{ dst, x, w *rt.Tensor }

var matMulTasks taskPool[matMulTask]

func (t *matMulTask) run(lo, hi int) {
	buf := getF32(t.x.Dim(1))
	for j := lo; j < hi; j++ {
		wr := weightRow(t.w, j, buf.f)
		for i := range t.x.Dim(0) {
			row(t.dst, i)[j] = dot(row(t.x, i), wr)
		}
	}
	putF32(buf)
}

func embedding(dst, table *rt.Tensor, ids []int32) {
	eachRow(dst, rowArgs{dst: dst, a: table, ids: ids}, func(o *rowArgs, i int) {
		buf := getF32(o.a.Dim(1))
		copy(row(o.dst, i), weightRow(o.a, int(o.ids[i]), buf.f))
		putF32(buf)
	})
}

// matMulSwiGLU is the chain the op stands for: x·wᵀ into scratch, then
// silu of its gate half times its up half.
func matMulSwiGLU(dst, x, w *rt.Tensor) {
	m, n := dst.Dim(0), dst.Dim(1)
	buf := getF32(m * 2 * n)
	defer putF32(buf)
	gu, err := rt.FromF32(buf.f, m, 2*n)
	if err != nil {
		panic(err) // the buffer holds m·2n floats
	}
	matMul(gu, x, w)
	gate, _ := gu.Slice(1, 0, n)
	up, _ := gu.Slice(1, n, 2*n)
	swiGLU(dst, gate, up)
}
