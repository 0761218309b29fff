package qwen35

import (
	"errors"
	"fmt"

	rt "github.com/govllm/govllm/runtime"
)

// A batch-1 decode step of a dense model on a device that can run
// DecodeLayers (a persistent kernel) goes through runs of blocks: every
// DeltaNet mixer and MLP between two attention mixers is one op, and the
// attention mixers run op by op between them. At batch 1 a step is a chain
// of small GEMVs, each too small to reach the memory's rate on its own; as
// one kernel the weights stream without a break at each op.

// decodeRun is one DecodeLayers op and the attention layer after it (-1
// where the run ends the model).
type decodeRun struct {
	blocks []rt.DecodeBlock
	attn   int
}

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

// decodeRuns returns the runs of c's blocks, made at first use.
func (m *Model) decodeRuns(c *Cache) []decodeRun {
	if c.runs != nil {
		return c.runs
	}
	cfg := m.Config
	var runs []decodeRun
	var cur []rt.DecodeBlock
	for i := range m.Layers {
		l := &m.Layers[i]
		if l.Kind == FullAttention {
			runs = append(runs, decodeRun{blocks: cur, attn: i})
			cur = nil
		} else {
			n := l.DeltaNet
			cur = append(cur, rt.DecodeBlock{Norm: l.InputNorm, InProj: n.In.Fused, ConvW: n.Conv, ConvStates: c.conv[i],
				RecStates: c.rec[i], ALog: n.ALog, DtBias: n.DtBias, GateNorm: n.Norm, OutProj: n.OutProj,
				KeyHeads: cfg.LinKeyHeads, KeyDim: cfg.LinKeyDim, TiledHeads: cfg.TiledVHeads, QKNormEps: 1e-6})
		}
		cur = append(cur, rt.DecodeBlock{Norm: l.PostNorm, GateUp: l.MLP.GateUp.Fused, Down: l.MLP.Down})
	}
	c.runs = append(runs, decodeRun{blocks: cur, attn: -1})
	return c.runs
}

// persistentStep runs the layers of a batch-1 decode step on x [1, H]
// (the embedding), leaving the last layer's residual stream in x. An
// attention layer's projections (with its input norm, gate and residual
// add) run inside the DecodeLayers around it: between two only the
// attention's core runs op by op.
func (m *Model) persistentStep(c *Cache, b *batch, x *rt.Tensor) error {
	cfg, ar, be := m.Config, b.arena, m.be
	vd := cfg.LinValueHeads * cfg.LinValueDim
	d := &c.decode
	*d = rt.DecodeLayersArgs{X: x, Slot: int32(b.seqs[0].Slot), Eps: cfg.RMSNormEps,
		Proj: ar.New(rt.F32, convChannels(cfg)+vd+2*cfg.LinValueHeads), Core: ar.New(rt.F32, vd), Hidden: ar.New(rt.F32, cfg.IntermediateSize)}
	prev := -1 // the attention layer before this run
	for _, r := range m.decodeRuns(c) {
		d.Blocks = r.blocks
		d.AttnOut, d.AttnIn = nil, nil
		if prev >= 0 {
			d.AttnOut = m.Layers[prev].Attention.OProj
		}
		var att *Attention
		if r.attn >= 0 {
			l := &m.Layers[r.attn]
			att = l.Attention
			d.AttnIn, d.AttnNorm, d.AttnQKV = att.In.Fused, l.InputNorm, ar.New(rt.F32, 1, att.In.Fused.Dim(0))
		}
		if err := be.DecodeLayers(d); err != nil {
			if r.attn < 0 {
				return fmt.Errorf("qwen35: layers after %d: %w", prev, err)
			}
			return fmt.Errorf("qwen35: layers before %d: %w", r.attn, err)
		}
		if att == nil {
			continue
		}
		var in [maxProjections]*rt.Tensor
		off := 0
		for i, rows := range att.In.Rows {
			in[i] = ar.Slice(d.AttnQKV, 1, off, off+rows)
			off += rows
		}
		o, gate, err := att.core(be, cfg, in, c.k[r.attn], c.v[r.attn], b, m.fused)
		if err != nil {
			return fmt.Errorf("qwen35: layer %d (%s): %w", r.attn, m.Layers[r.attn].Kind, err)
		}
		d.AttnO, d.AttnGate = o, gate
		prev = r.attn
	}
	return nil
}
