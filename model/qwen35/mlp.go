package qwen35

import rt "github.com/govllm/govllm/runtime"

// MLP is the SwiGLU feed-forward block: down(silu(gate(x)) · up(x)).
type MLP struct {
	Gate, Up, Down *rt.Tensor // [I, H], [I, H], [H, I]
}

func bindMLP(b *binder, prefix string, hidden, inter int) *MLP {
	return &MLP{
		Gate: b.matrix(prefix+"gate_proj.weight", inter, hidden),
		Up:   b.matrix(prefix+"up_proj.weight", inter, hidden),
		Down: b.matrix(prefix+"down_proj.weight", hidden, inter),
	}
}

// forward writes the block's output for x [T, H] into out [T, H].
func (m *MLP) forward(be *rt.Backend, ar *rt.Arena, out, x *rt.Tensor) error {
	t, inter := x.Dim(0), m.Gate.Dim(0)
	gate, up := ar.New(rt.F32, t, inter), ar.New(rt.F32, t, inter)
	if err := be.MatMul(gate, x, m.Gate); err != nil {
		return err
	}
	if err := be.MatMul(up, x, m.Up); err != nil {
		return err
	}
	if err := be.SwiGLU(gate, gate, up); err != nil {
		return err
	}
	return be.MatMul(out, gate, m.Down)
}
