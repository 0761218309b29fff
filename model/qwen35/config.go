package qwen35

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
)

// LayerKind is the token mixer of a decoder layer.
type LayerKind uint8

const (
	LinearAttention LayerKind = iota // Gated DeltaNet
	FullAttention                    // gated softmax attention
)

func (k LayerKind) String() string {
	if k == FullAttention {
		return "full_attention"
	}
	return "linear_attention"
}

// Config is the text model's configuration, with transformers' defaults
// applied where config.json is silent.
type Config struct {
	Architecture string
	MoE          bool

	VocabSize        int
	HiddenSize       int
	NumLayers        int
	IntermediateSize int // dense MLP
	RMSNormEps       float32
	TieEmbeddings    bool
	Layers           []LayerKind
	EOSTokenIDs      []int
	MaxPositions     int

	// Full attention.
	NumHeads   int
	NumKVHeads int
	HeadDim    int
	RotaryDim  int // channels rotated per head; 0 means no rotation
	RopeTheta  float32

	// Gated DeltaNet.
	ConvKernel    int
	LinKeyHeads   int
	LinValueHeads int
	LinKeyDim     int
	LinValueDim   int
	// TiledVHeads: value heads are stored in llama.cpp's tiled order (head h
	// reads key head h mod Hk), as GGUF files hold them.
	TiledVHeads bool

	// Mixture of experts.
	NumExperts      int
	TopK            int
	ExpertInterSize int
	SharedInterSize int
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("invalid config")

// fields reads typed values from one JSON object and reports problems by
// field name.
type fields struct {
	file string
	m    map[string]json.RawMessage
	err  error
}

func (f *fields) fail(name, format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf("qwen35: %s: field %q: %w: %s", f.file, name, ErrConfig, fmt.Sprintf(format, args...))
	}
}

func (f *fields) has(name string) bool {
	raw, ok := f.m[name]
	return ok && string(raw) != "null"
}

func (f *fields) int(name string, def int, required bool) int {
	if !f.has(name) {
		if required {
			f.fail(name, "missing, and it has no default")
		}
		return def
	}
	var v float64
	if err := json.Unmarshal(f.m[name], &v); err != nil || v != math.Trunc(v) || math.Abs(v) > 1<<40 {
		f.fail(name, "want an integer, got %s", f.m[name])
		return def
	}
	return int(v)
}

func (f *fields) float(name string, def float64) float64 {
	if !f.has(name) {
		return def
	}
	var v float64
	if err := json.Unmarshal(f.m[name], &v); err != nil {
		f.fail(name, "want a number, got %s", f.m[name])
		return def
	}
	return v
}

func (f *fields) bool(name string, def bool) bool {
	if !f.has(name) {
		return def
	}
	var v bool
	if err := json.Unmarshal(f.m[name], &v); err != nil {
		f.fail(name, "want true or false, got %s", f.m[name])
		return def
	}
	return v
}

func (f *fields) str(name, def string) string {
	if !f.has(name) {
		return def
	}
	var v string
	if err := json.Unmarshal(f.m[name], &v); err != nil {
		f.fail(name, "want a string, got %s", f.m[name])
		return def
	}
	return v
}

func (f *fields) object(name string) *fields {
	sub := &fields{file: f.file + ": " + name, m: map[string]json.RawMessage{}}
	if f.has(name) {
		if err := json.Unmarshal(f.m[name], &sub.m); err != nil {
			f.fail(name, "want an object, got %s", f.m[name])
		}
	}
	return sub
}

// LoadConfig reads config.json of a checkpoint directory.
func LoadConfig(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("qwen35: %w", err)
	}
	return ParseConfig(path, raw)
}

// ParseConfig reads a Qwen3.5 config.json: either a text config at the top
// level (Qwen3_5(Moe)ForCausalLM) or one nested under text_config
// (Qwen3_5(Moe)ForConditionalGeneration).
func ParseConfig(name string, raw []byte) (*Config, error) {
	top := &fields{file: name}
	if err := json.Unmarshal(raw, &top.m); err != nil {
		return nil, fmt.Errorf("qwen35: %s: %w: %v", name, ErrConfig, err)
	}
	var arch []string
	if top.has("architectures") {
		if err := json.Unmarshal(top.m["architectures"], &arch); err != nil {
			top.fail("architectures", "want a list of strings")
		}
	}
	text := top
	if top.has("text_config") {
		text = top.object("text_config")
	}
	if top.err != nil {
		return nil, top.err
	}
	c := &Config{}
	if len(arch) > 0 {
		c.Architecture = arch[0]
	}
	modelType := text.str("model_type", top.str("model_type", ""))
	c.MoE = strings.Contains(modelType, "moe") || strings.Contains(c.Architecture, "Moe") || text.has("num_experts")

	c.VocabSize = text.int("vocab_size", 0, true)
	c.HiddenSize = text.int("hidden_size", 0, true)
	c.NumLayers = text.int("num_hidden_layers", 0, true)
	c.NumHeads = text.int("num_attention_heads", 0, true)
	c.NumKVHeads = text.int("num_key_value_heads", 4, false)
	c.HeadDim = text.int("head_dim", 256, false)
	c.RMSNormEps = float32(text.float("rms_norm_eps", 1e-6))
	c.MaxPositions = text.int("max_position_embeddings", 32768, false)
	c.ConvKernel = text.int("linear_conv_kernel_dim", 4, false)
	c.LinKeyDim = text.int("linear_key_head_dim", 128, false)
	c.LinValueDim = text.int("linear_value_head_dim", 128, false)
	c.LinKeyHeads = text.int("linear_num_key_heads", 16, false)
	c.LinValueHeads = text.int("linear_num_value_heads", 32, false)
	// The top level decides tying for the nested layout, as in transformers.
	c.TieEmbeddings = top.bool("tie_word_embeddings", text.bool("tie_word_embeddings", false))
	if c.MoE {
		c.NumExperts = text.int("num_experts", 0, true)
		c.TopK = text.int("num_experts_per_tok", 0, true)
		c.ExpertInterSize = text.int("moe_intermediate_size", 0, true)
		c.SharedInterSize = text.int("shared_expert_intermediate_size", 0, false)
	} else {
		c.IntermediateSize = text.int("intermediate_size", 0, true)
	}
	if act := text.str("hidden_act", "silu"); act != "silu" {
		text.fail("hidden_act", "%q is not supported (Qwen3.5 uses silu)", act)
	}
	if text.bool("attention_bias", false) {
		text.fail("attention_bias", "biased attention projections are not supported")
	}
	c.readRope(text)
	c.readLayers(text)
	c.readEOS(text)
	if text.err != nil {
		return nil, text.err
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("qwen35: %s: %w", name, err)
	}
	return c, nil
}

// readRope applies rope_parameters, falling back to the legacy top-level
// rope_theta and partial_rotary_factor fields.
func (c *Config) readRope(text *fields) {
	rope := text.object("rope_parameters")
	if kind := rope.str("rope_type", rope.str("type", "default")); kind != "default" {
		rope.fail("rope_type", "%q is not supported (only default rotary embeddings)", kind)
	}
	c.RopeTheta = float32(rope.float("rope_theta", text.float("rope_theta", 10000)))
	factor := rope.float("partial_rotary_factor", text.float("partial_rotary_factor", 0.25))
	if factor < 0 || factor > 1 {
		rope.fail("partial_rotary_factor", "%v is outside [0, 1]", factor)
	}
	// Multimodal rope sections only matter when the three position axes
	// differ; for text they are equal and the rotation is plain NeoX.
	c.RotaryDim = int(float64(c.HeadDim) * factor)
	if rope.err != nil && text.err == nil {
		text.err = rope.err
	}
}

// maxLayers bounds num_hidden_layers so that a corrupt config cannot make
// the loader allocate without limit.
const maxLayers = 1 << 12

func (c *Config) readLayers(text *fields) {
	if text.has("layer_types") {
		var names []string
		if err := json.Unmarshal(text.m["layer_types"], &names); err != nil {
			text.fail("layer_types", "want a list of strings")
			return
		}
		if len(names) != c.NumLayers {
			text.fail("layer_types", "%d entries for %d layers", len(names), c.NumLayers)
			return
		}
		for i, n := range names {
			switch n {
			case "linear_attention":
				c.Layers = append(c.Layers, LinearAttention)
			case "full_attention":
				c.Layers = append(c.Layers, FullAttention)
			default:
				text.fail("layer_types", "entry %d is %q, want linear_attention or full_attention", i, n)
				return
			}
		}
		return
	}
	if c.NumLayers > maxLayers {
		text.fail("num_hidden_layers", "%d exceeds the limit of %d", c.NumLayers, maxLayers)
		return
	}
	interval := text.int("full_attention_interval", 4, false)
	if interval < 1 {
		text.fail("full_attention_interval", "%d must be at least 1", interval)
		return
	}
	for i := range max(c.NumLayers, 0) {
		kind := LinearAttention
		if (i+1)%interval == 0 {
			kind = FullAttention
		}
		c.Layers = append(c.Layers, kind)
	}
}

func (c *Config) readEOS(text *fields) {
	if !text.has("eos_token_id") {
		return
	}
	raw := text.m["eos_token_id"]
	var one int
	if json.Unmarshal(raw, &one) == nil {
		c.EOSTokenIDs = []int{one}
		return
	}
	if json.Unmarshal(raw, &c.EOSTokenIDs) != nil {
		text.fail("eos_token_id", "want an integer or a list of integers, got %s", raw)
	}
}

// Validate checks that the dimensions are positive and consistent.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	pos := map[string]int{
		"vocab_size": c.VocabSize, "hidden_size": c.HiddenSize, "num_hidden_layers": c.NumLayers,
		"num_attention_heads": c.NumHeads, "num_key_value_heads": c.NumKVHeads, "head_dim": c.HeadDim,
		"linear_conv_kernel_dim": c.ConvKernel, "linear_key_head_dim": c.LinKeyDim, "linear_value_head_dim": c.LinValueDim,
		"linear_num_key_heads": c.LinKeyHeads, "linear_num_value_heads": c.LinValueHeads,
	}
	if c.MoE {
		pos["num_experts"], pos["num_experts_per_tok"], pos["moe_intermediate_size"] = c.NumExperts, c.TopK, c.ExpertInterSize
	} else {
		pos["intermediate_size"] = c.IntermediateSize
	}
	for _, name := range slices.Sorted(maps.Keys(pos)) {
		if pos[name] <= 0 {
			return bad("%s is %d, want > 0", name, pos[name])
		}
	}
	switch {
	case c.NumHeads%c.NumKVHeads != 0:
		return bad("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumHeads, c.NumKVHeads)
	case c.LinValueHeads%c.LinKeyHeads != 0:
		return bad("linear_num_value_heads %d is not a multiple of linear_num_key_heads %d", c.LinValueHeads, c.LinKeyHeads)
	case c.RotaryDim%2 != 0:
		return bad("rotary width %d (head_dim × partial_rotary_factor) must be even", c.RotaryDim)
	case c.MoE && c.TopK > c.NumExperts:
		return bad("num_experts_per_tok %d exceeds num_experts %d", c.TopK, c.NumExperts)
	case len(c.Layers) != c.NumLayers:
		return bad("%d layer kinds for %d layers", len(c.Layers), c.NumLayers)
	}
	return nil
}
