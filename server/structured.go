package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/govllm/govllm/grammar"
	"github.com/govllm/govllm/tokenizer/chat"
)

// structuredFields are the structured-output parameters of OpenAI
// (response_format), vLLM (guided_*, and structured_outputs since 0.10) and
// llama.cpp's server (grammar, json_schema). A request gives at most one.
type structuredFields struct {
	ResponseFormat    json.RawMessage `json:"response_format"`
	GuidedJSON        json.RawMessage `json:"guided_json"`
	GuidedRegex       *string         `json:"guided_regex"`
	GuidedGrammar     *string         `json:"guided_grammar"`
	GuidedChoice      []string        `json:"guided_choice"`
	StructuredOutputs *struct {
		JSON    json.RawMessage `json:"json"`
		Regex   *string         `json:"regex"`
		Grammar *string         `json:"grammar"`
		Choice  []string        `json:"choice"`
	} `json:"structured_outputs"`
	Grammar    *string         `json:"grammar"`
	JSONSchema json.RawMessage `json:"json_schema"`

	ThinkingTokenBudget *int `json:"thinking_token_budget"`
}

// constraintSource is one requested constraint: the field that asked for
// it, its kind and its text.
type constraintSource struct {
	field, kind, text string
}

func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// sources lists the constraints the fields ask for.
func (f *structuredFields) sources() ([]constraintSource, error) {
	var out []constraintSource
	add := func(field, kind, text string) { out = append(out, constraintSource{field, kind, text}) }
	if present(f.ResponseFormat) {
		var rf struct {
			Type       string          `json:"type"`
			Schema     json.RawMessage `json:"schema"` // llama.cpp's json_object with a schema
			JSONSchema *struct {
				Name   string          `json:"name"`
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		}
		if err := json.Unmarshal(f.ResponseFormat, &rf); err != nil {
			return nil, badRequest("response_format", "response_format: %v", err)
		}
		switch rf.Type {
		case "text", "":
		case "json_object":
			if present(rf.Schema) {
				add("response_format.schema", "json", string(rf.Schema))
			} else {
				add("response_format", "json_object", "")
			}
		case "json_schema":
			if rf.JSONSchema == nil || !present(rf.JSONSchema.Schema) {
				return nil, badRequest("response_format.json_schema.schema", "response_format json_schema needs json_schema.schema")
			}
			add("response_format.json_schema.schema", "json", string(rf.JSONSchema.Schema))
		default:
			return nil, badRequest("response_format.type", "response_format type %q: want text, json_object or json_schema", rf.Type)
		}
	}
	jsonField := func(field string, raw json.RawMessage) error {
		if !present(raw) {
			return nil
		}
		var s string
		if json.Unmarshal(raw, &s) == nil { // vLLM takes the schema as a string too
			raw = json.RawMessage(s)
		}
		add(field, "json", string(raw))
		return nil
	}
	text := func(field, kind string, s *string) {
		if s != nil {
			add(field, kind, *s)
		}
	}
	choice := func(field string, c []string) {
		if c != nil {
			b, _ := json.Marshal(c)
			add(field, "choice", string(b))
		}
	}
	jsonField("guided_json", f.GuidedJSON)
	text("guided_regex", "regex", f.GuidedRegex)
	text("guided_grammar", "gbnf", f.GuidedGrammar)
	choice("guided_choice", f.GuidedChoice)
	if so := f.StructuredOutputs; so != nil {
		jsonField("structured_outputs.json", so.JSON)
		text("structured_outputs.regex", "regex", so.Regex)
		text("structured_outputs.grammar", "gbnf", so.Grammar)
		choice("structured_outputs.choice", so.Choice)
	}
	text("grammar", "gbnf", f.Grammar)
	jsonField("json_schema", f.JSONSchema)
	if len(out) > 1 {
		names := make([]string, len(out))
		for i, s := range out {
			names[i] = s.field
		}
		return nil, badRequest(out[1].field, "only one constraint may be given, got %s", strings.Join(names, " and "))
	}
	return out, nil
}

// compile builds the grammar of a source.
func compile(src constraintSource) (*grammar.Grammar, error) {
	switch src.kind {
	case "json_object":
		return grammar.JSONObject(), nil
	case "json":
		return grammar.FromJSONSchema([]byte(src.text))
	case "regex":
		return grammar.FromRegex(src.text)
	case "gbnf":
		return grammar.ParseGBNF(src.text)
	case "choice":
		var choices []string
		json.Unmarshal([]byte(src.text), &choices)
		if len(choices) == 0 {
			return nil, fmt.Errorf("%w: no choices", grammar.ErrGrammar)
		}
		alts := make([]string, len(choices))
		for i, c := range choices {
			b, _ := json.Marshal(c) // a GBNF literal's escapes are JSON's
			alts[i] = string(b)
		}
		return grammar.ParseGBNF("root ::= " + strings.Join(alts, " | "))
	}
	return nil, fmt.Errorf("%w: unknown kind %q", grammar.ErrGrammar, src.kind)
}

// grammarCache keeps compiled maskers by their source, so that requests
// with the same schema share one automaton and its masks.
type grammarCache struct {
	mu    sync.Mutex
	byKey map[string]*grammar.Masker
	order []string
}

const cachedGrammars = 64

func (c *grammarCache) get(key string, build func() (*grammar.Masker, error)) (*grammar.Masker, error) {
	c.mu.Lock()
	if m, ok := c.byKey[key]; ok {
		c.mu.Unlock()
		return m, nil
	}
	c.mu.Unlock()
	m, err := build()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[string]*grammar.Masker{}
	}
	if _, ok := c.byKey[key]; !ok {
		if len(c.order) >= cachedGrammars {
			delete(c.byKey, c.order[0])
			c.order = c.order[1:]
		}
		c.byKey[key] = m
		c.order = append(c.order, key)
	}
	return c.byKey[key], nil
}

// masker compiles (or finds) the masker of src; a grammar that does not
// compile is a 400 naming the field.
func (s *Server) masker(src constraintSource) (*grammar.Masker, error) {
	return s.grammars.get(src.kind+"\x00"+src.text, func() (*grammar.Masker, error) {
		g, err := compile(src)
		if err != nil {
			if errors.Is(err, grammar.ErrGrammar) {
				return nil, badRequest(src.field, "%s: %v", src.field, err)
			}
			return nil, err
		}
		return grammar.NewMasker(g, s.eng.GrammarVocab()), nil
	})
}

// constraint is the masker a request's fields ask for, or nil.
func (s *Server) constraint(f *structuredFields) (*grammar.Masker, error) {
	srcs, err := f.sources()
	if err != nil || len(srcs) == 0 {
		return nil, err
	}
	return s.masker(srcs[0])
}

// toolCallMasker constrains the output to calls of the tools: required,
// one call of any or with many (parallel_tool_calls, the default) one or
// more; named, one call of that tool.
func (s *Server) toolCallMasker(tools []chat.Tool, mode, named string, many bool) (*grammar.Masker, error) {
	format := grammar.ToolCallJSON
	if s.opts.Template.ToolCallsXML() {
		format = grammar.ToolCallXML
	}
	var list []grammar.Tool
	var key strings.Builder
	fmt.Fprintf(&key, "tools\x00%d\x00%s\x00%v", format, mode, many)
	for _, t := range tools {
		if mode == "named" && t.Function.Name != named {
			continue
		}
		list = append(list, grammar.Tool{Name: t.Function.Name, Parameters: t.Function.Parameters})
		fmt.Fprintf(&key, "\x00%s\x00%s", t.Function.Name, t.Function.Parameters)
	}
	return s.grammars.get(key.String(), func() (*grammar.Masker, error) {
		g, err := grammar.ToolCalls(list, format, many)
		if err != nil {
			if errors.Is(err, grammar.ErrGrammar) {
				return nil, badRequest("tools", "tool_choice %s: %v", mode, err)
			}
			return nil, err
		}
		return grammar.NewMasker(g, s.eng.GrammarVocab()), nil
	})
}
