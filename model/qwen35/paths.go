package qwen35

import (
	"maps"
	"slices"

	rt "github.com/govllm/govllm/runtime"
)

// The model's execution paths and the ops each needs, besides the matmul
// dtypes that binding records. Both attention preambles are declared, and
// so both are checked at load: whichever one a run takes must never fail
// for want of a kernel.
var pathOps = map[string][]rt.OpID{
	"embedding":           {rt.OpEmbedding},
	"deltanet":            {rt.OpMatMul, rt.OpConv1dCausal, rt.OpL2Norm, rt.OpDeltaRuleChunked, rt.OpDeltaRuleRecurrent, rt.OpDeltaNetStep, rt.OpGatedRMSNorm},
	"attention.fused":     {rt.OpMatMul, rt.OpAttnPreamble, rt.OpKVWrite, rt.OpAttention, rt.OpSigmoidMul},
	"attention.composite": {rt.OpMatMul, rt.OpSplitQueryGate, rt.OpRMSNormOffset, rt.OpRoPENeoX, rt.OpKVWrite, rt.OpAttention, rt.OpSigmoidMul},
	"mlp":                 {rt.OpMatMul, rt.OpMatMulSwiGLU, rt.OpSwiGLU},
	"moe":                 {rt.OpMatMul, rt.OpMatMulSwiGLU, rt.OpSwiGLU, rt.OpSigmoidMul, rt.OpAdd},
	"moe.experts":         {rt.OpMoEExperts},
	"decoder":             {rt.OpRMSNormOffset, rt.OpAddRMSNormOffset, rt.OpAdd},
	"lm_head":             {rt.OpAddRMSNormOffset, rt.OpGatherRows, rt.OpMatMul, rt.OpArgmax},
}

// paths builds the requirement list: each path's ops at F32, with matmul,
// embedding and moe_experts at the dtypes of the weights they read.
func paths(dtypes map[string]map[rt.DType]bool) []rt.Path {
	var out []rt.Path
	for _, name := range slices.Sorted(maps.Keys(dtypes)) {
		p := rt.Path{Name: name}
		for _, op := range pathOps[name] {
			if op == rt.OpMatMul || op == rt.OpMatMulSwiGLU || op == rt.OpEmbedding || op == rt.OpMoEExperts {
				for _, dt := range rt.DTypes {
					if dtypes[name][dt] {
						p.Needs = append(p.Needs, rt.Requirement{Op: op, DType: dt})
					}
				}
				continue
			}
			p.Needs = append(p.Needs, rt.Requirement{Op: op, DType: rt.F32})
		}
		out = append(out, p)
	}
	return out
}
