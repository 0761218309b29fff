package qwen35

import (
	rt "github.com/govllm/govllm/runtime"
)

// DeltaNet is the Gated DeltaNet linear-attention block: a causal depthwise
// conv over [q | k | v], L2-normalised q and k, the gated delta rule over a
// recurrent state per value head, then a gated RMSNorm by z and out_proj.
type DeltaNet struct {
	InQKV, InZ, InB, InA *rt.Tensor // [2·Kd+Vd, H], [Vd, H], [Hv, H], [Hv, H]
	Conv                 *rt.Tensor // [2·Kd+Vd, K], f32
	ALog, DtBias         *rt.Tensor // [Hv], f32
	Norm                 *rt.Tensor // [Dv], f32, used as is (no offset)
	OutProj              *rt.Tensor // [H, Vd]
}

// chunkLen is the chunk of the chunked delta rule, as in transformers.
const chunkLen = 64

func bindDeltaNet(b *binder, prefix string, c *Config) *DeltaNet {
	h, kd, vd := c.HiddenSize, c.LinKeyHeads*c.LinKeyDim, c.LinValueHeads*c.LinValueDim
	conv := 2*kd + vd
	return &DeltaNet{
		InQKV:   b.matrix(prefix+"in_proj_qkv.weight", conv, h),
		InZ:     b.matrix(prefix+"in_proj_z.weight", vd, h),
		InB:     b.matrix(prefix+"in_proj_b.weight", c.LinValueHeads, h),
		InA:     b.matrix(prefix+"in_proj_a.weight", c.LinValueHeads, h),
		Conv:    b.f32(prefix+"conv1d.weight", conv, c.ConvKernel),
		ALog:    b.f32(prefix+"A_log", c.LinValueHeads),
		DtBias:  b.f32(prefix+"dt_bias", c.LinValueHeads),
		Norm:    b.f32(prefix+"norm.weight", c.LinValueDim),
		OutProj: b.matrix(prefix+"out_proj.weight", h, vd),
	}
}

func (n *DeltaNet) forward(be *rt.Backend, c *Config, out, x *rt.Tensor, cache *Cache, layer int, b *batch) error {
	t := x.Dim(0)
	hk, hv, dk, dv := c.LinKeyHeads, c.LinValueHeads, c.LinKeyDim, c.LinValueDim
	kd, vd := hk*dk, hv*dv
	qkv := rt.New(rt.F32, t, 2*kd+vd)
	z := rt.New(rt.F32, t, vd)
	bIn, aIn := rt.New(rt.F32, t, hv), rt.New(rt.F32, t, hv)
	for _, mm := range []struct{ dst, w *rt.Tensor }{{qkv, n.InQKV}, {z, n.InZ}, {bIn, n.InB}, {aIn, n.InA}} {
		if err := be.MatMul(mm.dst, x, mm.w); err != nil {
			return err
		}
	}
	mixed := rt.New(rt.F32, t, 2*kd+vd)
	for si, s := range b.seqs { // the conv carries state per sequence
		conv, _ := cache.slot(layer, s.Slot)
		r0, r1 := b.rows[si], b.rows[si]+len(s.Tokens)
		dst, _ := mixed.Slice(0, r0, r1)
		src, _ := qkv.Slice(0, r0, r1)
		if err := be.Conv1dCausal(dst, src, n.Conv, conv); err != nil {
			return err
		}
	}
	if err := be.SiLU(mixed, mixed); err != nil {
		return err
	}
	qView, _ := mixed.Slice(1, 0, kd)
	kView, _ := mixed.Slice(1, kd, 2*kd)
	vView, _ := mixed.Slice(1, 2*kd, 2*kd+vd)
	q, k := rt.New(rt.F32, t, hk, dk), rt.New(rt.F32, t, hk, dk)
	if err := be.L2Norm(q, qView.MustReshape(t, hk, dk), 1e-6); err != nil {
		return err
	}
	if err := be.L2Norm(k, kView.MustReshape(t, hk, dk), 1e-6); err != nil {
		return err
	}
	g, beta := rt.New(rt.F32, t, hv), rt.New(rt.F32, t, hv)
	if err := be.GDNGating(g, beta, aIn, bIn, n.ALog, n.DtBias); err != nil {
		return err
	}
	core := rt.New(rt.F32, t, hv, dv)
	v := vView.MustReshape(t, hv, dv)
	params := rt.DeltaRuleParams{Chunk: chunkLen, TiledHeads: c.TiledVHeads}
	for si, s := range b.seqs {
		_, rec := cache.slot(layer, s.Slot)
		r0, r1 := b.rows[si], b.rows[si]+len(s.Tokens)
		rows := func(x *rt.Tensor) *rt.Tensor { v, _ := x.Slice(0, r0, r1); return v }
		var err error
		if r1-r0 == 1 {
			err = be.DeltaRuleRecurrent(rows(core), rows(q), rows(k), rows(v), rows(g), rows(beta), rec, params)
		} else {
			err = be.DeltaRuleChunked(rows(core), rows(q), rows(k), rows(v), rows(g), rows(beta), rec, params)
		}
		if err != nil {
			return err
		}
	}
	if err := be.GatedRMSNorm(core, core, z.MustReshape(t, hv, dv), n.Norm, c.RMSNormEps); err != nil {
		return err
	}
	return be.MatMul(out, core.MustReshape(t, vd), n.OutProj)
}
