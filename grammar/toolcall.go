package grammar

import (
	"fmt"
	"slices"
	"strings"
)

// Tool is a function that a constrained output calls: its name and the
// JSON schema of its arguments (nil: no arguments).
type Tool struct {
	Name       string
	Parameters []byte
}

// ToolCallFormat is how a model writes tool calls.
type ToolCallFormat uint8

const (
	// ToolCallJSON is Qwen3's <tool_call>\n{"name": …, "arguments": …}\n</tool_call>.
	ToolCallJSON ToolCallFormat = iota
	// ToolCallXML is Qwen3.5's <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n…</function>\n</tool_call>,
	// string values as raw text, others as JSON.
	ToolCallXML
)

// ToolCalls compiles the grammar of tool calls to the tools in format,
// after a little whitespace: one call, or with many one or more separated
// by newlines. Each call's arguments match its tool's parameter schema.
func ToolCalls(tools []Tool, format ToolCallFormat, many bool) (*Grammar, error) {
	if len(tools) == 0 {
		return nil, fmt.Errorf("%w: no tools to call", ErrGrammar)
	}
	c := &schemaCompiler{e: newEmitter(), refs: map[string]string{}}
	var calls []string
	for i, t := range tools {
		schema := t.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = []byte(`{"type": "object"}`)
		}
		doc, err := decodeOrdered(schema)
		if err != nil {
			return nil, &SchemaError{Problems: []string{fmt.Sprintf("tool %q: parameters are not valid JSON: %v", t.Name, err)}}
		}
		c.root, c.refs = doc, map[string]string{}
		path := fmt.Sprintf("tools/%d/parameters", i)
		var body string
		switch format {
		case ToolCallJSON:
			var name strings.Builder
			encodeJSON(&name, t.Name)
			body = gbnfLiteral("<tool_call>\n{\"name\": "+name.String()+", \"arguments\": ") + " " +
				c.visit(doc, path) + " " + gbnfLiteral("}\n</tool_call>")
		case ToolCallXML:
			body = gbnfLiteral("<tool_call>\n<function="+t.Name+">\n") + " " + c.xmlParameters(doc, path) + " " +
				gbnfLiteral("</function>\n</tool_call>")
		}
		calls = append(calls, c.e.rule("call-"+t.Name, body))
	}
	if len(c.problems) > 0 {
		return nil, &SchemaError{Problems: c.problems}
	}
	call := c.e.rule("call", strings.Join(calls, " | "))
	root := `[ \n]{0,2} ` + call
	if many {
		root += ` ("\n"{1,2} ` + call + ")*"
	}
	return ParseGBNF(c.e.text(root))
}

// xmlParameters is the grammar of a call's <parameter=…> blocks: the
// schema's properties in order, the required ones present.
func (c *schemaCompiler) xmlParameters(doc any, path string) string {
	s, ok := doc.(*object)
	if !ok {
		c.fail(path, "parameters must be an object schema")
		return `""`
	}
	if t, ok := s.get("type"); ok && t != "object" {
		c.fail(path+"/type", "parameters must be of type object")
	}
	for _, k := range s.keys {
		if !slices.Contains(annotationKeywords, k) && k != "type" && k != "properties" && k != "required" && k != "additionalProperties" {
			c.fail(path, "keyword %q in tool parameters is not supported in XML tool calls", k)
		}
	}
	if a, ok := s.get("additionalProperties"); ok && a != false {
		c.fail(path+"/additionalProperties", "additional parameters are not supported in XML tool calls")
	}
	props, _ := s.vals["properties"].(*object)
	if props == nil {
		return `""`
	}
	required := map[string]bool{}
	if r, ok := s.get("required"); ok {
		list, _ := r.([]any)
		for _, e := range list {
			if name, ok := e.(string); ok {
				required[name] = true
			}
		}
	}
	parts := make([]string, 0, len(props.keys))
	for _, k := range props.keys {
		value := c.xmlValue(props.vals[k], path+"/properties/"+escapePointer(k))
		p := c.e.rule("param-"+k, gbnfLiteral("<parameter="+k+">\n")+" "+value+" "+gbnfLiteral("\n</parameter>\n"))
		if !required[k] {
			p += "?"
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return `""`
	}
	return strings.Join(parts, " ")
}

// xmlValue is the grammar of one parameter's value as the XML format
// writes it and its parser reads it back: by the schema's type (the first
// that is not null), strings as raw text without '<', other types as JSON.
func (c *schemaCompiler) xmlValue(v any, path string) string {
	s, ok := v.(*object)
	if !ok {
		c.fail(path, "a parameter schema must be an object")
		return `""`
	}
	typ := ""
	switch t := s.vals["type"].(type) {
	case string:
		typ = t
	case []any:
		for _, e := range t {
			if name, _ := e.(string); name != "null" {
				typ = name
				break
			}
		}
		narrowed := &object{keys: s.keys, vals: map[string]any{}}
		for k, x := range s.vals {
			narrowed.vals[k] = x
		}
		narrowed.vals["type"] = typ
		s = narrowed
	}
	if typ != "string" && typ != "" {
		return c.visit(s, path)
	}
	return c.rawString(s, path)
}

// rawString is the grammar of a string schema's values as raw text (no
// quotes, no escapes), '<' excluded so that the value cannot run into the
// closing tag.
func (c *schemaCompiler) rawString(s *object, path string) string {
	c.e.define("raw-char", `[^<]`)
	for _, k := range s.keys {
		switch {
		case slices.Contains(annotationKeywords, k), k == "type", k == "minLength", k == "maxLength", k == "pattern", k == "format":
		case k == "enum" || k == "const":
			var vals []any
			if k == "const" {
				vals = []any{s.vals[k]}
			} else {
				vals, _ = s.vals[k].([]any)
			}
			var alts []string
			for _, x := range vals {
				str, ok := x.(string)
				if !ok {
					c.fail(path+"/"+k, "in XML tool calls a string parameter's values must be strings")
					return `""`
				}
				alts = append(alts, gbnfLiteral(str))
			}
			if len(alts) == 0 {
				c.fail(path+"/"+k, "%s has no values", k)
				return `""`
			}
			return "(" + strings.Join(alts, " | ") + ")"
		default:
			c.fail(path, "keyword %q on a string parameter is not supported in XML tool calls", k)
			return `""`
		}
	}
	lo, hi := c.count(s, "minLength", path), c.count(s, "maxLength", path)
	if p, ok := s.get("pattern"); ok {
		pattern, _ := p.(string)
		body, err := regexBody(c.e, pattern, xmlText, false)
		if err != nil {
			c.fail(path+"/pattern", "%v", strings.TrimPrefix(err.Error(), ErrGrammar.Error()+": "))
			return `""`
		}
		if lo >= 0 || hi >= 0 {
			c.fail(path, "pattern with length bounds is not supported in XML tool calls")
		}
		return "(" + body + ")"
	}
	if f, ok := s.get("format"); ok {
		name, _ := f.(string)
		body, ok := stringFormats[name]
		if !ok {
			c.fail(path+"/format", "format %q is not supported (supported: date, date-time, time, uuid, ipv4)", name)
			return `""`
		}
		for _, p := range formatParts {
			c.e.define(p[0], p[1])
		}
		return "(" + body + ")"
	}
	if lo < 0 && hi < 0 {
		return "raw-char*"
	}
	rep := fmt.Sprintf("{%d,}", max(lo, 0))
	if hi >= 0 {
		rep = fmt.Sprintf("{%d,%d}", max(lo, 0), hi)
	}
	return "raw-char" + rep
}
