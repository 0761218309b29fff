//go:build linux && amd64

package cuda

import rt "github.com/govllm/govllm/runtime"

// Register adds the CUDA kernels to reg. They are compiled in on every
// linux/amd64 build; whether a GPU and the libraries are there is decided
// at run time by Available.
//
// Quantized weights: every block type of quantTypes (Q8_0, Q4_K and Q6_K
// with kernels of their own, the other types through load8_more's byte
// loads); a type not there is not registered, and the model's coverage
// check names it when a path needs it.
// delta_rule_chunked runs the recurrent kernel token by token (exact, not
// yet the chunked parallel form).
func Register(reg *rt.Registry) error {
	f32 := rt.F32
	regs := []error{
		rt.Register(reg, rt.Embedding, rt.CUDA, rt.F32, Provider, embedding),
		rt.Register(reg, rt.Embedding, rt.CUDA, rt.BF16, Provider, embedding),
		rt.Register(reg, rt.Embedding, rt.CUDA, rt.F16, Provider, embedding),
		rt.Register(reg, rt.MatMul, rt.CUDA, rt.F32, Provider, matMul),
		rt.Register(reg, rt.MatMul, rt.CUDA, rt.BF16, Provider, matMul),
		rt.Register(reg, rt.MatMul, rt.CUDA, rt.F16, Provider, matMul),
		rt.Register(reg, rt.MatMulSwiGLU, rt.CUDA, rt.F32, Provider, matMulSwiGLU),
		rt.Register(reg, rt.MatMulSwiGLU, rt.CUDA, rt.BF16, Provider, matMulSwiGLU),
		rt.Register(reg, rt.MatMulSwiGLU, rt.CUDA, rt.F16, Provider, matMulSwiGLU),
		rt.Register(reg, rt.Add, rt.CUDA, f32, Provider, add),
		rt.Register(reg, rt.RMSNorm, rt.CUDA, f32, Provider, rmsNorm),
		rt.Register(reg, rt.RMSNormOffset, rt.CUDA, f32, Provider, rmsNormOffset),
		rt.Register(reg, rt.AddRMSNormOffset, rt.CUDA, f32, Provider, addRMSNormOffset),
		rt.Register(reg, rt.GatedRMSNorm, rt.CUDA, f32, Provider, gatedRMSNorm),
		rt.Register(reg, rt.SiLU, rt.CUDA, f32, Provider, silu),
		rt.Register(reg, rt.SwiGLU, rt.CUDA, f32, Provider, swiGLU),
		rt.Register(reg, rt.SigmoidMul, rt.CUDA, f32, Provider, sigmoidMul),
		rt.Register(reg, rt.SplitQueryGate, rt.CUDA, f32, Provider, splitQueryGate),
		rt.Register(reg, rt.RoPENeoX, rt.CUDA, f32, Provider, ropeNeoX),
		rt.Register(reg, rt.AttnPreamble, rt.CUDA, f32, Provider, attnPreamble),
		rt.Register(reg, rt.KVWrite, rt.CUDA, f32, Provider, kvWrite),
		rt.Register(reg, rt.Attention, rt.CUDA, f32, Provider, attention),
		rt.Register(reg, rt.Conv1dCausal, rt.CUDA, f32, Provider, conv1dCausal),
		rt.Register(reg, rt.L2Norm, rt.CUDA, f32, Provider, l2Norm),
		rt.Register(reg, rt.GDNGating, rt.CUDA, f32, Provider, gdnGating),
		rt.Register(reg, rt.DeltaRuleChunked, rt.CUDA, f32, Provider, rt.DeltaRuleChunkedKernel(deltaRule(rt.OpDeltaRuleChunked))),
		rt.Register(reg, rt.DeltaRuleRecurrent, rt.CUDA, f32, Provider, deltaRule(rt.OpDeltaRuleRecurrent)),
		rt.Register(reg, rt.Conv1dSlots, rt.CUDA, f32, Provider, conv1dSlots),
		rt.Register(reg, rt.DeltaRuleSlots, rt.CUDA, f32, Provider, deltaRuleSlots),
		rt.Register(reg, rt.DeltaNetStep, rt.CUDA, f32, Provider, deltaNetStep),
		rt.Register(reg, rt.GatherRows, rt.CUDA, f32, Provider, gatherRows),
		rt.Register(reg, rt.Argmax, rt.CUDA, f32, Provider, argmax),
		// Where the GPU can run it (memory's PersistentDecode); else the
		// model runs the ops it replaces.
		rt.Register(reg, rt.DecodeLayers, rt.CUDA, rt.BF16, Provider, decodeLayers),
	}
	for dt := range quantTypes {
		regs = append(regs, rt.Register(reg, rt.MatMul, rt.CUDA, dt, Provider, matMul),
			rt.Register(reg, rt.MatMulSwiGLU, rt.CUDA, dt, Provider, matMulSwiGLU),
			rt.Register(reg, rt.Embedding, rt.CUDA, dt, Provider, embedding))
	}
	for dt := range expertTypes {
		regs = append(regs, rt.Register(reg, rt.MoEExperts, rt.CUDA, dt, Provider, moeExperts))
	}
	for _, err := range regs {
		if err != nil {
			return err
		}
	}
	return nil
}
