package runtime

//go:generate stringer -type=OpID -linecomment -output=op_string.go

// OpID names an operation. Kernels are registered under an OpID; its String
// is the name that errors, the coverage matrix and `govllm ops` print.
type OpID uint16

// The ops of the Qwen3.5 paths. Keep names stable: they appear in errors.
const (
	OpInvalid            OpID = iota // invalid
	OpEmbedding                      // embedding
	OpMatMul                         // matmul
	OpAdd                            // add
	OpRMSNorm                        // rms_norm
	OpRMSNormOffset                  // rms_norm_offset
	OpGatedRMSNorm                   // gated_rms_norm
	OpSiLU                           // silu
	OpSwiGLU                         // swiglu
	OpSigmoidMul                     // sigmoid_mul
	OpSplitQueryGate                 // split_query_gate
	OpRoPENeoX                       // rope_neox
	OpAttnPreamble                   // attn_preamble_fused
	OpKVWrite                        // kv_write
	OpAttention                      // attention_causal_gqa
	OpConv1dCausal                   // conv1d_causal
	OpL2Norm                         // l2_norm
	OpGDNGating                      // gdn_gating
	OpDeltaRuleChunked               // delta_rule_chunked
	OpDeltaRuleRecurrent             // delta_rule_recurrent
	OpGatherRows                     // gather_rows
	OpConv1dSlots                    // conv1d_causal_slots
	OpDeltaRuleSlots                 // delta_rule_slots
	OpAddRMSNormOffset               // add_rms_norm_offset
	OpMoEExperts                     // moe_experts
	OpMatMulSwiGLU                   // matmul_swiglu
	OpDeltaNetStep                   // deltanet_step
	OpArgmax                         // argmax
	OpDecodeLayers                   // decode_layers_persistent
	opCount
)

// Ops lists every valid op in id order.
func Ops() []OpID {
	ops := make([]OpID, 0, opCount-1)
	for op := OpID(1); op < opCount; op++ {
		ops = append(ops, op)
	}
	return ops
}

// Device is where a kernel runs.
type Device uint8

const (
	CPU Device = iota
	CUDA
)

func (d Device) String() string {
	switch d {
	case CPU:
		return "cpu"
	case CUDA:
		return "cuda"
	}
	return "device?"
}

// Devices lists the devices govllm knows, registered or not.
var Devices = []Device{CPU, CUDA}
