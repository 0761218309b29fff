package cpu

import (
	"math"

	rt "github.com/govllm/govllm/runtime"
)

// deltaHead is the view of one value head of a gated delta rule call.
type deltaHead struct {
	q, k, v, out *rt.Tensor
	g, beta      *rt.Tensor
	h, kh        int       // value head, and the key head it reads
	s            []float32 // state [dk][dv] of head h
	dk, dv       int
	scale        float32
}

func newDeltaHead(out, q, k, v, g, beta, state *rt.Tensor, h int, tiled bool) *deltaHead {
	hk, hv := q.Dim(1), v.Dim(1)
	dk, dv := q.Dim(2), v.Dim(2)
	kh := h / (hv / hk)
	if tiled {
		kh = h % hk
	}
	return &deltaHead{
		q: q, k: k, v: v, out: out, g: g, beta: beta,
		h: h, kh: kh, dk: dk, dv: dv,
		s:     state.F32()[h*dk*dv : (h+1)*dk*dv],
		scale: float32(1 / math.Sqrt(float64(dk))),
	}
}

func (d *deltaHead) qRow(t int) []float32 { return row(d.q, t*d.q.Dim(1)+d.kh) }
func (d *deltaHead) kRow(t int) []float32 { return row(d.k, t*d.k.Dim(1)+d.kh) }
func (d *deltaHead) vRow(t int) []float32 { return row(d.v, t*d.v.Dim(1)+d.h) }
func (d *deltaHead) oRow(t int) []float32 { return row(d.out, t*d.out.Dim(1)+d.h) }
func (d *deltaHead) gAt(t int) float32    { return row(d.g, t)[d.h] }
func (d *deltaHead) bAt(t int) float32    { return row(d.beta, t)[d.h] }

// deltaRuleRecurrent: per token, S ← S·exp(g); δ = β(v − Sᵀk); S ← S + k⊗δ;
// out = Sᵀ(q·scale).
func deltaRuleRecurrent(out, q, k, v, g, beta, state *rt.Tensor, p rt.DeltaRuleParams) {
	parallelFor(v.Dim(1), 1, func(lo, hi int) {
		for h := lo; h < hi; h++ {
			d := newDeltaHead(out, q, k, v, g, beta, state, h, p.TiledHeads)
			delta := make([]float32, d.dv)
			for t := range q.Dim(0) {
				d.step(t, delta)
			}
		}
	})
}

func (d *deltaHead) step(t int, delta []float32) {
	s, dv := d.s, d.dv
	decay := float32(math.Exp(float64(d.gAt(t))))
	b := d.bAt(t)
	kr, vr, qr := d.kRow(t), d.vRow(t), d.qRow(t)
	for i := range s {
		s[i] *= decay
	}
	copy(delta, vr)
	for i, ki := range kr {
		si := s[i*dv : (i+1)*dv]
		for j := range delta {
			delta[j] -= si[j] * ki
		}
	}
	for j := range delta {
		delta[j] *= b
	}
	o := d.oRow(t)
	clear(o)
	for i, ki := range kr {
		si := s[i*dv : (i+1)*dv]
		qi := qr[i] * d.scale
		for j := range si {
			si[j] += ki * delta[j]
			o[j] += si[j] * qi
		}
	}
}

// deltaRuleChunked processes each chunk of C tokens with the UT transform of
// the DeltaNet papers (as in transformers' torch_chunk_gated_delta_rule):
// with γ the cumulative log-decay in the chunk and L[i][j] =
// β_i (k_i·k_j) exp(γ_i − γ_j) for j < i,
//
//	U = (I+L)⁻¹ (β v),  W = (I+L)⁻¹ (β k exp(γ)),  V' = U − W S,
//	out_i = exp(γ_i) q_i S + Σ_{j≤i} (q_i·k_j) exp(γ_i − γ_j) V'_j,
//	S ← exp(γ_C) S + Σ_i exp(γ_C − γ_i) k_i ⊗ V'_i.
func deltaRuleChunked(out, q, k, v, g, beta, state *rt.Tensor, p rt.DeltaRuleParams) {
	chunk := p.Chunk
	T := q.Dim(0)
	parallelFor(v.Dim(1), 1, func(lo, hi int) {
		for h := lo; h < hi; h++ {
			d := newDeltaHead(out, q, k, v, g, beta, state, h, p.TiledHeads)
			w := newChunkScratch(min(chunk, T), d.dk, d.dv)
			for t0 := 0; t0 < T; t0 += chunk {
				d.chunk(t0, min(chunk, T-t0), w)
			}
		}
	})
}

type chunkScratch struct {
	gam     []float32 // cumulative log decay in the chunk
	u, wv   []float32 // [C][dv]: U, then V'
	wk      []float32 // [C][dk]: W
	qs, ks  [][]float32
	vs      [][]float32
	outRows [][]float32
	bs      []float32
}

func newChunkScratch(c, dk, dv int) *chunkScratch {
	return &chunkScratch{
		gam: make([]float32, c), u: make([]float32, c*dv), wv: make([]float32, c*dv), wk: make([]float32, c*dk),
		qs: make([][]float32, c), ks: make([][]float32, c), vs: make([][]float32, c), outRows: make([][]float32, c),
		bs: make([]float32, c),
	}
}

func (d *deltaHead) chunk(t0, c int, w *chunkScratch) {
	dk, dv, s := d.dk, d.dv, d.s
	var acc float32
	for i := range c {
		t := t0 + i
		acc += d.gAt(t)
		w.gam[i] = acc
		w.qs[i], w.ks[i], w.vs[i], w.bs[i], w.outRows[i] = d.qRow(t), d.kRow(t), d.vRow(t), d.bAt(t), d.oRow(t)
	}
	// Forward substitution of (I+L) X = B, row by row, for U and W at once.
	for i := range c {
		bi := w.bs[i]
		ui, wki := w.u[i*dv:(i+1)*dv], w.wk[i*dk:(i+1)*dk]
		eg := float32(math.Exp(float64(w.gam[i])))
		for j, x := range w.vs[i] {
			ui[j] = bi * x
		}
		for j, x := range w.ks[i] {
			wki[j] = bi * x * eg
		}
		for j := range i {
			lij := bi * dot(w.ks[i], w.ks[j]) * float32(math.Exp(float64(w.gam[i]-w.gam[j])))
			uj, wkj := w.u[j*dv:(j+1)*dv], w.wk[j*dk:(j+1)*dk]
			for x := range ui {
				ui[x] -= lij * uj[x]
			}
			for x := range wki {
				wki[x] -= lij * wkj[x]
			}
		}
	}
	// V' = U − W S.
	for i := range c {
		vi := w.wv[i*dv : (i+1)*dv]
		copy(vi, w.u[i*dv:(i+1)*dv])
		for a, wa := range w.wk[i*dk : (i+1)*dk] {
			sa := s[a*dv : (a+1)*dv]
			for x := range vi {
				vi[x] -= wa * sa[x]
			}
		}
	}
	// Outputs read the state from before this chunk.
	for i := range c {
		o := w.outRows[i]
		clear(o)
		eg := float32(math.Exp(float64(w.gam[i]))) * d.scale
		for a, qa := range w.qs[i] {
			f := qa * eg
			sa := s[a*dv : (a+1)*dv]
			for x := range o {
				o[x] += f * sa[x]
			}
		}
		for j := 0; j <= i; j++ {
			f := dot(w.qs[i], w.ks[j]) * d.scale * float32(math.Exp(float64(w.gam[i]-w.gam[j])))
			vj := w.wv[j*dv : (j+1)*dv]
			for x := range o {
				o[x] += f * vj[x]
			}
		}
	}
	// State update.
	last := w.gam[c-1]
	ec := float32(math.Exp(float64(last)))
	for i := range s {
		s[i] *= ec
	}
	for i := range c {
		f := float32(math.Exp(float64(last - w.gam[i])))
		vi := w.wv[i*dv : (i+1)*dv]
		for a, ka := range w.ks[i] {
			kf := ka * f
			sa := s[a*dv : (a+1)*dv]
			for x := range sa {
				sa[x] += kf * vi[x]
			}
		}
	}
}
