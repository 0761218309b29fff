package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tokenizer encodes text to token ids and back, as Hugging Face tokenizers
// does for the same tokenizer.json (encoding without a post-processor, i.e.
// add_special_tokens=False).
type Tokenizer struct {
	normalize normalizer
	pre       *preTokenizer
	model     *bpe
	added     []*AddedToken
	byFirst   [256][]*AddedToken // added tokens by first byte, longest first
	tokens    []string           // id → token
	special   []bool             // id → is a special added token
	decodeBL  bool               // the decoder is ByteLevel
}

// AddedToken is an entry of tokenizer.json's added_tokens.
type AddedToken struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// ErrFormat is wrapped by errors about a tokenizer.json.
var ErrFormat = errors.New("unsupported or malformed tokenizer.json")

// ErrID is wrapped by errors about token ids outside the vocabulary.
var ErrID = errors.New("token id outside the vocabulary")

// Load reads dir/tokenizer.json.
func Load(dir string) (*Tokenizer, error) {
	path := filepath.Join(dir, "tokenizer.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := FromJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return t, nil
}

// FromJSON builds a tokenizer from the contents of a tokenizer.json.
func FromJSON(raw []byte) (*Tokenizer, error) {
	var spec struct {
		AddedTokens  []*AddedToken   `json:"added_tokens"`
		Normalizer   json.RawMessage `json:"normalizer"`
		PreTokenizer json.RawMessage `json:"pre_tokenizer"`
		Model        json.RawMessage `json:"model"`
		Decoder      json.RawMessage `json:"decoder"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	wrap := func(err error) error { return fmt.Errorf("%w: %v", ErrFormat, err) }
	t := &Tokenizer{}
	var err error
	if t.normalize, err = newNormalizer(spec.Normalizer); err != nil {
		return nil, wrap(err)
	}
	if t.pre, err = newPreTokenizer(spec.PreTokenizer); err != nil {
		return nil, wrap(err)
	}
	if t.model, err = newBPE(spec.Model); err != nil {
		return nil, wrap(err)
	}
	if t.decodeBL, err = byteLevelDecoder(spec.Decoder); err != nil {
		return nil, wrap(err)
	}
	if !t.pre.byteLevel && !t.decodeBL {
		return nil, wrap(errors.New("only byte-level BPE is supported (no ByteLevel pre-tokenizer or decoder)"))
	}
	size := 0
	for _, id := range t.model.vocab {
		size = max(size, int(id)+1)
	}
	for _, a := range spec.AddedTokens {
		if a == nil || a.Content == "" || a.ID < 0 {
			return nil, wrap(errors.New("an added token without content or id"))
		}
		size = max(size, int(a.ID)+1)
	}
	if size > 1<<24 {
		return nil, wrap(fmt.Errorf("vocabulary of %d ids", size))
	}
	t.tokens, t.special = make([]string, size), make([]bool, size)
	for tok, id := range t.model.vocab {
		if id < 0 {
			return nil, wrap(fmt.Errorf("token %q has id %d", tok, id))
		}
		t.tokens[id] = tok
	}
	for _, a := range spec.AddedTokens {
		t.tokens[a.ID], t.special[a.ID] = a.Content, a.Special
		t.added = append(t.added, a)
		t.byFirst[a.Content[0]] = append(t.byFirst[a.Content[0]], a)
	}
	for _, list := range &t.byFirst {
		sort.SliceStable(list, func(i, j int) bool { return len(list[i].Content) > len(list[j].Content) })
	}
	return t, nil
}

func byteLevelDecoder(raw json.RawMessage) (bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	var spec struct {
		Type     string            `json:"type"`
		Decoders []json.RawMessage `json:"decoders"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		return false, err
	}
	switch spec.Type {
	case "ByteLevel":
		return true, nil
	case "Sequence":
		bl := false
		for _, d := range spec.Decoders {
			ok, err := byteLevelDecoder(d)
			if err != nil {
				return false, err
			}
			bl = bl || ok
		}
		return bl, nil
	}
	return false, fmt.Errorf("decoder type %q is not supported", spec.Type)
}

// VocabSize is one more than the largest token id.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// TokenID looks a token (a vocabulary entry or added token) up.
func (t *Tokenizer) TokenID(token string) (int32, bool) {
	for _, a := range t.added {
		if a.Content == token {
			return a.ID, true
		}
	}
	id, ok := t.model.vocab[token]
	return id, ok
}

// Known reports whether id has a token. Models often have more ids than
// their tokenizer (padded embeddings); those decode to nothing.
func (t *Tokenizer) Known(id int32) bool {
	return id >= 0 && int(id) < len(t.tokens) && t.tokens[id] != ""
}

// TokenBytes returns the bytes one token stands for (nil for unknown ids).
func (t *Tokenizer) TokenBytes(id int32) []byte {
	b, err := t.appendToken(nil, id, false)
	if err != nil {
		return nil
	}
	return b
}

// IsAdded reports whether id is an added token (special or not): chat and
// tool markers such as <think> and <tool_call>, never plain text.
func (t *Tokenizer) IsAdded(id int32) bool {
	for _, a := range t.added {
		if a.ID == id {
			return true
		}
	}
	return false
}

// IsSpecial reports whether id is a special added token.
func (t *Tokenizer) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.special) && t.special[id]
}

// Encode returns the token ids of text. Invalid UTF-8 is read as U+FFFD.
func (t *Tokenizer) Encode(text string) []int32 {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	out := make([]int32, 0, len(text)/3+1)
	// Added tokens stored unnormalized are matched in the raw text, the
	// others after normalization, as in Hugging Face's AddedVocabulary.
	t.splitAdded(text, false, func(seg string, tok *AddedToken) {
		if tok != nil {
			out = append(out, tok.ID)
			return
		}
		if t.normalize != nil {
			seg = t.normalize(seg)
		}
		t.splitAdded(seg, true, func(piece string, tok *AddedToken) {
			if tok != nil {
				out = append(out, tok.ID)
				return
			}
			t.pre.run(piece, func(word string) { out = t.model.encode(word, out) })
		})
	})
	return out
}

// splitAdded yields the text between added tokens (tok nil) and the added
// tokens themselves, leftmost-longest, considering only tokens whose
// Normalized flag equals normalized.
func (t *Tokenizer) splitAdded(s string, normalized bool, yield func(string, *AddedToken)) {
	start := 0
	for i := 0; i < len(s); i++ {
		for _, a := range t.byFirst[s[i]] {
			if a.Normalized != normalized || !strings.HasPrefix(s[i:], a.Content) {
				continue
			}
			end := i + len(a.Content)
			if a.SingleWord && !wordBoundary(s, i, end) {
				continue
			}
			left := i
			if a.LStrip {
				left = len(strings.TrimRightFunc(s[start:i], unicode.IsSpace)) + start
			}
			if a.RStrip {
				end = len(s) - len(strings.TrimLeftFunc(s[end:], unicode.IsSpace))
			}
			if left > start {
				yield(s[start:left], nil)
			}
			yield("", a)
			start, i = end, end-1
			break
		}
	}
	if start < len(s) {
		yield(s[start:], nil)
	}
}

func wordBoundary(s string, start, end int) bool {
	isWord := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) || r == '_' }
	if start > 0 {
		if r, _ := utf8.DecodeLastRuneInString(s[:start]); isWord(r) {
			return false
		}
	}
	if end < len(s) {
		if r, _ := utf8.DecodeRuneInString(s[end:]); isWord(r) {
			return false
		}
	}
	return true
}

// Decode returns the text of ids; invalid UTF-8 in the result becomes
// U+FFFD. With skipSpecial, special added tokens are left out.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) (string, error) {
	var buf []byte
	for i, id := range ids {
		var err error
		if buf, err = t.appendToken(buf, id, skipSpecial); err != nil {
			return "", fmt.Errorf("tokenizer: id %d at index %d: %w", id, i, err)
		}
	}
	return toValidUTF8(buf), nil
}

// appendToken appends the bytes of one token.
func (t *Tokenizer) appendToken(buf []byte, id int32, skipSpecial bool) ([]byte, error) {
	if id < 0 || int(id) >= len(t.tokens) || t.tokens[id] == "" {
		return buf, fmt.Errorf("%w of %d", ErrID, len(t.tokens))
	}
	if skipSpecial && t.special[id] {
		return buf, nil
	}
	tok := t.tokens[id]
	if !t.decodeBL {
		return append(buf, tok...), nil
	}
	for _, r := range tok {
		if b, ok := runeToByte[r]; ok {
			buf = append(buf, b)
		} else {
			buf = utf8.AppendRune(buf, r)
		}
	}
	return buf, nil
}

// toValidUTF8 replaces each maximal invalid subsequence by U+FFFD, as
// Rust's String::from_utf8_lossy does.
func toValidUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			sb.WriteRune(utf8.RuneError)
			b = b[invalidPrefix(b):]
			continue
		}
		sb.Write(b[:size])
		b = b[size:]
	}
	return sb.String()
}

// invalidPrefix is the length of the maximal prefix of b that starts a
// valid UTF-8 sequence but does not complete one (at least 1).
func invalidPrefix(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xbf)
	switch {
	case c >= 0xc2 && c <= 0xdf:
		need = 1
	case c == 0xe0:
		need, lo = 2, 0xa0
	case c >= 0xe1 && c <= 0xec, c == 0xee, c == 0xef:
		need = 2
	case c == 0xed:
		need, hi = 2, 0x9f
	case c == 0xf0:
		need, lo = 3, 0x90
	case c >= 0xf1 && c <= 0xf3:
		need = 3
	case c == 0xf4:
		need, hi = 3, 0x8f
	default:
		return 1
	}
	i := 1
	for ; i <= need && i < len(b); i++ {
		if b[i] < lo || b[i] > hi {
			return i
		}
		lo, hi = 0x80, 0xbf
	}
	return i
}
