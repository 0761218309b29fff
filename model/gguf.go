package model

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"

	"github.com/govllm/govllm/format/gguf"
	rt "github.com/govllm/govllm/runtime"
)

// GGUF is a Source over a llama.cpp GGUF file of the qwen35 family. It
// serves tensors under their Hugging Face names, undoing what llama.cpp's
// converter changed where it changed values: RMSNorm weights with the +1
// folded in get it back out, ssm_a (stored as -exp(A_log)) becomes A_log.
// The value-head order stays llama.cpp's (tiled): the model reads it so
// (Config.TiledVHeads), which needs no copy of any weight.
type GGUF struct {
	File   *gguf.File
	byHF   map[string]ggufRef
	hfName []string
}

type ggufRef struct {
	tensor string
	expert int // ≥ 0: one expert of a stacked [E, N, K] tensor
	fix    func(float32) float32
}

// ggufNames maps a GGUF block tensor to its Hugging Face suffix.
var ggufNames = map[string]string{
	"attn_norm.weight": "input_layernorm.weight", "post_attention_norm.weight": "post_attention_layernorm.weight",
	"ssm_a": "linear_attn.A_log", "ssm_conv1d.weight": "linear_attn.conv1d.weight", "ssm_dt.bias": "linear_attn.dt_bias",
	"ssm_alpha.weight": "linear_attn.in_proj_a.weight", "ssm_beta.weight": "linear_attn.in_proj_b.weight",
	"attn_qkv.weight": "linear_attn.in_proj_qkv.weight", "attn_gate.weight": "linear_attn.in_proj_z.weight",
	"ssm_norm.weight": "linear_attn.norm.weight", "ssm_out.weight": "linear_attn.out_proj.weight",
	"attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
	"attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
	"attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
	"ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight", "ffn_down.weight": "mlp.down_proj.weight",
	"ffn_gate_inp.weight": "mlp.gate.weight", "ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight",
	"ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight", "ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight",
	"ffn_gate_inp_shexp.weight": "mlp.shared_expert_gate.weight",
}

var ggufExperts = map[string]string{"ffn_gate_exps.weight": "gate_proj.weight", "ffn_up_exps.weight": "up_proj.weight", "ffn_down_exps.weight": "down_proj.weight"}

// offsetNorms hold 1 + w in GGUF and w in Hugging Face checkpoints.
var offsetNorms = map[string]bool{"attn_norm.weight": true, "post_attention_norm.weight": true, "attn_q_norm.weight": true, "attn_k_norm.weight": true}

var blockName = regexp.MustCompile(`^blk\.(\d+)\.(.+)$`)

// OpenGGUF maps a GGUF file; only its header is read.
func OpenGGUF(path string) (*GGUF, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	g := &GGUF{File: f, byHF: map[string]ggufRef{}}
	minus1 := func(x float32) float32 { return x - 1 }
	for _, t := range f.Tensors {
		switch t.Name {
		case "token_embd.weight":
			g.add("model.embed_tokens.weight", ggufRef{tensor: t.Name, expert: -1})
		case "output.weight":
			g.add("lm_head.weight", ggufRef{tensor: t.Name, expert: -1})
		case "output_norm.weight":
			g.add("model.norm.weight", ggufRef{tensor: t.Name, expert: -1, fix: minus1})
		}
		m := blockName.FindStringSubmatch(t.Name)
		if m == nil {
			continue
		}
		layer, _ := strconv.Atoi(m[1])
		prefix := fmt.Sprintf("model.layers.%d.", layer)
		if hf, ok := ggufNames[m[2]]; ok {
			ref := ggufRef{tensor: t.Name, expert: -1}
			switch {
			case offsetNorms[m[2]]:
				ref.fix = minus1
			case m[2] == "ssm_a":
				ref.fix = func(a float32) float32 { return float32(math.Log(-float64(a))) }
			}
			g.add(prefix+hf, ref)
		}
		if hf, ok := ggufExperts[m[2]]; ok && len(t.Dims) == 3 {
			for e := range int(t.Dims[2]) {
				g.add(fmt.Sprintf("%smlp.experts.%d.%s", prefix, e, hf), ggufRef{tensor: t.Name, expert: e})
			}
		}
	}
	sort.Strings(g.hfName)
	return g, nil
}

func (g *GGUF) add(name string, ref ggufRef) {
	g.byHF[name] = ref
	g.hfName = append(g.hfName, name)
}

func (g *GGUF) Info(name string) (TensorInfo, bool) {
	ref, ok := g.byHF[name]
	if !ok {
		return TensorInfo{}, false
	}
	t, _ := g.File.Tensor(ref.tensor)
	shape := t.Shape()
	if ref.expert >= 0 {
		shape = shape[1:]
	}
	dt, _ := gguf.RuntimeDType(t.Type)
	return TensorInfo{Name: name, DType: dt, Raw: t.Type.String(), Shape: shape, File: g.File.Path}, true
}

func (g *GGUF) Tensor(name string) (*rt.Tensor, error) {
	ref, ok := g.byHF[name]
	if !ok {
		return nil, fmt.Errorf("model: %w: tensor %q not in %s", ErrTensor, name, g.File.Path)
	}
	t, _ := g.File.Tensor(ref.tensor)
	dt, ok := gguf.RuntimeDType(t.Type)
	if !ok {
		return nil, fmt.Errorf("model: %s: tensor %q: %w: type %v is not supported yet", g.File.Path, t.Name, ErrTensor, t.Type)
	}
	x, err := rt.FromBytes(dt, g.File.Bytes(t), t.Shape()...)
	if err != nil {
		return nil, fmt.Errorf("model: %s: tensor %q: %w", g.File.Path, t.Name, err)
	}
	if ref.expert >= 0 {
		if x, err = x.Index(ref.expert); err != nil {
			return nil, err
		}
	}
	if ref.fix != nil {
		if dt != rt.F32 {
			return nil, fmt.Errorf("model: %s: tensor %q: %w: expected f32, found %v", g.File.Path, t.Name, ErrTensor, t.Type)
		}
		c := rt.New(rt.F32, x.Shape()...)
		for i, v := range x.F32()[:x.Len()] {
			c.F32()[i] = ref.fix(v)
		}
		x = c
	}
	return x, nil
}

func (g *GGUF) Names() []string { return g.hfName }
func (g *GGUF) Where() string   { return g.File.Path }
func (g *GGUF) Close() error    { return g.File.Close() }
