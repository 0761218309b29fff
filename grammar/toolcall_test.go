package grammar_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/govllm/govllm/grammar"
	"github.com/govllm/govllm/tokenizer/chat"
)

var callTools = []struct{ name, params string }{
	{"get_weather", `{"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["c", "f"]}, "days": {"type": "integer"}}, "required": ["city"]}`},
	{"set_flags", `{"type": "object", "properties": {"on": {"type": "boolean"}, "ids": {"type": "array", "items": {"type": "integer"}, "maxItems": 3}, "ratio": {"type": ["number", "null"]}, "when": {"type": "string", "format": "date"}}, "required": ["on", "ids"]}`},
	{"ping", ``},
}

// TestToolCallGrammarsParse generates calls from the grammars of both
// formats and reads them back with the chat parser: every call parses, names
// a tool, and its arguments pass the reference validator.
func TestToolCallGrammarsParse(t *testing.T) {
	var tools []grammar.Tool
	var chatTools []chat.Tool
	refs := map[string]func(string) error{}
	for _, ct := range callTools {
		tools = append(tools, grammar.Tool{Name: ct.name, Parameters: []byte(ct.params)})
		var tool chat.Tool
		tool.Type, tool.Function.Name, tool.Function.Parameters = "function", ct.name, json.RawMessage(ct.params)
		if ct.params == "" {
			tool.Function.Parameters = nil
		}
		chatTools = append(chatTools, tool)
		schema := ct.params
		if schema == "" {
			schema = `{"type": "object", "additionalProperties": false}`
		}
		ref := validator(t, schema)
		refs[ct.name] = func(args string) error { return validates(t, ref, args) }
	}
	var toks [][]byte
	for c := 0; c < 128; c++ {
		toks = append(toks, []byte{byte(c)})
	}
	for _, s := range []string{"<tool_call>", "</tool_call>", "<function=", "<parameter=", "</parameter>", "é", "true", "null", "2024-"} {
		toks = append(toks, []byte(s))
	}
	v := grammar.NewVocab(len(toks), func(id int32) []byte { return toks[id] })
	rng := rand.New(rand.NewPCG(5, 6))
	for _, format := range []grammar.ToolCallFormat{grammar.ToolCallJSON, grammar.ToolCallXML} {
		g, err := grammar.ToolCalls(tools, format, true)
		if err != nil {
			t.Fatal(err)
		}
		mk := grammar.NewMasker(g, v)
		ended := 0
		for walk := 0; walk < 60; walk++ {
			p, text := mk.Start(), []byte(nil)
			for step := 0; step < 400 && !(p.Accepting() && rng.IntN(3) == 0); step++ {
				m := mk.Mask(p)
				var allowed, close []int32
				for id := range int32(len(toks)) {
					if m.Has(id) {
						allowed = append(allowed, id)
						if strings.ContainsAny(string(toks[id]), "\"]}<\n") {
							close = append(close, id)
						}
					}
				}
				if len(allowed) == 0 {
					break
				}
				pick := allowed
				if len(close) > 0 && rng.IntN(2) == 0 {
					pick = close
				}
				id := pick[rng.IntN(len(pick))]
				text, p = append(text, toks[id]...), mk.Advance(p, toks[id])
			}
			if !p.Accepting() {
				continue
			}
			ended++
			_, _, calls := chat.ParseAll(string(text), chat.ParserOptions{ToolCalls: true, Tools: chatTools})
			if len(calls) == 0 {
				t.Fatalf("format %d: no call parsed from %q", format, text)
			}
			for _, c := range calls {
				if c.Err != nil {
					t.Fatalf("format %d: %q: %v", format, text, c.Err)
				}
				ref, ok := refs[c.Name]
				if !ok {
					t.Fatalf("format %d: call to unknown %q", format, c.Name)
				}
				if err := ref(c.Arguments); err != nil {
					t.Fatalf("format %d: %q: arguments %s fail the schema: %v", format, text, c.Arguments, err)
				}
			}
		}
		if ended < 30 {
			t.Errorf("format %d: only %d of 60 walks ended", format, ended)
		}
	}
	_, err := grammar.ToolCalls([]grammar.Tool{{Name: "f", Parameters: []byte(`{"type": "object", "properties": {"s": {"type": "string", "minimum": 1}}}`)}}, grammar.ToolCallXML, false)
	if !errors.Is(err, grammar.ErrGrammar) || !strings.Contains(err.Error(), `"minimum"`) {
		t.Errorf("an unsupported keyword in XML parameters: %v", err)
	}
}
