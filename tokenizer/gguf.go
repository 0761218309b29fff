package tokenizer

import (
	"encoding/json"
	"fmt"

	"github.com/govllm/govllm/format/gguf"
)

// ggufPre maps tokenizer.ggml.pre to the Split regex of that family.
var ggufPre = map[string]string{"qwen2": patternQwen3, "qwen35": patternQwen35}

// FromGGUF builds the tokenizer a GGUF file embeds (tokenizer.ggml.*: a
// gpt2-style byte-level BPE), as the equivalent tokenizer.json: the
// vocabulary, the merges, control and user-defined tokens as added tokens
// (control ones special), NFC and the pre-tokenizer regex of its family.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	if model, _ := f.String("tokenizer.ggml.model"); model != "gpt2" {
		return nil, fmt.Errorf("tokenizer: %s: %w: tokenizer.ggml.model %q (want gpt2)", f.Path, ErrFormat, model)
	}
	pre, _ := f.String("tokenizer.ggml.pre")
	pattern, ok := ggufPre[pre]
	if !ok {
		return nil, fmt.Errorf("tokenizer: %s: %w: tokenizer.ggml.pre %q is not supported (qwen2, qwen35)", f.Path, ErrFormat, pre)
	}
	tokens, ok := f.Array("tokenizer.ggml.tokens")
	if !ok {
		return nil, fmt.Errorf("tokenizer: %s: %w: no tokenizer.ggml.tokens", f.Path, ErrFormat)
	}
	types, _ := f.Array("tokenizer.ggml.token_type")
	merges, _ := f.Array("tokenizer.ggml.merges")
	vocab := make(map[string]int, len(tokens))
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		Special    bool   `json:"special"`
		Normalized bool   `json:"normalized"`
	}
	var addedTokens []added
	for i, t := range tokens {
		s, ok := t.(string)
		if !ok {
			return nil, fmt.Errorf("tokenizer: %s: %w: token %d is not a string", f.Path, ErrFormat, i)
		}
		kind := uint64(1)
		if i < len(types) {
			switch v := types[i].(type) {
			case int64:
				kind = uint64(v)
			case uint64:
				kind = v
			}
		}
		switch kind {
		case 3, 4: // control, user-defined
			addedTokens = append(addedTokens, added{ID: i, Content: s, Special: kind == 3})
		default:
			vocab[s] = i
		}
	}
	mergeList := make([]string, len(merges))
	for i, m := range merges {
		s, ok := m.(string)
		if !ok {
			return nil, fmt.Errorf("tokenizer: %s: %w: merge %d is not a string", f.Path, ErrFormat, i)
		}
		mergeList[i] = s
	}
	spec := map[string]any{
		"added_tokens": addedTokens,
		"normalizer":   map[string]string{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]string{"Regex": pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
		}},
		"model":   map[string]any{"type": "BPE", "vocab": vocab, "merges": mergeList},
		"decoder": map[string]string{"type": "ByteLevel"},
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	t, err := FromJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", f.Path, err)
	}
	return t, nil
}
