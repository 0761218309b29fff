package qwen35

import (
	"fmt"
	"strings"

	"github.com/govllm/govllm/format/gguf"
	"github.com/govllm/govllm/model"
)

// ConfigFromGGUF reads a qwen35 or qwen35moe GGUF file's metadata with
// llama.cpp's defaults: a missing rope.dimension_count means rotary width 0,
// a missing full_attention_interval means 4, and attention.recurrent_layers,
// where present, gives the pattern exactly.
func ConfigFromGGUF(f *gguf.File) (*Config, error) {
	arch, _ := f.String("general.architecture")
	if arch != "qwen35" && arch != "qwen35moe" {
		return nil, fmt.Errorf("qwen35: %s: %w: general.architecture %q is not qwen35 or qwen35moe", f.Path, ErrConfig, arch)
	}
	var missing []string
	req := func(key string) int {
		v, ok := f.Uint(arch + "." + key)
		if !ok {
			missing = append(missing, arch+"."+key)
		}
		return int(v)
	}
	opt := func(key string, def int) int {
		if v, ok := f.Uint(arch + "." + key); ok {
			return int(v)
		}
		return def
	}
	c := &Config{Architecture: "gguf:" + arch, MoE: arch == "qwen35moe", TiledVHeads: true}
	c.NumLayers = req("block_count")
	c.HiddenSize = req("embedding_length")
	c.NumHeads = req("attention.head_count")
	c.NumKVHeads = req("attention.head_count_kv")
	c.HeadDim = req("attention.key_length")
	c.RotaryDim = opt("rope.dimension_count", 0)
	c.MaxPositions = opt("context_length", 4096)
	c.ConvKernel = req("ssm.conv_kernel")
	c.LinKeyDim = req("ssm.state_size")
	c.LinValueDim = c.LinKeyDim // llama.cpp keeps one head size for both
	c.LinKeyHeads = req("ssm.group_count")
	c.LinValueHeads = req("ssm.time_step_rank")
	if inner := opt("ssm.inner_size", 0); c.LinValueHeads > 0 && inner != c.LinValueHeads*c.LinValueDim {
		return nil, fmt.Errorf("qwen35: %s: %w: ssm.inner_size %d is not time_step_rank × state_size", f.Path, ErrConfig, inner)
	}
	if c.MoE {
		c.NumExperts = req("expert_count")
		c.TopK = req("expert_used_count")
		c.ExpertInterSize = req("expert_feed_forward_length")
		c.SharedInterSize = opt("expert_shared_feed_forward_length", 0)
	} else {
		c.IntermediateSize = req("feed_forward_length")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("qwen35: %s: %w: missing %s", f.Path, ErrConfig, strings.Join(missing, ", "))
	}
	theta, ok := f.Float(arch + ".rope.freq_base")
	if !ok {
		theta = 10000
	}
	c.RopeTheta = float32(theta)
	eps, ok := f.Float(arch + ".attention.layer_norm_rms_epsilon")
	if !ok {
		eps = 1e-6
	}
	c.RMSNormEps = float32(eps)
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Dims) != 2 {
		return nil, fmt.Errorf("qwen35: %s: %w: no 2-D token_embd.weight", f.Path, ErrConfig)
	}
	c.VocabSize = int(emb.Dims[1])
	_, hasOutput := f.Tensor("output.weight")
	c.TieEmbeddings = !hasOutput
	if eos, ok := f.Uint("tokenizer.ggml.eos_token_id"); ok {
		c.EOSTokenIDs = []int{int(eos)}
	}
	if flags, ok := f.Array(arch + ".attention.recurrent_layers"); ok {
		if len(flags) != c.NumLayers {
			return nil, fmt.Errorf("qwen35: %s: %w: %d recurrent_layers flags for %d layers", f.Path, ErrConfig, len(flags), c.NumLayers)
		}
		for i, v := range flags {
			rec, isBool := v.(bool)
			if !isBool {
				return nil, fmt.Errorf("qwen35: %s: %w: recurrent_layers[%d] is not a bool", f.Path, ErrConfig, i)
			}
			c.Layers = append(c.Layers, map[bool]LayerKind{true: LinearAttention, false: FullAttention}[rec])
		}
	} else {
		interval := opt("full_attention_interval", 4)
		if interval < 1 || c.NumLayers > maxLayers {
			return nil, fmt.Errorf("qwen35: %s: %w: full_attention_interval %d, %d layers", f.Path, ErrConfig, interval, c.NumLayers)
		}
		for i := range c.NumLayers {
			c.Layers = append(c.Layers, map[bool]LayerKind{false: LinearAttention, true: FullAttention}[(i+1)%interval == 0])
		}
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("qwen35: %s: %w", f.Path, err)
	}
	return c, nil
}

// loadGGUF opens a .gguf file as config and tensor source.
func loadGGUF(path string) (*Config, model.Source, error) {
	src, err := model.OpenGGUF(path)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := ConfigFromGGUF(src.File)
	if err != nil {
		src.Close()
		return nil, nil, err
	}
	return cfg, src, nil
}

// IsGGUF reports whether path names a GGUF file rather than a directory.
func IsGGUF(path string) bool { return strings.HasSuffix(strings.ToLower(path), ".gguf") }
