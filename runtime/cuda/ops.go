//go:build linux && amd64

package cuda

import (
	"fmt"
	"maps"
	"slices"
	"unsafe"

	rt "github.com/govllm/govllm/runtime"
)

// Provider names the CUDA kernels in the registry.
var Provider = rt.Provider{Name: "cuda", Priority: 0}

// mat is a tensor seen as rows of a dense last dimension at one stride.
type mat struct {
	ptr        uintptr
	stride     int64
	rows, cols int32
}

// asMat flattens t to [rows, cols]; the leading dimensions must merge.
func asMat(name string, t *rt.Tensor) (mat, error) {
	if !t.OnDevice() {
		return mat{}, fmt.Errorf("cuda: %s (%v %v) is in host memory", name, t.DType(), t.Shape())
	}
	cols, rows := t.Dim(-1), t.Rows()
	s, err := t.MatrixStride()
	if err != nil {
		return mat{}, fmt.Errorf("cuda: %s: %w", name, err)
	}
	stride := int64(s)
	if rows <= 1 {
		stride = int64(cols) // a single row's stride is arbitrary; cuBLAS wants ≥ cols
	}
	return mat{ptr: t.DevicePtr(), stride: stride, rows: int32(rows), cols: int32(cols)}, nil
}

// rows3 is a tensor as the rows of [A, group, cols] with strides (s0, s1,
// 1): a view that asMat takes (s0 = group·stride, s1 = stride), or a
// head-split slice of wider rows ([T, H, D] with strides [S, D, 1]),
// which the kernels taking rows3 read in place.
type rows3 struct {
	ptr    uintptr
	s0, s1 int64
}

func asRows3(name string, t *rt.Tensor, group int) (rows3, error) {
	if m, err := asMat(name, t); err == nil {
		return rows3{m.ptr, int64(group) * m.stride, m.stride}, nil
	} else if t.Rank() != 3 || t.Dim(1) != group || t.Strides()[2] != 1 {
		return rows3{}, err
	}
	return rows3{t.DevicePtr(), int64(t.Strides()[0]), int64(t.Strides()[1])}, nil
}

// group is the middle dimension of a rank-3 tensor, else 1.
func group(t *rt.Tensor) int {
	if t.Rank() == 3 {
		return t.Dim(1)
	}
	return 1
}

func rowsAll(names []string, g int, ts ...*rt.Tensor) ([maxOperands]rows3, error) {
	var out [maxOperands]rows3 // an array, as mats
	for i, t := range ts {
		if t == nil {
			continue
		}
		r, err := asRows3(names[i], t, g)
		if err != nil {
			return out, err
		}
		out[i] = r
	}
	return out, nil
}

func mats(names []string, ts ...*rt.Tensor) ([maxOperands]mat, error) {
	var out [maxOperands]mat // an array: no allocation per op
	for i, t := range ts {
		m, err := asMat(names[i], t)
		if err != nil {
			return out, err
		}
		out[i] = m
	}
	return out, nil
}

// maxOperands is the most operands an op passes to mats.
const maxOperands = 6

// kernel returns the context and runs f under it, recording an error
// that names the op.
func kernel(op rt.OpID, f func(c *Context) error) {
	c, err := Open()
	if err != nil {
		// Device tensors come from an open context, so this is a caller
		// that built one by hand: there is no context to record into.
		panic(fmt.Sprintf("cuda: %s called without a CUDA context: %v", op, err))
	}
	rec := c.rec
	if rec != nil {
		err = f(c) // Step holds the thread, with the context current
	} else {
		err = c.do(func() error { return f(c) })
	}
	if err != nil {
		err = fmt.Errorf("%s on cuda: %w", op, err)
		if rec != nil && rec.ahead {
			rec.fail(err) // fails the recording, not the step running now
		} else {
			c.fail(err)
		}
	}
}

// launchEach runs an elementwise kernel over the rows of dst: 256 threads
// a block, as many blocks a row as its columns fill.
func (c *Context) launchEach(name string, dst mat, args ...karg) error {
	return c.launch2(name, int(dst.rows), int(min((dst.cols+255)/256, 64)), 256, 0, args...)
}

// grown is *s resized to n and cleared, reallocated only to grow.
func grown(s *[]int32, n int) []int32 {
	if cap(*s) < n {
		*s = make([]int32, n)
	}
	*s = (*s)[:n]
	clear(*s)
	return *s
}

// threads picks a block size for rows of n elements.
func threads(n int32) int {
	switch {
	case n >= 1024:
		return 512
	case n >= 256:
		return 256
	case n >= 128:
		return 128
	}
	return 32
}

func add(dst, a, b *rt.Tensor) {
	kernel(rt.OpAdd, func(c *Context) error {
		m, err := mats([]string{"dst", "a", "b"}, dst, a, b)
		if err != nil {
			return err
		}
		return c.launchEach("add_f32", m[0],
			p(m[0].ptr), p(m[0].stride), p(m[1].ptr), p(m[1].stride), p(m[2].ptr), p(m[2].stride), p(m[0].cols))
	})
}

func swiglu(op rt.OpID, dst, gate, up *rt.Tensor) {
	kernel(op, func(c *Context) error {
		m, err := mats([]string{"dst", "gate"}, dst, gate)
		if err != nil {
			return err
		}
		u := mat{}
		if up != nil {
			if u, err = asMat("up", up); err != nil {
				return err
			}
		}
		return c.launchEach("swiglu_f32", m[0],
			p(m[0].ptr), p(m[0].stride), p(m[1].ptr), p(m[1].stride), p(u.ptr), p(u.stride), p(m[0].cols))
	})
}

func silu(dst, x *rt.Tensor)          { swiglu(rt.OpSiLU, dst, x, nil) }
func swiGLU(dst, gate, up *rt.Tensor) { swiglu(rt.OpSwiGLU, dst, gate, up) }

func sigmoidMul(dst, x, gate *rt.Tensor) {
	kernel(rt.OpSigmoidMul, func(c *Context) error {
		m, err := mats([]string{"dst", "x", "gate"}, dst, x, gate)
		if err != nil {
			return err
		}
		return c.launchEach("sigmoid_mul_f32", m[0],
			p(m[0].ptr), p(m[0].stride), p(m[1].ptr), p(m[1].stride), p(m[2].ptr), p(m[2].stride), p(m[0].cols), p(m[2].cols))
	})
}

func rmsNormWith(op rt.OpID, dst, x, z, w *rt.Tensor, eps float32, offset int32) {
	kernel(op, func(c *Context) error {
		g := group(dst)
		r, err := rowsAll([]string{"dst", "x", "z"}, g, dst, x, z)
		if err != nil {
			return err
		}
		wp, g32, rows, cols := w.DevicePtr(), int32(g), dst.Rows(), int32(dst.Dim(-1))
		return c.launch("rms_norm_f32", rows, threads(cols), 0,
			p(r[0].ptr), p(r[0].s0), p(r[0].s1), p(r[1].ptr), p(r[1].s0), p(r[1].s1), p(wp), p(r[2].ptr), p(r[2].s0), p(r[2].s1),
			p(g32), p(cols), p(eps), p(offset))
	})
}

func rmsNorm(dst, x, w *rt.Tensor, eps float32) { rmsNormWith(rt.OpRMSNorm, dst, x, nil, w, eps, 0) }
func rmsNormOffset(dst, x, w *rt.Tensor, eps float32) {
	rmsNormWith(rt.OpRMSNormOffset, dst, x, nil, w, eps, 1)
}
func gatedRMSNorm(dst, x, z, w *rt.Tensor, eps float32) {
	rmsNormWith(rt.OpGatedRMSNorm, dst, x, z, w, eps, 0)
}

func addRMSNormOffset(dst, x, y, w *rt.Tensor, eps float32) {
	kernel(rt.OpAddRMSNormOffset, func(c *Context) error {
		m, err := mats([]string{"dst", "x", "y", "w"}, dst, x, y, w)
		if err != nil {
			return err
		}
		return c.launch("add_rms_norm_f32", int(m[0].rows), threads(m[0].cols), 0,
			p(m[0].ptr), p(m[0].stride), p(m[1].ptr), p(m[1].stride), p(m[2].ptr), p(m[2].stride), p(m[3].ptr),
			p(m[0].cols), p(eps))
	})
}

func l2Norm(dst, x *rt.Tensor, eps float32) {
	kernel(rt.OpL2Norm, func(c *Context) error {
		g := group(dst)
		r, err := rowsAll([]string{"dst", "x"}, g, dst, x)
		if err != nil {
			return err
		}
		g32, rows, cols := int32(g), dst.Rows(), int32(dst.Dim(-1))
		return c.launch("l2_norm_f32", rows, threads(cols), 0,
			p(r[0].ptr), p(r[0].s0), p(r[0].s1), p(r[1].ptr), p(r[1].s0), p(r[1].s1), p(g32), p(cols), p(eps))
	})
}

func splitQueryGate(q, gate, qg *rt.Tensor) {
	kernel(rt.OpSplitQueryGate, func(c *Context) error {
		g := q.Dim(1)
		r, err := rowsAll([]string{"q", "gate", "qg"}, g, q, gate, qg)
		if err != nil {
			return err
		}
		g32, cols := int32(g), int32(q.Dim(2))
		return c.launch("split_query_gate_f32", q.Rows(), threads(cols), 0,
			p(r[0].ptr), p(r[0].s0), p(r[0].s1), p(r[1].ptr), p(r[1].s0), p(r[1].s1), p(r[2].ptr), p(r[2].s0), p(r[2].s1),
			p(g32), p(cols))
	})
}

func ropeNeoX(x *rt.Tensor, positions []int32, rotaryDim int, theta float32) {
	if rotaryDim == 0 {
		return
	}
	kernel(rt.OpRoPENeoX, func(c *Context) error {
		r, err := asRows3("x", x, x.Dim(1))
		if err != nil {
			return err
		}
		pos, err := c.hostInts(positions)
		if err != nil {
			return err
		}
		heads, rd := int32(x.Dim(1)), int32(rotaryDim)
		return c.launch("rope_neox_f32", x.Rows(), threads(rd/2), 0,
			p(r.ptr), p(r.s0), p(r.s1), p(pos), p(heads), p(rd), p(theta))
	})
}

func attnPreamble(q, gate, qg, k, qNorm, kNorm *rt.Tensor, positions []int32, pp rt.PreambleParams) {
	kernel(rt.OpAttnPreamble, func(c *Context) error {
		m, err := mats([]string{"q", "gate", "q_norm", "k_norm"}, q, gate, qNorm, kNorm)
		if err != nil {
			return err
		}
		qgv, err := asRows3("qg", qg, qg.Dim(1))
		if err != nil {
			return err
		}
		kv, err := asRows3("k", k, k.Dim(1))
		if err != nil {
			return err
		}
		pos, err := c.hostInts(positions)
		if err != nil {
			return err
		}
		var kc, vc, slots uintptr // with a cache, the keys and v go there too
		var vv rows3
		if pp.KCache != nil {
			kc, vc = pp.KCache.DevicePtr(), pp.VCache.DevicePtr()
			if vv, err = asRows3("v", pp.V, pp.V.Dim(1)); err != nil {
				return err
			}
			if slots, err = c.hostInts(pp.Slots); err != nil {
				return err
			}
		}
		hq, hkv, dim := int32(q.Dim(1)), int32(k.Dim(1)), int32(q.Dim(2))
		rd := int32(pp.RotaryDim)
		rows := q.Dim(0) * int(hq+hkv)
		return c.launch("attn_preamble_f32", rows, threads(dim), 0,
			p(m[0].ptr), p(m[0].stride), p(m[1].ptr), p(m[1].stride), p(qgv.ptr), p(qgv.s0), p(qgv.s1), p(kv.ptr), p(kv.s0), p(kv.s1),
			p(m[2].ptr), p(m[3].ptr), p(pos), p(hq), p(hkv), p(dim), p(rd), p(pp.Theta), p(pp.Eps),
			p(kc), p(vc), p(vv.ptr), p(vv.s0), p(vv.s1), p(slots))
	})
}

func gdnGating(g, beta, a, b, aLog, dtBias *rt.Tensor) {
	kernel(rt.OpGDNGating, func(c *Context) error {
		m, err := mats([]string{"g", "beta", "a", "b", "a_log", "dt_bias"}, g, beta, a, b, aLog, dtBias)
		if err != nil {
			return err
		}
		return c.launch("gdn_gating_f32", int(m[0].rows), threads(m[0].cols), 0,
			p(m[0].ptr), p(m[0].stride), p(m[1].ptr), p(m[1].stride), p(m[2].ptr), p(m[2].stride), p(m[3].ptr), p(m[3].stride),
			p(m[4].ptr), p(m[5].ptr), p(m[0].cols))
	})
}

var embedKernels = map[rt.DType]string{rt.F32: "embed_f32", rt.BF16: "embed_bf16", rt.F16: "embed_f16"}

func embedding(dst, table *rt.Tensor, ids []int32) {
	kernel(rt.OpEmbedding, func(c *Context) error {
		m, err := mats([]string{"dst", "table"}, dst, table)
		if err != nil {
			return err
		}
		dev, err := c.hostInts(ids)
		if err != nil {
			return err
		}
		if typ, ok := quantTypes[table.DType()]; ok {
			rowBytes := int64(table.DType().ByteLen(int(m[0].cols)))
			return c.launch("embed_q", len(ids), 128, 0, p(m[0].ptr), p(m[0].stride), p(m[1].ptr), p(rowBytes), p(dev), p(m[0].cols), p(typ))
		}
		return c.launch(embedKernels[table.DType()], len(ids), threads(m[0].cols), 0, p(m[0].ptr), p(m[0].stride), p(m[1].ptr), p(dev), p(m[0].cols))
	})
}

// matMul runs on cuBLAS, but for 16-bit weights and one row on the GEMV
// kernel. On cuBLAS, 16-bit weights take activations as two 16-bit parts
// (splitGemm): rounding them to bf16 alone put the oracle models 0.4 off.
func matMul(dst, x, w *rt.Tensor) {
	kernel(rt.OpMatMul, func(c *Context) error {
		m, err := mats([]string{"dst", "x", "w"}, dst, x, w)
		if err != nil {
			return err
		}
		return c.matMul(m[:3], w.DType())
	})
}

// matMul runs dst = x·wᵀ for m = (dst, x, w).
func (c *Context) matMul(m []mat, dt rt.DType) error {
	M, N, K := int(m[1].rows), int(m[2].rows), int(m[1].cols)
	switch dt {
	case rt.F32:
		return c.gemm(m[0].ptr, int(m[0].stride), m[1].ptr, cudaR32F, int(m[1].stride), m[2].ptr, cudaR32F, M, N, K)
	case rt.BF16, rt.F16:
		if takesGEMV16(m, M, K) {
			// One row: bound by reading the weight, which the GEMV
			// kernel does once, with x in f32. (Up to 8 rows in one
			// GEMV ran at 188 µs where one ran at 54 µs and cuBLAS at
			// 16 rows at 70 µs on a 128 MiB weight.)
			return c.gemv16(m, dt, 0)
		}
		typ, f16 := int32(cudaR16BF), int32(0)
		if dt == rt.F16 {
			typ, f16 = cudaR16F, 1
		}
		return c.splitGemm(m, typ, f16, m[2].ptr, M, N, K)
	}
	if _, ok := quantTypes[dt]; ok {
		return matMulQuant(c, m, dt, M, N, K)
	}
	return fmt.Errorf("no cuda matmul for %v weights", dt)
}

// gemv16 launches gemv_16 for one row of x, or with glu > 0 gemv_16_glu:
// w is [gate; up] of glu rows each and d gets silu(gate·x)·(up·x).
func (c *Context) gemv16(m []mat, dt rt.DType, glu int32) error {
	N, K := int(m[2].rows), int(m[1].cols)
	var f16 int32
	if dt == rt.F16 {
		f16 = 1
	}
	nn, kk, rows, split := int32(N), int32(K), int32(gemvRows), gemvSplit(N, K)
	slots := (N + gemvRows - 1) / gemvRows // a glu warp takes 2 gate rows and their 2 up rows: as many
	grid := (slots*int(split) + 7) / 8
	name := "gemv_16"
	if glu > 0 {
		name = "gemv_16_glu"
	}
	if r := c.residentBlocks(name); r > 0 && grid > r {
		grid = r // one wave striding over the blocks
	}
	if glu > 0 {
		return c.launch("gemv_16_glu", grid, 256, 0, p(m[0].ptr), p(m[1].ptr), p(m[2].ptr),
			p(nn), p(kk), p(f16), p(split), p(rows), p(glu))
	}
	return c.launch("gemv_16", grid, 256, 0, p(m[0].ptr), p(m[1].ptr), p(m[2].ptr),
		p(nn), p(kk), p(f16), p(split), p(rows))
}

// takesGEMV16 says whether a 16-bit matmul takes gemv_16: one row of x, and
// 16-byte loads.
func takesGEMV16(m []mat, M, K int) bool {
	return M == 1 && K%8 == 0 && m[1].ptr%16 == 0 && m[2].ptr%16 == 0
}

// matMulSwiGLU runs an MLP's gate and up projections and its SwiGLU. One
// row of x (a decode step) takes a GEMV whose warps compute a gate row and
// its up row together and write silu(g)·u, a launch and a pass less; more
// rows, and f32 weights, run the product into scratch and then swiglu.
func matMulSwiGLU(dst, x, w *rt.Tensor) {
	kernel(rt.OpMatMulSwiGLU, func(c *Context) error {
		m, err := mats([]string{"dst", "x", "w"}, dst, x, w)
		if err != nil {
			return err
		}
		dt, M, I, K := w.DType(), int(m[1].rows), m[0].cols, int(m[1].cols)
		if typ, quant := quantTypes[dt]; quant && takesGEMVQ(m[:3], M) {
			rowBytes, kk := int64(dt.ByteLen(K)), int32(K)
			return c.launch("gemv_qr_swiglu", (int(I)+3)/4, 256, 0, p(m[0].ptr), p(m[1].ptr), p(m[2].ptr), p(rowBytes), p(I), p(kk), p(typ))
		}
		if (dt == rt.BF16 || dt == rt.F16) && takesGEMV16(m[:3], M, K) {
			return c.gemv16(m[:3], dt, I)
		}
		gu, err := c.scratchBytes(12, uintptr(4*M*2*int(I)))
		if err != nil {
			return err
		}
		prod := m
		prod[0] = mat{ptr: gu, stride: 2 * int64(I), rows: int32(M), cols: 2 * I}
		if err := c.matMul(prod[:3], dt); err != nil {
			return err
		}
		up := gu + 4*uintptr(I)
		return c.launchEach("swiglu_f32", m[0],
			p(m[0].ptr), p(m[0].stride), p(gu), p(prod[0].stride), p(up), p(prod[0].stride), p(m[0].cols))
	})
}

// gemvRows is the weight rows a warp of gemv_16 takes, and gemvSplit the
// warps a row's K is split over: from 2 until there are ~2k warps, while
// each lane still has a 16-byte piece of its share. On the H200
// (BenchmarkDecodeGEMVs, a sweep of 1, 2, 4 rows × splits 1–8) this streams
// the 0.8B shape's lm_head at 4.3 TB/s (one row a warp: 2.73) and takes a
// 4 MiB matrix in 5 µs in a graph.
const gemvRows = 4

func gemvSplit(N, K int) int32 {
	split := 2
	for split < 8 && N/gemvRows*split < 2048 && K/8/(2*split) >= 32 {
		split *= 2
	}
	return int32(split)
}

// quantTypes numbers the block formats as kernels.cu's unit_q and load8
// do.
var quantTypes = map[rt.DType]int32{rt.Q8_0: 0, rt.Q4_K: 1, rt.Q6_K: 2, rt.Q5_K: 3, rt.Q4_0: 4, rt.Q4_1: 5,
	rt.Q5_0: 6, rt.Q5_1: 7, rt.IQ4_NL: 8, rt.IQ4_XS: 9, rt.Q2_K: 13, rt.Q3_K: 14}

// quantGEMVRows is the most rows of x that take the fused dequantising
// GEMV (the weight read once for all of them); more rows dequantise the
// weight to bf16 for cuBLAS.
const quantGEMVRows = 8

// takesGEMVQ says whether a quantized matmul takes gemv_qr: one row of
// x, 16-byte aligned.
func takesGEMVQ(m []mat, M int) bool { return M == 1 && m[1].ptr%16 == 0 }

func matMulQuant(c *Context, m []mat, dt rt.DType, M, N, K int) error {
	typ, rowBytes := quantTypes[dt], int64(dt.ByteLen(K))
	mm, nn, kk := int32(M), int32(N), int32(K)
	if takesGEMVQ(m, M) { // load8 numbers the block types as quantTypes does
		if N >= 32768 {
			return c.launch("gemv_qr4", (N+31)/32, 256, 0, p(m[0].ptr), p(m[1].ptr), p(m[2].ptr), p(rowBytes), p(nn), p(kk), p(typ))
		}
		return c.launch("gemv_qr1", (N+7)/8, 256, 0, p(m[0].ptr), p(m[1].ptr), p(m[2].ptr), p(rowBytes), p(nn), p(kk), p(typ))
	}
	if M <= quantGEMVRows {
		return c.launch("gemv_q", (N+7)/8, 256, 0, p(m[0].ptr), p(m[0].stride), p(m[1].ptr), p(m[1].stride),
			p(m[2].ptr), p(rowBytes), p(mm), p(nn), p(kk), p(typ))
	}
	wt, err := c.scratchBytes(3, uintptr(2*N*K))
	if err != nil {
		return err
	}
	units := N * K / 8
	if err := c.launch("dequant_q_bf16", (units+255)/256, 256, 0, p(wt), p(m[2].ptr), p(rowBytes), p(nn), p(kk), p(typ)); err != nil {
		return err
	}
	return c.splitGemm(m, cudaR16BF, 0, wt, M, N, K)
}

// splitGemm computes dst = x·wᵀ for a 16-bit w on cuBLAS with x split into
// hi and lo 16-bit parts, stacked as 2M rows of one GEMM (the weight read
// once), whose two halves of the output are then added.
func (c *Context) splitGemm(m []mat, typ, f16 int32, w uintptr, M, N, K int) error {
	xt, err := c.scratchBytes(1, uintptr(2*2*M*K))
	if err != nil {
		return err
	}
	y, err := c.scratchBytes(7, uintptr(4*2*M*N))
	if err != nil {
		return err
	}
	mm, nn := int32(M), int32(N)
	if err := c.launch("split_16", M, threads(m[1].cols), 0, p(xt), p(m[1].ptr), p(m[1].stride), p(m[1].cols), p(mm), p(f16)); err != nil {
		return err
	}
	if err := c.gemm(y, N, xt, typ, K, w, typ, 2*M, N, K); err != nil {
		return err
	}
	return c.launch2("sum_halves", (N+4*256-1)/(4*256), min(M, 65535), 256, 0, p(m[0].ptr), p(m[0].stride), p(y), p(mm), p(nn))
}

func kvWrite(cache, x *rt.Tensor, slots []int32) {
	kernel(rt.OpKVWrite, func(c *Context) error {
		cm, err := asMat("cache", cache)
		if err != nil {
			return err
		}
		xv, err := x.Reshape(x.Dim(0), -1)
		if err != nil {
			return fmt.Errorf("x: %w", err)
		}
		xm, err := asMat("x", xv)
		if err != nil {
			return err
		}
		dev, err := c.hostInts(slots)
		if err != nil {
			return err
		}
		width := int32(cache.Dim(1) * cache.Dim(2))
		return c.launch("kv_write_f32", len(slots), threads(width), 0, p(cm.ptr), p(xm.ptr), p(xm.stride), p(dev), p(width))
	})
}

func conv1dCausal(dst, x, w, state *rt.Tensor, silu bool) {
	conv1d(rt.OpConv1dCausal, dst, x, w, state, nil, silu)
}

func conv1dSlots(dst, x, w, states *rt.Tensor, slots []int32, silu bool) {
	conv1d(rt.OpConv1dSlots, dst, x, w, states, slots, silu)
}

// conv1d runs the kernel over x as one sequence, or with slots as one
// token of each of len(slots) sequences.
func conv1d(op rt.OpID, dst, x, w, state *rt.Tensor, slots []int32, silu bool) {
	kernel(op, func(c *Context) error {
		m, err := mats([]string{"dst", "x", "w", "state"}, dst, x, w, state)
		if err != nil {
			return err
		}
		T, C, K := int32(x.Dim(0)), int32(x.Dim(1)), int32(w.Dim(1))
		if K-1 > 16 {
			return fmt.Errorf("kernel width %d over the 17 the kernel keeps", K)
		}
		dslots, items, err := slotArgs(c, slots, &T)
		if err != nil {
			return err
		}
		act := int32(0)
		if silu {
			act = 1
		}
		warps := max(1, min(int(T), 8)) // warps of a block split the tokens
		return c.launch2("conv1d_causal_f32", int((C+31)/32), items, 32*warps, 0,
			p(m[0].ptr), p(m[0].stride), p(m[1].ptr), p(m[1].stride), p(m[2].ptr), p(m[3].ptr), p(dslots), p(T), p(C), p(K), p(act))
	})
}

// slotArgs uploads the slots of a decode-step call (none: one sequence of
// *T tokens) and returns their address and the number of sequences; with
// slots each sequence has one token.
func slotArgs(c *Context, slots []int32, T *int32) (uintptr, int, error) {
	if slots == nil {
		return 0, 1, nil
	}
	*T = 1
	dev, err := c.hostInts(slots)
	return dev, len(slots), err
}

// deltaRule runs the gated delta rule token by token on the GPU; the
// chunked op takes the same kernel (see the note in Register).
func deltaRule(op rt.OpID) rt.DeltaRuleRecurrentKernel {
	return func(out, q, k, v, g, beta, state *rt.Tensor, dp rt.DeltaRuleParams) {
		deltaRuleLaunch(op, out, q, k, v, g, beta, state, nil, dp)
	}
}

func deltaRuleSlots(out, q, k, v, g, beta, states *rt.Tensor, slots []int32, dp rt.DeltaRuleParams) {
	deltaRuleLaunch(rt.OpDeltaRuleSlots, out, q, k, v, g, beta, states, slots, dp)
}

// deltaChunk is the tokens the delta rule stages in shared memory at once
// (DR_CHUNK in kernels.cu); a block of 128 threads holds 128/lanes columns
// of a head's state, each in the registers of its lanes.
const deltaChunk = 16

// deltaRuleKernels[wide][norm]: 8 lanes a column (wide) or 4, q and k
// normalised in the kernel (norm) or not.
var deltaRuleKernels = [2][2]string{
	{"delta_rule_narrow_f32", "delta_rule_narrow_qknorm_f32"},
	{"delta_rule_f32", "delta_rule_qknorm_f32"},
}

func deltaRuleLaunch(op rt.OpID, out, q, k, v, g, beta, state *rt.Tensor, slots []int32, dp rt.DeltaRuleParams) {
	kernel(op, func(c *Context) error {
		m, err := mats([]string{"g", "beta", "state"}, g, beta, state)
		if err != nil {
			return err
		}
		T, hk, hv := int32(q.Dim(0)), int32(q.Dim(1)), int32(v.Dim(1))
		// q, k, v: views of the conv output, read in place
		r, err := rowsAll([]string{"q", "k"}, int(hk), q, k)
		if err != nil {
			return err
		}
		rv, err := rowsAll([]string{"out", "v"}, int(hv), out, v)
		if err != nil {
			return err
		}
		dk, dv := int32(q.Dim(2)), int32(v.Dim(2))
		var tiled int32
		if dp.TiledHeads {
			tiled = 1
		}
		dslots, items, err := slotArgs(c, slots, &T)
		if err != nil {
			return err
		}
		if dk%16 != 0 || dk > 128 {
			return fmt.Errorf("key head dim %d: the kernel takes multiples of 16 up to 128", dk)
		}
		// 8 lanes a column halve a token's serial work over a prompt; a
		// decode step has blocks enough (one set per sequence) and each
		// block's staging is a fixed cost, so it keeps 4.
		wide, norm := dk%32 == 0 && slots == nil, dp.QKNormEps > 0
		name, lanes := deltaRuleKernels[b2i(wide)][b2i(norm)], 4
		if wide {
			lanes = 8
		}
		cols := 128 / lanes
		groups := (int(dv) + cols - 1) / cols
		var aLog, dtBias uintptr // gating in the kernel (null: g and beta come gated)
		if dp.ALog != nil {
			aLog, dtBias = dp.ALog.DevicePtr(), dp.DtBias.DevicePtr()
		}
		smem := 4 * deltaChunk * (2*int(dk) + cols + 2) // q', k, v, e, β of a chunk
		return c.launch2(name, int(hv)*groups, items, 128, smem,
			p(rv[0].ptr), p(rv[0].s0), p(rv[0].s1), p(r[0].ptr), p(r[0].s0), p(r[0].s1), p(r[1].ptr), p(r[1].s0), p(r[1].s1),
			p(rv[1].ptr), p(rv[1].s0), p(rv[1].s1), p(m[0].ptr), p(m[0].stride), p(m[1].ptr), p(m[1].stride), p(m[2].ptr),
			p(dslots), p(T), p(hk), p(hv), p(dk), p(dv), p(tiled), p(dp.QKNormEps), p(aLog), p(dtBias))
	})
}

// deltaNetStep runs a DeltaNet decode step as one launch, a block per
// (key head, sequence) (see deltanet_step_f32).
func deltaNetStep(s *rt.DeltaNetStepArgs) {
	kernel(rt.OpDeltaNetStep, func(c *Context) error {
		hv, dv := s.Out.Dim(1), s.Out.Dim(2)
		if s.KeyDim%16 != 0 || s.KeyDim > 128 || dv > 256 {
			return fmt.Errorf("key head dim %d, value head dim %d: the kernel takes key dims in multiples of 16 up to 128 and value dims up to 256", s.KeyDim, dv)
		}
		m, err := mats([]string{"qkv", "a", "b"}, s.QKV, s.A, s.B)
		if err != nil {
			return err
		}
		r, err := rowsAll([]string{"out", "z"}, hv, s.Out, s.Z)
		if err != nil {
			return err
		}
		slots, err := c.hostInts(s.Slots)
		if err != nil {
			return err
		}
		convW, convStates, recStates, norm := s.ConvW.DevicePtr(), s.ConvStates.DevicePtr(), s.RecStates.DevicePtr(), s.Norm.DevicePtr()
		aLog, dtBias := s.Rule.ALog.DevicePtr(), s.Rule.DtBias.DevicePtr()
		hk, hv32, dk, dv32, k := int32(s.KeyHeads), int32(hv), int32(s.KeyDim), int32(dv), int32(s.ConvW.Dim(1))
		tiled := int32(b2i(s.Rule.TiledHeads))
		threads := 4 * ((dv + 7) / 8 * 8) // 4 lanes a column, whole warps
		return c.launch2("deltanet_step_f32", s.KeyHeads, len(s.Slots), threads, 0,
			p(r[0].ptr), p(r[0].s0), p(r[0].s1), p(m[0].ptr), p(m[0].stride), p(r[1].ptr), p(r[1].s0), p(r[1].s1),
			p(m[1].ptr), p(m[1].stride), p(m[2].ptr), p(m[2].stride), p(convW), p(convStates), p(recStates), p(slots),
			p(hk), p(hv32), p(dk), p(dv32), p(k), p(tiled), p(s.Rule.QKNormEps), p(aLog), p(dtBias), p(norm), p(s.NormEps))
	})
}

func attention(dst, q, k, v *rt.Tensor, seqs []rt.AttnSeq, blockSize int, scale float32) {
	kernel(rt.OpAttention, func(c *Context) error {
		m, err := mats([]string{"dst", "q", "k", "v"}, dst, q, k, v)
		if err != nil {
			return err
		}
		n := q.Dim(0)
		hq, hkv, dim := int32(q.Dim(1)), int32(k.Dim(1)), int32(q.Dim(2))
		if dim > 256 {
			return fmt.Errorf("head dim %d over 256", dim)
		}
		if dim%4 == 0 && slices.ContainsFunc(seqs, func(s rt.AttnSeq) bool { return s.Len > 1 }) {
			return attentionTiles(c, m[:4], seqs, hq, hkv, dim, int32(blockSize), scale)
		}
		// The host arrays are copied as they are staged, so the context's
		// buffers serve every call.
		rowpos, rowtab := grown(&c.hostRows[0], n), grown(&c.hostRows[1], n)
		tabs := c.hostRows[2][:0]
		for _, s := range seqs {
			off := int32(len(tabs))
			tabs = append(tabs, s.Blocks...)
			for i := range s.Len {
				rowpos[s.Row+i] = int32(s.Start + i)
				rowtab[s.Row+i] = off
			}
		}
		c.hostRows[2] = tabs
		pp, err := c.hostInts(rowpos)
		if err != nil {
			return err
		}
		pt, err := c.hostInts(rowtab)
		if err != nil {
			return err
		}
		pb, err := c.hostInts(tabs)
		if err != nil {
			return err
		}
		// A block's warps split the keys. Few blocks (a decode step of few
		// sequences) get 32 warps, so that each walks few keys: the walk is
		// a chain of dependent loads.
		bs, warps := int32(blockSize), 4
		if n*int(hq) < 2*c.SMs {
			warps = 32
		}
		return c.launch("attention_f32", n*int(hq), 32*warps, 0,
			p(m[0].ptr), p(m[0].stride), p(m[1].ptr), p(m[1].stride), p(m[2].ptr), p(m[3].ptr),
			p(pp), p(pt), p(pb), p(hq), p(hkv), p(dim), p(bs), p(scale))
	})
}

// attnTileRows is the query rows of a block of attention_tile_f32
// (AT_ROWS), attnTileKeys the keys it stages at once (AT_KEYS).
const attnTileRows, attnTileKeys = 16, 32

// attentionTiles runs a step that holds a prompt (more than one row of a
// sequence) as tiles of consecutive rows of one sequence; a decode row in
// the same step is a tile of one.
func attentionTiles(c *Context, m []mat, seqs []rt.AttnSeq, hq, hkv, dim, bs int32, scale float32) error {
	var tiles, tabs []int32
	for _, s := range seqs {
		off := int32(len(tabs))
		tabs = append(tabs, s.Blocks...)
		for i := 0; i < s.Len; i += attnTileRows {
			tiles = append(tiles, int32(s.Row+i), int32(s.Start+i), int32(min(attnTileRows, s.Len-i)), off)
		}
	}
	pt, err := c.hostInts(tiles)
	if err != nil {
		return err
	}
	pb, err := c.hostInts(tabs)
	if err != nil {
		return err
	}
	d := int(dim)
	smem := 4 * (attnTileRows*d + attnTileKeys*(d+4) + attnTileKeys*d + 4*attnTileKeys*4)
	return c.launch("attention_tile_f32", len(tiles)/4*int(hq), 128, smem,
		p(m[0].ptr), p(m[0].stride), p(m[1].ptr), p(m[1].stride), p(m[2].ptr), p(m[3].ptr),
		p(pt), p(pb), p(hq), p(hkv), p(dim), p(bs), p(scale))
}

func gatherRows(dst, x *rt.Tensor, rows []int32) {
	kernel(rt.OpGatherRows, func(c *Context) error {
		m, err := mats([]string{"dst", "x"}, dst, x)
		if err != nil {
			return err
		}
		dev, err := c.hostInts(rows)
		if err != nil {
			return err
		}
		return c.launch("gather_rows_f32", len(rows), threads(m[0].cols), 0, p(m[0].ptr), p(m[0].stride), p(m[1].ptr), p(m[1].stride), p(dev), p(m[0].cols))
	})
}

// argmaxChunk is the columns an argmax_part_f32 block takes: a 248k-token
// row is 61 blocks.
const argmaxChunk = 4096

func argmax(dst, x *rt.Tensor) {
	kernel(rt.OpArgmax, func(c *Context) error {
		m, err := mats([]string{"dst", "x"}, dst, x)
		if err != nil {
			return err
		}
		parts := (int(m[1].cols) + argmaxChunk - 1) / argmaxChunk
		part, err := c.scratchBytes(13, uintptr(8*parts*int(m[1].rows)))
		if err != nil {
			return err
		}
		if err := c.launch2("argmax_part_f32", parts, int(m[1].rows), 256, 0, p(part), p(m[1].ptr), p(m[1].stride), p(m[1].cols), p(int32(argmaxChunk))); err != nil {
			return err
		}
		return c.launch("argmax_final", int(m[1].rows), 32, 0, p(m[0].ptr), p(part), p(int32(parts)))
	})
}

// expertTypes numbers the expert weight types as kernels.cu's load8 does:
// the block types, and 16-bit and f32 weights.
var expertTypes = func() map[rt.DType]int32 {
	m := maps.Clone(quantTypes)
	m[rt.BF16], m[rt.F16], m[rt.F32] = 10, 11, 12
	return m
}()

// How the experts run, by the step's tokens: up to moeGEMVTokens, GEMVs
// per assignment (token, expert), each reading its expert's rows (a
// decode step of few sequences: the experts are mostly distinct); up to
// moeTileTokens, the assignments sorted by expert into tiles of 8 and a
// GEMV per tile, reading an expert's rows once a tile; beyond, tiles of 32
// assignments × 64 rows (moe_gemm), the weight staged in shared memory.
const moeGEMVTokens, moeTileTokens = 4, 128

// moeExperts routes on the GPU (router_topk_f32) and runs the experts
// from there, so nothing waits for the host and a step with experts is a
// graph like any other.
func moeExperts(out, x, logits *rt.Tensor, ex *rt.Experts) {
	kernel(rt.OpMoEExperts, func(c *Context) error {
		m, err := mats([]string{"out", "x", "logits"}, out, x, logits)
		if err != nil {
			return err
		}
		E, k, H, I := len(ex.Gate), ex.TopK, ex.Hidden(), ex.Inter()
		T := int(m[1].rows)
		switch {
		case E > 1024 || k > 32:
			return fmt.Errorf("top-%d of %d experts: the kernels keep up to 1024 experts and 32 picks", k, E)
		case H%8 != 0 || I%8 != 0:
			return fmt.Errorf("hidden size %d and expert width %d must be multiples of 8", H, I)
		case m[1].ptr%16 != 0 || m[1].stride%4 != 0:
			return fmt.Errorf("x rows must be 16-byte aligned (x at %#x, row stride %d floats)", m[1].ptr, m[1].stride)
		}
		tab, err := c.expertTables(ex)
		if err != nil {
			return err
		}
		types, rowBytes, tables := tab.types, tab.rowBytes, tab.dev
		A := T * k
		if A == 0 {
			return nil
		}
		ids, err := c.scratchBytes(0, uintptr(4*A))
		if err != nil {
			return err
		}
		w, err := c.scratchBytes(2, uintptr(4*A))
		if err != nil {
			return err
		}
		h, err := c.scratchBytes(8, uintptr(4*A*I))
		if err != nil {
			return err
		}
		kk, ee, hh, ii := int32(k), int32(E), int32(H), int32(I)
		if err := c.launch("router_topk_f32", T, 32, 0, p(ids), p(w), p(m[2].ptr), p(m[2].stride), p(ee), p(kk)); err != nil {
			return err
		}
		if T <= moeGEMVTokens {
			if err := c.launch2("moe_gate_up", (I+7)/8, A, 256, 0, p(h), p(m[1].ptr), p(m[1].stride), p(ids),
				p(tables[0]), p(tables[1]), p(rowBytes[0]), p(rowBytes[1]), p(types[0]), p(types[1]), p(kk), p(hh), p(ii)); err != nil {
				return err
			}
			return c.launch2("moe_down", (H+3)/4, T, 256, 0, p(m[0].ptr), p(m[0].stride), p(h), p(ids), p(w),
				p(tables[2]), p(rowBytes[2]), p(types[2]), p(kk), p(hh), p(ii))
		}
		bm := moeTileRows
		if T <= moeTileTokens {
			bm = moeGEMVTile
		}
		tiles := (A+bm-1)/bm + E
		order, err := c.scratchBytes(10, uintptr(4*tiles*bm))
		if err != nil {
			return err
		}
		tileExpert, err := c.scratchBytes(11, uintptr(4*tiles))
		if err != nil {
			return err
		}
		y, err := c.scratchBytes(9, uintptr(4*A*H))
		if err != nil {
			return err
		}
		aa, nt, div, bm32 := int32(A), int32(tiles), int32(k), int32(bm)
		if err := c.launch("moe_align", 1, 1024, 0, p(order), p(tileExpert), p(ids), p(aa), p(ee), p(nt), p(bm32)); err != nil {
			return err
		}
		if bm == moeGEMVTile {
			if err := c.launch2("moe_gate_up_tile", tiles, (I+7)/8, 256, 0, p(h), p(m[1].ptr), p(m[1].stride), p(div),
				p(order), p(tileExpert), p(tables[0]), p(tables[1]), p(rowBytes[0]), p(rowBytes[1]), p(types[0]), p(types[1]), p(hh), p(ii)); err != nil {
				return err
			}
			if err := c.launch2("moe_down_tile", tiles, (H+15)/16, 256, 0, p(y), p(h), p(order), p(tileExpert),
				p(tables[2]), p(rowBytes[2]), p(types[2]), p(hh), p(ii)); err != nil {
				return err
			}
		} else {
			one := int32(1)
			var none uintptr
			sh, sy := int64(I), int64(H)
			if err := c.launch2("moe_gemm", tiles, (I+moeTileCols-1)/moeTileCols, 256, 0, p(h), p(sh), p(m[1].ptr), p(m[1].stride), p(div),
				p(order), p(tileExpert), p(tables[0]), p(tables[1]), p(rowBytes[0]), p(rowBytes[1]), p(types[0]), p(types[1]), p(hh), p(ii)); err != nil {
				return err
			}
			if err := c.launch2("moe_gemm", tiles, (H+moeTileCols-1)/moeTileCols, 256, 0, p(y), p(sy), p(h), p(sh), p(one),
				p(order), p(tileExpert), p(tables[2]), p(none), p(rowBytes[2]), p(rowBytes[2]), p(types[2]), p(types[2]), p(ii), p(hh)); err != nil {
				return err
			}
		}
		return c.launch("moe_combine", T, threads(hh), 0, p(m[0].ptr), p(m[0].stride), p(y), p(w), p(kk), p(hh))
	})
}

// expertTable is an Experts' weight types, row sizes and the device
// tables of their row-0 addresses (gate, up, down), made at first use.
type expertTable struct {
	types    [3]int32
	rowBytes [3]int64
	dev      [3]uintptr
}

// expertTables returns ex's tables, uploading them the first time: they
// are the same every step, so a step stages nothing for them.
func (c *Context) expertTables(ex *rt.Experts) (*expertTable, error) {
	if t, ok := c.experts[ex]; ok {
		return t, nil
	}
	if err := c.flush(); err != nil { // an upload waits: not inside a recording
		return nil, err
	}
	t := &expertTable{}
	for r, ws := range [3][]*rt.Tensor{ex.Gate, ex.Up, ex.Down} {
		typ, ok := expertTypes[ws[0].DType()]
		if !ok {
			return nil, fmt.Errorf("no cuda kernel for %v experts", ws[0].DType())
		}
		t.types[r], t.rowBytes[r] = typ, int64(ws[0].DType().ByteLen(ws[0].Dim(1)))
		ptrs := make([]uint64, len(ws))
		for e, w := range ws {
			ptrs[e] = uint64(w.DevicePtr())
		}
		if err := check("cuMemAlloc", cuMemAlloc(&t.dev[r], uintptr(8*len(ptrs)))); err != nil {
			return nil, err
		}
		if err := check("cuMemcpyHtoD", cuMemcpyHtoD(t.dev[r], unsafe.Pointer(unsafe.SliceData(ptrs)), uintptr(8*len(ptrs)))); err != nil {
			return nil, err
		}
	}
	if c.experts == nil {
		c.experts = map[*rt.Experts]*expertTable{}
	}
	c.experts[ex] = t
	return t, nil
}

// moeTileRows and moeTileCols are moe_gemm's tile (MOE_BM, MOE_BN),
// moeGEMVTile the tile of the grouped GEMVs (MOE_TILE).
const moeTileRows, moeTileCols, moeGEMVTile = 32, 64, 8

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
