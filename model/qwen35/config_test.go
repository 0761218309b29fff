package qwen35

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestConfigDefaultsAndLayouts(t *testing.T) {
	raw := []byte(`{"architectures": ["Qwen3_5MoeForConditionalGeneration"], "tie_word_embeddings": true,
		"text_config": {"vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 8, "num_attention_heads": 4,
		"num_key_value_heads": 2, "head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2,
		"moe_intermediate_size": 32, "full_attention_interval": 4, "rope_theta": 5e6,
		"linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 8}}`)
	c, err := ParseConfig("config.json", raw)
	if err != nil {
		t.Fatal(err)
	}
	if !c.MoE || !c.TieEmbeddings || c.RotaryDim != 4 || c.RopeTheta != 5e6 || c.ConvKernel != 4 || c.RMSNormEps != 1e-6 {
		t.Fatalf("config %+v", c)
	}
	for i, k := range c.Layers {
		if want := (i+1)%4 == 0; (k == FullAttention) != want {
			t.Fatalf("layer %d is %v", i, k)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for name, raw := range map[string]string{
		"not JSON":            `{"vocab_size": `,
		"string for int":      `{"vocab_size": "512", "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 8}`,
		"missing layers":      `{"vocab_size": 512, "hidden_size": 64, "num_attention_heads": 1, "intermediate_size": 8}`,
		"unsupported rope":    `{"vocab_size": 512, "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 8, "rope_parameters": {"rope_type": "yarn"}}`,
		"heads not divisible": `{"vocab_size": 512, "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 3, "num_key_value_heads": 2, "intermediate_size": 8}`,
		"layer_types length":  `{"vocab_size": 512, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 1, "intermediate_size": 8, "layer_types": ["full_attention"]}`,
	} {
		if _, err := ParseConfig("config.json", []byte(raw)); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// FuzzParseConfig: any bytes give a config that validates, or ErrConfig.
func FuzzParseConfig(f *testing.F) {
	for _, fx := range []string{"qwen35-dense", "qwen35moe-vlayout"} {
		if raw, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "oracle", fx, "config.json")); err == nil {
			f.Add(raw)
		}
	}
	f.Add([]byte(`{"text_config": {"vocab_size": 1e300}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := ParseConfig("config.json", raw)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error without ErrConfig: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}
