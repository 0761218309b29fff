package qwen35

import (
	"math"

	rt "github.com/govllm/govllm/runtime"
)

// Attention is Qwen3.5's gated full attention: q_proj yields per head a
// query and an output gate; q and k get an RMSNorm (1 + w) and NeoX rotary
// embedding on their first RotaryDim channels; the attention output is
// multiplied by sigmoid(gate) before o_proj.
type Attention struct {
	In           *Projections // q (query and gate) [Hq·2D, H], k [Hkv·D, H], v [Hkv·D, H]
	OProj        *rt.Tensor   // [H, Hq·D]
	QNorm, KNorm *rt.Tensor   // [D], f32
}

func bindAttention(b *binder, prefix string, c *Config) *Attention {
	h, d := c.HiddenSize, c.HeadDim
	return &Attention{
		In: b.projections([]string{prefix + "q_proj.weight", prefix + "k_proj.weight", prefix + "v_proj.weight"},
			[]int{c.NumHeads * 2 * d, c.NumKVHeads * d, c.NumKVHeads * d}, h),
		OProj: b.matrix(prefix+"o_proj.weight", h, c.NumHeads*d),
		QNorm: b.f32(prefix+"q_norm.weight", d),
		KNorm: b.f32(prefix+"k_norm.weight", d),
	}
}

func (a *Attention) forward(be *rt.Backend, c *Config, out, x, kCache, vCache *rt.Tensor, b *batch, fused bool) error {
	t, d, hq := x.Dim(0), c.HeadDim, c.NumHeads
	ar := b.arena
	in, err := a.In.forward(be, ar, x)
	if err != nil {
		return err
	}
	o, gate, err := a.core(be, c, in, kCache, vCache, b, fused)
	if err != nil {
		return err
	}
	if err := be.SigmoidMul(o, o, gate); err != nil {
		return err
	}
	return be.MatMul(out, ar.Reshape(o, t, hq*d), a.OProj)
}

// core runs the attention between its projections: from in (q with its
// gate, k, v: [T, rows]) to the attention's output o and the gate, both
// [T, Hq, D], the gate not yet applied.
func (a *Attention) core(be *rt.Backend, c *Config, in [maxProjections]*rt.Tensor, kCache, vCache *rt.Tensor, b *batch, fused bool) (o, gate *rt.Tensor, err error) {
	t, d, hq, hkv := in[0].Dim(0), c.HeadDim, c.NumHeads, c.NumKVHeads
	ar := b.arena
	qg, k, v := ar.Reshape(in[0], t, hq, 2*d), ar.Reshape(in[1], t, hkv, d), ar.Reshape(in[2], t, hkv, d)
	q := ar.New(rt.F32, t, hq, d)
	gate = ar.New(rt.F32, t, hq, d)
	if fused { // the preamble writes the cache too
		p := rt.PreambleParams{RotaryDim: c.RotaryDim, Theta: c.RopeTheta, Eps: c.RMSNormEps,
			KCache: kCache, VCache: vCache, V: v, Slots: b.kvSlots}
		if err := be.AttnPreamble(q, gate, qg, k, a.QNorm, a.KNorm, b.positions, p); err != nil {
			return nil, nil, err
		}
	} else if err := a.composite(be, c, q, gate, qg, k, v, kCache, vCache, b); err != nil {
		return nil, nil, err
	}
	o = ar.New(rt.F32, t, hq, d)
	if err := be.Attention(o, q, kCache, vCache, b.attn, b.blockSize, float32(1/math.Sqrt(float64(d)))); err != nil {
		return nil, nil, err
	}
	return o, gate, nil
}

// composite is the unfused preamble and cache write: the chain
// AttnPreamble replaces.
func (a *Attention) composite(be *rt.Backend, c *Config, q, gate, qg, k, v, kCache, vCache *rt.Tensor, b *batch) error {
	if err := a.normRotate(be, c, q, gate, qg, k, b.positions); err != nil {
		return err
	}
	if err := be.KVWrite(kCache, k, b.kvSlots); err != nil {
		return err
	}
	return be.KVWrite(vCache, v, b.kvSlots)
}

func (a *Attention) normRotate(be *rt.Backend, c *Config, q, gate, qg, k *rt.Tensor, positions []int32) error {
	if err := be.SplitQueryGate(q, gate, qg); err != nil {
		return err
	}
	if err := be.RMSNormOffset(q, q, a.QNorm, c.RMSNormEps); err != nil {
		return err
	}
	if err := be.RMSNormOffset(k, k, a.KNorm, c.RMSNormEps); err != nil {
		return err
	}
	if err := be.RoPENeoX(q, positions, c.RotaryDim, c.RopeTheta); err != nil {
		return err
	}
	return be.RoPENeoX(k, positions, c.RotaryDim, c.RopeTheta)
}
