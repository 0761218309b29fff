package cpu

import rt "github.com/govllm/govllm/runtime"

// Provider is the plain-Go kernel provider. Assembly providers will register
// beside it at a higher priority.
var Provider = rt.Provider{Name: "go", Priority: 0}

// Register adds every CPU kernel to reg.
func Register(reg *rt.Registry) error {
	f32 := rt.F32
	regs := []error{
		rt.Register(reg, rt.Embedding, rt.CPU, rt.F32, Provider, embedding),
		rt.Register(reg, rt.Embedding, rt.CPU, rt.BF16, Provider, embedding),
		rt.Register(reg, rt.Embedding, rt.CPU, rt.F16, Provider, embedding),
		rt.Register(reg, rt.MatMul, rt.CPU, rt.F32, Provider, matMul),
		rt.Register(reg, rt.MatMul, rt.CPU, rt.BF16, Provider, matMul),
		rt.Register(reg, rt.MatMul, rt.CPU, rt.F16, Provider, matMul),
		rt.Register(reg, rt.MatMulSwiGLU, rt.CPU, rt.F32, Provider, matMulSwiGLU),
		rt.Register(reg, rt.MatMulSwiGLU, rt.CPU, rt.BF16, Provider, matMulSwiGLU),
		rt.Register(reg, rt.MatMulSwiGLU, rt.CPU, rt.F16, Provider, matMulSwiGLU),
		rt.Register(reg, rt.MoEExperts, rt.CPU, rt.F32, Provider, moeExperts),
		rt.Register(reg, rt.MoEExperts, rt.CPU, rt.BF16, Provider, moeExperts),
		rt.Register(reg, rt.MoEExperts, rt.CPU, rt.F16, Provider, moeExperts),
		rt.Register(reg, rt.Add, rt.CPU, f32, Provider, add),
		rt.Register(reg, rt.RMSNorm, rt.CPU, f32, Provider, rmsNorm),
		rt.Register(reg, rt.RMSNormOffset, rt.CPU, f32, Provider, rmsNormOffset),
		rt.Register(reg, rt.AddRMSNormOffset, rt.CPU, f32, Provider, addRMSNormOffset),
		rt.Register(reg, rt.GatedRMSNorm, rt.CPU, f32, Provider, gatedRMSNorm),
		rt.Register(reg, rt.SiLU, rt.CPU, f32, Provider, silu),
		rt.Register(reg, rt.SwiGLU, rt.CPU, f32, Provider, swiGLU),
		rt.Register(reg, rt.SigmoidMul, rt.CPU, f32, Provider, sigmoidMul),
		rt.Register(reg, rt.SplitQueryGate, rt.CPU, f32, Provider, splitQueryGate),
		rt.Register(reg, rt.RoPENeoX, rt.CPU, f32, Provider, ropeNeoX),
		rt.Register(reg, rt.AttnPreamble, rt.CPU, f32, Provider, attnPreamble),
		rt.Register(reg, rt.KVWrite, rt.CPU, f32, Provider, kvWrite),
		rt.Register(reg, rt.Attention, rt.CPU, f32, Provider, attention),
		rt.Register(reg, rt.Conv1dCausal, rt.CPU, f32, Provider, conv1dCausal),
		rt.Register(reg, rt.L2Norm, rt.CPU, f32, Provider, l2Norm),
		rt.Register(reg, rt.GDNGating, rt.CPU, f32, Provider, gdnGating),
		rt.Register(reg, rt.DeltaRuleChunked, rt.CPU, f32, Provider, deltaRuleChunked),
		rt.Register(reg, rt.DeltaRuleRecurrent, rt.CPU, f32, Provider, deltaRuleRecurrent),
		rt.Register(reg, rt.Conv1dSlots, rt.CPU, f32, Provider, conv1dSlots),
		rt.Register(reg, rt.DeltaRuleSlots, rt.CPU, f32, Provider, deltaRuleSlots),
		rt.Register(reg, rt.DeltaNetStep, rt.CPU, f32, Provider, deltaNetStep),
		rt.Register(reg, rt.GatherRows, rt.CPU, f32, Provider, gatherRows),
		rt.Register(reg, rt.Argmax, rt.CPU, f32, Provider, argmax),
	}
	for _, dt := range rt.DTypes {
		if dt.Quantized() {
			regs = append(regs, rt.Register(reg, rt.Embedding, rt.CPU, dt, Provider, embedding), rt.Register(reg, rt.MatMul, rt.CPU, dt, Provider, matMul),
				rt.Register(reg, rt.MatMulSwiGLU, rt.CPU, dt, Provider, matMulSwiGLU), rt.Register(reg, rt.MoEExperts, rt.CPU, dt, Provider, moeExperts))
		}
	}
	for _, err := range regs {
		if err != nil {
			return err
		}
	}
	return nil
}
