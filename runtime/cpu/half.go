package cpu

import rt "github.com/govllm/govllm/runtime"

// halfSupported reports whether matMulHalf has kernels for weights of dt
// with rows of k elements.
func halfSupported(dt rt.DType, k int) bool {
	return hasAVX512 && (dt == rt.BF16 || dt == rt.F16) && k%32 == 0
}

// halfDecodeTask streams BF16/F16 weight rows [lo, hi) against one
// activation row.
type halfDecodeTask struct {
	f16    bool
	w      []uint16
	k      int
	x, out []float32
}

var halfDecodeTasks taskPool[halfDecodeTask]

func (t *halfDecodeTask) run(lo, hi int) {
	halfDecode(t.f16, t.w[lo*t.k:hi*t.k], t.k, t.x, t.out[lo:hi])
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
		t := halfDecodeTasks.get()
		*t = halfDecodeTask{f16: f16, w: wh, k: k, x: xf[:k], out: d}
		parallelTask(n, 64, t)
		halfDecodeTasks.put(t)
		return
	}
	t := halfMatTasks.get()
	*t = halfMatTask{f16: f16, w: wh, k: k, m: m, rowBlock: max(4, min(m, (256<<10)/(4*k))), x: xf, xs: xs, out: d, ds: ds}
	parallelTask(n, max(1, 16384/max(1, m*k)), t)
	halfMatTasks.put(t)
}

// halfMatTask runs weight rows [lo, hi) of matMulHalf against every
// activation row, rowBlock rows (about 256 KB) per pass.
type halfMatTask struct {
	f16            bool
	w              []uint16
	k, m, rowBlock int
	x              []float32
	xs             int
	out            []float32
	ds             int
}

var halfMatTasks taskPool[halfMatTask]

func (t *halfMatTask) run(lo, hi int) {
	k := t.k
	for r0 := 0; r0 < t.m; r0 += t.rowBlock {
		rows := min(t.rowBlock, t.m-r0)
		for j := lo; j < hi; j++ {
			halfRows(t.f16, t.w[j*k:(j+1)*k], t.x[r0*t.xs:], rows, t.xs, t.out[r0*t.ds+j:], t.ds)
		}
	}
}
