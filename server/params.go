package server

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/govllm/govllm/engine"
)

// samplingFields are the generation parameters that completions and chat
// completions share, with vLLM's extra fields.
type samplingFields struct {
	Model               string             `json:"model"`
	MaxTokens           *int               `json:"max_tokens"`
	MaxCompletionTokens *int               `json:"max_completion_tokens"`
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	TopK                *int               `json:"top_k"`
	MinP                *float64           `json:"min_p"`
	N                   *int               `json:"n"`
	Seed                *int64             `json:"seed"`
	Stop                json.RawMessage    `json:"stop"`
	StopTokenIDs        []int32            `json:"stop_token_ids"`
	PresencePenalty     *float64           `json:"presence_penalty"`
	FrequencyPenalty    *float64           `json:"frequency_penalty"`
	RepetitionPenalty   *float64           `json:"repetition_penalty"`
	LogitBias           map[string]float64 `json:"logit_bias"`
	IgnoreEOS           bool               `json:"ignore_eos"`
	MinTokens           *int               `json:"min_tokens"`
	Stream              bool               `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	SkipSpecialTokens *bool `json:"skip_special_tokens"`
	structuredFields
}

func (f *samplingFields) includeUsage() bool {
	return f.StreamOptions != nil && f.StreamOptions.IncludeUsage
}

// request turns the fields into an engine request for prompt, naming the
// field of any value out of range.
func (f *samplingFields) request(prompt []int32, maxLen, capacity int) (engine.Request, error) {
	r := engine.Request{Prompt: prompt, IgnoreEOS: f.IgnoreEOS, StopTokenIDs: f.StopTokenIDs, N: 1}
	p := &r.Sampling
	p.Temperature, p.TopP = 1, 1
	num := func(name string, v *float64, lo, hi float64, dst *float64) error {
		if v == nil {
			return nil
		}
		if math.IsNaN(*v) || *v < lo || *v > hi {
			return badRequest(name, "%s must be in [%v, %v], got %v", name, lo, hi, *v)
		}
		*dst = *v
		return nil
	}
	for _, c := range []struct {
		name   string
		v      *float64
		lo, hi float64
		dst    *float64
	}{
		{"temperature", f.Temperature, 0, 2, &p.Temperature},
		{"top_p", f.TopP, 1e-9, 1, &p.TopP},
		{"min_p", f.MinP, 0, 1, &p.MinP},
		{"presence_penalty", f.PresencePenalty, -2, 2, &p.PresencePenalty},
		{"frequency_penalty", f.FrequencyPenalty, -2, 2, &p.FrequencyPenalty},
		{"repetition_penalty", f.RepetitionPenalty, 1e-9, 100, &p.RepetitionPenalty},
	} {
		if err := num(c.name, c.v, c.lo, c.hi, c.dst); err != nil {
			return r, err
		}
	}
	if f.TopK != nil {
		if *f.TopK < -1 {
			return r, badRequest("top_k", "top_k must be -1 (all) or ≥ 0, got %d", *f.TopK)
		}
		p.TopK = max(*f.TopK, 0)
	}
	if f.Seed != nil {
		seed := uint64(*f.Seed)
		p.Seed = &seed
	}
	if f.N != nil {
		if *f.N < 1 || *f.N > 64 {
			return r, badRequest("n", "n must be in [1, 64], got %d", *f.N)
		}
		r.N = *f.N
	}
	if len(f.LogitBias) > 0 {
		p.LogitBias = map[int32]float64{}
		for k, v := range f.LogitBias {
			id, err := strconv.Atoi(k)
			if err != nil || id < 0 || v < -100 || v > 100 {
				return r, badRequest("logit_bias", "logit_bias entry %q: %v (token ids, bias in [-100, 100])", k, v)
			}
			p.LogitBias[int32(id)] = v
		}
	}
	if present(f.Stop) {
		var one string
		if json.Unmarshal(f.Stop, &one) == nil {
			r.StopStrings = []string{one}
		} else if json.Unmarshal(f.Stop, &r.StopStrings) != nil {
			return r, badRequest("stop", "stop must be a string or a list of strings")
		}
	}
	room := min(maxLen, capacity) - len(prompt)
	if room < 1 {
		return r, badRequest("prompt", "the prompt has %d tokens; this model's context is %d", len(prompt), min(maxLen, capacity))
	}
	r.MaxTokens = room
	for name, v := range map[string]*int{"max_tokens": f.MaxTokens, "max_completion_tokens": f.MaxCompletionTokens} {
		if v == nil {
			continue
		}
		if *v < 1 {
			return r, badRequest(name, "%s must be at least 1, got %d", name, *v)
		}
		if *v > room {
			return r, badRequest(name, "%s %d plus the %d prompt tokens exceed the context of %d", name, *v, len(prompt), min(maxLen, capacity))
		}
		r.MaxTokens = *v
	}
	if f.MinTokens != nil {
		if *f.MinTokens < 0 || *f.MinTokens > r.MaxTokens {
			return r, badRequest("min_tokens", "min_tokens %d must be in [0, max_tokens]", *f.MinTokens)
		}
		r.MinTokens = *f.MinTokens
	}
	r.KeepSpecial = f.SkipSpecialTokens != nil && !*f.SkipSpecialTokens
	if b := f.ThinkingTokenBudget; b != nil {
		if *b < 0 {
			return r, badRequest("thinking_token_budget", "thinking_token_budget must be ≥ 0, got %d", *b)
		}
		r.ThinkingBudget = b
	}
	return r, nil
}

// usage is the OpenAI usage object.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details,omitempty"`
}

func (u *usage) add(o engine.Usage, countPrompt bool) {
	if countPrompt {
		u.PromptTokens += o.PromptTokens
		if u.PromptTokensDetails == nil {
			u.PromptTokensDetails = &struct {
				CachedTokens int `json:"cached_tokens"`
			}{}
		}
		u.PromptTokensDetails.CachedTokens += o.CachedTokens
	}
	u.CompletionTokens += o.CompletionTokens
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
}
