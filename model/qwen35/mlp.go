package qwen35

import rt "github.com/govllm/govllm/runtime"

// MLP is the SwiGLU feed-forward block: down(silu(gate(x)) · up(x)).
type MLP struct {
	GateUp *Projections // gate [I, H], up [I, H]
	Down   *rt.Tensor   // [H, I]
}

func bindMLP(b *binder, prefix string, hidden, inter int) *MLP {
	return &MLP{
		GateUp: b.projections([]string{prefix + "gate_proj.weight", prefix + "up_proj.weight"}, []int{inter, inter}, hidden),
		Down:   b.matrix(prefix+"down_proj.weight", hidden, inter),
	}
}

// forward writes the block's output for x [T, H] into out [T, H]. Where
// gate and up are one weight, one op runs both and the SwiGLU (a decode
// step's GEMV writes silu(g)·u directly).
func (m *MLP) forward(be *rt.Backend, ar *rt.Arena, out, x *rt.Tensor) error {
	if m.GateUp.Fused != nil {
		h := ar.New(rt.F32, x.Dim(0), m.GateUp.Rows[0])
		if err := be.MatMulSwiGLU(h, x, m.GateUp.Fused); err != nil {
			return err
		}
		return be.MatMul(out, h, m.Down)
	}
	gu, err := m.GateUp.forward(be, ar, x)
	if err != nil {
		return err
	}
	gate, up := gu[0], gu[1]
	if err := be.SwiGLU(gate, gate, up); err != nil {
		return err
	}
	return be.MatMul(out, gate, m.Down)
}
