package tokenizer

import (
	"encoding/json"
	"fmt"
	"regexp"
	"unicode"
	"unicode/utf8"
)

// preStep splits one piece of text into smaller pieces.
type preStep func(piece string, yield func(string))

type preSpec struct {
	Type          string            `json:"type"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Pattern       struct {
		String *string `json:"String"`
		Regex  *string `json:"Regex"`
	} `json:"pattern"`
	Behavior         string `json:"behavior"`
	Invert           bool   `json:"invert"`
	AddPrefixSpace   bool   `json:"add_prefix_space"`
	UseRegex         *bool  `json:"use_regex"`
	IndividualDigits bool   `json:"individual_digits"`
}

// preTokenizer is the chain of steps, and whether a ByteLevel step maps
// bytes to the byte-level alphabet (which the BPE model then does).
type preTokenizer struct {
	steps     []preStep
	byteLevel bool
}

func newPreTokenizer(raw json.RawMessage) (*preTokenizer, error) {
	p := &preTokenizer{}
	if len(raw) == 0 || string(raw) == "null" {
		return p, nil
	}
	return p, p.add(raw)
}

func (p *preTokenizer) add(raw json.RawMessage) error {
	var spec preSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("pre_tokenizer: %w", err)
	}
	switch spec.Type {
	case "Sequence":
		for i, sub := range spec.Pretokenizers {
			if err := p.add(sub); err != nil {
				return fmt.Errorf("pre_tokenizer %d of sequence: %w", i, err)
			}
		}
		return nil
	case "Split":
		var sp splitter
		var err error
		switch {
		case spec.Pattern.Regex != nil:
			sp, err = newSplitter(*spec.Pattern.Regex)
		case spec.Pattern.String != nil:
			sp, err = newRegexSplitter(regexp.QuoteMeta(*spec.Pattern.String))
		default:
			err = fmt.Errorf("pre_tokenizer Split: no pattern")
		}
		if err != nil {
			return err
		}
		step, err := splitStep(sp, spec.Behavior, spec.Invert)
		if err != nil {
			return err
		}
		p.steps = append(p.steps, step)
		return nil
	case "ByteLevel":
		if spec.AddPrefixSpace {
			p.steps = append(p.steps, func(piece string, yield func(string)) {
				if piece != "" && piece[0] != ' ' {
					piece = " " + piece
				}
				yield(piece)
			})
		}
		if spec.UseRegex == nil || *spec.UseRegex {
			sp, err := newSplitter(patternGPT2)
			if err != nil {
				return err
			}
			step, _ := splitStep(sp, "Isolated", false)
			p.steps = append(p.steps, step)
		}
		p.byteLevel = true
		return nil
	case "Digits":
		p.steps = append(p.steps, digitsStep(spec.IndividualDigits))
		return nil
	}
	return fmt.Errorf("pre_tokenizer type %q is not supported", spec.Type)
}

// run applies every step and yields the final pieces.
func (p *preTokenizer) run(text string, yield func(string)) {
	var apply func(i int, piece string)
	apply = func(i int, piece string) {
		if piece == "" {
			return
		}
		if i == len(p.steps) {
			yield(piece)
			return
		}
		p.steps[i](piece, func(sub string) { apply(i+1, sub) })
	}
	apply(0, text)
}

// splitStep implements the Split behaviors over the matches of sp.
func splitStep(sp splitter, behavior string, invert bool) (preStep, error) {
	switch behavior {
	case "Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous":
	default:
		return nil, fmt.Errorf("pre_tokenizer Split: behavior %q is not supported", behavior)
	}
	return func(s string, yield func(string)) {
		type seg struct {
			start, end int
			match      bool
		}
		var segs []seg
		last := 0
		sp.matches(s, func(start, end int) {
			if start > last {
				segs = append(segs, seg{last, start, invert})
			}
			segs = append(segs, seg{start, end, !invert})
			last = end
		})
		if last < len(s) {
			segs = append(segs, seg{last, len(s), invert})
		}
		switch behavior {
		case "Isolated":
			for _, g := range segs {
				yield(s[g.start:g.end])
			}
		case "Removed":
			for _, g := range segs {
				if !g.match {
					yield(s[g.start:g.end])
				}
			}
		case "MergedWithPrevious": // each match joins the piece before it
			pending := -1
			for _, g := range segs {
				switch {
				case !g.match:
					pending = g.start
				case pending >= 0:
					yield(s[pending:g.end])
					pending = -1
				default:
					yield(s[g.start:g.end])
				}
			}
			if pending >= 0 {
				yield(s[pending:])
			}
		case "MergedWithNext": // each match joins the piece after it
			pending := -1
			for _, g := range segs {
				switch {
				case g.match:
					if pending >= 0 {
						yield(s[pending:g.start])
					}
					pending = g.start
				case pending >= 0:
					yield(s[pending:g.end])
					pending = -1
				default:
					yield(s[g.start:g.end])
				}
			}
			if pending >= 0 {
				yield(s[pending:])
			}
		case "Contiguous":
			start := 0
			for i, g := range segs {
				if i+1 == len(segs) || segs[i+1].match != g.match {
					yield(s[start:g.end])
					start = g.end
				}
			}
		}
	}, nil
}

func digitsStep(individual bool) preStep {
	return func(s string, yield func(string)) {
		start := 0
		prevDigit := false
		for i, r := range s {
			digit := unicode.IsDigit(r)
			if i > start && (digit != prevDigit || (individual && digit)) {
				yield(s[start:i])
				start = i
			}
			prevDigit = digit
		}
		if start < len(s) {
			yield(s[start:])
		}
	}
}

// byteToRune is GPT-2's reversible map from bytes to printable runes.
var byteToRune, runeToByte = func() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	r2b := map[rune]byte{}
	n := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff) {
			b2r[b] = rune(b)
		} else {
			b2r[b] = rune(256 + n)
			n++
		}
		r2b[b2r[b]] = byte(b)
	}
	return b2r, r2b
}()

// byteLevelString maps raw bytes into the byte-level alphabet.
func byteLevelString(s string) string {
	buf := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		buf = utf8.AppendRune(buf, byteToRune[s[i]])
	}
	return string(buf)
}
