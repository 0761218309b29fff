package cpu_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/cpu"
	"github.com/govllm/govllm/runtime/quant"
)

func backend(t testing.TB) *rt.Backend {
	t.Helper()
	reg := rt.NewRegistry()
	if err := cpu.Register(reg); err != nil {
		t.Fatal(err)
	}
	return rt.NewBackend(reg, rt.CPU)
}

func random(rng *rand.Rand, scale float32, shape ...int) *rt.Tensor {
	x := rt.New(rt.F32, shape...)
	for i := range x.F32() {
		x.F32()[i] = float32(rng.NormFloat64()) * scale
	}
	return x
}

func clone(x *rt.Tensor) *rt.Tensor {
	c := rt.New(rt.F32, x.Shape()...)
	copy(c.F32(), x.F32())
	return c
}

func maxDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestEveryOpRegistered fails when a CPU registration is removed.
func TestEveryOpRegistered(t *testing.T) {
	reg := rt.NewRegistry()
	must(t, cpu.Register(reg))
	for _, op := range rt.Ops() {
		if op == rt.OpDecodeLayers { // a device's fusion: the CPU runs the ops it replaces
			continue
		}
		dts := []rt.DType{rt.F32}
		if op == rt.OpMatMul || op == rt.OpEmbedding || op == rt.OpMoEExperts {
			dts = rt.DTypes
		}
		for _, dt := range dts {
			if _, ok := reg.Selected(op, rt.CPU, dt); !ok {
				t.Errorf("cpu has no kernel for %s[%s]", op, dt)
			}
		}
	}
	if err := cpu.Register(reg); err == nil {
		t.Fatal("registering the CPU provider twice succeeded")
	}
}

func TestMatMulDTypes(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewPCG(1, 2))
	m, k, n := 5, 256, 19
	x := random(rng, 1, m, k)
	wf := random(rng, 1, n, k)
	for _, dt := range rt.DTypes {
		w := rt.New(dt, n, k)
		if dt.Quantized() {
			data, err := quant.Quantize(dt, wf.F32())
			must(t, err)
			copy(w.Bytes(), data)
		}
		ref := make([]float32, n*k) // the weight values as stored
		for i, v := range wf.F32() {
			switch dt {
			case rt.F32:
				w.F32()[i], ref[i] = v, v
			case rt.BF16:
				w.U16()[i] = rt.F32ToBF16(v)
				ref[i] = rt.BF16ToF32(w.U16()[i])
			case rt.F16:
				w.U16()[i] = rt.F32ToF16(v)
				ref[i] = rt.F16ToF32(w.U16()[i])
			}
		}
		if dt.Quantized() {
			quant.DequantRow(dt, w.Bytes(), ref)
		}
		dst := rt.New(rt.F32, m, n)
		must(t, be.MatMul(dst, x, w))
		want := make([]float32, m*n)
		var worst float64 // error relative to Σ|x·w|
		for i := range m {
			for j := range n {
				var s, mag float64
				for c := range k {
					s += float64(x.F32()[i*k+c]) * float64(ref[j*k+c])
					mag += math.Abs(float64(x.F32()[i*k+c]) * float64(ref[j*k+c]))
				}
				want[i*n+j] = float32(s)
				worst = max(worst, math.Abs(float64(dst.F32()[i*n+j])-s)/mag)
			}
		}
		if cpu.ActivationsQuantized(dt) {
			// Integer kernels quantize activations to 8 bits per block of
			// 32, as llama.cpp does: an error of a few tenths of a percent.
			if worst > 0.01 {
				t.Errorf("%v: relative error %g", dt, worst)
			}
		} else if d := maxDiff(dst.F32(), want); d > 1e-4 {
			t.Errorf("%v: max diff %g", dt, d)
		}
	}
}

// quantizeQ8_0 is GGML's reference Q8_0 quantization: per block of 32,
// d = max|x| / 127 stored as f16, q = round(x / d).
func quantizeQ8_0(x []float32, out []byte) {
	for b := 0; b*32 < len(x); b++ {
		blk := x[b*32 : (b+1)*32]
		amax := float32(0)
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		h := rt.F32ToF16(d)
		o := out[b*34:]
		o[0], o[1] = byte(h), byte(h>>8)
		for i, v := range blk {
			o[2+i] = byte(int8(math.Round(float64(v * id))))
		}
	}
}

func TestQ8_0RejectsPartialBlocks(t *testing.T) {
	be := backend(t)
	w := rt.New(rt.Q8_0, 4, 32)
	x, dst := rt.New(rt.F32, 2, 32), rt.New(rt.F32, 2, 4)
	must(t, be.MatMul(dst, x, w))
	if _, err := rt.FromBytes(rt.Q8_0, make([]byte, 40), 1, 40); err == nil {
		t.Fatal("a Q8_0 row of 40 was accepted")
	}
}

// TestFusedPreambleMatchesComposite: attn_preamble_fused gives what
// split_query_gate, rms_norm_offset, rope_neox and kv_write give, rotary
// width 0 included, with qg, k and v as head-split views of one
// projection's rows (as the model has them) and writing the caches.
func TestFusedPreambleMatchesComposite(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewPCG(3, 4))
	T, hq, hkv, d, slots := 6, 4, 2, 32, 10
	views := func(proj *rt.Tensor) (qg, k, v *rt.Tensor) {
		part := func(lo, hi, heads int) *rt.Tensor {
			s, err := proj.Slice(1, lo, hi)
			must(t, err)
			r, err := s.Reshape(T, heads, -1)
			must(t, err)
			return r
		}
		return part(0, hq*2*d, hq), part(hq*2*d, (hq*2+hkv)*d, hkv), part((hq*2+hkv)*d, (hq*2+2*hkv)*d, hkv)
	}
	for _, rot := range []int{0, 8, 32} {
		proj := random(rng, 1, T, (hq*2+2*hkv)*d)
		qn, kn := random(rng, 0.1, d), random(rng, 0.1, d)
		pos := []int32{3, 4, 5, 6, 7, 8}
		kvSlots := []int32{9, 0, 4, 5, 1, 2}

		projF, kcF, vcF := clone(proj), rt.New(rt.F32, slots, hkv, d), rt.New(rt.F32, slots, hkv, d)
		qg, k, v := views(projF)
		p := rt.PreambleParams{RotaryDim: rot, Theta: 1e7, Eps: 1e-6, KCache: kcF, VCache: vcF, V: v, Slots: kvSlots}
		qF, gF := rt.New(rt.F32, T, hq, d), rt.New(rt.F32, T, hq, d)
		must(t, be.AttnPreamble(qF, gF, qg, k, qn, kn, pos, p))

		projC, kcC, vcC := clone(proj), rt.New(rt.F32, slots, hkv, d), rt.New(rt.F32, slots, hkv, d)
		qg, k, v = views(projC)
		qC, gC := rt.New(rt.F32, T, hq, d), rt.New(rt.F32, T, hq, d)
		must(t, be.SplitQueryGate(qC, gC, qg))
		must(t, be.RMSNormOffset(qC, qC, qn, p.Eps))
		must(t, be.RMSNormOffset(k, k, kn, p.Eps))
		must(t, be.RoPENeoX(qC, pos, rot, p.Theta))
		must(t, be.RoPENeoX(k, pos, rot, p.Theta))
		must(t, be.KVWrite(kcC, k, kvSlots))
		must(t, be.KVWrite(vcC, v, kvSlots))

		for _, c := range []struct {
			name string
			a, b *rt.Tensor
		}{{"q", qF, qC}, {"gate", gF, gC}, {"projection (k in place)", projF, projC}, {"k cache", kcF, kcC}, {"v cache", vcF, vcC}} {
			if diff := maxDiff(c.a.F32(), c.b.F32()); diff > 1e-6 {
				t.Errorf("rotary %d: %s differs by %g", rot, c.name, diff)
			}
		}
		if maxDiff(kcF.F32(), make([]float32, kcF.Len())) == 0 {
			t.Errorf("rotary %d: nothing was written to the k cache", rot)
		}
	}
}

// TestAddRMSNormMatchesChain: add_rms_norm_offset gives what add then
// rms_norm_offset give, on a dense residual stream and on a strided view.
func TestAddRMSNormMatchesChain(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewPCG(7, 8))
	const rows, cols, width, off = 5, 64, 80, 8
	wide := random(rng, 1, rows, width)
	dense := rt.New(rt.F32, rows, cols)
	for r := range rows {
		copy(dense.F32()[r*cols:(r+1)*cols], wide.F32()[r*width+off:])
	}
	y, w := random(rng, 1, rows, cols), random(rng, 0.1, cols)
	xC, nC := clone(dense), rt.New(rt.F32, rows, cols)
	must(t, be.Add(xC, xC, y))
	must(t, be.RMSNormOffset(nC, xC, w, 1e-6))

	xF, nF := clone(dense), rt.New(rt.F32, rows, cols)
	must(t, be.AddRMSNormOffset(nF, xF, y, w, 1e-6))
	if d := max(maxDiff(xF.F32(), xC.F32()), maxDiff(nF.F32(), nC.F32())); d != 0 {
		t.Errorf("fused and chained differ by %g", d)
	}
	view, _ := wide.Slice(1, off, off+cols)
	must(t, be.AddRMSNormOffset(nF, view, y, w, 1e-6)) // updated in place
	for r := range rows {
		if d := maxDiff(wide.F32()[r*width+off:r*width+off+cols], xC.F32()[r*cols:(r+1)*cols]); d != 0 {
			t.Fatalf("strided residual row %d differs by %g", r, d)
		}
	}
	if d := maxDiff(nF.F32(), nC.F32()); d != 0 {
		t.Errorf("strided: fused and chained differ by %g", d)
	}
}

func TestRoPEWidthZeroIsIdentity(t *testing.T) {
	be := backend(t)
	x := random(rand.New(rand.NewPCG(5, 6)), 1, 3, 2, 16)
	y := clone(x)
	must(t, be.RoPENeoX(y, []int32{0, 9, 400}, 0, 1e7))
	if maxDiff(x.F32(), y.F32()) != 0 {
		t.Fatal("rotary width 0 changed the input")
	}
}

func TestRoPERotatesPairs(t *testing.T) {
	be := backend(t)
	x := rt.New(rt.F32, 1, 1, 8)
	copy(x.F32(), []float32{1, 0, 0, 0, 0, 0, 0, 0}) // rotary width 4: pairs (0,2), (1,3)
	must(t, be.RoPENeoX(x, []int32{2}, 4, 10000))
	// Pair (0, 2) at inverse frequency 1: angle 2.
	want := []float32{float32(math.Cos(2)), 0, float32(math.Sin(2)), 0, 0, 0, 0, 0}
	if d := maxDiff(x.F32(), want); d > 1e-6 {
		t.Fatalf("got %v, want %v", x.F32(), want)
	}
}

// deltaReference is the gated delta rule in float64, token by token.
func deltaReference(q, k, v, g, beta, state *rt.Tensor) []float64 {
	T, hk, dk := q.Dim(0), q.Dim(1), q.Dim(2)
	hv, dv := v.Dim(1), v.Dim(2)
	s := make([]float64, hv*dk*dv)
	for i, x := range state.F32() {
		s[i] = float64(x)
	}
	out := make([]float64, T*hv*dv)
	scale := 1 / math.Sqrt(float64(dk))
	for t := range T {
		for h := range hv {
			kh := h / (hv / hk)
			qr := q.F32()[(t*hk+kh)*dk:][:dk]
			kr := k.F32()[(t*hk+kh)*dk:][:dk]
			vr := v.F32()[(t*hv+h)*dv:][:dv]
			sh := s[h*dk*dv:][:dk*dv]
			decay := math.Exp(float64(g.F32()[t*hv+h]))
			b := float64(beta.F32()[t*hv+h])
			for i := range sh {
				sh[i] *= decay
			}
			for j := range dv {
				var mem float64
				for i := range dk {
					mem += sh[i*dv+j] * float64(kr[i])
				}
				delta := (float64(vr[j]) - mem) * b
				for i := range dk {
					sh[i*dv+j] += float64(kr[i]) * delta
				}
				var o float64
				for i := range dk {
					o += sh[i*dv+j] * float64(qr[i]) * scale
				}
				out[(t*hv+h)*dv+j] = o
			}
		}
	}
	return out
}

func TestDeltaRuleChunkedAndRecurrentMatchReference(t *testing.T) {
	// The second shape's value rows (64) take the assembly matrix products.
	for _, shape := range [][5]int{{37, 2, 4, 8, 6}, {70, 1, 2, 32, 64}} {
		deltaRuleAgainstReference(t, shape[0], shape[1], shape[2], shape[3], shape[4])
	}
}

func deltaRuleAgainstReference(t *testing.T, T, hk, hv, dk, dv int) {
	t.Helper()
	be := backend(t)
	rng := rand.New(rand.NewPCG(7, 8))
	unit := func(shape ...int) *rt.Tensor {
		x := random(rng, 1, shape...)
		y := rt.New(rt.F32, shape...)
		must(t, be.L2Norm(y, x, 1e-6))
		return y
	}
	q, k := unit(T, hk, dk), unit(T, hk, dk)
	v := random(rng, 1, T, hv, dv)
	g, beta := rt.New(rt.F32, T, hv), rt.New(rt.F32, T, hv)
	for i := range g.F32() {
		g.F32()[i] = -float32(rng.Float64()) * 0.5
		beta.F32()[i] = float32(rng.Float64())
	}
	init := random(rng, 0.3, hv, dk, dv)
	want := deltaReference(q, k, v, g, beta, init)
	wantF := make([]float32, len(want))
	for i, x := range want {
		wantF[i] = float32(x)
	}
	for _, chunk := range []int{1, 5, 16, 64} {
		out, st := rt.New(rt.F32, T, hv, dv), clone(init)
		must(t, be.DeltaRuleChunked(out, q, k, v, g, beta, st, rt.DeltaRuleParams{Chunk: chunk}))
		if d := maxDiff(out.F32(), wantF); d > 1e-4 {
			t.Errorf("dk %d dv %d chunk %d: max diff %g", dk, dv, chunk, d)
		}
	}
	out, st := rt.New(rt.F32, T, hv, dv), clone(init)
	must(t, be.DeltaRuleRecurrent(out, q, k, v, g, beta, st, rt.DeltaRuleParams{}))
	if d := maxDiff(out.F32(), wantF); d > 1e-4 {
		t.Errorf("dk %d dv %d recurrent: max diff %g", dk, dv, d)
	}
	// The state a chunked pass leaves equals the recurrent one's.
	st2 := clone(init)
	must(t, be.DeltaRuleChunked(rt.New(rt.F32, T, hv, dv), q, k, v, g, beta, st2, rt.DeltaRuleParams{Chunk: 16}))
	if d := maxDiff(st.F32(), st2.F32()); d > 1e-4 {
		t.Errorf("dk %d dv %d: final states differ by %g", dk, dv, d)
	}
}

func TestConvCarriesState(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewPCG(9, 10))
	T, C, K := 9, 5, 4
	x, w := random(rng, 1, T, C), random(rng, 1, C, K)
	whole, st := rt.New(rt.F32, T, C), rt.New(rt.F32, K-1, C)
	must(t, be.Conv1dCausal(whole, x, w, st, false))
	// Reference: zero padding before the sequence.
	for tt := range T {
		for c := range C {
			var s float64
			for j := range K {
				if src := tt - (K - 1) + j; src >= 0 {
					s += float64(w.F32()[c*K+j]) * float64(x.F32()[src*C+c])
				}
			}
			if d := math.Abs(s - float64(whole.F32()[tt*C+c])); d > 1e-5 {
				t.Fatalf("t=%d c=%d: %v vs %v", tt, c, whole.F32()[tt*C+c], s)
			}
		}
	}
	// In pieces of 2, 1 and 6 tokens, carrying the state.
	st2 := rt.New(rt.F32, K-1, C)
	var pieces []float32
	for _, r := range [][2]int{{0, 2}, {2, 3}, {3, 9}} {
		xs, _ := x.Slice(0, r[0], r[1])
		out := rt.New(rt.F32, r[1]-r[0], C)
		must(t, be.Conv1dCausal(out, xs, w, st2, false))
		pieces = append(pieces, out.F32()...)
	}
	if d := maxDiff(pieces, whole.F32()); d > 1e-6 {
		t.Fatalf("pieces differ by %g", d)
	}
	if d := maxDiff(st.F32(), st2.F32()); d != 0 {
		t.Fatalf("states differ by %g", d)
	}
	// The fused silu is the chain conv, then SiLU.
	fused, chain, st3 := rt.New(rt.F32, T, C), rt.New(rt.F32, T, C), rt.New(rt.F32, K-1, C)
	must(t, be.Conv1dCausal(fused, x, w, st3, true))
	must(t, be.SiLU(chain, whole))
	if d := maxDiff(fused.F32(), chain.F32()); d != 0 {
		t.Fatalf("conv with silu differs from conv then silu by %g", d)
	}
}

// TestPagedAttentionMatchesReference runs two sequences in one call over a
// paged cache whose blocks are out of order.
type attnTestSeq struct {
	start, n int
	blocks   []int32
	k, v     *rt.Tensor // logical [start+n, hkv, d]
}

// TestPagedAttentionMatchesReference holds paged attention to float64
// arithmetic: with 8-wide heads (one row at a time), and with heads of 16
// and 64 (attnTile's tiles, with key blocks of 2 (no whole group of four
// keys) and 8, and units of several tokens).
func TestPagedAttentionMatchesReference(t *testing.T) {
	cpu.EachKernelSet(t, testPagedAttentionMatchesReference)
}

func testPagedAttentionMatchesReference(t *testing.T) {
	pagedAttentionAgainstReference(t, 4, 2, 8, 2, []attnTestSeq{{start: 3, n: 4, blocks: []int32{5, 0, 7, 2}}, {start: 0, n: 3, blocks: []int32{6, 1}}})
	pagedAttentionAgainstReference(t, 4, 2, 16, 2, []attnTestSeq{{start: 3, n: 4, blocks: []int32{5, 0, 7, 2}}, {start: 0, n: 3, blocks: []int32{6, 1}}})
	pagedAttentionAgainstReference(t, 8, 2, 64, 8, []attnTestSeq{{start: 5, n: 14, blocks: []int32{3, 0, 7}}, {start: 0, n: 1, blocks: []int32{6}}, {start: 0, n: 9, blocks: []int32{1, 2}}})
}

func pagedAttentionAgainstReference(t *testing.T, hq, hkv, d, bs int, seqs []attnTestSeq) {
	t.Helper()
	be := backend(t)
	rng := rand.New(rand.NewPCG(11, 12))
	cache := func() (*rt.Tensor, *rt.Tensor) { return rt.New(rt.F32, 8*bs, hkv, d), rt.New(rt.F32, 8*bs, hkv, d) }
	kc, vc := cache()
	var attn []rt.AttnSeq
	rows := 0
	for i := range seqs {
		s := &seqs[i]
		s.k, s.v = random(rng, 1, s.start+s.n, hkv, d), random(rng, 1, s.start+s.n, hkv, d)
		var slots []int32
		for p := range s.start + s.n {
			slots = append(slots, s.blocks[p/bs]*int32(bs)+int32(p%bs))
		}
		must(t, be.KVWrite(kc, s.k, slots))
		must(t, be.KVWrite(vc, s.v, slots))
		attn = append(attn, rt.AttnSeq{Row: rows, Len: s.n, Start: s.start, Blocks: s.blocks})
		rows += s.n
	}
	q := random(rng, 1, rows, hq, d)
	out := rt.New(rt.F32, rows, hq, d)
	scale := float32(1 / math.Sqrt(float64(d)))
	must(t, be.Attention(out, q, kc, vc, attn, bs, scale))
	for si, s := range seqs {
		for tt := range s.n {
			r := attn[si].Row + tt
			for h := range hq {
				kh := h / (hq / hkv)
				n := s.start + tt + 1
				sc := make([]float64, n)
				mx, sum := math.Inf(-1), 0.0
				for j := range n {
					for c := range d {
						sc[j] += float64(q.F32()[(r*hq+h)*d+c]) * float64(s.k.F32()[(j*hkv+kh)*d+c])
					}
					sc[j] *= float64(scale)
					mx = max(mx, sc[j])
				}
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for c := range d {
					var o float64
					for j := range n {
						o += sc[j] / sum * float64(s.v.F32()[(j*hkv+kh)*d+c])
					}
					if diff := math.Abs(o - float64(out.F32()[(r*hq+h)*d+c])); diff > 1e-5 {
						t.Fatalf("d=%d block %d: seq %d t=%d h=%d c=%d: diff %g", d, bs, si, tt, h, c, diff)
					}
				}
			}
		}
	}
	bad := []rt.AttnSeq{{Row: 0, Len: seqs[0].n, Start: seqs[0].start, Blocks: seqs[0].blocks[:len(seqs[0].blocks)-1]}}
	if err := be.Attention(out, q, kc, vc, bad, bs, scale); !errors.Is(err, rt.ErrShape) {
		t.Fatalf("too few blocks: err = %v", err)
	}
}

// moeReference is the routed experts' sum for row r of x, from routing
// done here in float64 and each chosen expert's chain of ops on that row
// alone: matmul (gate, up), swiglu, matmul (down).
func moeReference(t *testing.T, be *rt.Backend, x, logits *rt.Tensor, ex *rt.Experts, r int) []float32 {
	lg := logits.F32()[r*logits.Dim(1) : (r+1)*logits.Dim(1)]
	p := make([]float64, len(lg))
	var sum float64
	for i, v := range lg {
		p[i] = math.Exp(float64(v))
		sum += p[i]
	}
	chosen, total := []int{}, 0.0
	for range ex.TopK {
		best := -1
		for i := range p {
			if !slices.Contains(chosen, i) && (best < 0 || p[i] > p[best]) {
				best = i
			}
		}
		chosen, total = append(chosen, best), total+p[best]/sum
	}
	h, inter := ex.Hidden(), ex.Inter()
	xr, _ := rt.FromF32(slices.Clone(x.F32()[r*h:(r+1)*h]), 1, h)
	gate, up, y := rt.New(rt.F32, 1, inter), rt.New(rt.F32, 1, inter), rt.New(rt.F32, 1, h)
	want := make([]float32, h)
	for _, e := range chosen {
		must(t, be.MatMul(gate, xr, ex.Gate[e]))
		must(t, be.MatMul(up, xr, ex.Up[e]))
		must(t, be.SwiGLU(gate, gate, up))
		must(t, be.MatMul(y, gate, ex.Down[e]))
		w := float32(p[e] / sum / total)
		for i, v := range y.F32() {
			want[i] += w * v
		}
	}
	return want
}

// TestMoEExpertsMatchesPerTokenChain: the grouped op against each token's
// experts run one by one, for f32, bf16 and Q8_0 weights; a row of equal
// logits picks the lowest-numbered experts.
func TestMoEExpertsMatchesPerTokenChain(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewPCG(7, 8))
	const T, E, k, H, I = 6, 8, 3, 64, 96
	x, logits := random(rng, 1, T, H), random(rng, 1, T, E)
	clear(logits.F32()[:E])
	for _, dt := range []rt.DType{rt.F32, rt.BF16, rt.Q8_0} {
		weight := func(n, kk int) *rt.Tensor {
			w, err := quant.Tensor(dt, random(rng, 0.1, n, kk).F32()[:n*kk], n, kk)
			must(t, err)
			return w
		}
		gate, up, down := make([]*rt.Tensor, E), make([]*rt.Tensor, E), make([]*rt.Tensor, E)
		for e := range E {
			gate[e], up[e], down[e] = weight(I, H), weight(I, H), weight(H, I)
		}
		ex, err := rt.NewExperts(gate, up, down, k)
		must(t, err)
		out := random(rng, 1, T, H) // overwritten, not added to
		must(t, be.MoEExperts(out, x, logits, ex))
		for r := range T {
			want := moeReference(t, be, x, logits, ex, r)
			if d := maxDiff(out.F32()[r*H:(r+1)*H], want); d > 1e-5 {
				t.Errorf("%v: row %d differs by %g", dt, r, d)
			}
		}
	}
	// Bad experts are refused with what was wrong.
	w := rt.New(rt.BF16, I, H)
	if _, err := rt.NewExperts([]*rt.Tensor{w, w}, []*rt.Tensor{w, rt.New(rt.F32, I, H)}, []*rt.Tensor{rt.New(rt.BF16, H, I), rt.New(rt.BF16, H, I)}, 1); !errors.Is(err, rt.ErrDType) {
		t.Errorf("mixed dtypes: err = %v", err)
	}
	if _, err := rt.NewExperts([]*rt.Tensor{w}, []*rt.Tensor{w}, []*rt.Tensor{w}, 1); !errors.Is(err, rt.ErrShape) {
		t.Errorf("down of the gate's shape: err = %v", err)
	}
}

func TestNormsAndGates(t *testing.T) {
	be := backend(t)
	x := rt.New(rt.F32, 1, 4)
	copy(x.F32(), []float32{1, -2, 3, -4})
	w := rt.New(rt.F32, 4)
	copy(w.F32(), []float32{0.5, 0, -0.5, 1})
	inv := 1 / math.Sqrt((1+4+9+16)/4.0+1e-6)
	plain, offset := rt.New(rt.F32, 1, 4), rt.New(rt.F32, 1, 4)
	must(t, be.RMSNorm(plain, x, w, 1e-6))
	must(t, be.RMSNormOffset(offset, x, w, 1e-6))
	for i, xv := range x.F32() {
		wv := float64(w.F32()[i])
		if math.Abs(float64(plain.F32()[i])-float64(xv)*inv*wv) > 1e-6 ||
			math.Abs(float64(offset.F32()[i])-float64(xv)*inv*(1+wv)) > 1e-6 {
			t.Fatalf("element %d: %v %v", i, plain.F32()[i], offset.F32()[i])
		}
	}
	z := rt.New(rt.F32, 1, 4)
	copy(z.F32(), []float32{0, 1, -1, 2})
	gated := rt.New(rt.F32, 1, 4)
	must(t, be.GatedRMSNorm(gated, x, z, w, 1e-6))
	for i, xv := range x.F32() {
		zv := float64(z.F32()[i])
		want := float64(xv) * inv * float64(w.F32()[i]) * zv / (1 + math.Exp(-zv))
		if math.Abs(float64(gated.F32()[i])-want) > 1e-6 {
			t.Fatalf("gated %d: %v want %v", i, gated.F32()[i], want)
		}
	}
	gate := rt.New(rt.F32, 1, 1)
	gate.F32()[0] = 0.3
	sm := rt.New(rt.F32, 1, 4)
	must(t, be.SigmoidMul(sm, x, gate))
	if s := 1 / (1 + math.Exp(-0.3)); math.Abs(float64(sm.F32()[3])+4*s) > 1e-6 {
		t.Fatalf("broadcast sigmoid gate: %v", sm.F32())
	}
}

// TestSlotOpsMatchPerSequenceCalls checks the decode-step forms against the
// per-sequence ops they batch, and that they refuse a slot given twice or
// out of range.
func TestSlotOpsMatchPerSequenceCalls(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewPCG(11, 12))
	const hk, hv, dk, dv, C, K, S = 2, 4, 8, 6, 10, 4, 5
	slots := []int32{3, 0, 4}
	n := len(slots)
	x, w, convStates := random(rng, 1, n, C), random(rng, 1, C, K), random(rng, 1, S, K-1, C)
	q, k, v := random(rng, 0.3, n, hk, dk), random(rng, 0.3, n, hk, dk), random(rng, 1, n, hv, dv)
	g, beta := random(rng, 0.1, n, hv), random(rng, 0.5, n, hv)
	states := random(rng, 0.1, S, hv, dk, dv)
	wantConvStates, wantStates := clone(convStates), clone(states)
	wantConv, wantOut := rt.New(rt.F32, n, C), rt.New(rt.F32, n, hv, dv)
	at := func(t *rt.Tensor, i int) *rt.Tensor { r, _ := t.Slice(0, i, i+1); return r }
	for i, s := range slots {
		cs, _ := wantConvStates.Index(int(s))
		must(t, be.Conv1dCausal(at(wantConv, i), at(x, i), w, cs, true))
		st, _ := wantStates.Index(int(s))
		must(t, be.DeltaRuleRecurrent(at(wantOut, i), at(q, i), at(k, i), at(v, i), at(g, i), at(beta, i), st, rt.DeltaRuleParams{}))
	}
	conv, out := rt.New(rt.F32, n, C), rt.New(rt.F32, n, hv, dv)
	must(t, be.Conv1dSlots(conv, x, w, convStates, slots, true))
	must(t, be.DeltaRuleSlots(out, q, k, v, g, beta, states, slots, rt.DeltaRuleParams{}))
	for _, c := range [][2]*rt.Tensor{{conv, wantConv}, {convStates, wantConvStates}, {out, wantOut}, {states, wantStates}} {
		if d := maxDiff(c[0].F32(), c[1].F32()); d != 0 {
			t.Errorf("%v: differs from the per-sequence op by %g", c[0].Shape(), d)
		}
	}
	for _, bad := range [][]int32{{3, 0, 3}, {3, 0, 5}, {3, 0}} {
		err := be.Conv1dSlots(conv, x, w, convStates, bad, true)
		if !errors.Is(err, rt.ErrShape) {
			t.Errorf("slots %v: %v, want a shape error", bad, err)
		}
		if err := be.DeltaRuleSlots(out, q, k, v, g, beta, states, bad, rt.DeltaRuleParams{}); !errors.Is(err, rt.ErrShape) {
			t.Errorf("delta rule slots %v: %v, want a shape error", bad, err)
		}
	}
}

// TestDeltaRuleNormalisesQK checks the delta rule that normalises q and k
// as it reads them against the chain it replaces, L2Norm then the rule, in
// each of its forms.
func TestDeltaRuleNormalisesQK(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewPCG(21, 22))
	const T, hk, hv, dk, dv, S = 9, 2, 4, 16, 8, 3
	q, k, v := random(rng, 1, T, hk, dk), random(rng, 1, T, hk, dk), random(rng, 1, T, hv, dv)
	g, beta := random(rng, 0.1, T, hv), random(rng, 0.5, T, hv)
	qn, kn := clone(q), clone(k)
	must(t, be.L2Norm(qn, qn, 1e-6))
	must(t, be.L2Norm(kn, kn, 1e-6))
	fused := ruleOperands{q, k, v, g, beta, rt.DeltaRuleParams{Chunk: 4, QKNormEps: 1e-6}}
	chain := ruleOperands{qn, kn, v, g, beta, rt.DeltaRuleParams{Chunk: 4}}
	deltaRuleFormsAgree(t, be, random(rng, 0.1, hv, dk, dv), random(rng, 0.1, S, hv, dk, dv), fused, chain)
}

// ruleOperands are the inputs of a delta rule call besides its state.
type ruleOperands struct {
	q, k, v, g, beta *rt.Tensor
	p                rt.DeltaRuleParams
}

// deltaRuleFormsAgree runs each form of the delta rule (recurrent and
// chunked from state, slots over the first rows from states) on a fused
// and a chained set of operands, and wants outputs and states the same.
func deltaRuleFormsAgree(t *testing.T, be *rt.Backend, state, states *rt.Tensor, fused, chain ruleOperands) {
	t.Helper()
	T, hv, dv := fused.v.Dim(0), fused.v.Dim(1), fused.v.Dim(2)
	forms := map[string]func(out, st *rt.Tensor, o ruleOperands) error{
		"recurrent": func(out, st *rt.Tensor, o ruleOperands) error {
			return be.DeltaRuleRecurrent(out, o.q, o.k, o.v, o.g, o.beta, st, o.p)
		},
		"chunked": func(out, st *rt.Tensor, o ruleOperands) error {
			return be.DeltaRuleChunked(out, o.q, o.k, o.v, o.g, o.beta, st, o.p)
		},
	}
	slots := []int32{2, 0, 1}
	forms["slots"] = func(out, st *rt.Tensor, o ruleOperands) error {
		rows := func(x *rt.Tensor) *rt.Tensor { r, _ := x.Slice(0, 0, len(slots)); return r }
		return be.DeltaRuleSlots(rows(out), rows(o.q), rows(o.k), rows(o.v), rows(o.g), rows(o.beta), st, slots, o.p)
	}
	for name, f := range forms {
		st := state
		if name == "slots" {
			st = states
		}
		outF, outC := rt.New(rt.F32, T, hv, dv), rt.New(rt.F32, T, hv, dv)
		stF, stC := clone(st), clone(st)
		must(t, f(outF, stF, fused))
		must(t, f(outC, stC, chain))
		if d := maxDiff(outF.F32(), outC.F32()); d != 0 {
			t.Errorf("%s: outputs differ from the chain by %g", name, d)
		}
		if d := maxDiff(stF.F32(), stC.F32()); d != 0 {
			t.Errorf("%s: states differ from the chain by %g", name, d)
		}
	}
}

// TestDeltaRuleGates checks the delta rule that gates the raw a and b
// projections as it reads them against the chain it replaces, GDNGating
// then the rule, in each of its forms, and that both gating parameters
// are required.
func TestDeltaRuleGates(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewPCG(23, 24))
	const T, hk, hv, dk, dv, S = 9, 2, 4, 16, 8, 3
	q, k, v := random(rng, 1, T, hk, dk), random(rng, 1, T, hk, dk), random(rng, 1, T, hv, dv)
	a, b := random(rng, 3, T, hv), random(rng, 3, T, hv)
	aLog, dtBias := random(rng, 1, hv), random(rng, 1, hv)
	aLog.F32()[0], a.F32()[1] = 0, 30 // softplus's linear branch too
	g, beta := rt.New(rt.F32, T, hv), rt.New(rt.F32, T, hv)
	must(t, be.GDNGating(g, beta, a, b, aLog, dtBias))
	state := random(rng, 0.1, hv, dk, dv)
	gated := rt.DeltaRuleParams{Chunk: 4, QKNormEps: 1e-6, ALog: aLog, DtBias: dtBias}
	fused := ruleOperands{q, k, v, a, b, gated}
	chain := ruleOperands{q, k, v, g, beta, rt.DeltaRuleParams{Chunk: 4, QKNormEps: 1e-6}}
	deltaRuleFormsAgree(t, be, state, random(rng, 0.1, S, hv, dk, dv), fused, chain)
	out, st := rt.New(rt.F32, T, hv, dv), clone(state)
	half := rt.DeltaRuleParams{Chunk: 4, ALog: aLog}
	if err := be.DeltaRuleRecurrent(out, q, k, v, a, b, st, half); !errors.Is(err, rt.ErrShape) {
		t.Errorf("A_log without dt_bias: %v, want a shape error", err)
	}
	short := rt.DeltaRuleParams{Chunk: 4, ALog: aLog, DtBias: random(rng, 1, hv-1)}
	if err := be.DeltaRuleRecurrent(out, q, k, v, a, b, st, short); !errors.Is(err, rt.ErrShape) || !strings.Contains(err.Error(), "dt_bias") {
		t.Errorf("dt_bias of %d for %d heads: %v, want a shape error naming it", hv-1, hv, err)
	}
}

// TestMatMulSwiGLUMatchesChain checks matmul_swiglu against matmul of the
// stacked gate and up weights then swiglu, and its shape checks.
func TestMatMulSwiGLUMatchesChain(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewPCG(25, 26))
	const I, K = 37, 256
	for _, dt := range []rt.DType{rt.F32, rt.BF16, rt.F16, rt.Q8_0, rt.Q4_K, rt.Q6_K} {
		w, err := quant.Tensor(dt, random(rng, 0.1, 2*I, K).F32(), 2*I, K)
		must(t, err)
		for _, M := range []int{1, 4} {
			x := random(rng, 1, M, K)
			fused, chain, gu := rt.New(rt.F32, M, I), rt.New(rt.F32, M, I), rt.New(rt.F32, M, 2*I)
			must(t, be.MatMulSwiGLU(fused, x, w))
			must(t, be.MatMul(gu, x, w))
			g, _ := gu.Slice(1, 0, I)
			u, _ := gu.Slice(1, I, 2*I)
			must(t, be.SwiGLU(chain, g, u))
			if d := maxDiff(fused.F32(), chain.F32()); d != 0 {
				t.Errorf("%v M=%d: differs from the chain by %g", dt, M, d)
			}
		}
	}
	w, x := random(rng, 0.1, 2*I+1, K), random(rng, 1, 1, K)
	if err := be.MatMulSwiGLU(rt.New(rt.F32, 1, I), x, w); !errors.Is(err, rt.ErrShape) || !strings.Contains(err.Error(), "2 parts") {
		t.Errorf("w of %d rows: %v, want a shape error about its parts", 2*I+1, err)
	}
	w = random(rng, 0.1, 2*I, K)
	if err := be.MatMulSwiGLU(rt.New(rt.F32, 1, 2*I), x, w); !errors.Is(err, rt.ErrShape) || !strings.Contains(err.Error(), "matmul_swiglu") {
		t.Errorf("dst as wide as w: %v, want a shape error naming the op", err)
	}
}

// TestArgmax: ties go to the lower index, NaN never wins, and a row of
// NaN (a broken step) still names a token.
func TestArgmax(t *testing.T) {
	be := backend(t)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	rows := [][]float32{
		{1, 3, 2, 3},
		{nan, -1, nan, -2},
		{nan, nan, nan, nan},
		{-inf, -inf, -inf, -inf},
		{0, inf, nan, inf},
	}
	want := []int32{1, 1, 0, 0, 1}
	x := rt.New(rt.F32, len(rows), 4)
	for r, v := range rows {
		copy(x.F32()[r*4:], v)
	}
	dst := rt.New(rt.I32, len(rows))
	must(t, be.Argmax(dst, x))
	if got := dst.I32(); !slices.Equal(got, want) {
		t.Errorf("argmax %v, want %v", got, want)
	}
	if err := be.Argmax(rt.New(rt.F32, len(rows)), x); !errors.Is(err, rt.ErrDType) {
		t.Errorf("an f32 dst: %v, want %v", err, rt.ErrDType)
	}
	if err := be.Argmax(rt.New(rt.I32, 3), x); !errors.Is(err, rt.ErrShape) {
		t.Errorf("3 ids for 5 rows: %v, want %v", err, rt.ErrShape)
	}
}

// TestAttentionRowBitsIndependentOfChunks: a token's attention output has
// the same bits in a prefill of the whole sequence and as a decode step on
// its own, so that a request's output does not depend on how the scheduler
// cut it (preemption recomputes sequences in other chunks).
func TestAttentionRowBitsIndependentOfChunks(t *testing.T) {
	cpu.EachKernelSet(t, testAttentionRowBitsIndependentOfChunks)
}

func testAttentionRowBitsIndependentOfChunks(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewPCG(21, 22))
	hq, hkv, d, bs, n := 8, 2, 64, 8, 13
	kc, vc := random(rng, 1, 4*bs, hkv, d), random(rng, 1, 4*bs, hkv, d)
	blocks := []int32{2, 0}
	q := random(rng, 1, n, hq, d)
	scale := float32(1 / math.Sqrt(float64(d)))
	whole := rt.New(rt.F32, n, hq, d)
	must(t, be.Attention(whole, q, kc, vc, []rt.AttnSeq{{Row: 0, Len: n, Start: 0, Blocks: blocks}}, bs, scale))
	for tok := range n {
		qt, _ := q.Slice(0, tok, tok+1)
		one := rt.New(rt.F32, 1, hq, d)
		must(t, be.Attention(one, qt, kc, vc, []rt.AttnSeq{{Row: 0, Len: 1, Start: tok, Blocks: blocks}}, bs, scale))
		for i, v := range one.F32() {
			if w := whole.F32()[tok*hq*d+i]; math.Float32bits(v) != math.Float32bits(w) {
				t.Fatalf("token %d, element %d: %v alone, %v in the prefill", tok, i, v, w)
			}
		}
	}
}
