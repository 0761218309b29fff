package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/govllm/govllm/format/gguf"
	"github.com/govllm/govllm/internal/oracle"
	"golang.org/x/text/unicode/norm"
)

type encCase struct {
	Text    string  `json:"text"`
	IDs     []int32 `json:"ids"`
	Decoded string  `json:"decoded"`
}

var (
	qwen3Once sync.Once
	qwen3Tok  *Tokenizer
	qwen3Err  error
)

// qwen3 loads the real Qwen3 tokenizer once per test binary.
func qwen3(t testing.TB) *Tokenizer {
	t.Helper()
	qwen3Once.Do(func() {
		qwen3Tok, qwen3Err = Load(filepath.Join(oracle.Dir(t), "..", "tokenizers", "qwen3"))
	})
	if qwen3Err != nil {
		t.Fatal(qwen3Err)
	}
	return qwen3Tok
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func checkCases(t *testing.T, tok *Tokenizer, cases []encCase) {
	t.Helper()
	for i, c := range cases {
		got := tok.Encode(c.Text)
		if !slices.Equal(got, c.IDs) {
			t.Errorf("case %d %q:\n got %v\nwant %v", i, c.Text, got, c.IDs)
			continue
		}
		text, err := tok.Decode(c.IDs, false)
		if err != nil || text != c.Decoded {
			t.Errorf("case %d: decoded %q, want %q (%v)", i, text, c.Decoded, err)
		}
	}
}

func TestQwen3MatchesHuggingFace(t *testing.T) {
	var doc struct{ Cases []encCase }
	readJSON(t, filepath.Join(oracle.Dir(t), "tokenize_qwen3.json"), &doc)
	checkCases(t, qwen3(t), doc.Cases)
}

func TestQwen35RegexMatchesHuggingFace(t *testing.T) {
	var doc struct {
		Regex string
		Cases []encCase
	}
	readJSON(t, filepath.Join(oracle.Dir(t), "tokenize_qwen3_vocab_qwen35_regex.json"), &doc)
	raw, err := os.ReadFile(filepath.Join(oracle.Dir(t), "..", "tokenizers", "qwen3", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	quoted, _ := json.Marshal(patternQwen3)
	withRegex, _ := json.Marshal(doc.Regex)
	if !strings.Contains(string(raw), string(quoted)) {
		t.Fatal("the Qwen3 tokenizer.json does not hold the expected Split regex")
	}
	if doc.Regex != patternQwen35 {
		t.Fatalf("oracle regex %q is not the known Qwen3.5 pattern", doc.Regex)
	}
	tok, err := FromJSON([]byte(strings.Replace(string(raw), string(quoted), string(withRegex), 1)))
	if err != nil {
		t.Fatal(err)
	}
	checkCases(t, tok, doc.Cases)
}

func TestFixtureTokenizers(t *testing.T) {
	for _, name := range oracle.Fixtures {
		dir := filepath.Join(oracle.Dir(t), name)
		tok, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Prompt    string
			PromptIDs []int32 `json:"prompt_ids"`
			Enc       []encCase
		}
		readJSON(t, filepath.Join(dir, "tokenizer_oracle.json"), &doc)
		if got := tok.Encode(doc.Prompt); !slices.Equal(got, doc.PromptIDs) {
			t.Errorf("%s: chat prompt ids %v, want %v", name, got, doc.PromptIDs)
		}
		checkCases(t, tok, doc.Enc)
	}
}

// TestHandWrittenSplitterMatchesRegexEngine holds the fast splitter to the
// general regex engine's answers.
func TestHandWrittenSplitterMatchesRegexEngine(t *testing.T) {
	var doc struct{ Cases []encCase }
	readJSON(t, filepath.Join(oracle.Dir(t), "tokenize_qwen3.json"), &doc)
	extra := []string{"a  b", " \n \n x", "x\r\n\r\n  y  ", "'S'LL'Ve", "ſ'ſ 'ſ", "e\u0301\u0301 x\u0301", "\u0301abc", "  ", " ", "\t\tx", "a\u00a0\u00a0b", "١٢٣ ४५"}
	for _, c := range doc.Cases {
		extra = append(extra, c.Text)
	}
	for _, pattern := range []string{patternQwen3, patternQwen35} {
		fast, _ := newSplitter(pattern)
		slow, err := newRegexSplitter(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range extra {
			if a, b := pieces(fast, s), pieces(slow, s); !slices.Equal(a, b) {
				t.Errorf("%q:\nfast %q\nslow %q", s, a, b)
			}
		}
	}
}

func pieces(sp splitter, s string) []string {
	var out []string
	sp.matches(s, func(a, b int) { out = append(out, s[a:b]) })
	return out
}

func FuzzSplitter(f *testing.F) {
	for _, s := range []string{"Hello world", "a  b\n\n c", "I'm 'RE 123", "e\u0301x 你好", "  \r\n\t"} {
		f.Add(s)
	}
	fast3, _ := newSplitter(patternQwen3)
	slow3, _ := newRegexSplitter(patternQwen3)
	fast35, _ := newSplitter(patternQwen35)
	slow35, _ := newRegexSplitter(patternQwen35)
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		if a, b := pieces(fast3, s), pieces(slow3, s); !slices.Equal(a, b) {
			t.Fatalf("qwen3 %q:\nfast %q\nslow %q", s, a, b)
		}
		if a, b := pieces(fast35, s), pieces(slow35, s); !slices.Equal(a, b) {
			t.Fatalf("qwen3.5 %q:\nfast %q\nslow %q", s, a, b)
		}
	})
}

// FuzzRoundTrip: decode(encode(s)) == NFC(s) for valid UTF-8, and no panic
// for any input.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"Hello", "<|im_start|>x<|im_end|>", "café\u0301", "\xff\xfe", "emoji 😀🇩🇪"} {
		f.Add(s)
	}
	tok := qwen3(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		text, err := tok.Decode(ids, false)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(s) {
			return
		}
		// Added tokens are matched before normalization, so the text
		// between them normalizes piece by piece.
		var want strings.Builder
		tok.splitAdded(s, false, func(seg string, a *AddedToken) {
			if a != nil {
				want.WriteString(a.Content)
			} else {
				want.WriteString(norm.NFC.String(seg))
			}
		})
		if text != want.String() {
			t.Fatalf("%q -> %v -> %q, want %q", s, ids, text, want.String())
		}
	})
}

func TestStreamDecoderNeverSplitsCharacters(t *testing.T) {
	tok := qwen3(t)
	text := "héllo 😀 世界 <|im_end|> done 🇩🇪"
	ids := tok.Encode(text)
	d := tok.NewStreamDecoder(false)
	var sb strings.Builder
	for _, id := range ids {
		delta, err := d.Add(id)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(delta) {
			t.Fatalf("delta %q is not valid UTF-8", delta)
		}
		sb.WriteString(delta)
	}
	sb.WriteString(d.Flush())
	if sb.String() != text {
		t.Fatalf("streamed %q, want %q", sb.String(), text)
	}
	skip := tok.NewStreamDecoder(true)
	var sk strings.Builder
	for _, id := range ids {
		delta, _ := skip.Add(id)
		sk.WriteString(delta)
	}
	if want := strings.Replace(text, "<|im_end|>", "", 1); sk.String() != want {
		t.Fatalf("skip_special_tokens: %q, want %q", sk.String(), want)
	}
	if _, err := d.Add(1 << 30); err == nil {
		t.Fatal("an id outside the vocabulary was accepted")
	}
}

func TestDecodeReplacesInvalidUTF8LikeRust(t *testing.T) {
	for in, want := range map[string]string{
		"a\xffb":          "a\uFFFDb",
		"\xe4\xb8":        "\uFFFD",        // one truncated sequence
		"\xe4\xb8x\xe4":   "\uFFFDx\uFFFD", // two
		"\xf0\x9f\x98":    "\uFFFD",
		"\xc0\xaf":        "\uFFFD\uFFFD", // overlong: each byte alone
		"ok \xed\xa0\x80": "ok \uFFFD\uFFFD\uFFFD",
	} {
		if got := toValidUTF8([]byte(in)); got != want {
			t.Errorf("%q -> %q, want %q", in, got, want)
		}
	}
}

// TestGGUFTokenizerMatchesTokenizerJSON: the tokenizer a llama.cpp GGUF
// embeds encodes every fixture case as Hugging Face does.
func TestGGUFTokenizerMatchesTokenizerJSON(t *testing.T) {
	for _, name := range oracle.Fixtures {
		dir := filepath.Join(oracle.Dir(t), name)
		files, _ := filepath.Glob(filepath.Join(dir, "gguf", "*.gguf"))
		f, err := gguf.Open(files[0])
		if err != nil {
			t.Fatal(err)
		}
		tok, err := FromGGUF(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Prompt    string
			PromptIDs []int32 `json:"prompt_ids"`
			Enc       []encCase
		}
		readJSON(t, filepath.Join(dir, "tokenizer_oracle.json"), &doc)
		if got := tok.Encode(doc.Prompt); !slices.Equal(got, doc.PromptIDs) {
			t.Errorf("%s: chat prompt %v, want %v", name, got, doc.PromptIDs)
		}
		checkCases(t, tok, doc.Enc)
		f.Close()
	}
}

// FuzzFromJSON loads hostile tokenizer.json files: a tokenizer or an
// error, never a panic; a loaded one encodes and decodes.
func FuzzFromJSON(f *testing.F) {
	raw, err := os.ReadFile(filepath.Join(oracle.Dir(f), "qwen35-dense", "tokenizer.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},"added_tokens":[{"id":3,"content":"<x>","special":true}]}`))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[["a","a"]]},"pre_tokenizer":{"type":"Split","pattern":{"Regex":"("}}}`))
	f.Add([]byte(`{"model":{"type":"WordPiece"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 1<<16 {
			return
		}
		tok, err := FromJSON(raw)
		if err != nil {
			return
		}
		ids := tok.Encode("Hello <x> wörld ab 12")
		if _, err := tok.Decode(ids, false); err != nil {
			t.Logf("decode: %v", err) // an error is fine; a panic is not
		}
	})
}
