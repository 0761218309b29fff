package qwen35

import (
	"errors"
	"fmt"

	rt "github.com/govllm/govllm/runtime"
)

// A batch-1 decode step of a dense model on a device that can run
// DecodeLayers (a persistent kernel) is one op for all the layers: every
// DeltaNet mixer, attention mixer and MLP. At batch 1 a step is a chain of
// small GEMVs, each too small to reach the memory's rate on its own; as one
// kernel the weights stream without a break at each op.

// persistentPath says whether this model, on its backend, takes
// DecodeLayers for batch-1 decode steps (nil), or why not.
func (m *Model) persistentPath() error {
	var dt rt.DType
	same := func(w *rt.Tensor) bool {
		if w == nil {
			return false
		}
		if dt == rt.DTypeInvalid {
			dt = w.DType()
		}
		return w.DType() == dt
	}
	for i, l := range m.Layers {
		switch {
		case l.MoE != nil:
			return errors.New("a mixture-of-experts model")
		case l.Kind != FullAttention && !(same(l.DeltaNet.In.Fused) && same(l.DeltaNet.OutProj)):
			return fmt.Errorf("layer %d: the DeltaNet projections are not one weight of one dtype", i)
		case l.Kind == FullAttention && !(same(l.Attention.In.Fused) && same(l.Attention.OProj)):
			return fmt.Errorf("layer %d: the attention's projections are not one qkv weight and an o_proj of one dtype", i)
		case !(same(l.MLP.GateUp.Fused) && same(l.MLP.Down)):
			return fmt.Errorf("layer %d: the MLP's matrices are not one gate_up weight and a down of one dtype", i)
		}
	}
	if _, ok := m.be.Registry().Selected(rt.OpDecodeLayers, m.be.Device(), dt); !ok {
		return fmt.Errorf("%s has no %s kernel for %v weights", m.be.Device(), rt.OpDecodeLayers, dt)
	}
	pd, ok := m.be.Memory().(rt.PersistentDecoder)
	if !ok {
		return fmt.Errorf("%s memory cannot run a persistent kernel", m.be.Device())
	}
	return pd.PersistentDecode()
}

// decodeBlocks returns the layers as blocks of DecodeLayers over c's
// states, made at first use.
func (m *Model) decodeBlocks(c *Cache) []rt.DecodeBlock {
	if c.blocks != nil {
		return c.blocks
	}
	cfg := m.Config
	var blocks []rt.DecodeBlock
	for i := range m.Layers {
		l := &m.Layers[i]
		if l.Kind == FullAttention {
			a := l.Attention
			blocks = append(blocks, rt.DecodeBlock{Norm: l.InputNorm, QKV: a.In.Fused, QNorm: a.QNorm, KNorm: a.KNorm,
				OutProj: a.OProj, Heads: cfg.NumHeads, KVHeads: cfg.NumKVHeads, HeadDim: cfg.HeadDim,
				RotaryDim: cfg.RotaryDim, Theta: cfg.RopeTheta}) // the caches are set each step
		} else {
			n := l.DeltaNet
			blocks = append(blocks, rt.DecodeBlock{Norm: l.InputNorm, InProj: n.In.Fused, ConvW: n.Conv, ConvStates: c.conv[i],
				RecStates: c.rec[i], ALog: n.ALog, DtBias: n.DtBias, GateNorm: n.Norm, OutProj: n.OutProj,
				KeyHeads: cfg.LinKeyHeads, KeyDim: cfg.LinKeyDim, TiledHeads: cfg.TiledVHeads, QKNormEps: 1e-6})
		}
		blocks = append(blocks, rt.DecodeBlock{Norm: l.PostNorm, GateUp: l.MLP.GateUp.Fused, Down: l.MLP.Down})
	}
	c.blocks = blocks
	return blocks
}

// persistentStep runs the layers of a batch-1 decode step on x [1, H]
// (the embedding) as one DecodeLayers, leaving the last layer's residual
// stream in x.
func (m *Model) persistentStep(c *Cache, b *batch, x *rt.Tensor) error {
	cfg, ar := m.Config, b.arena
	vd := cfg.LinValueHeads * cfg.LinValueDim
	qkv := cfg.NumHeads*2*cfg.HeadDim + 2*cfg.NumKVHeads*cfg.HeadDim
	blocks := m.decodeBlocks(c)
	for i := range m.Layers { // a layer is two blocks; the KV caches grow, and move, with the sequences
		if m.Layers[i].Kind == FullAttention {
			blocks[2*i].KCache, blocks[2*i].VCache = c.k[i], c.v[i]
		}
	}
	d := &c.decode
	*d = rt.DecodeLayersArgs{X: x, Blocks: blocks, Slot: int32(b.seqs[0].Slot), Eps: cfg.RMSNormEps,
		Proj: ar.New(rt.F32, convChannels(cfg)+vd+2*cfg.LinValueHeads), Core: ar.New(rt.F32, vd), Hidden: ar.New(rt.F32, cfg.IntermediateSize),
		Pos: b.positions[0], KVRow: b.kvSlots[0], Table: b.attn[0].Blocks, BlockSize: b.blockSize,
		QKV: ar.New(rt.F32, qkv), AttnPart: ar.New(rt.F32, cfg.NumHeads*rt.DecodeAttnSplit*(cfg.HeadDim+4))}
	if err := m.be.DecodeLayers(d); err != nil {
		return fmt.Errorf("qwen35: decode layers: %w", err)
	}
	return nil
}
