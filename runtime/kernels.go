package runtime

// Def binds an op id to the Go signature K of its kernels, so that
// registration and lookup are typed.
type Def[K any] struct{ ID OpID }

// Kernel signatures. Activations are F32; the dtype a kernel is registered
// under is that of its weight operand (matmul, embedding) or F32. Kernels do
// no validation: the Backend method of each op checks its arguments first.
type (
	// EmbeddingKernel gathers rows ids of table [V, H] into dst [T, H].
	EmbeddingKernel func(dst, table *Tensor, ids []int32)
	// MatMulKernel computes dst[M, N] = x[M, K] · w[N, K]ᵀ.
	MatMulKernel func(dst, x, w *Tensor)
	// AddKernel computes dst = a + b elementwise.
	AddKernel func(dst, a, b *Tensor)
	// RMSNormKernel normalises each row of x and scales it by w (or 1 + w).
	RMSNormKernel func(dst, x, w *Tensor, eps float32)
	// AddRMSNormKernel adds y into x (the residual stream) and writes x's
	// rows normalised and scaled by 1 + w into dst: add then
	// rms_norm_offset in one pass.
	AddRMSNormKernel func(dst, x, y, w *Tensor, eps float32)
	// GatedRMSNormKernel computes rmsnorm(x) · w · silu(z) per row.
	GatedRMSNormKernel func(dst, x, z, w *Tensor, eps float32)
	// SiLUKernel computes dst = x · sigmoid(x).
	SiLUKernel func(dst, x *Tensor)
	// MatMulSwiGLUKernel computes dst[M, I] = silu(x·gateᵀ) · (x·upᵀ) for
	// w [2I, K] holding gate's rows then up's: an MLP's gate and up
	// projections and its SwiGLU in one op.
	MatMulSwiGLUKernel func(dst, x, w *Tensor)
	// SwiGLUKernel computes dst = silu(gate) · up.
	SwiGLUKernel func(dst, gate, up *Tensor)
	// SigmoidMulKernel computes dst = x · sigmoid(gate); a gate row of one
	// element broadcasts over the row of x.
	SigmoidMulKernel func(dst, x, gate *Tensor)
	// SplitQueryGateKernel splits qg [T, H, 2D], per head [q | gate], into
	// q [T, H, D] and gate [T, H, D].
	SplitQueryGateKernel func(q, gate, qg *Tensor)
	// RoPEKernel rotates, in place, the first rotaryDim channels of each head
	// of x [T, H, D] in NeoX style (halves), at the given positions.
	RoPEKernel func(x *Tensor, positions []int32, rotaryDim int, theta float32)
	// AttnPreambleKernel is split_query_gate, rms_norm_offset of q and k and
	// rope_neox of q and k in one pass; k is updated in place.
	AttnPreambleKernel func(q, gate, qg, k, qNorm, kNorm *Tensor, positions []int32, p PreambleParams)
	// KVWriteKernel copies row i of x [T, Hkv, D] into row slots[i] of the
	// paged cache [blocks·blockSize, Hkv, D].
	KVWriteKernel func(cache, x *Tensor, slots []int32)
	// AttentionKernel is causal grouped-query attention with an f32 softmax
	// over a paged cache, for several sequences at once: the rows of each
	// AttnSeq in q [N, Hq, D] attend to their sequence's keys and values in
	// k, v [blocks·blockSize, Hkv, D]; dst is [N, Hq, D].
	AttentionKernel func(dst, q, k, v *Tensor, seqs []AttnSeq, blockSize int, scale float32)
	// Conv1dKernel is a causal depthwise convolution of x [T, C] with
	// w [C, K], followed by silu where asked (one pass, as vLLM's
	// causal_conv1d with activation "silu"); state [K-1, C] holds the
	// inputs before x and is advanced past x.
	Conv1dKernel func(dst, x, w, state *Tensor, silu bool)
	// L2NormKernel divides each row by sqrt(sum of squares + eps).
	L2NormKernel func(dst, x *Tensor, eps float32)
	// GDNGatingKernel computes the DeltaNet decay g = -exp(aLog)·softplus(a +
	// dtBias) and the write strength beta = sigmoid(b), all [T, Hv].
	GDNGatingKernel func(g, beta, a, b, aLog, dtBias *Tensor)
	// DeltaRuleChunkedKernel runs the gated delta rule over a sequence in
	// chunks of the given length, from and into state [Hv, Dk, Dv].
	// q, k are [T, Hk, Dk] (L2-normalised, or normalised by the kernel
	// with QKNormEps; the kernel scales q by Dk^-½),
	// v and out are [T, Hv, Dv], g and beta [T, Hv].
	DeltaRuleChunkedKernel func(out, q, k, v, g, beta, state *Tensor, p DeltaRuleParams)
	// DeltaRuleRecurrentKernel is the same rule one token at a time.
	DeltaRuleRecurrentKernel func(out, q, k, v, g, beta, state *Tensor, p DeltaRuleParams)
	// Conv1dSlotsKernel is Conv1dKernel for a decode step of many
	// sequences: row i of x [N, C] is one token of the sequence whose state
	// is states[slots[i]] ([S, K-1, C]).
	Conv1dSlotsKernel func(dst, x, w, states *Tensor, slots []int32, silu bool)
	// DeltaRuleSlotsKernel is DeltaRuleRecurrentKernel for a decode step of
	// many sequences: row i of q, k, v, g, beta is one token of the sequence
	// whose state is states[slots[i]] ([S, Hv, Dk, Dv]).
	DeltaRuleSlotsKernel func(out, q, k, v, g, beta, states *Tensor, slots []int32, p DeltaRuleParams)
	// GatherRowsKernel copies row rows[i] of x into row i of dst.
	GatherRowsKernel func(dst, x *Tensor, rows []int32)
	// ArgmaxKernel writes into dst[r] (I32) the index of row r's largest
	// element: ties to the lower index, NaN never largest (index 0 if the
	// row has nothing else).
	ArgmaxKernel func(dst, x *Tensor)
	// MoEExpertsKernel writes into out [T, H], for each row t of x [T, H],
	// Σ w_e · down_e(silu(gate_e·x_t) ⊙ up_e·x_t) over the TopK experts e
	// with the largest softmax of logits row t [T, E] (ties to the lower
	// index), w renormalised over those k to sum to one.
	MoEExpertsKernel func(out, x, logits *Tensor, ex *Experts)
	// DeltaNetStepKernel is a decode step of Gated DeltaNet blocks, the
	// chain conv1d_causal_slots (SiLU), delta_rule_slots (q and k
	// normalised, a and b gated) and gated_rms_norm (see DeltaNetStepArgs).
	DeltaNetStepKernel func(s *DeltaNetStepArgs)
	// DecodeLayersKernel runs a batch-1 decode step through a run of dense
	// blocks as one launch (see DecodeLayersArgs).
	DecodeLayersKernel func(d *DecodeLayersArgs)
)

// DecodeLayersArgs is one sequence's decode step (one token) through a run
// of a dense Qwen3.5's blocks, in order, on X [1, H], the residual stream,
// updated in place: each block adds its output to X. Its result is that of
// the ops it replaces (rms_norm_offset, matmul, deltanet_step,
// attn_preamble, attention, sigmoid_mul, matmul_swiglu, add); a device runs
// it as one persistent kernel, so the weights stream without a break at
// each op (DESIGN: docs/cuda.md). The states of a DeltaNet block are row
// Slot of its ConvStates and RecStates. Proj, Core and Hidden are scratch
// of at least C + Vd + 2·Hv, Hv·Dv and I elements (f32).
//
// An attention block reads the token's position Pos and writes its key and
// value to cache row KVRow; position p < Pos is cache row
// Table[p/BlockSize]·BlockSize + p%BlockSize. QKV and AttnPart are its
// scratch: the projections (Hq·2D + 2·Hkv·D) and the partial results of
// the attention, DecodeAttnSplit of D + 4 elements a query head.
type DecodeLayersArgs struct {
	X                  *Tensor
	Blocks             []DecodeBlock
	Slot               int32
	Proj, Core, Hidden *Tensor
	Eps                float32 // of every RMSNorm
	Pos, KVRow         int32
	Table              []int32
	BlockSize          int
	QKV, AttnPart      *Tensor
}

// DecodeAttnSplit is how many partial results at most an attention block
// of DecodeLayers splits a query head's keys into (chunks of 32 keys or
// more), merged by the output projection.
const DecodeAttnSplit = 16

// DecodeBlock is a block of DecodeLayersArgs: a DeltaNet mixer where
// InProj is set, an attention mixer where QKV is set, else a SwiGLU MLP;
// each reads rmsnorm(X)·(1 + Norm).
type DecodeBlock struct {
	Norm *Tensor // [H]
	// DeltaNet: InProj [C + Vd + 2·Hv, H] holds the qkv, z, b and a rows
	// (DeltaNetStepArgs names the rest), OutProj is [H, Vd].
	InProj, ConvW, ConvStates, RecStates, ALog, DtBias, GateNorm, OutProj *Tensor
	KeyHeads, KeyDim                                                      int
	TiledHeads                                                            bool
	QKNormEps                                                             float32
	// Attention: QKV [Hq·2D + 2·Hkv·D, H] holds each query head's rows and
	// its gate's, then the key and the value rows; QNorm and KNorm [D]
	// (used as 1 + w), the caches [rows, Hkv, D]; OutProj (above) is [H, Hq·D].
	// RoPE (NeoX) rotates the first RotaryDim values of q and k by Theta.
	QKV, QNorm, KNorm, KCache, VCache  *Tensor
	Heads, KVHeads, HeadDim, RotaryDim int
	Theta                              float32
	// MLP: GateUp [2I, H] (gate rows, then up), Down [H, I].
	GateUp, Down *Tensor
}

// DeltaNetStepArgs are the operands of a Gated DeltaNet decode step over
// N sequences of one token each, row i being the sequence whose states are
// ConvStates[Slots[i]] and RecStates[Slots[i]]: QKV [N, C] (C = 2·Hk·Dk +
// Hv·Dv) runs through the causal conv ConvW [C, K] with SiLU; of its output
// q [Hk, Dk] and k are L2-normalised (Rule.QKNormEps) and, with v [Hv, Dv],
// the raw A and B [N, Hv] (gated by Rule.ALog, Rule.DtBias), go through
// the gated delta rule (Rule.TiledHeads); each head of the result is
// RMS-normalised by Norm [Dv] (NormEps) and multiplied by silu of Z [N,
// Hv, Dv] into Out [N, Hv, Dv].
type DeltaNetStepArgs struct {
	Out, QKV, Z, A, B            *Tensor
	ConvW, ConvStates, RecStates *Tensor // [C, K], [S, K-1, C], [S, Hv, Dk, Dv]
	Norm                         *Tensor
	Slots                        []int32
	KeyHeads, KeyDim             int
	Rule                         DeltaRuleParams
	NormEps                      float32
}

// AttnSeq is one sequence of an attention call: rows Row..Row+Len of q are
// at positions Start..Start+Len, and position p of the sequence is cache row
// Blocks[p/blockSize]·blockSize + p%blockSize.
type AttnSeq struct {
	Row, Len, Start int
	Blocks          []int32
}

// DeltaRuleParams are the scalars of the gated delta rule.
type DeltaRuleParams struct {
	Chunk int // tokens per chunk of the chunked form
	// TiledHeads: value head h reads key head h mod Hk (llama.cpp's order)
	// instead of h / (Hv/Hk) (transformers' grouped order).
	TiledHeads bool
	// QKNormEps > 0: q and k come unnormalised and the kernel divides each
	// head's row by its L2 norm first (eps under the root), as vLLM's
	// use_qk_l2norm_in_kernel: one pass less than an L2Norm op before it.
	QKNormEps float32
	// ALog and DtBias ([Hv] each), when set: g and beta come as the raw a
	// and b projections, and the kernel gates them as it reads them, as
	// GDNGating would (vLLM's fused_sigmoid_gating_delta_rule_update): a
	// launch and a pass over g and β less.
	ALog, DtBias *Tensor
}

// PreambleParams are the scalars of the fused attention preamble.
type PreambleParams struct {
	RotaryDim int
	Theta     float32
	Eps       float32
	// With KCache set, the preamble also writes each token's keys (as
	// normalised and rotated) and V's rows into row Slots[t] of KCache and
	// VCache, as KVWrite does: two launches fewer a layer.
	KCache, VCache, V *Tensor
	Slots             []int32
}

// The typed op definitions.
var (
	Embedding          = Def[EmbeddingKernel]{OpEmbedding}
	MatMul             = Def[MatMulKernel]{OpMatMul}
	MatMulSwiGLU       = Def[MatMulSwiGLUKernel]{OpMatMulSwiGLU}
	Add                = Def[AddKernel]{OpAdd}
	RMSNorm            = Def[RMSNormKernel]{OpRMSNorm}
	RMSNormOffset      = Def[RMSNormKernel]{OpRMSNormOffset}
	AddRMSNormOffset   = Def[AddRMSNormKernel]{OpAddRMSNormOffset}
	GatedRMSNorm       = Def[GatedRMSNormKernel]{OpGatedRMSNorm}
	SiLU               = Def[SiLUKernel]{OpSiLU}
	SwiGLU             = Def[SwiGLUKernel]{OpSwiGLU}
	SigmoidMul         = Def[SigmoidMulKernel]{OpSigmoidMul}
	SplitQueryGate     = Def[SplitQueryGateKernel]{OpSplitQueryGate}
	RoPENeoX           = Def[RoPEKernel]{OpRoPENeoX}
	AttnPreamble       = Def[AttnPreambleKernel]{OpAttnPreamble}
	KVWrite            = Def[KVWriteKernel]{OpKVWrite}
	Attention          = Def[AttentionKernel]{OpAttention}
	Conv1dCausal       = Def[Conv1dKernel]{OpConv1dCausal}
	L2Norm             = Def[L2NormKernel]{OpL2Norm}
	GDNGating          = Def[GDNGatingKernel]{OpGDNGating}
	DeltaRuleChunked   = Def[DeltaRuleChunkedKernel]{OpDeltaRuleChunked}
	DeltaRuleRecurrent = Def[DeltaRuleRecurrentKernel]{OpDeltaRuleRecurrent}
	GatherRows         = Def[GatherRowsKernel]{OpGatherRows}
	MoEExperts         = Def[MoEExpertsKernel]{OpMoEExperts}
	Conv1dSlots        = Def[Conv1dSlotsKernel]{OpConv1dSlots}
	DeltaRuleSlots     = Def[DeltaRuleSlotsKernel]{OpDeltaRuleSlots}
	DeltaNetStep       = Def[DeltaNetStepKernel]{OpDeltaNetStep}
	Argmax             = Def[ArgmaxKernel]{OpArgmax}
	DecodeLayers       = Def[DecodeLayersKernel]{OpDecodeLayers}
)

// ArgmaxRow is ArgmaxKernel on one row: the backends' kernels and the
// engine's greedy sampler choose the same token.
func ArgmaxRow(x []float32) int32 {
	best := -1
	for i, v := range x {
		if v == v && (best < 0 || v > x[best]) { // v == v: not NaN
			best = i
		}
	}
	return int32(max(best, 0))
}
