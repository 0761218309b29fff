package grammar_test

import (
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/govllm/govllm/grammar"
	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/tokenizer"
)

// jsonGBNF is JSON (an object at the top), after llama.cpp's json.gbnf.
const jsonGBNF = `
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= "-"? ([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws
ws     ::= | " " | "\n" [ \t]{0,20}
`

var (
	qwenOnce  sync.Once
	qwenVocab *grammar.Vocab
	qwenTok   *tokenizer.Tokenizer
	qwenErr   error
)

// qwen3 is the real Qwen3 tokenizer's vocabulary (151k tokens) as a trie.
func qwen3(t testing.TB) (*tokenizer.Tokenizer, *grammar.Vocab) {
	t.Helper()
	dir := filepath.Join(oracle.Dir(t), "..", "tokenizers", "qwen3")
	qwenOnce.Do(func() {
		qwenTok, qwenErr = tokenizer.Load(dir)
		if qwenErr == nil {
			qwenVocab = grammar.NewVocab(qwenTok.VocabSize(), func(id int32) []byte {
				if qwenTok.IsSpecial(id) {
					return nil
				}
				return qwenTok.TokenBytes(id)
			})
		}
	})
	if qwenErr != nil {
		t.Fatal(qwenErr)
	}
	return qwenTok, qwenVocab
}

// TestRandomWalksOverQwen3AreJSON samples tokens uniformly from each mask
// of the JSON grammar over the Qwen3 vocabulary: every text the grammar
// accepts along the way is valid JSON.
func TestRandomWalksOverQwen3AreJSON(t *testing.T) {
	tok, v := qwen3(t)
	g, err := grammar.ParseGBNF(jsonGBNF)
	if err != nil {
		t.Fatal(err)
	}
	mk := grammar.NewMasker(g, v)
	rng := rand.New(rand.NewPCG(3, 4))
	accepted := 0
	for walk := range 10 {
		s, text := mk.Start(), []byte(nil)
		for range 40 {
			m := mk.Mask(s)
			var allowed []int32
			for id := range int32(v.Size()) {
				if m.Has(id) {
					allowed = append(allowed, id)
				}
			}
			if len(allowed) == 0 {
				if s.Accepting() {
					break // only the end of the sequence may follow
				}
				t.Fatalf("walk %d: no token allowed after %q", walk, text)
			}
			b := tok.TokenBytes(allowed[rng.IntN(len(allowed))])
			text = append(text, b...)
			if s = mk.Advance(s, b); s.Dead() {
				t.Fatalf("walk %d: a masked-in token killed the state after %q", walk, text)
			}
			if s.Accepting() {
				accepted++
				if !json.Valid(text) {
					t.Fatalf("walk %d: accepted %q, which is not JSON", walk, text)
				}
			}
		}
	}
	t.Logf("%d accepting states checked", accepted)
	for _, bad := range []string{`{"a":}`, `{"a":1,}`, `[1]`, `{"a":"\x01"}`} {
		if g.Match(bad) {
			t.Errorf("the JSON grammar accepts %q", bad)
		}
	}
	if !g.Match(`{"a": [1, -2.5e3, "x\u00e9\n", {"b": null}], "c": true}`) {
		t.Error("the JSON grammar rejects a valid object")
	}
}

// BenchmarkMaskQwen3 is the cost of one mask over the 151k-token Qwen3
// vocabulary in a JSON string (the widest state), uncached and cached.
func BenchmarkMaskQwen3(b *testing.B) {
	_, v := qwen3(b)
	g, err := grammar.ParseGBNF(jsonGBNF)
	if err != nil {
		b.Fatal(err)
	}
	s := g.Start().Advance([]byte(`{"key": "some text`))
	// A new automaton: every transition is computed in the walk.
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			mk := grammar.NewMasker(g, v)
			mk.Mask(mk.At(s))
		}
	})
	// Transitions known, the mask not: a state seen for the first time
	// whose neighbourhood the automaton has explored.
	b.Run("warm", func(b *testing.B) {
		mk := grammar.NewMasker(g, v)
		mk.Mask(mk.At(s))
		for b.Loop() {
			p := mk.At(g.Start().Advance([]byte(`{"key": "some text`)))
			grammar.ResetMask(p)
			mk.Mask(p)
		}
	})
	b.Run("cached", func(b *testing.B) {
		mk := grammar.NewMasker(g, v)
		p := mk.At(s)
		mk.Mask(p)
		for b.Loop() {
			mk.Mask(mk.Advance(p, []byte("x")))
		}
	})
}
