package qwen35

import (
	"fmt"

	rt "github.com/govllm/govllm/runtime"
)

// MoE is the routed mixture-of-experts block with a sigmoid-gated shared
// expert: softmax router, top-k renormalised, experts run on the tokens
// routed to them. The routed experts are one op (moe_experts), so a step
// routes on the device it runs on and never waits for the host.
type MoE struct {
	Router     *rt.Tensor // [E, H]
	Experts    *rt.Experts
	Shared     *MLP       // nil without a shared expert
	SharedGate *rt.Tensor // [1, H]
}

// bindMoE accepts per-expert keys (experts.N.gate_proj.weight, ...) and the
// fused layout (experts.gate_up_proj [E, 2I, H], experts.down_proj [E, H, I]).
func bindMoE(b *binder, prefix string, c *Config) *MoE {
	h, e, inter := c.HiddenSize, c.NumExperts, c.ExpertInterSize
	m := &MoE{Router: b.matrix(prefix+"gate.weight", e, h)}
	if c.SharedInterSize > 0 {
		m.Shared = bindMLP(b, prefix+"shared_expert.", h, c.SharedInterSize)
		m.SharedGate = b.matrix(prefix+"shared_expert_gate.weight", 1, h)
	}
	b.enter("moe.experts")
	gate, up, down := make([]*rt.Tensor, e), make([]*rt.Tensor, e), make([]*rt.Tensor, e)
	if fused := prefix + "experts.gate_up_proj"; b.has(fused) {
		gateUp := b.matrix(fused, e, 2*inter, h) // stored fused: sliced in every memory
		downs := b.matrix(prefix+"experts.down_proj", e, h, inter)
		if gateUp == nil || downs == nil {
			return m
		}
		for i := range e {
			gu, _ := gateUp.Index(i)
			gate[i], _ = gu.Slice(0, 0, inter)
			up[i], _ = gu.Slice(0, inter, 2*inter)
			down[i], _ = downs.Index(i)
		}
	} else {
		for i := range e {
			p := fmt.Sprintf("%sexperts.%d.", prefix, i)
			gate[i] = b.matrix(p+"gate_proj.weight", inter, h)
			up[i] = b.matrix(p+"up_proj.weight", inter, h)
			down[i] = b.matrix(p+"down_proj.weight", h, inter)
		}
	}
	if !b.bind || b.err() != nil {
		return m
	}
	ex, err := rt.NewExperts(gate, up, down, c.TopK)
	if err != nil {
		b.fail(fmt.Errorf("qwen35: %s: %w", prefix+"experts", err))
		return m
	}
	m.Experts = ex
	return m
}

func (m *MoE) forward(be *rt.Backend, b *batch, out, x *rt.Tensor) error {
	ar := b.arena
	logits := ar.New(rt.F32, x.Dim(0), len(m.Experts.Gate))
	if err := be.MatMul(logits, x, m.Router); err != nil {
		return err
	}
	if err := be.MoEExperts(out, x, logits, m.Experts); err != nil {
		return err
	}
	if m.Shared == nil {
		return nil
	}
	shared, gate := ar.New(rt.F32, x.Dim(0), x.Dim(1)), ar.New(rt.F32, x.Dim(0), 1)
	if err := m.Shared.forward(be, ar, shared, x); err != nil {
		return fmt.Errorf("shared expert: %w", err)
	}
	if err := be.MatMul(gate, x, m.SharedGate); err != nil {
		return err
	}
	if err := be.SigmoidMul(shared, shared, gate); err != nil {
		return err
	}
	return be.Add(out, out, shared)
}
