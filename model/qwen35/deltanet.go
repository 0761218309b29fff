package qwen35

import (
	rt "github.com/govllm/govllm/runtime"
)

// DeltaNet is the Gated DeltaNet linear-attention block: a causal depthwise
// conv over [q | k | v], L2-normalised q and k, the gated delta rule over a
// recurrent state per value head, then a gated RMSNorm by z and out_proj.
type DeltaNet struct {
	In           *Projections // qkv [2·Kd+Vd, H], z [Vd, H], b [Hv, H], a [Hv, H]
	Conv         *rt.Tensor   // [2·Kd+Vd, K], f32
	ALog, DtBias *rt.Tensor   // [Hv], f32
	Norm         *rt.Tensor   // [Dv], f32, used as is (no offset)
	OutProj      *rt.Tensor   // [H, Vd]
}

// chunkLen is the chunk of the chunked delta rule, as in transformers.
const chunkLen = 64

func bindDeltaNet(b *binder, prefix string, c *Config) *DeltaNet {
	h, kd, vd := c.HiddenSize, c.LinKeyHeads*c.LinKeyDim, c.LinValueHeads*c.LinValueDim
	conv := 2*kd + vd
	return &DeltaNet{
		In: b.projections([]string{prefix + "in_proj_qkv.weight", prefix + "in_proj_z.weight", prefix + "in_proj_b.weight", prefix + "in_proj_a.weight"},
			[]int{conv, vd, c.LinValueHeads, c.LinValueHeads}, h),
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
	ar := b.arena
	in, err := n.In.forward(be, ar, x)
	if err != nil {
		return err
	}
	qkv, z, bIn, aIn := in[0], in[1], in[2], in[3]
	// The rule gates the raw a and b projections as it reads them.
	params := rt.DeltaRuleParams{Chunk: chunkLen, TiledHeads: c.TiledVHeads, QKNormEps: 1e-6, ALog: n.ALog, DtBias: n.DtBias}
	core := ar.New(rt.F32, t, hv, dv)
	if t == len(b.seqs) { // one token a sequence: conv, rule and norm in one op over their slots
		b.deltaNet = rt.DeltaNetStepArgs{Out: core, QKV: qkv, Z: ar.Reshape(z, t, hv, dv), A: aIn, B: bIn,
			ConvW: n.Conv, ConvStates: cache.conv[layer], RecStates: cache.rec[layer], Norm: n.Norm, Slots: b.slots,
			KeyHeads: hk, KeyDim: dk, Rule: params, NormEps: c.RMSNormEps}
		if err := be.DeltaNetStep(&b.deltaNet); err != nil {
			return err
		}
		return be.MatMul(out, ar.Reshape(core, t, vd), n.OutProj)
	}
	mixed := ar.New(rt.F32, t, 2*kd+vd)
	for si, s := range b.seqs { // the conv carries state per sequence
		r0, r1 := b.rows[si], b.rows[si]+len(s.Tokens)
		conv := ar.Index(cache.conv[layer], s.Slot)
		if err := be.Conv1dCausal(ar.Slice(mixed, 0, r0, r1), ar.Slice(qkv, 0, r0, r1), n.Conv, conv, true); err != nil {
			return err
		}
	}
	// q and k side by side, normalised by one L2Norm: over a prompt that
	// is faster than the rule normalising them, as its loop over tokens is
	// serial.
	qk := ar.Reshape(ar.Slice(mixed, 1, 0, 2*kd), t, 2*hk, dk)
	if err := be.L2Norm(qk, qk, params.QKNormEps); err != nil {
		return err
	}
	params.QKNormEps = 0
	q, k := ar.Slice(qk, 1, 0, hk), ar.Slice(qk, 1, hk, 2*hk)
	v := ar.Reshape(ar.Slice(mixed, 1, 2*kd, 2*kd+vd), t, hv, dv)
	g, beta := aIn, bIn
	for si, s := range b.seqs {
		rec := ar.Index(cache.rec[layer], s.Slot)
		r0, r1 := b.rows[si], b.rows[si]+len(s.Tokens)
		rows := func(x *rt.Tensor) *rt.Tensor { return ar.Slice(x, 0, r0, r1) }
		if r1-r0 == 1 {
			err = be.DeltaRuleRecurrent(rows(core), rows(q), rows(k), rows(v), rows(g), rows(beta), rec, params)
		} else {
			err = be.DeltaRuleChunked(rows(core), rows(q), rows(k), rows(v), rows(g), rows(beta), rec, params)
		}
		if err != nil {
			return err
		}
	}
	if err := be.GatedRMSNorm(core, core, ar.Reshape(z, t, hv, dv), n.Norm, c.RMSNormEps); err != nil {
		return err
	}
	return be.MatMul(out, ar.Reshape(core, t, vd), n.OutProj)
}
