package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/govllm/govllm/engine"
	"github.com/govllm/govllm/model/qwen35"
	"github.com/govllm/govllm/tokenizer"
	"github.com/spf13/cobra"
)

func newRunCmd() *cobra.Command {
	var (
		modelDir, device, override string
		noChat, noThinking         bool
		temperature, topP          float64
		topK, maxTokens            int
		seed                       uint64
	)
	cmd := &cobra.Command{
		Use:   `run [--model DIR_OR_GGUF] "prompt"`,
		Short: "Generate from a prompt and stream the text to stdout",
		Long: "Applies the model's chat template to the prompt (unless --no-chat), generates greedily by default\n" +
			"(--temperature, --top-p, --top-k, --seed to sample) and streams the text to stdout.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			params := engine.SamplingParams{Temperature: temperature, TopP: topP, TopK: topK}
			if cmd.Flags().Changed("seed") {
				params.Seed = &seed
			}
			sampler, err := engine.NewSampler(params)
			if err != nil {
				return err
			}
			if maxTokens < 1 {
				return fmt.Errorf("--max-tokens %d must be at least 1", maxTokens)
			}
			if modelDir, err = modelOrDefault(modelDir); err != nil {
				return err
			}
			tok, err := loadTokenizer(modelDir)
			if err != nil {
				return err
			}
			prompt := args[0]
			if !noChat {
				tmpl, err := loadTemplate(modelDir, override)
				if err != nil {
					return err
				}
				var kwargs map[string]any
				if noThinking {
					kwargs = map[string]any{"enable_thinking": false}
				}
				if prompt, err = tmpl.RenderString(prompt, kwargs); err != nil {
					return err
				}
			}
			m, err := loadModel(modelDir, device, false)
			if err != nil {
				return err
			}
			defer m.Close()
			stop := stopTokens(modelDir, m.Config, tok)
			return generate(cmd.OutOrStdout(), m, tok, sampler, tok.Encode(prompt), maxTokens, stop)
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelDir, "model", "", "model directory (config.json, safetensors, tokenizer files) or .gguf file; default: the embedded govllm-default")
	f.StringVar(&device, "device", "cpu", "backend device")
	f.StringVar(&override, "chat-template", "", "use this Jinja file instead of the model's template")
	f.BoolVar(&noChat, "no-chat", false, "send the prompt as is, without the chat template")
	f.BoolVar(&noThinking, "no-thinking", false, "render the template with enable_thinking=false")
	f.Float64Var(&temperature, "temperature", 0, "sampling temperature; 0 is greedy")
	f.Float64Var(&topP, "top-p", 1, "nucleus sampling mass")
	f.IntVar(&topK, "top-k", 0, "sample among the k most likely tokens; 0 is all")
	f.Uint64Var(&seed, "seed", 0, "random seed for sampling")
	f.IntVar(&maxTokens, "max-tokens", 256, "tokens to generate at most")
	return cmd
}

// stopTokens gathers the end-of-sequence ids of config.json,
// generation_config.json and the tokenizer's eos token.
func stopTokens(dir string, cfg *qwen35.Config, tok *tokenizer.Tokenizer) map[int32]bool {
	stop := map[int32]bool{}
	for _, id := range cfg.EOSTokenIDs {
		stop[int32(id)] = true
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "generation_config.json")); err == nil {
		var gen struct {
			EOS json.RawMessage `json:"eos_token_id"`
		}
		if json.Unmarshal(raw, &gen) == nil {
			var one int32
			var many []int32
			if json.Unmarshal(gen.EOS, &one) == nil {
				stop[one] = true
			} else if json.Unmarshal(gen.EOS, &many) == nil {
				for _, id := range many {
					stop[id] = true
				}
			}
		}
	}
	if tmpl, err := loadTemplate(dir, ""); err == nil && tmpl.EOSToken != "" {
		if id, ok := tok.TokenID(tmpl.EOSToken); ok {
			stop[id] = true
		}
	}
	return stop
}

func generate(w io.Writer, m *qwen35.Model, tok *tokenizer.Tokenizer, s *engine.Sampler, prompt []int32, maxTokens int, stop map[int32]bool) error {
	if len(prompt) == 0 {
		return fmt.Errorf("the prompt encodes to no tokens")
	}
	st := m.NewState()
	defer st.Close()
	dec := tok.NewStreamDecoder(true)
	input := prompt
	for range maxTokens {
		logits, err := m.Forward(st, input, qwen35.ForwardOptions{})
		if err != nil {
			return err
		}
		v := m.Config.VocabSize
		next := s.Sample(logits.F32()[(logits.Dim(0)-1)*v : logits.Dim(0)*v])
		if stop[next] {
			break
		}
		text, err := dec.Add(next)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, text); err != nil {
			return err
		}
		input = []int32{next}
	}
	_, err := io.WriteString(w, dec.Flush()+"\n")
	return err
}
