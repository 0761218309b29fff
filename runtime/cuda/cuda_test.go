//go:build linux && amd64

package cuda_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/model/qwen35"

	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/backends"
	"github.com/govllm/govllm/runtime/cpu"
	"github.com/govllm/govllm/runtime/cuda"
	"github.com/govllm/govllm/runtime/quant"
)

// pair runs each op on the CPU and on the GPU from the same inputs.
type pair struct {
	t        *testing.T
	ctx      *cuda.Context
	cpu, gpu *rt.Backend
	rng      *rand.Rand
	dev      map[*rt.Tensor]*rt.Tensor // host tensor → its device copy
}

func newPair(t *testing.T) *pair {
	t.Helper()
	ctx, err := cuda.Open()
	if errors.Is(err, cuda.ErrUnavailable) {
		t.Skipf("no CUDA here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	reg := rt.NewRegistry()
	if err := cpu.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := cuda.Register(reg); err != nil {
		t.Fatal(err)
	}
	return &pair{t: t, ctx: ctx, cpu: rt.NewBackend(reg, rt.CPU), gpu: rt.NewBackend(reg, rt.CUDA),
		rng: rand.New(rand.NewPCG(1, 2)), dev: map[*rt.Tensor]*rt.Tensor{}}
}

func (p *pair) random(scale float32, shape ...int) *rt.Tensor {
	x := rt.New(rt.F32, shape...)
	for i := range x.F32() {
		x.F32()[i] = float32(p.rng.NormFloat64()) * scale
	}
	return x
}

// d is the device copy of host tensor h (made once).
func (p *pair) d(h *rt.Tensor) *rt.Tensor {
	if g, ok := p.dev[h]; ok {
		return g
	}
	g, err := p.ctx.Upload(h)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { p.ctx.Free(g) })
	p.dev[h] = g
	return g
}

// same checks that the device copy of each host tensor equals it within tol
// (relative to the largest magnitude).
func (p *pair) same(tol float64, hs ...*rt.Tensor) {
	p.t.Helper()
	if err := p.ctx.Sync(); err != nil {
		p.t.Fatal(err)
	}
	for _, h := range hs {
		got := rt.New(rt.F32, h.Shape()...)
		if err := p.ctx.Download(got, p.d(h)); err != nil {
			p.t.Fatal(err)
		}
		var diff, scale float64
		for i, w := range h.F32()[:h.Len()] {
			diff = max(diff, math.Abs(float64(got.F32()[i])-float64(w)))
			scale = max(scale, math.Abs(float64(w)))
		}
		if diff > tol*max(scale, 1e-6) || math.IsNaN(diff) {
			p.t.Errorf("%v: max difference %.3g against a largest value of %.3g", h.Shape(), diff, scale)
		}
	}
}

// both runs f on the GPU, then on the CPU: a tensor's device copy is made
// at its first use, before the CPU run changes it in place.
func (p *pair) both(f func(b *rt.Backend, d func(*rt.Tensor) *rt.Tensor) error) {
	p.t.Helper()
	if err := f(p.gpu, p.d); err != nil {
		p.t.Fatal("cuda: ", err)
	}
	if err := f(p.cpu, func(h *rt.Tensor) *rt.Tensor { return h }); err != nil {
		p.t.Fatal("cpu: ", err)
	}
}

func TestElementwiseAgreesWithCPU(t *testing.T) {
	p := newPair(t)
	const rows, cols = 37, 1000
	a, b, z, w := p.random(1, rows, cols), p.random(1, rows, cols), p.random(1, rows, cols), p.random(0.3, cols)
	g1 := p.random(2, rows, 1)
	sum, s, sw, sm, sm1 := rt.New(rt.F32, rows, cols), rt.New(rt.F32, rows, cols), rt.New(rt.F32, rows, cols), rt.New(rt.F32, rows, cols), rt.New(rt.F32, rows, cols)
	n, no, gn, l2 := rt.New(rt.F32, rows, cols), rt.New(rt.F32, rows, cols), rt.New(rt.F32, rows, cols), rt.New(rt.F32, rows, cols)
	res, an := p.random(1, rows, cols), rt.New(rt.F32, rows, cols)
	p.both(func(be *rt.Backend, d func(*rt.Tensor) *rt.Tensor) error {
		for _, err := range []error{
			be.Add(d(sum), d(a), d(b)), be.SiLU(d(s), d(a)), be.SwiGLU(d(sw), d(a), d(b)),
			be.SigmoidMul(d(sm), d(a), d(b)), be.SigmoidMul(d(sm1), d(a), d(g1)),
			be.RMSNorm(d(n), d(a), d(w), 1e-6), be.RMSNormOffset(d(no), d(a), d(w), 1e-6),
			be.GatedRMSNorm(d(gn), d(a), d(z), d(w), 1e-6), be.L2Norm(d(l2), d(b), 1e-6),
			be.AddRMSNormOffset(d(an), d(res), d(b), d(w), 1e-6),
		} {
			if err != nil {
				return err
			}
		}
		return nil
	})
	p.same(1e-5, sum, s, sw, sm, sm1, n, no, gn, l2, res, an)
}

// TestAttentionOpsAgreeWithCPU runs the fused preamble (writing the
// caches) and its chain on qg, k and v as head-split views of one
// projection's rows, as the model has them.
func TestAttentionOpsAgreeWithCPU(t *testing.T) {
	p := newPair(t)
	const T, hq, hkv, dim, slots = 5, 8, 2, 256, 9
	positions := []int32{3, 4, 5, 6, 7}
	kvSlots := []int32{8, 0, 3, 4, 1}
	views := func(proj *rt.Tensor) (qg, k, v *rt.Tensor) {
		return columns(t, proj, 0, hq*2*dim, T, hq, 2*dim), columns(t, proj, hq*2*dim, (hq*2+hkv)*dim, T, hkv, dim),
			columns(t, proj, (hq*2+hkv)*dim, (hq*2+2*hkv)*dim, T, hkv, dim)
	}
	for _, rd := range []int{0, 64, dim} {
		proj := p.random(1, T, (hq*2+2*hkv)*dim)
		proj2 := hostCopy(proj)
		q, gate := rt.New(rt.F32, T, hq, dim), rt.New(rt.F32, T, hq, dim)
		q2, gate2 := rt.New(rt.F32, T, hq, dim), rt.New(rt.F32, T, hq, dim)
		kc, vc, kc2, vc2 := rt.New(rt.F32, slots, hkv, dim), rt.New(rt.F32, slots, hkv, dim), rt.New(rt.F32, slots, hkv, dim), rt.New(rt.F32, slots, hkv, dim)
		qw, kw := p.random(0.2, dim), p.random(0.2, dim)
		p.both(func(be *rt.Backend, d func(*rt.Tensor) *rt.Tensor) error {
			qg, k, v := views(d(proj))
			params := rt.PreambleParams{RotaryDim: rd, Theta: 1e7, Eps: 1e-6, KCache: d(kc), VCache: d(vc), V: v, Slots: kvSlots}
			if err := be.AttnPreamble(d(q), d(gate), qg, k, d(qw), d(kw), positions, params); err != nil {
				return err
			}
			// The composite path: split, norms, rotations, cache writes.
			qg, k, v = views(d(proj2))
			if err := be.SplitQueryGate(d(q2), d(gate2), qg); err != nil {
				return err
			}
			if err := be.RMSNormOffset(d(q2), d(q2), d(qw), 1e-6); err != nil {
				return err
			}
			if err := be.RMSNormOffset(k, k, d(kw), 1e-6); err != nil {
				return err
			}
			if err := be.RoPENeoX(d(q2), positions, rd, 1e7); err != nil {
				return err
			}
			if err := be.RoPENeoX(k, positions, rd, 1e7); err != nil {
				return err
			}
			if err := be.KVWrite(d(kc2), k, kvSlots); err != nil {
				return err
			}
			return be.KVWrite(d(vc2), v, kvSlots)
		})
		p.same(1e-5, q, gate, proj, kc, vc, q2, gate2, proj2, kc2, vc2)
	}
}

func TestPagedAttentionAgreesWithCPU(t *testing.T) {
	p := newPair(t)
	const hq, hkv, dim, bs, blocks = 8, 2, 256, 16, 12
	for _, seqs := range [][]rt.AttnSeq{
		// 40 cached tokens + 3 new, and a fresh prompt of 20 (tiles of rows).
		{{Row: 0, Len: 3, Start: 40, Blocks: []int32{7, 2, 9}}, {Row: 3, Len: 20, Start: 0, Blocks: []int32{4, 0}}},
		// A decode step (a row a sequence).
		{{Row: 0, Len: 1, Start: 42, Blocks: []int32{7, 2, 9}}, {Row: 1, Len: 1, Start: 19, Blocks: []int32{4, 0}}},
		// A prompt of several row and key tiles beside a decode row.
		{{Row: 0, Len: 45, Start: 0, Blocks: []int32{1, 3, 5}}, {Row: 45, Len: 1, Start: 30, Blocks: []int32{4, 0}}},
	} {
		kc, vc := rt.New(rt.F32, blocks*bs, hkv, dim), rt.New(rt.F32, blocks*bs, hkv, dim)
		var slots []int32
		rows := 0
		for _, s := range seqs {
			rows += s.Len
			for pos := range s.Start + s.Len {
				slots = append(slots, s.Blocks[pos/bs]*bs+int32(pos%bs))
			}
		}
		kx, vx := p.random(1, len(slots), hkv, dim), p.random(1, len(slots), hkv, dim)
		q := p.random(1, rows, hq, dim)
		out := rt.New(rt.F32, rows, hq, dim)
		p.both(func(be *rt.Backend, d func(*rt.Tensor) *rt.Tensor) error {
			if err := be.KVWrite(d(kc), d(kx), slots); err != nil {
				return err
			}
			if err := be.KVWrite(d(vc), d(vx), slots); err != nil {
				return err
			}
			return be.Attention(d(out), d(q), d(kc), d(vc), seqs, bs, 1/16.)
		})
		p.same(1e-5, kc, vc, out)
	}
}

func TestDeltaNetOpsAgreeWithCPU(t *testing.T) {
	p := newPair(t)
	const hk, hv, dk, dv, C, K = 4, 8, 128, 128, 96, 4
	for _, T := range []int{1, 70} {
		x, w := p.random(1, T, C), p.random(0.5, C, K)
		state, conv := p.random(1, K-1, C), rt.New(rt.F32, T, C)
		a, b, alog, dtb := p.random(1, T, hv), p.random(1, T, hv), p.random(0.5, hv), p.random(0.5, hv)
		g, beta := rt.New(rt.F32, T, hv), rt.New(rt.F32, T, hv)
		q, k, v := p.random(1, T, hk, dk), p.random(1, T, hk, dk), p.random(1, T, hv, dv)
		rec, chunked := rt.New(rt.F32, T, hv, dv), rt.New(rt.F32, T, hv, dv)
		s0 := p.random(0.1, hv, dk, dv)
		s1, s2, s3 := hostCopy(s0), hostCopy(s0), hostCopy(s0)
		// The fused forms take q and k as they are and normalise them, and
		// a and b as they are and gate them.
		qRaw, kRaw := hostCopy(q), hostCopy(k)
		recFused, chunkedFused := rt.New(rt.F32, T, hv, dv), rt.New(rt.F32, T, hv, dv)
		p.both(func(be *rt.Backend, d func(*rt.Tensor) *rt.Tensor) error {
			if err := be.Conv1dCausal(d(conv), d(x), d(w), d(state), T == 1); err != nil {
				return err
			}
			if err := be.GDNGating(d(g), d(beta), d(a), d(b), d(alog), d(dtb)); err != nil {
				return err
			}
			if err := be.L2Norm(d(q), d(q), 1e-6); err != nil {
				return err
			}
			if err := be.L2Norm(d(k), d(k), 1e-6); err != nil {
				return err
			}
			if err := be.DeltaRuleRecurrent(d(rec), d(q), d(k), d(v), d(g), d(beta), d(s0), rt.DeltaRuleParams{}); err != nil {
				return err
			}
			return be.DeltaRuleChunked(d(chunked), d(q), d(k), d(v), d(g), d(beta), d(s1), rt.DeltaRuleParams{Chunk: 64, TiledHeads: true})
		})
		p.both(func(be *rt.Backend, d func(*rt.Tensor) *rt.Tensor) error {
			fused := rt.DeltaRuleParams{Chunk: 64, QKNormEps: 1e-6, ALog: d(alog), DtBias: d(dtb)}
			if err := be.DeltaRuleRecurrent(d(recFused), d(qRaw), d(kRaw), d(v), d(a), d(b), d(s2), fused); err != nil {
				return err
			}
			fused.TiledHeads = true
			return be.DeltaRuleChunked(d(chunkedFused), d(qRaw), d(kRaw), d(v), d(a), d(b), d(s3), fused)
		})
		p.same(1e-4, conv, state, g, beta, rec, s0, chunked, s1, recFused, s2, chunkedFused, s3)
		for _, c := range [][2]*rt.Tensor{{recFused, rec}, {s2, s0}, {chunkedFused, chunked}, {s3, s1}} {
			if d, _ := oracle.MaxDiff(c[0].F32(), c[1].F32()); d != 0 {
				t.Errorf("T=%d: on the CPU the delta rule normalising q and k and gating differs from L2Norm, GDNGating and the rule by %g", T, d)
			}
		}
	}
}

// TestHeadSplitViewsAgreeWithCPU feeds the DeltaNet ops the views the
// model makes of one projection output: q, k, v and z as head-split column
// ranges of wider rows, read and (L2Norm) written in place.
func TestHeadSplitViewsAgreeWithCPU(t *testing.T) {
	p := newPair(t)
	const T, hk, hv, dk, dv = 5, 2, 4, 64, 32
	kd, vd := hk*dk, hv*dv
	width := 2*kd + 2*vd + 3 // q | k | v | z | padding
	mixed, w := p.random(1, T, width), p.random(0.3, dv)
	g, beta := p.random(0.1, T, hv), p.random(0.5, T, hv)
	state, out, normed := p.random(0.1, hv, dk, dv), rt.New(rt.F32, T, hv, dv), rt.New(rt.F32, T, hv, dv)
	view := func(x *rt.Tensor, c0, c1, heads int) *rt.Tensor {
		s, err := x.Slice(1, c0, c1)
		if err != nil {
			t.Fatal(err)
		}
		return s.MustReshape(T, heads, (c1-c0)/heads)
	}
	p.both(func(be *rt.Backend, d func(*rt.Tensor) *rt.Tensor) error {
		m := d(mixed)
		qk := view(m, 0, 2*kd, 2*hk)
		if err := be.L2Norm(qk, qk, 1e-6); err != nil {
			return err
		}
		q, _ := qk.Slice(1, 0, hk)
		k, _ := qk.Slice(1, hk, 2*hk)
		v, z := view(m, 2*kd, 2*kd+vd, hv), view(m, 2*kd+vd, 2*kd+2*vd, hv)
		if err := be.DeltaRuleRecurrent(d(out), q, k, v, d(g), d(beta), d(state), rt.DeltaRuleParams{}); err != nil {
			return err
		}
		return be.GatedRMSNorm(d(normed), d(out), z, d(w), 1e-6)
	})
	p.same(1e-4, mixed, out, state, normed)
}

// TestSlotOpsAgreeWithCPU runs the decode-step forms, one token of each of
// several sequences against scattered state slots.
func TestSlotOpsAgreeWithCPU(t *testing.T) {
	p := newPair(t)
	const hk, hv, dk, dv, C, K, S = 2, 4, 64, 96, 80, 4, 8
	slots := []int32{6, 1, 3, 0, 7}
	n := len(slots)
	x, w, convStates, conv := p.random(1, n, C), p.random(0.5, C, K), p.random(1, S, K-1, C), rt.New(rt.F32, n, C)
	q, k, v := p.random(0.3, n, hk, dk), p.random(0.3, n, hk, dk), p.random(1, n, hv, dv)
	g, beta := p.random(0.1, n, hv), p.random(0.5, n, hv)
	states, out := p.random(0.1, S, hv, dk, dv), rt.New(rt.F32, n, hv, dv)
	p.both(func(be *rt.Backend, d func(*rt.Tensor) *rt.Tensor) error {
		if err := be.Conv1dSlots(d(conv), d(x), d(w), d(convStates), slots, true); err != nil {
			return err
		}
		return be.DeltaRuleSlots(d(out), d(q), d(k), d(v), d(g), d(beta), d(states), slots, rt.DeltaRuleParams{TiledHeads: true})
	})
	p.same(1e-4, conv, convStates, out, states)
	// The model's decode form: q and k normalised and a and b gated in the rule.
	a, b, alog, dtb := p.random(1, n, hv), p.random(1, n, hv), p.random(0.5, hv), p.random(0.5, hv)
	out = rt.New(rt.F32, n, hv, dv)
	p.both(func(be *rt.Backend, d func(*rt.Tensor) *rt.Tensor) error {
		fused := rt.DeltaRuleParams{QKNormEps: 1e-6, ALog: d(alog), DtBias: d(dtb)}
		return be.DeltaRuleSlots(d(out), d(q), d(k), d(v), d(a), d(b), d(states), slots, fused)
	})
	p.same(1e-4, out, states)
}

// columns is x's columns lo..hi (a view of its rows), reshaped to shape
// when one is given.
func columns(t *testing.T, x *rt.Tensor, lo, hi int, shape ...int) *rt.Tensor {
	t.Helper()
	v, err := x.Slice(1, lo, hi)
	if err == nil && len(shape) > 0 {
		v, err = v.Reshape(shape...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// hostCopy is a copy of host tensor h.
func hostCopy(h *rt.Tensor) *rt.Tensor {
	o := rt.New(rt.F32, h.Shape()...)
	copy(o.F32(), h.F32())
	return o
}

// TestDeltaNetStepAgreesWithCPU runs deltanet_step and the chain it
// replaces (conv1d_causal_slots, delta_rule_slots, gated_rms_norm) on both
// backends, on views of one projection's rows as the model has them: key
// heads tiled and grouped, a column count that leaves dead lanes, one
// sequence and several.
func TestDeltaNetStepAgreesWithCPU(t *testing.T) {
	p := newPair(t)
	const hk, hv, K, S = 2, 4, 4, 8
	for _, c := range []struct {
		dk, dv int
		tiled  bool
		slots  []int32
	}{{64, 36, true, []int32{6, 1, 3, 0, 7}}, {16, 16, false, []int32{5}}, {128, 128, false, []int32{2, 4}}} {
		n, C := len(c.slots), 2*hk*c.dk+hv*c.dv
		width := C + hv*c.dv + 2*hv // [qkv | z | b | a], as the fused input projection
		proj := p.random(1, n, width)
		w, alog, dtb, norm := p.random(0.5, C, K), p.random(0.5, hv), p.random(0.5, hv), p.random(0.5, c.dv)
		convInit, recInit := p.random(1, S, K-1, C), p.random(0.1, S, hv, c.dk, c.dv)
		convF, recF, convC, recC := hostCopy(convInit), hostCopy(recInit), hostCopy(convInit), hostCopy(recInit)
		outF, outC, mixed := rt.New(rt.F32, n, hv, c.dv), rt.New(rt.F32, n, hv, c.dv), rt.New(rt.F32, n, C)
		rule := func(d func(*rt.Tensor) *rt.Tensor) rt.DeltaRuleParams {
			return rt.DeltaRuleParams{TiledHeads: c.tiled, QKNormEps: 1e-6, ALog: d(alog), DtBias: d(dtb)}
		}
		p.both(func(be *rt.Backend, d func(*rt.Tensor) *rt.Tensor) error {
			pr := d(proj)
			qkv, z := columns(t, pr, 0, C), columns(t, pr, C, C+hv*c.dv, n, hv, c.dv)
			b, a := columns(t, pr, C+hv*c.dv, C+hv*c.dv+hv), columns(t, pr, C+hv*c.dv+hv, width)
			s := rt.DeltaNetStepArgs{Out: d(outF), QKV: qkv, Z: z, A: a, B: b, ConvW: d(w), ConvStates: d(convF), RecStates: d(recF),
				Norm: d(norm), Slots: c.slots, KeyHeads: hk, KeyDim: c.dk, Rule: rule(d), NormEps: 1e-6}
			if err := be.DeltaNetStep(&s); err != nil {
				return err
			}
			if err := be.Conv1dSlots(d(mixed), qkv, d(w), d(convC), c.slots, true); err != nil {
				return err
			}
			qk := columns(t, d(mixed), 0, 2*hk*c.dk, n, 2*hk, c.dk)
			if err := be.DeltaRuleSlots(d(outC), columns(t, qk, 0, hk), columns(t, qk, hk, 2*hk), columns(t, d(mixed), 2*hk*c.dk, C, n, hv, c.dv),
				a, b, d(recC), c.slots, rule(d)); err != nil {
				return err
			}
			return be.GatedRMSNorm(d(outC), d(outC), z, d(norm), 1e-6)
		})
		p.same(1e-4, outF, convF, recF, outC, convC, recC)
		for _, pair := range [][2]*rt.Tensor{{outF, outC}, {convF, convC}, {recF, recC}} {
			var diff float64
			for i, v := range pair[0].F32() {
				diff = max(diff, math.Abs(float64(v-pair[1].F32()[i])))
			}
			if diff > 1e-6 {
				t.Errorf("dk %d dv %d: on the CPU the step and its chain differ by %g", c.dk, c.dv, diff)
			}
		}
	}
}

func TestMatMulAndEmbeddingAgreeWithCPU(t *testing.T) {
	p := newPair(t)
	const K = 1024
	for _, c := range []struct { // N % 4 != 0: sum_halves' scalar tail
		dt rt.DType
		N  int
	}{{rt.F32, 300}, {rt.BF16, 300}, {rt.F16, 300}, {rt.BF16, 301}} {
		dt, N := c.dt, c.N
		wf := p.random(0.05, N, K)
		w := wf
		if dt != rt.F32 {
			w = rt.New(dt, N, K)
			for i, f := range wf.F32()[:wf.Len()] {
				if dt == rt.BF16 {
					w.U16()[i] = rt.F32ToBF16(f)
				} else {
					w.U16()[i] = rt.F32ToF16(f)
				}
			}
		}
		// One row takes the GEMV kernel (x in f32), more cuBLAS with x
		// split into hi and lo 16-bit parts: x kept to ~2^-17 either way.
		for _, M := range []int{1, 2, 7, 9, 16, 17, 64, 65} {
			x := p.random(1, M, K)
			out := rt.New(rt.F32, M, N)
			emb := rt.New(rt.F32, 3, K)
			p.both(func(be *rt.Backend, d func(*rt.Tensor) *rt.Tensor) error {
				if err := be.MatMul(d(out), d(x), d(w)); err != nil {
					return err
				}
				return be.Embedding(d(emb), d(w), []int32{5, 0, int32(N - 1)})
			})
			tol := 1e-5
			if dt != rt.F32 && M > 1 {
				tol = 1e-4
			}
			p.t.Logf("%v M=%d", dt, M)
			p.same(tol, out)
			p.same(0, emb)
		}
	}
}

// TestQuantizedMatMulAgreesWithCPU covers every block format the backend
// takes (those of Q8_0 and Q4_K_M files with kernels of their own, the rest
// through load8_more): the fused GEMV (up to 8 rows), the bf16
// dequantisation for cuBLAS (more rows) and the embedding.
func TestQuantizedMatMulAgreesWithCPU(t *testing.T) {
	p := newPair(t)
	const N, K = 300, 1024
	for _, dt := range []rt.DType{rt.Q8_0, rt.Q4_K, rt.Q6_K, rt.Q5_K, rt.Q4_0, rt.Q4_1, rt.Q5_0, rt.Q5_1, rt.IQ4_NL, rt.IQ4_XS, rt.Q2_K, rt.Q3_K} {
		wf := p.random(0.05, N, K)
		raw, err := quant.Quantize(dt, wf.F32()[:wf.Len()])
		if err != nil {
			t.Fatal(err)
		}
		w, err := rt.FromBytes(dt, raw, N, K)
		if err != nil {
			t.Fatal(err)
		}
		for _, M := range []int{1, 8, 9, 64} {
			x := p.random(1, M, K)
			out := rt.New(rt.F32, M, N)
			emb := rt.New(rt.F32, 3, K)
			p.both(func(be *rt.Backend, d func(*rt.Tensor) *rt.Tensor) error {
				if err := be.MatMul(d(out), d(x), d(w)); err != nil {
					return err
				}
				return be.Embedding(d(emb), d(w), []int32{5, 0, N - 1})
			})
			// The CPU quantises x to 8 bits for Q8_0 and the k-quants;
			// more than 8 rows on the GPU round x to bf16.
			p.t.Logf("%v M=%d", dt, M)
			p.same(2e-2, out)
			p.same(1e-6, emb)
		}
		// A matrix of many rows (an lm_head) takes four rows a warp.
		const bigN, bigK = 33001, 256
		big, err := quant.Tensor(dt, p.random(0.05, bigN, bigK).F32()[:bigN*bigK], bigN, bigK)
		if err != nil {
			t.Fatal(err)
		}
		x, out := p.random(1, 1, bigK), rt.New(rt.F32, 1, bigN)
		p.both(func(be *rt.Backend, d func(*rt.Tensor) *rt.Tensor) error { return be.MatMul(d(out), d(x), d(big)) })
		p.same(2e-2, out)
	}
}

// TestMatMulSwiGLUMatchesChain runs matmul_swiglu against the chain it
// replaces (matmul of the stacked gate and up, then swiglu): on the GPU
// bit for bit at one row (the fused GEMV sums each row as the plain one
// does; more rows run the chain itself), and against the CPU.
func TestMatMulSwiGLUMatchesChain(t *testing.T) {
	p := newPair(t)
	for _, dt := range []rt.DType{rt.F32, rt.BF16, rt.F16, rt.Q8_0, rt.Q4_K, rt.Q6_K, rt.Q5_K, rt.Q4_0, rt.Q5_1, rt.IQ4_XS, rt.Q3_K, rt.Q2_K} {
		for _, shape := range [][2]int{{301, 512}, {1024, 1024}} { // an odd I leaves a warp one row
			I, K := shape[0], shape[1]
			w, err := quant.Tensor(dt, p.random(0.05, 2*I, K).F32()[:2*I*K], 2*I, K)
			if err != nil {
				t.Fatal(err)
			}
			for _, M := range []int{1, 5} {
				x := p.random(1, M, K)
				fused, chain, gu := rt.New(rt.F32, M, I), rt.New(rt.F32, M, I), rt.New(rt.F32, M, 2*I)
				p.both(func(be *rt.Backend, d func(*rt.Tensor) *rt.Tensor) error {
					if err := be.MatMulSwiGLU(d(fused), d(x), d(w)); err != nil {
						return err
					}
					if err := be.MatMul(d(gu), d(x), d(w)); err != nil {
						return err
					}
					g, _ := d(gu).Slice(1, 0, I)
					u, _ := d(gu).Slice(1, I, 2*I)
					return be.SwiGLU(d(chain), g, u)
				})
				p.t.Logf("%v I=%d K=%d M=%d", dt, I, K, M)
				p.same(2e-2, fused) // the CPU quantises x to 8 bits for block types
				got, want := rt.New(rt.F32, M, I), rt.New(rt.F32, M, I)
				if err := p.ctx.Download(got, p.d(fused)); err != nil {
					t.Fatal(err)
				}
				if err := p.ctx.Download(want, p.d(chain)); err != nil {
					t.Fatal(err)
				}
				if d, _ := oracle.MaxDiff(got.F32(), want.F32()); d != 0 {
					t.Errorf("%v I=%d M=%d: on the GPU matmul_swiglu differs from matmul then swiglu by %g", dt, I, M, d)
				}
			}
		}
	}
}

func TestCoverageMatrixHasCUDA(t *testing.T) {
	reg := rt.NewRegistry()
	if err := cuda.Register(reg); err != nil {
		t.Fatal(err)
	}
	for _, op := range []rt.OpID{rt.OpMatMul, rt.OpAttention, rt.OpDeltaRuleRecurrent, rt.OpAttnPreamble, rt.OpSplitQueryGate} {
		dt := rt.F32
		if op == rt.OpMatMul {
			dt = rt.BF16
		}
		if _, ok := reg.Selected(op, rt.CUDA, dt); !ok {
			t.Errorf("%s[%v] is not registered for cuda", op, dt)
		}
	}
	// Every GGML block type the CPU reads, the GPU reads too.
	for _, dt := range rt.DTypes {
		if !dt.Quantized() {
			continue
		}
		for _, op := range []rt.OpID{rt.OpMatMul, rt.OpMatMulSwiGLU, rt.OpEmbedding, rt.OpMoEExperts} {
			if _, ok := reg.Selected(op, rt.CUDA, dt); !ok {
				t.Errorf("%s[%v] is not registered for cuda", op, dt)
			}
		}
	}
}

// BenchmarkMatMulBF16 streams a 128 MiB bf16 weight (more than the L2) per
// call; the bytes/s it reports are the weight's read rate.
func BenchmarkMatMulBF16(b *testing.B) {
	ctx, err := cuda.Open()
	if err != nil {
		b.Skip(err)
	}
	reg := rt.NewRegistry()
	if err := cuda.Register(reg); err != nil {
		b.Fatal(err)
	}
	be := rt.NewBackend(reg, rt.CUDA)
	const N, K = 16384, 4096
	w, err := ctx.Alloc(rt.BF16, N, K)
	if err != nil {
		b.Fatal(err)
	}
	defer ctx.Free(w)
	for _, M := range []int{1, 8, 16, 64, 2048} {
		b.Run(fmt.Sprintf("M=%d", M), func(b *testing.B) {
			x, _ := ctx.Alloc(rt.F32, M, K)
			out, _ := ctx.Alloc(rt.F32, M, N)
			defer ctx.Free(x)
			defer ctx.Free(out)
			b.SetBytes(2 * N * K)
			for b.Loop() {
				if err := be.MatMul(out, x, w); err != nil {
					b.Fatal(err)
				}
				if err := ctx.Sync(); err != nil { // each call timed to its end
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(2*M*N*K)*float64(b.N)/b.Elapsed().Seconds()/1e12, "TFLOP/s")
		})
	}
}

// TestMoEExpertsAgreeWithCPU runs the routed experts both ways for 16-bit
// and quantized weights (gate and up Q4_K with down Q6_K, as in Q4_K_M
// files, Q5_K with Q6_K as in Q5_K_M ones, and gate and up of different
// types), at token counts on both
// sides of moeGEMVTokens and moeTileTokens (each of the three kernel paths). The CPU rounds x to 8 bits for
// quantized weights, twice in the chain (x, then the gated product): 3e-2
// there.
func TestMoEExpertsAgreeWithCPU(t *testing.T) {
	p := newPair(t)
	const E, k, H, I = 64, 8, 256, 512
	weight := func(dt rt.DType, n, kk int) *rt.Tensor {
		w, err := quant.Tensor(dt, p.random(0.05, n, kk).F32()[:n*kk], n, kk)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	for _, c := range []struct {
		gate, up, down rt.DType
		tol            float64
	}{{rt.BF16, rt.BF16, rt.BF16, 1e-4}, {rt.F32, rt.F32, rt.F32, 1e-4}, {rt.Q8_0, rt.Q8_0, rt.Q8_0, 3e-2},
		{rt.Q4_K, rt.Q4_K, rt.Q6_K, 3e-2}, {rt.Q4_K, rt.BF16, rt.Q8_0, 3e-2},
		{rt.Q5_K, rt.Q5_K, rt.Q6_K, 3e-2}, {rt.IQ4_XS, rt.Q4_0, rt.Q3_K, 3e-2}} {
		gate, up, down := make([]*rt.Tensor, E), make([]*rt.Tensor, E), make([]*rt.Tensor, E)
		dgate, dup, ddown := make([]*rt.Tensor, E), make([]*rt.Tensor, E), make([]*rt.Tensor, E)
		for e := range E {
			gate[e], up[e], down[e] = weight(c.gate, I, H), weight(c.up, I, H), weight(c.down, H, I)
			dgate[e], dup[e], ddown[e] = p.d(gate[e]), p.d(up[e]), p.d(down[e])
		}
		host, err := rt.NewExperts(gate, up, down, k)
		if err != nil {
			t.Fatal(err)
		}
		dev, err := rt.NewExperts(dgate, dup, ddown, k)
		if err != nil {
			t.Fatal(err)
		}
		for _, T := range []int{1, 4, 5, 40, 129} { // each side of moeGEMVTokens and moeTileTokens
			x, logits, out := p.random(1, T, H), p.random(2, T, E), rt.New(rt.F32, T, H)
			p.both(func(be *rt.Backend, d func(*rt.Tensor) *rt.Tensor) error {
				ex := host
				if be.Device() == rt.CUDA {
					ex = dev
				}
				return be.MoEExperts(d(out), d(x), d(logits), ex)
			})
			t.Logf("%v/%v/%v T=%d", c.gate, c.up, c.down, T)
			p.same(c.tol, out)
		}
	}
}

// TestOracleModelsCoveredOnCUDA: every op the bf16 oracle checkpoints need
// is registered for cuda; the GGUF files (Q8_0 and k-quants) are reported
// with their missing matmul dtypes. This needs no GPU.
func TestOracleModelsCoveredOnCUDA(t *testing.T) {
	reg := rt.NewRegistry()
	if err := cuda.Register(reg); err != nil {
		t.Fatal(err)
	}
	be := rt.NewBackend(reg, rt.CUDA)
	for _, name := range []string{"qwen35-dense", "qwen35-dense-norope", "qwen35moe"} {
		_, paths, err := qwen35.Plan(filepath.Join(oracle.Dir(t), name))
		if err != nil {
			t.Fatal(err)
		}
		if err := be.Check(paths); err != nil {
			t.Errorf("%s on cuda: %v", name, err)
		}
	}
}

// BenchmarkDecodeGEMVs times the GEMVs of a Qwen3.5-0.8B decode step (bf16,
// and the Q4_K, Q6_K and Q8_0 weights of its GGUF files)
// in CUDA graphs of 32 calls a shape (launch gaps included, as in a step);
// bytes/s is the weight's read rate.
func BenchmarkDecodeGEMVs(b *testing.B) {
	be, err := backends.New(rt.CUDA)
	if err != nil {
		b.Skip(err)
	}
	mem := be.Memory()
	step := mem.(rt.Stepper)
	regs, resident := cuda.KernelOccupancy("gemv_16")
	b.Logf("gemv_16: %d registers a thread, %d blocks resident", regs, resident)
	for _, s := range []struct {
		dt   rt.DType
		n, k int
	}{{rt.BF16, 8224, 1024}, {rt.BF16, 7168, 1024}, {rt.BF16, 1024, 2048}, {rt.BF16, 1024, 3584}, {rt.BF16, 248320, 1024},
		{rt.Q4_K, 8224, 1024}, {rt.Q6_K, 1024, 3584}, {rt.Q8_0, 8224, 1024}, {rt.Q6_K, 248320, 1024}} {
		name := fmt.Sprintf("%dx%d", s.n, s.k)
		if s.dt != rt.BF16 {
			name = fmt.Sprintf("%v/%s", s.dt, name)
		}
		b.Run(name, func(b *testing.B) {
			const calls = 32
			var ws []*rt.Tensor
			for range calls { // distinct weights: none stays in the L2
				w, err := mem.Alloc(s.dt, s.n, s.k)
				if err != nil {
					b.Skip(err)
				}
				ws = append(ws, w)
			}
			if s.n > 100000 {
				ws = ws[:4]
			}
			x, _ := mem.Alloc(rt.F32, 1, s.k)
			out, _ := mem.Alloc(rt.F32, 1, s.n)
			defer func() {
				for _, t := range append(ws, x, out) {
					mem.Free(t)
				}
			}()
			b.SetBytes(int64(s.dt.ByteLen(s.n*s.k) * len(ws)))
			run := func() error {
				for _, w := range ws {
					if err := be.MatMul(out, x, w); err != nil {
						return err
					}
				}
				return nil
			}
			for b.Loop() {
				stepAndWait(b, step, run)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(ws)), "µs/gemv")
		})
	}
}

// BenchmarkDependentKernels times a chain of small kernels in a graph, each
// reading what the one before wrote (a decode step is ~300 such kernels):
// the fixed cost of a kernel that programmatic dependent launch hides.
func BenchmarkDependentKernels(b *testing.B) {
	be, err := backends.New(rt.CUDA)
	if err != nil {
		b.Skip(err)
	}
	mem := be.Memory()
	step := mem.(rt.Stepper)
	const chain = 128
	x, err := mem.Alloc(rt.F32, 1, 1024)
	if err != nil {
		b.Skip(err)
	}
	y, _ := mem.Alloc(rt.F32, 1, 1024)
	defer mem.Free(x)
	defer mem.Free(y)
	run := func() error {
		for range chain / 2 {
			if err := be.Add(y, x, x); err != nil {
				return err
			}
			if err := be.Add(x, y, y); err != nil {
				return err
			}
		}
		return nil
	}
	for b.Loop() {
		stepAndWait(b, step, run)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N*chain), "µs/kernel")
}

func stepAndWait(t testing.TB, step rt.Stepper, f func() error) {
	t.Helper()
	is, err := step.Step(f)
	if err == nil {
		err = is.Wait()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestRecordAhead records a step without running it, restages its ids
// and issues it; a free makes a recording stale, and a step that needs the
// GPU mid-step cannot be recorded ahead and leaves no error behind.
func TestRecordAhead(t *testing.T) {
	p := newPair(t)
	be, err := backends.New(rt.CUDA)
	if err != nil {
		t.Fatal(err)
	}
	mem := be.Memory()
	step := mem.(rt.Stepper)
	table := p.random(1, 5, 8)
	dst, err := mem.Alloc(rt.F32, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Free(dst)
	ids, tab := []int32{1, 2}, p.d(table)
	embed := func() error { return be.Embedding(dst, tab, ids) }
	rec, err := step.Record(embed)
	if err != nil {
		t.Fatal(err)
	}
	ids[0], ids[1] = 3, 0
	if err := rec.Restage(ids); err != nil {
		t.Fatal(err)
	}
	is, err := rec.Issue()
	if err == nil {
		err = is.Wait()
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Issue(); !errors.Is(err, rt.ErrStaleRecording) {
		t.Errorf("a recording issued twice: %v", err)
	}
	got := rt.New(rt.F32, 2, 8)
	if err := mem.Copy(got, dst); err != nil {
		t.Fatal(err)
	}
	for r, id := range ids {
		for j := range 8 {
			if g, w := got.F32()[r*8+j], table.F32()[int(id)*8+j]; g != w {
				t.Fatalf("row %d col %d: %g, want table row %d's %g", r, j, g, id, w)
			}
		}
	}

	rec, err = step.Record(embed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := step.Record(embed); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Issue(); !errors.Is(err, rt.ErrStaleRecording) {
		t.Errorf("a recording replaced by another: %v", err)
	}
	rec, err = step.Record(embed)
	if err != nil {
		t.Fatal(err)
	}
	scratch, err := mem.Alloc(rt.F32, 4)
	if err != nil {
		t.Fatal(err)
	}
	mem.Free(scratch)
	if _, err := rec.Issue(); !errors.Is(err, rt.ErrStaleRecording) {
		t.Errorf("a recording after a free: %v", err)
	}

	if _, err := step.Record(func() error {
		if err := embed(); err != nil {
			return err
		}
		return mem.Copy(got, dst) // needs the GPU mid-step
	}); err == nil {
		t.Error("a step copying to the host was recorded ahead")
	}
	if err := mem.Sync(); err != nil {
		t.Errorf("a failed recording left an error behind: %v", err)
	}
}

// TestFeedFromStepBefore chains steps as greedy decoding does: a step's
// argmax is read back to the host by the step, and the step after it,
// recorded ahead, takes its ids from that argmax on the device; it is
// issued before the first is waited for. Several rounds, so that both
// halves of the staging ring and the captured graphs are used.
func TestFeedFromStepBefore(t *testing.T) {
	p := newPair(t)
	be, err := backends.New(rt.CUDA)
	if err != nil {
		t.Fatal(err)
	}
	mem := be.Memory()
	step := mem.(rt.Stepper)
	const rows, vocab = 3, 8
	table := p.random(2, vocab, vocab)
	scores := p.random(3, rows, vocab)
	tab, logits := p.d(table), p.d(scores)
	emb, _ := mem.Alloc(rt.F32, rows, vocab)
	mixed, _ := mem.Alloc(rt.F32, rows, vocab)
	tokens, _ := mem.Alloc(rt.I32, rows)
	defer func() {
		for _, x := range []*rt.Tensor{emb, mixed, tokens} {
			mem.Free(x)
		}
	}()
	// A step: embed ids, add the logits, argmax to tokens, read back.
	ids := make([]int32, rows)
	var host *rt.Tensor
	f := func() error {
		if err := be.Embedding(emb, tab, ids); err != nil {
			return err
		}
		if err := be.Add(mixed, logits, emb); err != nil {
			return err
		}
		if err := be.Argmax(tokens, mixed); err != nil {
			return err
		}
		var err error
		host, err = step.ReadBack(tokens)
		return err
	}
	// The same on the host.
	want := func(in []int32) []int32 {
		out := make([]int32, rows)
		for r, id := range in {
			row := make([]float32, vocab)
			for j := range row {
				row[j] = scores.F32()[r*vocab+j] + table.F32()[int(id)*vocab+j]
			}
			out[r] = rt.ArgmaxRow(row)
		}
		return out
	}
	ids[0], ids[1], ids[2] = 1, 4, 6
	expect := want(ids)
	is, err := step.Step(f)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 6 {
		got := host
		rec, err := step.Record(f)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := rec.Feed(ids, tokens); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		next, err := rec.Issue()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := is.Wait(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !slices.Equal(got.I32(), expect) {
			t.Fatalf("round %d: tokens read back %v, want %v", round, got.I32(), expect)
		}
		expect, is = want(expect), next
	}
	if err := is.Wait(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(host.I32(), expect) {
		t.Fatalf("last round: tokens read back %v, want %v", host.I32(), expect)
	}
	if rec, err := step.Record(f); err != nil {
		t.Fatal(err)
	} else if err := rec.Feed(ids, mixed); err == nil {
		t.Error("ids fed from an f32 tensor")
	}
}

// TestArgmaxAgreesWithCPU: rows longer than a block's chunk, the maximum
// tied across chunks (the lower index wins), NaN in a row and a row of
// NaN, and a view of every other row.
func TestArgmaxAgreesWithCPU(t *testing.T) {
	p := newPair(t)
	const rows, cols = 6, 248_320
	x := p.random(1, rows, cols)
	v := x.F32()
	v[0*cols+200_000], v[0*cols+9_000] = 50, 50 // tie in two chunks: 9000
	v[1*cols+cols-1] = 60                       // the last column
	v[2*cols+5], v[2*cols+100_000] = float32(math.NaN()), 40
	for i := range cols {
		v[3*cols+i] = float32(math.NaN())
	}
	v[4*cols+4096], v[4*cols+4095] = 70, 70 // tie across a chunk boundary
	odd, err := x.Slice(1, 0, cols/2+7)     // rows strided by cols
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []*rt.Tensor{x, odd, p.random(1, 3, 100)} {
		got, want := rt.New(rt.I32, in.Shape()[0]), rt.New(rt.I32, in.Shape()[0])
		dev, err := p.ctx.Alloc(rt.I32, in.Shape()[0])
		if err != nil {
			t.Fatal(err)
		}
		src := in
		if in == odd {
			src = columns(t, p.d(x), 0, cols/2+7)
		} else {
			src = p.d(in)
		}
		if err := p.gpu.Argmax(dev, src); err != nil {
			t.Fatal(err)
		}
		if err := p.cpu.Argmax(want, in); err != nil {
			t.Fatal(err)
		}
		if err := p.ctx.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := p.ctx.Download(got, dev); err != nil {
			t.Fatal(err)
		}
		p.ctx.Free(dev)
		if !slices.Equal(got.I32(), want.I32()) {
			t.Errorf("%v: cuda %v, cpu %v", in.Shape(), got.I32(), want.I32())
		}
	}
}
