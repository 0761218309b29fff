package cpu

import (
	"math"
	"sync"

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
	normEps      float32 // > 0: q and k rows are normalised on reading
	gated        bool    // g and beta are raw a and b, gated on reading
	aLog, dtBias float32 // head h's gating parameters
}

func newDeltaHead(out, q, k, v, g, beta, state *rt.Tensor, h int, p rt.DeltaRuleParams) deltaHead {
	hk, hv := q.Dim(1), v.Dim(1)
	dk, dv := q.Dim(2), v.Dim(2)
	kh := h / (hv / hk)
	if p.TiledHeads {
		kh = h % hk
	}
	d := deltaHead{
		q: q, k: k, v: v, out: out, g: g, beta: beta,
		h: h, kh: kh, dk: dk, dv: dv, normEps: p.QKNormEps,
		s:     state.F32()[h*dk*dv : (h+1)*dk*dv],
		scale: float32(1 / math.Sqrt(float64(dk))),
	}
	if p.ALog != nil {
		d.gated, d.aLog, d.dtBias = true, p.ALog.F32()[h], p.DtBias.F32()[h]
	}
	return d
}

func (d *deltaHead) qRow(t int) []float32 { return row(d.q, t*d.q.Dim(1)+d.kh) }
func (d *deltaHead) kRow(t int) []float32 { return row(d.k, t*d.k.Dim(1)+d.kh) }

// normed is row x, normalised into buf where the call asks for it.
func (d *deltaHead) normed(x, buf []float32) []float32 {
	if d.normEps <= 0 {
		return x
	}
	l2NormRow(buf, x, d.normEps)
	return buf
}
func (d *deltaHead) vRow(t int) []float32 { return row(d.v, t*d.v.Dim(1)+d.h) }
func (d *deltaHead) oRow(t int) []float32 { return row(d.out, t*d.out.Dim(1)+d.h) }

// gAt and bAt are token t's log-decay g and β, gated here from a and b
// where the call carries the gating (the same arithmetic as gdnGating).
func (d *deltaHead) gAt(t int) float32 {
	if d.gated {
		return gdnDecay(row(d.g, t)[d.h], d.aLog, d.dtBias)
	}
	return row(d.g, t)[d.h]
}

func (d *deltaHead) bAt(t int) float32 {
	if d.gated {
		return sigmoid(row(d.beta, t)[d.h])
	}
	return row(d.beta, t)[d.h]
}

// deltaRuleRecurrent: per token, S ← S·exp(g); δ = β(v − Sᵀk); S ← S + k⊗δ;
// out = Sᵀ(q·scale).
func deltaRuleRecurrent(out, q, k, v, g, beta, state *rt.Tensor, p rt.DeltaRuleParams) {
	t := deltaRecTasks.get()
	*t = deltaRecTask{out: out, q: q, k: k, v: v, g: g, beta: beta, state: state, p: p}
	parallelTask(v.Dim(1), 1, t)
	deltaRecTasks.put(t)
}

// deltaRecTask runs value heads [lo, hi) of deltaRuleRecurrent.
type deltaRecTask struct {
	out, q, k, v, g, beta, state *rt.Tensor
	p                            rt.DeltaRuleParams
}

var deltaRecTasks taskPool[deltaRecTask]

func (r *deltaRecTask) run(lo, hi int) {
	buf := getF32(4*r.q.Dim(2) + 2*r.v.Dim(2))
	for h := lo; h < hi; h++ {
		d := newDeltaHead(r.out, r.q, r.k, r.v, r.g, r.beta, r.state, h, r.p)
		for t := range r.q.Dim(0) {
			d.step(t, buf.f)
		}
	}
	putF32(buf)
}

// step advances the state by token t; buf holds 4·dk + 2·dv floats. With
// e = exp(g): δ = β(v − e·Sᵀk), S ← e·S + k⊗δ and out = e·Sᵀq' + (k·q')δ
// (q' = q·scale), so that S is read once (for Sᵀk and Sᵀq') and updated
// once, instead of four passes.
func (d *deltaHead) step(t int, buf []float32) {
	s, dk, dv := d.s, d.dk, d.dv
	qs, sk, sq := buf[:dk], buf[2*dk:2*dk+dv], buf[2*dk+dv:2*dk+2*dv]
	nb := buf[2*dk+2*dv:]
	kr, vr, qr := d.normed(d.kRow(t), nb[:dk]), d.vRow(t), d.normed(d.qRow(t), nb[dk:2*dk])
	for i, x := range qr {
		qs[i] = x * d.scale
	}
	e := float32(math.Exp(float64(d.gAt(t))))
	clear(sk)
	clear(sq)
	mvAcc2(sk, sq, kr, qs, s, dv)
	beta := d.bAt(t)
	delta := sk
	for j, x := range vr {
		delta[j] = beta * (x - e*sk[j])
	}
	gerScale(s, dv, e, kr, delta)
	kq := dot(kr, qs)
	o := d.oRow(t)
	for j := range o {
		o[j] = e*sq[j] + kq*delta[j]
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
		c, dk, dv := min(chunk, T), q.Dim(2), v.Dim(2)
		w, _ := chunkScratches.Get().(*chunkScratch)
		if w == nil || w.c != c || w.dk != dk || w.dv != dv {
			w = newChunkScratch(c, dk, dv)
		}
		for h := lo; h < hi; h++ {
			d := newDeltaHead(out, q, k, v, g, beta, state, h, p)
			for t0 := 0; t0 < T; t0 += chunk {
				d.chunk(t0, min(chunk, T-t0), w)
			}
		}
		chunkScratches.Put(w)
	})
}

// chunkScratches recycles the scratch of deltaRuleChunked across heads,
// layers and steps (a prefill would otherwise allocate it per head).
var chunkScratches sync.Pool

type chunkScratch struct {
	c, dk, dv int
	gam       []float32 // cumulative log decay in the chunk
	dec       []float32 // [C][C]: exp(γ_i − γ_j) for j ≤ i
	u, wv     []float32 // [C][dv]: U, then V'
	wk        []float32 // [C][dk]: −W
	kt        []float32 // [dk][C]: keys scaled for the state update, transposed
	qm        []float32 // [C][dk]: queries scaled by exp(γ_i)·scale
	coef      []float32 // [C][C]: the forward substitution's row, then the outputs' (q_i·k_j) weights
	kq        []float32 // [2C][dk]: the keys, then the queries (normalised where the call asks)
	gram      []float32 // [2C][C]: k_i·k_j, then q_i·k_j
	qs, ks    [][]float32
	vs        [][]float32
	bs        []float32
}

func newChunkScratch(c, dk, dv int) *chunkScratch {
	return &chunkScratch{c: c, dk: dk, dv: dv,
		gam: make([]float32, c), dec: make([]float32, c*c), u: make([]float32, c*dv), wv: make([]float32, c*dv),
		wk: make([]float32, c*dk), kt: make([]float32, dk*c), qm: make([]float32, c*dk), coef: make([]float32, c*c),
		kq: make([]float32, 2*c*dk), gram: make([]float32, 2*c*c),
		qs: make([][]float32, c), ks: make([][]float32, c), vs: make([][]float32, c),
		bs: make([]float32, c),
	}
}

// chunk runs tokens [t0, t0+c) of head d. The three products with the state
// and the outputs' sum over V' are matrix products (gemmAcc), each state row
// loaded once per six rows instead of once per token.
func (d *deltaHead) chunk(t0, c int, w *chunkScratch) {
	dk, dv, s := d.dk, d.dv, d.s
	var acc float32
	for i := range c {
		t := t0 + i
		acc += d.gAt(t)
		w.gam[i] = acc
		w.ks[i], w.qs[i] = d.packed(d.kRow(t), w.kq[i*dk:(i+1)*dk]), d.packed(d.qRow(t), w.kq[(c+i)*dk:(c+i+1)*dk])
		w.vs[i], w.bs[i] = d.vRow(t), d.bAt(t)
		for a, ka := range w.ks[i] {
			w.kt[a*c+i] = ka
		}
	}
	// Every k_i·k_j and q_i·k_j as one product [K; Q]·Kᵀ.
	gram := w.gram[:2*c*c]
	clear(gram)
	gemmAcc(2*c, c, dk, w.kq, dk, w.kt, c, gram, c)
	dec := w.dec
	for i := range c {
		for j := 0; j <= i; j++ {
			dec[i*c+j] = float32(math.Exp(float64(w.gam[i] - w.gam[j])))
		}
	}
	// Forward substitution of (I+L) X = B, row by row, for U and −W at once:
	// row i is B_i − Σ_{j<i} L_ij X_j.
	coef := w.coef
	for i := range c {
		bi := w.bs[i]
		ui, wki := w.u[i*dv:(i+1)*dv], w.wk[i*dk:(i+1)*dk]
		eg := float32(math.Exp(float64(w.gam[i])))
		for j, x := range w.vs[i] {
			ui[j] = bi * x
		}
		for j, x := range w.ks[i] {
			wki[j] = -bi * x * eg
		}
		for j := range i {
			coef[j] = -bi * gram[i*c+j] * dec[i*c+j]
		}
		mvAcc(ui, coef[:i], w.u, dv)
		mvAcc(wki, coef[:i], w.wk, dk)
	}
	// V' = U − W S.
	copy(w.wv[:c*dv], w.u[:c*dv])
	gemmAcc(c, dv, dk, w.wk, dk, s, dv, w.wv, dv)
	// Outputs read the state from before this chunk: out = Q' S + C V',
	// with Q'_i = q_i exp(γ_i)·scale and C_ij = (q_i·k_j) exp(γ_i − γ_j)·scale
	// for j ≤ i (0 above the diagonal).
	for i := range c {
		eg := float32(math.Exp(float64(w.gam[i]))) * d.scale
		qm := w.qm[i*dk : (i+1)*dk]
		for a, qa := range w.qs[i] {
			qm[a] = qa * eg
		}
		ci := coef[i*c : (i+1)*c]
		for j := 0; j <= i; j++ {
			ci[j] = gram[(c+i)*c+j] * d.scale * dec[i*c+j]
		}
		clear(ci[i+1:])
		clear(d.oRow(t0 + i))
	}
	o, ldo := d.outRows(t0, c)
	gemmAcc(c, dv, dk, w.qm, dk, s, dv, o, ldo)
	gemmAcc(c, dv, c, coef, c, w.wv, dv, o, ldo)
	// State update: S ← exp(γ_C) S + Σ_i exp(γ_C − γ_i) k_i ⊗ V'_i.
	last := w.gam[c-1]
	scal(float32(math.Exp(float64(last))), s)
	for i := range c {
		f := dec[(c-1)*c+i]
		for a, ka := range w.ks[i] {
			w.kt[a*c+i] = ka * f
		}
	}
	gemmAcc(dk, dv, c, w.kt, c, w.wv, dv, s, dv)
}

// packed is row x copied (normalised where the call asks) into buf.
func (d *deltaHead) packed(x, buf []float32) []float32 {
	if d.normEps > 0 {
		l2NormRow(buf, x, d.normEps)
	} else {
		copy(buf, x)
	}
	return buf
}

// outRows is the output from token t0 on for n tokens, as a matrix: its
// floats from the first row on and the stride between tokens' rows.
func (d *deltaHead) outRows(t0, n int) ([]float32, int) {
	h := d.out.Dim(1)
	off := d.out.RowOffset(t0*h + d.h)
	ld := 0
	if n > 1 {
		ld = d.out.RowOffset((t0+1)*h+d.h) - off
	}
	return d.out.F32()[off:], ld
}

// deltaRuleSlots runs one recurrent step of each row against its slot's
// state (see conv1dSlots).
func deltaRuleSlots(out, q, k, v, g, beta, states *rt.Tensor, slots []int32, p rt.DeltaRuleParams) {
	at := func(t *rt.Tensor, i int) *rt.Tensor { r, _ := t.Slice(0, i, i+1); return r }
	for i, s := range slots {
		st, _ := states.Index(int(s))
		deltaRuleRecurrent(at(out, i), at(q, i), at(k, i), at(v, i), at(g, i), at(beta, i), st, p)
	}
}
