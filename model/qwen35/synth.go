package qwen35

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/govllm/govllm/format/gguf"
	"github.com/govllm/govllm/model"
	rt "github.com/govllm/govllm/runtime"
)

// Shapes are the configurations Synth writes: the real Qwen3.5 dimensions,
// and a small MoE shape that fits in 24 GB at BF16.
var Shapes = map[string]func() *Config{
	"qwen3.5-0.8b":      func() *Config { return denseShape(1024, 3584) },
	"qwen3.5-2b":        func() *Config { return denseShape(2048, 6144) },
	"qwen3.5-moe-small": moeSmallShape,
}

// ShapeNames lists Shapes, sorted, for messages.
func ShapeNames() []string {
	var names []string
	for n := range Shapes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func baseShape(hidden int) *Config {
	c := &Config{Architecture: "synthetic", VocabSize: 248320, HiddenSize: hidden, NumLayers: 24, RMSNormEps: 1e-6,
		TieEmbeddings: true, MaxPositions: 262144, NumHeads: 8, NumKVHeads: 2, HeadDim: 256, RotaryDim: 64, RopeTheta: 1e7,
		ConvKernel: 4, LinKeyHeads: 16, LinValueHeads: 16, LinKeyDim: 128, LinValueDim: 128, EOSTokenIDs: []int{248044}}
	for i := range c.NumLayers {
		kind := LinearAttention
		if (i+1)%4 == 0 {
			kind = FullAttention
		}
		c.Layers = append(c.Layers, kind)
	}
	return c
}

func denseShape(hidden, inter int) *Config {
	c := baseShape(hidden)
	c.IntermediateSize = inter
	return c
}

// moeSmallShape is Qwen3.5-35B-A3B's layer design (256 experts of 512,
// top 8, a shared expert) scaled to 64 experts at hidden size 1024.
func moeSmallShape() *Config {
	c := baseShape(1024)
	c.MoE, c.NumExperts, c.TopK, c.ExpertInterSize, c.SharedInterSize = true, 64, 8, 512, 512
	return c
}

// Synth writes a GGUF file of cfg's exact tensor shapes with random
// weights, through the same conversion (names, types, llama.cpp's type
// choices) as Convert, so that llama.cpp loads it. Speed does not depend on
// the values; they are drawn so that activations stay finite and MoE
// routing varies from token to token.
func Synth(cfg *Config, typeName, out string, seed uint64, progress func(done, total int)) error {
	ct, ok := ConvertTypes[typeName]
	if !ok {
		return fmt.Errorf("qwen35: synth: type %q is not one of %s", typeName, typeNames)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	arch := "qwen35"
	if cfg.MoE {
		arch = "qwen35moe"
	}
	w := gguf.NewWriter()
	if err := writeMetadata(w, "synthetic-"+arch, arch, cfg, ct.FileType); err != nil {
		return err
	}
	writeSynthTokenizer(w, cfg.VocabSize)
	src := newSynthSource(cfg, seed)
	c := &converter{w: w, src: src, choose: chooser{typ: ct.Type, mix: ct.Mix, layers: cfg.NumLayers, tied: cfg.TieEmbeddings}, cfg: cfg, prefix: "model."}
	c.tensors(progress)
	if c.err != nil {
		return c.err
	}
	return w.WriteFile(out)
}

// writeSynthTokenizer writes a byte-level vocabulary of n tokens: the 256
// byte symbols, filler tokens, and Qwen's three special tokens at the end.
func writeSynthTokenizer(w *gguf.Writer, n int) {
	tokens, types := make([]string, n), make([]int32, n)
	// GPT-2's byte-to-unicode table: printable bytes map to themselves,
	// the others to 256, 257, ... in order.
	var byteSyms []rune
	next := rune(256)
	for b := range rune(256) {
		if b < '!' || (b > '~' && b < '¡') || b == 0xAD {
			byteSyms, next = append(byteSyms, next), next+1
		} else {
			byteSyms = append(byteSyms, b)
		}
	}
	for i := range tokens {
		types[i] = 1
		switch {
		case i < 256:
			tokens[i] = string(byteSyms[i])
		default:
			tokens[i] = fmt.Sprintf("Ġsynth%d", i)
		}
	}
	tokens[256] = "Ġs" // the one merge's result
	specials := []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
	for i, s := range specials {
		id := n - len(specials) + i
		tokens[id], types[id] = s, 3
	}
	w.Set("tokenizer.ggml.model", "gpt2")
	w.Set("tokenizer.ggml.pre", "qwen35")
	w.Set("tokenizer.ggml.tokens", tokens)
	w.Set("tokenizer.ggml.token_type", types)
	w.Set("tokenizer.ggml.merges", []string{"Ġ s"})
	w.Set("tokenizer.ggml.eos_token_id", uint32(n-1))
	w.Set("tokenizer.ggml.padding_token_id", uint32(n-3))
	w.Set("tokenizer.ggml.add_bos_token", false)
}

// synthSource is a model.Source of Hugging Face tensor names whose data is
// drawn on demand, seeded by the tensor's name.
type synthSource struct {
	cfg    *Config
	seed   uint64
	shapes map[string][]int
}

func newSynthSource(cfg *Config, seed uint64) *synthSource {
	s := &synthSource{cfg: cfg, seed: seed, shapes: map[string][]int{}}
	h, p := cfg.HiddenSize, "model."
	s.shapes[p+"embed_tokens.weight"] = []int{cfg.VocabSize, h}
	s.shapes[p+"norm.weight"] = []int{h}
	if !cfg.TieEmbeddings {
		s.shapes["lm_head.weight"] = []int{cfg.VocabSize, h}
	}
	kd, vd := cfg.LinKeyHeads*cfg.LinKeyDim, cfg.LinValueHeads*cfg.LinValueDim
	for i, kind := range cfg.Layers {
		lp := fmt.Sprintf("%slayers.%d.", p, i)
		add := func(name string, shape ...int) { s.shapes[lp+name] = shape }
		add("input_layernorm.weight", h)
		add("post_attention_layernorm.weight", h)
		if kind == LinearAttention {
			la := "linear_attn."
			add(la+"in_proj_qkv.weight", 2*kd+vd, h)
			add(la+"in_proj_z.weight", vd, h)
			add(la+"in_proj_a.weight", cfg.LinValueHeads, h)
			add(la+"in_proj_b.weight", cfg.LinValueHeads, h)
			add(la+"dt_bias", cfg.LinValueHeads)
			add(la+"A_log", cfg.LinValueHeads)
			add(la+"conv1d.weight", 2*kd+vd, 1, cfg.ConvKernel)
			add(la+"norm.weight", cfg.LinValueDim)
			add(la+"out_proj.weight", h, vd)
		} else {
			sa := "self_attn."
			add(sa+"q_norm.weight", cfg.HeadDim)
			add(sa+"k_norm.weight", cfg.HeadDim)
			add(sa+"q_proj.weight", 2*cfg.NumHeads*cfg.HeadDim, h)
			add(sa+"k_proj.weight", cfg.NumKVHeads*cfg.HeadDim, h)
			add(sa+"v_proj.weight", cfg.NumKVHeads*cfg.HeadDim, h)
			add(sa+"o_proj.weight", h, cfg.NumHeads*cfg.HeadDim)
		}
		if cfg.MoE {
			add("mlp.gate.weight", cfg.NumExperts, h)
			for e := range cfg.NumExperts {
				ep := fmt.Sprintf("mlp.experts.%d.", e)
				add(ep+"gate_proj.weight", cfg.ExpertInterSize, h)
				add(ep+"up_proj.weight", cfg.ExpertInterSize, h)
				add(ep+"down_proj.weight", h, cfg.ExpertInterSize)
			}
			if cfg.SharedInterSize > 0 {
				add("mlp.shared_expert.gate_proj.weight", cfg.SharedInterSize, h)
				add("mlp.shared_expert.up_proj.weight", cfg.SharedInterSize, h)
				add("mlp.shared_expert.down_proj.weight", h, cfg.SharedInterSize)
				add("mlp.shared_expert_gate.weight", 1, h)
			}
		} else {
			add("mlp.gate_proj.weight", cfg.IntermediateSize, h)
			add("mlp.up_proj.weight", cfg.IntermediateSize, h)
			add("mlp.down_proj.weight", h, cfg.IntermediateSize)
		}
	}
	return s
}

func (s *synthSource) Info(name string) (model.TensorInfo, bool) {
	shape, ok := s.shapes[name]
	if !ok {
		return model.TensorInfo{}, false
	}
	return model.TensorInfo{Name: name, DType: rt.F32, Raw: "F32", Shape: shape, File: "synthetic"}, true
}

func (s *synthSource) Tensor(name string) (*rt.Tensor, error) {
	shape, ok := s.shapes[name]
	if !ok {
		return nil, fmt.Errorf("qwen35: synth: %w: no tensor %q", model.ErrTensor, name)
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	r := rand.New(rand.NewPCG(s.seed, h.Sum64()))
	t := rt.New(rt.F32, shape...)
	x := t.F32()
	switch {
	case strings.HasSuffix(name, "norm.weight"):
		// Norm weights near 1 (HF stores 1+w norms as offsets from 0).
		for i := range x {
			x[i] = float32(r.NormFloat64() * 0.1)
		}
		if strings.HasSuffix(name, "linear_attn.norm.weight") {
			for i := range x {
				x[i]++
			}
		}
	case strings.HasSuffix(name, "A_log"):
		for i := range x {
			x[i] = float32(math.Log(1 + 15*r.Float64()))
		}
	case strings.HasSuffix(name, "dt_bias"):
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
	default:
		// Init-scale weights: activations stay O(1) through the layers.
		std := 1 / math.Sqrt(float64(shape[len(shape)-1]))
		if strings.HasSuffix(name, "embed_tokens.weight") {
			std = 0.02
		}
		for i := range x {
			x[i] = float32(r.NormFloat64() * std)
		}
	}
	return t, nil
}

func (s *synthSource) Names() []string {
	var names []string
	for n := range s.shapes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (s *synthSource) Where() string { return "synthetic " + s.cfg.Architecture }
func (s *synthSource) Close() error  { return nil }
