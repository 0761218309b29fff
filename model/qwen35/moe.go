package qwen35

import (
	"fmt"

	rt "github.com/govllm/govllm/runtime"
)

// MoE is the routed mixture-of-experts block with a sigmoid-gated shared
// expert: softmax router, top-k renormalised, experts run on the tokens
// routed to them.
type MoE struct {
	Router     *rt.Tensor // [E, H]
	Experts    []MLP      // each [I, H], [I, H], [H, I]
	Shared     *MLP       // nil without a shared expert
	SharedGate *rt.Tensor // [1, H]
	TopK       int
}

// bindMoE accepts per-expert keys (experts.N.gate_proj.weight, ...) and the
// fused layout (experts.gate_up_proj [E, 2I, H], experts.down_proj [E, H, I]).
func bindMoE(b *binder, prefix string, c *Config) *MoE {
	h, e, inter := c.HiddenSize, c.NumExperts, c.ExpertInterSize
	m := &MoE{Router: b.matrix(prefix+"gate.weight", e, h), TopK: c.TopK, Experts: make([]MLP, e)}
	if fused := prefix + "experts.gate_up_proj"; b.has(fused) {
		gateUp := b.matrix(fused, e, 2*inter, h)
		down := b.matrix(prefix+"experts.down_proj", e, h, inter)
		if gateUp != nil && down != nil {
			for i := range m.Experts {
				gu, _ := gateUp.Index(i) // stored fused: one matmul in every memory
				m.Experts[i].GateUp = &Projections{Fused: gu, Rows: []int{inter, inter}}
				m.Experts[i].Down, _ = down.Index(i)
			}
		}
	} else {
		for i := range m.Experts {
			m.Experts[i] = *bindMLP(b, fmt.Sprintf("%sexperts.%d.", prefix, i), h, inter)
		}
	}
	if c.SharedInterSize > 0 {
		m.Shared = bindMLP(b, prefix+"shared_expert.", h, c.SharedInterSize)
		m.SharedGate = b.matrix(prefix+"shared_expert_gate.weight", 1, h)
	}
	return m
}

// moeScratch holds the routing of one MoE layer call, reused by the next.
type moeScratch struct {
	ids     []int32
	weights []float32
	rows    [][]int32   // per expert: the tokens routed to it
	ws      [][]float32 // and their weights
}

func (m *MoE) forward(be *rt.Backend, b *batch, out, x *rt.Tensor) error {
	t, h, e := x.Dim(0), x.Dim(1), len(m.Experts)
	ar, sc := b.arena, &b.moe
	logits := ar.New(rt.F32, t, e)
	if err := be.MatMul(logits, x, m.Router); err != nil {
		return err
	}
	sc.ids, sc.weights = resize(sc.ids, t*m.TopK), resize(sc.weights, t*m.TopK)
	ids, weights := sc.ids, sc.weights
	if err := be.RouterTopK(ids, weights, logits, m.TopK); err != nil {
		return err
	}
	// Group the (token, weight) pairs by expert.
	sc.rows, sc.ws = resize(sc.rows, e), resize(sc.ws, e)
	rows, ws := sc.rows, sc.ws
	for id := range rows {
		rows[id], ws[id] = rows[id][:0], ws[id][:0]
	}
	for i, id := range ids {
		rows[id] = append(rows[id], int32(i/m.TopK))
		ws[id] = append(ws[id], weights[i])
	}
	if err := be.Memory().Zero(out); err != nil {
		return err
	}
	for id := range m.Experts {
		n := len(rows[id])
		if n == 0 {
			continue
		}
		mark := ar.Mark()
		xe, ye := ar.New(rt.F32, n, h), ar.New(rt.F32, n, h)
		if err := be.GatherRows(xe, x, rows[id]); err != nil {
			return err
		}
		if err := m.Experts[id].forward(be, ar, ye, xe); err != nil {
			return fmt.Errorf("expert %d: %w", id, err)
		}
		if err := be.MoEScatterAdd(out, ye, rows[id], ws[id]); err != nil {
			return err
		}
		ar.Release(mark)
	}
	if m.Shared == nil {
		return nil
	}
	shared, gate := ar.New(rt.F32, t, h), ar.New(rt.F32, t, 1)
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

// resize returns s with length n, reusing its storage where it is large
// enough; the elements are not cleared.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
