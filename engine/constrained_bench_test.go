package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/govllm/govllm/grammar"
	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/model/qwen35"
	"github.com/govllm/govllm/tokenizer"
)

// qwen3VocabModel synthesizes a small Qwen3.5 (hidden 256, 4 layers) with
// the Qwen3 tokenizer's vocabulary (151,936 ids), so that the lm_head and
// the masks have the real vocabulary's size while the rest is cheap: the
// case where a mask's cost weighs most against a decode step.
func qwen3VocabModel(b *testing.B) (*qwen35.Model, *tokenizer.Tokenizer) {
	b.Helper()
	tok, err := tokenizer.Load(filepath.Join(oracle.Dir(b), "..", "tokenizers", "qwen3"))
	if err != nil {
		b.Fatal(err)
	}
	cfg := qwen35.Shapes["qwen3.5-0.8b"]()
	cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.EOSTokenIDs = 151936, 256, 768, []int{151645}
	cfg.NumLayers, cfg.Layers = 4, cfg.Layers[:4]
	path := filepath.Join(b.TempDir(), "qwen3-vocab.gguf")
	if err := qwen35.Synth(cfg, "bf16", path, 1, nil); err != nil {
		b.Fatal(err)
	}
	m, err := qwen35.Load(path, testBackend(b), qwen35.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m, tok
}

// BenchmarkConstrainedDecode is the decode step time at batch 1 over the Qwen3
// vocabulary, free and under grammars (temperature 1, so that the walk
// through the grammar varies): the slowdown the mask stage costs. "warm"
// shares one masker across requests, as the server's cache does; "cold"
// compiles a new one per request (a schema seen for the first time).
func BenchmarkConstrainedDecode(b *testing.B) {
	m, tok := qwen3VocabModel(b)
	e := newEngine(b, m, tok, Config{NoPrefixCaching: true})
	prompt := tok.Encode("<|im_start|>user\nGive me a record.<|im_end|>\n<|im_start|>assistant\n")
	schema := []byte(`{"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}, "age": {"type": "integer"},
		"tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 4}}, "required": ["name", "age", "tags"]}`)
	grammars := map[string]func() *grammar.Grammar{
		"schema": func() *grammar.Grammar {
			g, err := grammar.FromJSONSchema(schema)
			if err != nil {
				b.Fatal(err)
			}
			return g
		},
		"json_object": grammar.JSONObject,
	}
	// Reported per decode step (the mean inter-token time), since prefill
	// and a constrained request's earlier end would skew tokens/s.
	run := func(b *testing.B, masker func() *grammar.Masker, topP float64) {
		var steps int
		var decode time.Duration
		seed := uint64(0)
		for b.Loop() {
			seed++
			r := Request{Prompt: prompt, MaxTokens: 64, Sampling: SamplingParams{Temperature: 1, TopP: topP, Seed: &seed}}
			if masker != nil {
				r.Grammar = masker()
			}
			ch, err := e.Submit(context.Background(), r)
			if err != nil {
				b.Fatal(err)
			}
			for out := range ch {
				if out.Err != nil {
					b.Fatal(out.Err)
				}
				if n := out.Usage.CompletionTokens - 1; out.Finished && n > 0 {
					steps += n
					decode += out.Timings.MeanInterToken * time.Duration(n)
				}
			}
		}
		b.ReportMetric(float64(decode.Microseconds())/float64(steps), "µs/token")
		b.ReportMetric(float64(steps)/float64(b.N), "tokens/request")
	}
	b.Run("free", func(b *testing.B) { run(b, nil, 1) })
	for _, name := range []string{"schema", "json_object"} {
		g := grammars[name]()
		shared := grammar.NewMasker(g, e.GrammarVocab())
		b.Run(fmt.Sprintf("%s/warm", name), func(b *testing.B) { run(b, func() *grammar.Masker { return shared }, 1) })
		b.Run(fmt.Sprintf("%s/cold", name), func(b *testing.B) {
			run(b, func() *grammar.Masker { return grammar.NewMasker(grammars[name](), e.GrammarVocab()) }, 1)
		})
	}
	// top-p ranks the masked row, so every step computes its mask.
	b.Run("top_p/free", func(b *testing.B) { run(b, nil, 0.95) })
	shared := grammar.NewMasker(grammars["schema"](), e.GrammarVocab())
	b.Run("top_p/schema/warm", func(b *testing.B) { run(b, func() *grammar.Masker { return shared }, 0.95) })
}
