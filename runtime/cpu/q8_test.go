package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/quant"
)

func randF32(rng *rand.Rand, n int, scale float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64()) * scale
	}
	return x
}

// TestQ8KernelsAgree holds the assembly Q8_0 kernels to the Go ones:
// quantization and preparation bit for bit, the dot products to float
// rounding.
func TestQ8KernelsAgree(t *testing.T) {
	if !hasVNNI {
		t.Skip("no AVX-512 VNNI: only the Go kernels run here")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range []int{32, 64, 96, 1024, 3584} {
		np := q8Pairs(k)
		const rows = 7
		x := randF32(rng, rows*k, 1)
		x[5] = 0
		clear(x[k : k+32]) // an all-zero block
		qa, qg := make([]byte, rows*np*64), make([]byte, rows*np*64)
		sa, sg := make([]float32, rows*np*16), make([]float32, rows*np*16)
		for r := range rows {
			quantizeQ8X(x[r*k:(r+1)*k], qa[r*np*64:], sa[r*np*16:])
			quantizeQ8XGo(x[r*k:(r+1)*k], qg[r*np*64:], sg[r*np*16:])
		}
		if !slices.Equal(qa, qg) || !slices.Equal(sa, sg) {
			t.Fatalf("k=%d: quantizeQ8X differs from the Go kernel", k)
		}
		wq, _ := quant.Quantize(rt.Q8_0, randF32(rng, k, 0.05))
		pa, pg := make([]byte, np*q8PairBytes), make([]byte, np*q8PairBytes)
		q8Prep(wq, pa)
		q8PrepGo(wq, pg)
		if !slices.Equal(pa, pg) {
			t.Fatalf("k=%d: q8Prep differs from the Go kernel", k)
		}
		wq2, _ := quant.Quantize(rt.Q8_0, randF32(rng, k, 0.05))
		pb := make([]byte, np*q8PairBytes)
		q8PrepGo(wq2, pb)
		oa, og, o2 := make([]float32, rows*3), make([]float32, rows*3), make([]float32, rows*3)
		q8Rows(np, pa, qa, sa, rows, np*64, np*16, oa, 3)
		q8RowsGo(np, pg, qg, sg, rows, np*64, np*16, og, 3)
		q8RowsGo(np, pb, qg, sg, rows, np*64, np*16, og[1:], 3)
		q8Rows2(np, pa, pb, qa, sa, rows, np*64, np*16, o2, 3)
		for r := range rows {
			for c := range 2 {
				i := r*3 + c
				if c == 0 && !near(oa[i], og[i], 1e-4) {
					t.Errorf("k=%d row %d: q8Rows %v, go %v", k, r, oa[i], og[i])
				}
				if !near(o2[i], og[i], 1e-4) {
					t.Errorf("k=%d row %d col %d: q8Rows2 %v, go %v", k, r, c, o2[i], og[i])
				}
			}
		}
	}
}

// TestMatMulQ8 checks the integer Q8_0 matmul against the dequantized
// weights times the float activations: the difference is the activations'
// 8-bit rounding, well under 1% of the output's scale.
func TestMatMulQ8(t *testing.T) {
	testMatMulQuantized(t, rt.Q8_0, [][3]int{{1, 64, 5}, {5, 96, 17}, {4, 256, 9}, {7, 1024, 70}, {16, 512, 33}, {70, 1024, 33}})
}

// TestMatMulK is TestMatMulQ8 for the k-quants: decode (one row), the
// 4-row tiles and their remainders, an odd number of weight rows.
func TestMatMulK(t *testing.T) {
	for _, dt := range []rt.DType{rt.Q4_K, rt.Q5_K, rt.Q6_K} {
		testMatMulQuantized(t, dt, [][3]int{{1, 256, 5}, {1, 1024, 70}, {6, 512, 17}, {70, 1024, 33}})
	}
}

func testMatMulQuantized(t *testing.T, dt rt.DType, shapes [][3]int) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, shape := range shapes {
		m, k, n := shape[0], shape[1], shape[2]
		xs := randF32(rng, m*k, 1)
		wf := randF32(rng, n*k, 0.05)
		wq, _ := quant.Quantize(dt, wf)
		wd := make([]float32, n*k)
		quant.DequantRow(dt, wq, wd)
		x, _ := rt.FromF32(xs, m, k)
		w, _ := rt.FromBytes(dt, wq, n, k)
		dst := rt.New(rt.F32, m, n)
		matMul(dst, x, w)
		var worst float64
		for i := range m {
			for j := range n {
				var ref, mag float64
				for c := range k {
					ref += float64(xs[i*k+c]) * float64(wd[j*k+c])
					mag += math.Abs(float64(xs[i*k+c]) * float64(wd[j*k+c]))
				}
				worst = max(worst, math.Abs(float64(dst.F32()[i*n+j])-ref)/mag)
			}
		}
		if worst > 0.01 {
			t.Errorf("%v m=%d k=%d n=%d: relative error %.4f", dt, m, k, n, worst)
		}
	}
}

// BenchmarkQ8Rows times the Q8_0 prefill kernel alone: one prepared
// weight row against 64 activation rows of 1024.
func BenchmarkQ8Rows(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const k, rows = 1024, 64
	np := q8Pairs(k)
	q, s := make([]byte, rows*np*64), make([]float32, rows*np*16)
	x := randF32(rng, rows*k, 1)
	for r := range rows {
		quantizeQ8X(x[r*k:(r+1)*k], q[r*np*64:], s[r*np*16:])
	}
	wq, _ := quant.Quantize(rt.Q8_0, randF32(rng, k, 0.05))
	prep := make([]byte, np*q8PairBytes)
	q8Prep(wq, prep)
	out := make([]float32, 2*rows)
	b.Run("1", func(b *testing.B) {
		for b.Loop() {
			q8Rows(np, prep, q, s, rows, np*64, np*16, out, 1)
		}
		b.ReportMetric(float64(rows*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
	})
	b.Run("2", func(b *testing.B) {
		for b.Loop() {
			q8Rows2(np, prep, prep, q, s, rows, np*64, np*16, out, 2)
		}
		b.ReportMetric(float64(2*rows*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
	})
}

// BenchmarkQ8Decode streams a Q8_0 matrix of 1024 columns against one
// activation row: from cache (1 MB) and from memory (256 MB).
func BenchmarkQ8Decode(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const k = 1024
	np := q8Pairs(k)
	q, s := make([]byte, np*64), make([]float32, np*16)
	quantizeQ8X(randF32(rng, k, 1), q, s)
	for _, mb := range []int{1, 256} {
		rows := mb << 20 / 1088
		wq, _ := quant.Quantize(rt.Q8_0, randF32(rng, rows*k, 0.05))
		out := make([]float32, rows)
		b.Run(map[int]string{1: "1MB", 256: "256MB"}[mb], func(b *testing.B) {
			b.SetBytes(int64(len(wq)))
			for b.Loop() {
				if !q8Decode(wq, 1088, q, s, out) {
					b.Skip("no decode kernel")
				}
			}
		})
	}
}

// BenchmarkMatMulQ8Decode is the whole decode matmul (both cores) on an
// LM-head-sized matrix and on a layer-sized one.
func BenchmarkMatMulQ8Decode(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const k = 1024
	for _, n := range []int{1024, 6144, 248320} {
		wq, _ := quant.Quantize(rt.Q8_0, randF32(rng, n*k, 0.05))
		w, _ := rt.FromBytes(rt.Q8_0, wq, n, k)
		x, _ := rt.FromF32(randF32(rng, k, 1), 1, k)
		dst := rt.New(rt.F32, 1, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(len(wq)))
			for b.Loop() {
				matMulQ8(dst, x, w)
			}
		})
	}
}

// TestKQuantKernelsAgree holds the assembly k-quant kernels to the Go
// ones: activation quantization and weight preparation bit for bit, the
// super-block dot products to float rounding.
func TestKQuantKernelsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, dt := range []rt.DType{rt.Q4_K, rt.Q5_K, rt.Q6_K} {
		for _, k := range []int{256, 1024, 2304} {
			nsb := k / 256
			w0, _ := quant.Quantize(dt, randF32(rng, k, float32(k)/1024))
			w1, _ := quant.Quantize(dt, randF32(rng, k, 0.05))
			pa, pg := make([]byte, nsb*kSBBytes), make([]byte, nsb*kSBBytes)
			kPrepI(dt, w0, pa)
			kPrepIGo(dt, w0, pg)
			for i := range pa {
				if pa[i] != pg[i] {
					t.Fatalf("%v k=%d: kPrepI differs from the Go kernel at byte %d (super-block %d, offset %d)", dt, k, i, i/kSBBytes, i%kSBBytes)
				}
			}
			p1 := make([]byte, nsb*kSBBytes)
			kPrepIGo(dt, w1, p1)
			const rows = 6
			x := randF32(rng, rows*k, 1)
			clear(x[k : k+256]) // an all-zero super-block
			act, actGo := make([]byte, rows*nsb*kActBytes), make([]byte, rows*nsb*kActBytes)
			for r := range rows {
				quantizeQ8K(x[r*k:(r+1)*k], act[r*nsb*kActBytes:])
				quantizeQ8KGo(x[r*k:(r+1)*k], actGo[r*nsb*kActBytes:])
			}
			kSums(act, rows*nsb)
			kSums(actGo, rows*nsb)
			if !slices.Equal(act, actGo) {
				t.Fatalf("%v k=%d: quantizeQ8K differs from the Go kernel", dt, k)
			}
			oa, og := make([]float32, rows*2), make([]float32, rows*2)
			kRowsI(nsb, pa, p1, act, rows, nsb*kActBytes, oa, 2)
			kRowsIGo(nsb, pg, p1, act, rows, nsb*kActBytes, og, 2)
			for i := range oa {
				if !near(oa[i], og[i], 1e-4) {
					t.Errorf("%v k=%d out %d: asm %v, go %v", dt, k, i, oa[i], og[i])
				}
			}
		}
	}
}

// TestKQuantDecodeAgrees holds the streaming k-quant decode kernels to the
// prepared super-block path they stand in for on one activation row, bit
// for bit (a decode step's row must not differ from the same row in a
// batch), and that path to its Go form.
func TestKQuantDecodeAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, dt := range []rt.DType{rt.Q4_K, rt.Q5_K, rt.Q6_K} {
		if !kDecodeOK(dt) {
			t.Logf("%v: no decode kernel here", dt)
			continue
		}
		for _, k := range []int{256, 1024, 2304} {
			nsb := k / 256
			const rows = 5
			rb := dt.ByteLen(k)
			var w []byte
			for r := range rows {
				wr, _ := quant.Quantize(dt, randF32(rng, k, float32(r+1)/20))
				w = append(w, wr...)
			}
			x := randF32(rng, k, 1)
			x[3] = 0
			act := make([]byte, nsb*kActBytes)
			quantizeQ8KGo(x, act)
			kSums(act, nsb)
			var a kAct
			kActOf(&a, act, nsb, make([]byte, 2*k))
			got := make([]float32, rows)
			kDecodeRows(dt, w, rb, &a, got)
			p := make([]byte, nsb*kSBBytes)
			want, wantGo := make([]float32, 2), make([]float32, 2)
			for r := range rows {
				kPrepI(dt, w[r*rb:(r+1)*rb], p)
				kRowsI(nsb, p, p, act, 1, nsb*kActBytes, want, 2)
				if math.Float32bits(got[r]) != math.Float32bits(want[0]) {
					t.Errorf("%v k=%d row %d: decode %v, prepared path %v", dt, k, r, got[r], want[0])
				}
				kPrepIGo(dt, w[r*rb:(r+1)*rb], p)
				kRowsIGo(nsb, p, p, act, 1, nsb*kActBytes, wantGo, 2)
				if !near(got[r], wantGo[0], 1e-4) {
					t.Errorf("%v k=%d row %d: decode %v, prepared path in Go %v", dt, k, r, got[r], wantGo[0])
				}
			}
		}
	}
}

// TestMatMulKAVX2Agrees holds the AVX2 k-quant prefill (four activation
// rows a weight row, then the rows left one at a time; weight rows past a
// block) to the prepared super-block path in Go.
func TestMatMulKAVX2Agrees(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(23, 24))
	for _, dt := range []rt.DType{rt.Q4_K, rt.Q5_K, rt.Q6_K} {
		for _, shape := range [][3]int{{1, 1024, 37}, {7, 1024, 37}, {2, 256, 3}, {9, 2304, 70}} {
			m, k, n := shape[0], shape[1], shape[2]
			nsb := k / 256
			rb := dt.ByteLen(k)
			var wq []byte
			for r := range n {
				wr, _ := quant.Quantize(dt, randF32(rng, k, float32(r%5+1)/20))
				wq = append(wq, wr...)
			}
			xs := randF32(rng, m*k, 1)
			clear(xs[(m-1)*k : (m-1)*k+256]) // an all-zero super-block
			x, _ := rt.FromF32(xs, m, k)
			w, _ := rt.FromBytes(dt, wq, n, k)
			act := make([]byte, m*nsb*kActBytes)
			quantizeRowsK(x, nsb, act)
			want := make([]float32, 2)
			p := make([]byte, nsb*kSBBytes)
			got := rt.New(rt.F32, m, n)
			matMulKAVX2(got, x, w)
			for j := range n {
				kPrepIGo(dt, wq[j*rb:(j+1)*rb], p)
				for i := range m {
					kRowsIGo(nsb, p, p, act[i*nsb*kActBytes:], 1, nsb*kActBytes, want, 2)
					if g := got.F32()[i*n+j]; !near(g, want[0], 1e-4) {
						t.Fatalf("%v %v: out[%d,%d] = %v, prepared path %v", dt, shape, i, j, g, want[0])
					}
				}
			}
		}
	}
}

// TestMatMulKAVX2RowBitsIndependentOfBatch: a row's result has the same
// bits alone (a decode step) as in a batch, at every place in it.
func TestMatMulKAVX2RowBitsIndependentOfBatch(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(25, 26))
	for _, dt := range []rt.DType{rt.Q4_K, rt.Q5_K, rt.Q6_K} {
		const m, k, n = 9, 512, 40
		wq, _ := quant.Quantize(dt, randF32(rng, n*k, 0.05))
		w, _ := rt.FromBytes(dt, wq, n, k)
		xs := randF32(rng, m*k, 1)
		x, _ := rt.FromF32(xs, m, k)
		all := rt.New(rt.F32, m, n)
		matMulKAVX2(all, x, w)
		for i := range m {
			one, _ := rt.FromF32(xs[i*k:(i+1)*k], 1, k)
			got := rt.New(rt.F32, 1, n)
			matMulKAVX2(got, one, w)
			for j := range n {
				if a, b := all.F32()[i*n+j], got.F32()[j]; math.Float32bits(a) != math.Float32bits(b) {
					t.Fatalf("%v row %d col %d: %v in a batch of %d, %v alone", dt, i, j, a, m, b)
				}
			}
		}
	}
}

// TestMatMulQ8AVX2Agrees holds the AVX2 Q8_0, Q4_0, IQ4_NL and IQ4_XS matmul (four
// activation rows a weight block, the rows left one at a time, weight rows
// past a block, an odd number of blocks) to the dequantized weights times
// the quantized activations in float64, and checks that a row's bits do not
// depend on its batch.
func TestMatMulQ8AVX2Agrees(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(27, 28))
	for _, dt := range []rt.DType{rt.Q8_0, rt.Q4_0, rt.IQ4_NL, rt.IQ4_XS} {
		for _, shape := range [][3]int{{1, 1024, 37}, {7, 1024, 37}, {2, 96, 3}, {9, 2304, 20}} {
			m, k, n := shape[0], shape[1], shape[2]
			if be, _ := dt.Block(); k%be != 0 {
				continue
			}
			np := q8Pairs(k)
			wq, _ := quant.Quantize(dt, randF32(rng, n*k, 0.05))
			wd := make([]float32, n*k)
			quant.DequantRow(dt, wq, wd)
			xs := randF32(rng, m*k, 1)
			clear(xs[(m-1)*k : (m-1)*k+32]) // an all-zero block
			x, _ := rt.FromF32(xs, m, k)
			w, _ := rt.FromBytes(dt, wq, n, k)
			q, s := make([]byte, m*np*64), make([]float32, m*np*16)
			quantizeRows(x, np, q, s)
			xd := make([]float64, m*k) // the quantized activations, as the kernels see them
			for i := range m {
				for c := range k {
					b := c / 32
					xd[i*k+c] = float64(int8(q[i*np*64+c]^0x80)) * float64(s[i*np*16+(b/2)*16+(b%2)*8])
				}
			}
			got := rt.New(rt.F32, m, n)
			matMulQ8AVX2(got, x, w)
			for j := range n {
				for i := range m {
					var want float64
					for c := range k {
						want += float64(wd[j*k+c]) * xd[i*k+c]
					}
					if g := got.F32()[i*n+j]; !near(g, float32(want), 1e-4) {
						t.Fatalf("%v %v: out[%d,%d] = %v, want %v", dt, shape, i, j, g, want)
					}
				}
			}
			for i := range m {
				one, _ := rt.FromF32(xs[i*k:(i+1)*k], 1, k)
				alone := rt.New(rt.F32, 1, n)
				matMulQ8AVX2(alone, one, w)
				for j := range n {
					if a, b := got.F32()[i*n+j], alone.F32()[j]; math.Float32bits(a) != math.Float32bits(b) {
						t.Fatalf("%v %v row %d col %d: %v in a batch of %d, %v alone", dt, shape, i, j, a, m, b)
					}
				}
			}
		}
	}
}

// TestQuantizeQ8KSignedAgrees holds the fused AVX2 activation quantization
// to quantizeQ8KGo, kSums and kSigned bit for bit (zero, tiny and large
// super-blocks), and checks that a NaN makes the super-block's scale NaN.
func TestQuantizeQ8KSignedAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 30))
	const nsb = 5
	x := randF32(rng, nsb*256, 1)
	clear(x[256:512])
	for i := range 256 {
		x[512+i] *= 1e-30
		x[768+i] *= 1e30
	}
	x[1024+7] = float32(math.Inf(-1))
	want, got := make([]byte, nsb*kActBytes), make([]byte, nsb*kActBytes)
	wb, gb := make([]int16, nsb*16), make([]int16, nsb*16)
	quantizeQ8KGo(x, want)
	kSums(want, nsb)
	kSigned(want, wb)
	quantizeQ8KSigned(x, got, gb)
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("byte %d (super-block %d, offset %d): %#x, Go form %#x", i, i/kActBytes, i%kActBytes, got[i], want[i])
		}
	}
	if !slices.Equal(wb, gb) {
		t.Fatalf("sums %v, Go form %v", gb, wb)
	}
	x[300] = float32(math.NaN())
	quantizeQ8KSigned(x, got, gb)
	if d := asF32(got[kActBytes+320 : kActBytes+324])[0]; !math.IsNaN(float64(d)) {
		t.Fatalf("a NaN in super-block 1: its scale is %v, not NaN", d)
	}
}

// TestQuantizeQ8XSignedAgrees holds the fused AVX2 Q8_0 activation
// quantization to quantizeQ8XGo then q8Signed bit for bit (an odd number of
// blocks; zero, tiny, huge and infinite blocks), and checks that a NaN makes
// its block's scale NaN.
func TestQuantizeQ8XSignedAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	const nb = 7
	x := randF32(rng, nb*32, 1)
	clear(x[32:64])
	for i := range 32 {
		x[64+i] *= 1e-30
		x[96+i] *= 1e30
	}
	x[128+3] = float32(math.Inf(1))
	np := q8Pairs(nb * 32)
	wq, gq := make([]byte, np*64), make([]byte, np*64)
	ws, gs := make([]float32, np*16), make([]float32, np*16)
	quantizeQ8XGo(x, wq, ws)
	q8Signed(wq)
	quantizeQ8XSigned(x, gq, gs)
	if !slices.Equal(wq, gq) {
		t.Fatalf("integers %v, Go form %v", gq, wq)
	}
	for i := range ws {
		if math.Float32bits(ws[i]) != math.Float32bits(gs[i]) {
			t.Fatalf("scale %d: %v, Go form %v", i, gs[i], ws[i])
		}
	}
	x[170] = float32(math.NaN())
	quantizeQ8XSigned(x, gq, gs)
	if d := gs[(5/2)*16+8]; !math.IsNaN(float64(d)) {
		t.Fatalf("a NaN in block 5: its scale is %v, not NaN", d)
	}
}
