package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites text before pre-tokenization.
type normalizer func(string) string

type normalizerSpec struct {
	Type        string            `json:"type"`
	Normalizers []json.RawMessage `json:"normalizers"`
	Pattern     struct {
		String *string `json:"String"`
		Regex  *string `json:"Regex"`
	} `json:"pattern"`
	Content string `json:"content"`
	Prepend string `json:"prepend"`
	Left    bool   `json:"left"`
	Right   bool   `json:"right"`
}

func newNormalizer(raw json.RawMessage) (normalizer, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var spec normalizerSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	form := func(f norm.Form) normalizer {
		return func(s string) string {
			if f.IsNormalString(s) {
				return s
			}
			return f.String(s)
		}
	}
	switch spec.Type {
	case "NFC":
		return form(norm.NFC), nil
	case "NFD":
		return form(norm.NFD), nil
	case "NFKC":
		return form(norm.NFKC), nil
	case "NFKD":
		return form(norm.NFKD), nil
	case "Lowercase":
		return strings.ToLower, nil
	case "Strip":
		return func(s string) string {
			if spec.Left {
				s = strings.TrimLeftFunc(s, isSpace)
			}
			if spec.Right {
				s = strings.TrimRightFunc(s, isSpace)
			}
			return s
		}, nil
	case "Prepend":
		return func(s string) string {
			if s == "" {
				return s
			}
			return spec.Prepend + s
		}, nil
	case "Replace":
		if spec.Pattern.String != nil {
			old := *spec.Pattern.String
			return func(s string) string { return strings.ReplaceAll(s, old, spec.Content) }, nil
		}
		if spec.Pattern.Regex != nil {
			sp, err := newRegexSplitter(*spec.Pattern.Regex)
			if err != nil {
				return nil, err
			}
			return func(s string) string {
				var b strings.Builder
				last := 0
				sp.matches(s, func(start, end int) {
					b.WriteString(s[last:start])
					b.WriteString(spec.Content)
					last = end
				})
				b.WriteString(s[last:])
				return b.String()
			}, nil
		}
		return nil, fmt.Errorf("normalizer Replace: no pattern")
	case "Sequence":
		var chain []normalizer
		for i, sub := range spec.Normalizers {
			n, err := newNormalizer(sub)
			if err != nil {
				return nil, fmt.Errorf("normalizer %d of sequence: %w", i, err)
			}
			if n != nil {
				chain = append(chain, n)
			}
		}
		return func(s string) string {
			for _, n := range chain {
				s = n(s)
			}
			return s
		}, nil
	}
	return nil, fmt.Errorf("normalizer type %q is not supported", spec.Type)
}
