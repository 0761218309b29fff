package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ardanlabs/jinja"
)

// Template is a compiled chat template with the special tokens it may use.
type Template struct {
	Source   string // where it came from, for errors
	tmpl     *jinja.Template
	toolUse  *jinja.Template // the "tool_use" variant of a named list, if any
	BOSToken string
	EOSToken string
	xmlCalls bool
}

// ToolCallsXML reports whether the template writes tool calls in Qwen3.5's
// XML (<function=NAME><parameter=…>) rather than Qwen3's JSON.
func (t *Template) ToolCallsXML() bool { return t.xmlCalls }

// ErrTemplate is wrapped by errors about loading or rendering a template.
var ErrTemplate = errors.New("chat template")

// LoadTemplate finds the chat template of a model directory: override (a
// file, as vLLM's --chat-template) if given, else chat_template.jinja, else
// tokenizer_config.json's chat_template (a string or a list of named
// templates).
func LoadTemplate(dir, override string) (*Template, error) {
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
		BOS          json.RawMessage `json:"bos_token"`
		EOS          json.RawMessage `json:"eos_token"`
	}
	if raw, err := os.ReadFile(cfgPath); err == nil {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return nil, fmt.Errorf("chat: %s: %w", cfgPath, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("chat: %w", err)
	}
	t := &Template{BOSToken: tokenText(cfg.BOS), EOSToken: tokenText(cfg.EOS)}
	var src, toolSrc string
	switch {
	case override != "":
		raw, err := os.ReadFile(override)
		if err != nil {
			return nil, fmt.Errorf("chat: --chat-template: %w", err)
		}
		src, t.Source = string(raw), override
	case fileExists(filepath.Join(dir, "chat_template.jinja")):
		path := filepath.Join(dir, "chat_template.jinja")
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("chat: %w", err)
		}
		src, t.Source = string(raw), path
	case len(cfg.ChatTemplate) > 0 && string(cfg.ChatTemplate) != "null":
		t.Source = cfgPath + ": chat_template"
		var err error
		if src, toolSrc, err = namedTemplates(cfg.ChatTemplate); err != nil {
			return nil, fmt.Errorf("chat: %s: %w", t.Source, err)
		}
	default:
		return nil, fmt.Errorf("chat: %w: %s has no chat template (no chat_template.jinja, no chat_template in tokenizer_config.json); pass --chat-template", ErrTemplate, dir)
	}
	var err error
	if err := checkMacros(src + toolSrc); err != nil {
		return nil, fmt.Errorf("chat: %w: %s: %v", ErrTemplate, t.Source, err)
	}
	if t.tmpl, err = jinja.Compile(src); err != nil {
		return nil, fmt.Errorf("chat: %w: %s: %v", ErrTemplate, t.Source, err)
	}
	t.xmlCalls = strings.Contains(src+toolSrc, "<function=")
	if toolSrc != "" {
		if t.toolUse, err = jinja.Compile(toolSrc); err != nil {
			return nil, fmt.Errorf("chat: %w: %s (tool_use): %v", ErrTemplate, t.Source, err)
		}
	}
	return t, nil
}

// ParseTemplate compiles a template from source.
func ParseTemplate(src, bos, eos string) (*Template, error) {
	if err := checkMacros(src); err != nil {
		return nil, fmt.Errorf("chat: %w: %v", ErrTemplate, err)
	}
	tmpl, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("chat: %w: %v", ErrTemplate, err)
	}
	return &Template{Source: "template", tmpl: tmpl, BOSToken: bos, EOSToken: eos, xmlCalls: strings.Contains(src, "<function=")}, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// namedTemplates reads chat_template as a string, or as a list of
// {name, template} where "default" is used and "tool_use" serves requests
// with tools.
func namedTemplates(raw json.RawMessage) (def, toolUse string, err error) {
	if json.Unmarshal(raw, &def) == nil {
		return def, "", nil
	}
	var list []struct{ Name, Template string }
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", "", fmt.Errorf("%w: want a string or a list of {name, template}", ErrTemplate)
	}
	var names []string
	for _, e := range list {
		switch e.Name {
		case "default":
			def = e.Template
		case "tool_use":
			toolUse = e.Template
		}
		names = append(names, e.Name)
	}
	if def == "" {
		return "", "", fmt.Errorf("%w: no template named \"default\" among %v", ErrTemplate, names)
	}
	return def, toolUse, nil
}

// tokenText reads a special token written as a string or as an added-token
// object {"content": ...}.
func tokenText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct{ Content string }
	if json.Unmarshal(raw, &obj) == nil {
		return obj.Content
	}
	return ""
}

// Request is what a template renders. Messages and Tools are JSON (as the
// OpenAI API carries them); key order is kept, so tojson writes what the
// client sent, as transformers does.
type Request struct {
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools,omitempty"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	Kwargs              json.RawMessage `json:"chat_template_kwargs,omitempty"`
}

var (
	macroDef  = regexp.MustCompile(`\{%-?\s*macro\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(`)
	macroEnd  = regexp.MustCompile(`\{%-?\s*endmacro\b`)
	macroCall = regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_]*)\s*\(`)
)

// checkMacros refuses a template whose macros can call themselves,
// directly or through each other: the engine has no recursion limit, and
// a Go stack overflow is fatal, not an error.
func checkMacros(src string) error {
	calls := map[string][]string{}
	for _, m := range macroDef.FindAllStringSubmatchIndex(src, -1) {
		name := src[m[2]:m[3]]
		body := src[m[1]:]
		if end := macroEnd.FindStringIndex(body); end != nil {
			body = body[:end[0]]
		}
		for _, c := range macroCall.FindAllStringSubmatch(body, -1) {
			calls[name] = append(calls[name], c[1])
		}
	}
	state := map[string]int{} // 1 on the path, 2 done
	var visit func(name string, path []string) error
	visit = func(name string, path []string) error {
		state[name] = 1
		for _, callee := range calls[name] {
			if _, isMacro := calls[callee]; !isMacro {
				continue
			}
			switch state[callee] {
			case 1:
				return fmt.Errorf("macro %s calls itself (%s → %s); recursion is not allowed in templates", callee, strings.Join(append(path, name), " → "), callee)
			case 0:
				if err := visit(callee, append(path, name)); err != nil {
					return err
				}
			}
		}
		state[name] = 2
		return nil
	}
	for name := range calls {
		if state[name] == 0 {
			if err := visit(name, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// Bounds on range() in templates: a template's loops over messages are
// bounded by the request, and range is the way a template makes a long loop
// (or a huge list) from nothing; the budget over a whole render bounds
// nested loops too.
const (
	maxRangeItems  = 1 << 16
	maxRangeBudget = 1 << 20
)

// boundedRange is Jinja's range for one render: at most maxRangeItems items
// a call and maxRangeBudget over the render.
func boundedRange() jinja.Value {
	budget := maxRangeBudget
	return jinja.NewCallable("range", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		var n [3]int64
		for i, a := range args {
			if i >= 3 || !a.IsInt() {
				return jinja.Undefined(), fmt.Errorf("range: want 1 to 3 integers")
			}
			n[i] = a.AsInt()
		}
		start, stop, step := int64(0), n[0], int64(1)
		switch len(args) {
		case 0:
			return jinja.Undefined(), fmt.Errorf("range: want 1 to 3 integers")
		case 2, 3:
			start, stop = n[0], n[1]
			if len(args) == 3 {
				step = n[2]
			}
		}
		if step == 0 {
			return jinja.Undefined(), fmt.Errorf("range: step must not be zero")
		}
		count := max(0, (stop-start+step-sign(step))/step)
		if count > maxRangeItems {
			return jinja.Undefined(), fmt.Errorf("range of %d items: templates may make at most %d", count, maxRangeItems)
		}
		if budget -= int(count); budget < 0 {
			return jinja.Undefined(), fmt.Errorf("range: a render may make at most %d items in all", maxRangeBudget)
		}
		var items []jinja.Value
		for i := start; step > 0 && i < stop || step < 0 && i > stop; i += step {
			items = append(items, jinja.NewInt(i))
		}
		return jinja.NewList(items), nil
	})
}

func sign(x int64) int64 {
	if x < 0 {
		return -1
	}
	return 1
}

// Render renders the request's prompt.
func (t *Template) Render(r Request) (string, error) {
	vars := map[string]jinja.Value{
		"range":                 boundedRange(),
		"add_generation_prompt": jinja.NewBool(r.AddGenerationPrompt),
		"bos_token":             jinja.NewString(t.BOSToken),
		"eos_token":             jinja.NewString(t.EOSToken),
	}
	msgs, err := toValue(r.Messages)
	if err != nil {
		return "", fmt.Errorf("chat: %w: messages: %v", ErrTemplate, err)
	}
	if !msgs.IsList() {
		return "", fmt.Errorf("chat: %w: messages must be a list", ErrTemplate)
	}
	vars["messages"] = msgs
	tmpl := t.tmpl
	if len(r.Tools) > 0 && string(r.Tools) != "null" {
		tools, err := toValue(r.Tools)
		if err != nil || !tools.IsList() {
			return "", fmt.Errorf("chat: %w: tools must be a list", ErrTemplate)
		}
		vars["tools"] = tools
		if t.toolUse != nil {
			tmpl = t.toolUse
		}
	}
	if len(r.Kwargs) > 0 && string(r.Kwargs) != "null" {
		kw, err := toValue(r.Kwargs)
		if err != nil || !kw.IsDict() {
			return "", fmt.Errorf("chat: %w: chat_template_kwargs must be an object", ErrTemplate)
		}
		d := kw.AsDict()
		for _, k := range d.OrderedKeys() {
			v, _ := d.Get(k)
			vars[k] = v
		}
	}
	out, err := tmpl.RenderValues(vars)
	if err != nil {
		return "", fmt.Errorf("chat: %w: %s: %v", ErrTemplate, t.Source, err)
	}
	return out, nil
}

// toValue decodes JSON into template values, keeping object key order and
// the distinction between integers and floats.
func toValue(raw json.RawMessage) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Value{}, err
	}
	if dec.More() {
		return jinja.Value{}, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, v)
			}
			_, err := dec.Token()
			return jinja.NewList(items), err
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Value{}, err
				}
				key, _ := kt.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				d.AsDict().Set(key, v)
			}
			_, err := dec.Token()
			return d, err
		}
	case string:
		return jinja.NewString(x), nil
	case json.Number:
		return jinja.FromGoValue(x), nil
	case bool:
		return jinja.NewBool(x), nil
	case nil:
		return jinja.None(), nil
	}
	return jinja.Value{}, fmt.Errorf("unexpected JSON token %v", tok)
}

// RenderString is a convenience for one user message.
func (t *Template) RenderString(prompt string, kwargs map[string]any) (string, error) {
	msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": prompt}})
	var kw json.RawMessage
	if len(kwargs) > 0 {
		kw, _ = json.Marshal(kwargs)
	}
	return t.Render(Request{Messages: msgs, AddGenerationPrompt: true, Kwargs: kw})
}
