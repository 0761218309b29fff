package cpu

import rt "github.com/govllm/govllm/runtime"

// halfSupported reports whether matMulHalf has kernels for weights of dt
// with rows of k elements.
func halfSupported(dt rt.DType, k int) bool {
	return (hasAVX512 || hasAVX2) && (dt == rt.BF16 || dt == rt.F16) && k%32 == 0
}

// matMulHalf is matMul for BF16/F16 weights: each weight row is widened in
// registers, never stored as f32, and runs against blocks of activation
// rows that stay in L2. A decode step's one row takes the kernel that the
// rows after a batch's last tile take (four weight rows at a time), so
// that its bits are those it would have in any batch.
func matMulHalf(dst, x, w *rt.Tensor) {
	m, k, n := x.Dim(0), x.Dim(1), w.Dim(0)
	f16 := w.DType() == rt.F16
	wh := w.U16()
	d := dst.F32()
	ds := dst.Strides()[0]
	xs := x.Strides()[0]
	xf := x.F32()
	if !hasAVX512 {
		t := halfAVX2Tasks.get()
		*t = halfAVX2Task{f16: f16, w: wh, k: k, m: m, rowBlock: max(4, (128<<10)/(4*k)/4*4),
			wBlock: max(4, (16<<10)/(2*k)), x: xf, xs: xs, out: d, ds: ds}
		parallelTask(n, t.wBlock, t)
		halfAVX2Tasks.put(t)
		return
	}
	t := halfMatTasks.get()
	*t = halfMatTask{f16: f16, w: wh, k: k, n: n, m: m, rowBlock: halfRowBlock(m, k), x: xf, xs: xs, out: d, ds: ds}
	parallelTask((n+3)/4, max(1, 4096/max(1, m*k)), t)
	halfMatTasks.put(t)
}

// halfRowBlock is how many activation rows a pass of halfMatTask takes:
// about 256 KB of them, so that they stay in L2 while the weight rows go by,
// and a multiple of the tile's 6 rows.
func halfRowBlock(m, k int) int {
	return min(m, max(6, (256<<10)/(4*k)/6*6))
}

// halfMatTask runs weight rows [4·lo, 4·hi) of matMulHalf against every
// activation row, rowBlock rows per pass: in 6×4 tiles (halfTile64), each
// 4 weight rows in L1 against the pass's rows from L2; the rows beyond the
// last whole tile in 2×4 tiles (halfTail64); the n%4 last weight rows one at
// a time (halfRows).
type halfMatTask struct {
	f16               bool
	w                 []uint16
	k, n, m, rowBlock int
	x                 []float32
	xs                int
	out               []float32
	ds                int
}

var halfMatTasks taskPool[halfMatTask]

func (t *halfMatTask) run(lo, hi int) {
	k, x, out := t.k, t.x, t.out
	lo, hi = 4*lo, min(4*hi, t.n)
	for r0 := 0; r0 < t.m; r0 += t.rowBlock {
		rows := min(t.rowBlock, t.m-r0)
		tiled := rows - rows%6
		j := lo
		for ; j+4 <= hi; j += 4 {
			w := t.w[j*k : (j+4)*k]
			for r := r0; r < r0+tiled; r += 6 {
				halfTile64(t.f16, w, k, x[r*t.xs:], t.xs, out[r*t.ds+j:], t.ds)
			}
			if tiled < rows {
				halfTail64(t.f16, w, k, x[(r0+tiled)*t.xs:], t.xs, rows-tiled, out[(r0+tiled)*t.ds+j:], t.ds)
			}
		}
		for ; j < hi; j++ {
			halfRows(t.f16, t.w[j*k:(j+1)*k], x[r0*t.xs:], rows, t.xs, out[r0*t.ds+j:], t.ds)
		}
	}
}

// halfAVX2Task runs weight rows [lo, hi) of matMulHalf on CPUs without
// AVX-512 against every activation row: rowBlock rows (about 128 KB) a
// pass, wBlock weight rows (about 16 KB, in L1) against each four of them
// (halfRows4AVX2); the rows past a multiple of four (a decode step's one)
// one at a time, with the same bits (halfRows1AVX2).
type halfAVX2Task struct {
	f16                    bool
	w                      []uint16
	k, m, rowBlock, wBlock int
	x                      []float32
	xs                     int
	out                    []float32
	ds                     int
}

var halfAVX2Tasks taskPool[halfAVX2Task]

func (t *halfAVX2Task) run(lo, hi int) {
	k := t.k
	for r0 := 0; r0 < t.m; r0 += t.rowBlock {
		r1 := min(t.m, r0+t.rowBlock)
		for j0 := lo; j0 < hi; j0 += t.wBlock {
			j1 := min(hi, j0+t.wBlock)
			w := t.w[j0*k : j1*k]
			r := r0
			for ; r+4 <= r1; r += 4 {
				halfRows4AVX2(t.f16, w, k, t.x[r*t.xs:], t.xs, t.out[r*t.ds+j0:], t.ds)
			}
			for ; r < r1; r++ {
				halfRows1AVX2(t.f16, w, k, t.x[r*t.xs:r*t.xs+k], t.out[r*t.ds+j0:r*t.ds+j1])
			}
		}
	}
}
