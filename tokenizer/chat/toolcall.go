package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Tool is a function the model may call, as the OpenAI API describes it.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

// ToolCall is one parsed call. Arguments is a JSON object. A call that
// could not be parsed has Err set and keeps the model's text in Raw.
type ToolCall struct {
	Index     int
	Name      string
	Arguments string
	Raw       string
	Err       error
}

// ErrToolCall is wrapped by the Err of calls that could not be parsed.
var ErrToolCall = errors.New("malformed tool call")

// parseToolCall reads the body of a <tool_call> block in either format:
// Qwen3's JSON {"name": …, "arguments": …} or Qwen3.5's XML
// <function=NAME><parameter=ARG>VALUE</parameter></function>.
func parseToolCall(body string, tools []Tool) *ToolCall {
	call := &ToolCall{Raw: body}
	trimmed := strings.TrimSpace(body)
	var err error
	switch {
	case strings.HasPrefix(trimmed, "{"):
		err = parseJSONCall(trimmed, call)
	case strings.HasPrefix(trimmed, "<function="):
		err = parseXMLCall(trimmed, call, tools)
	default:
		err = errors.New("body is neither a JSON object nor a <function=…> block")
	}
	if err != nil {
		call.Err = fmt.Errorf("chat: %w: %v", ErrToolCall, err)
	}
	return call
}

func parseJSONCall(s string, call *ToolCall) error {
	var v struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Params    json.RawMessage `json:"parameters"`
	}
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("JSON: %v", err)
	}
	if dec.More() {
		return errors.New("JSON: text after the object")
	}
	if v.Name == nil || *v.Name == "" {
		return errors.New(`JSON: no "name"`)
	}
	args := v.Arguments
	if len(args) == 0 {
		args = v.Params
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	// Arguments given as a JSON string holding an object are unwrapped.
	var str string
	if json.Unmarshal(args, &str) == nil {
		args = json.RawMessage(str)
	}
	var obj map[string]any
	if err := json.Unmarshal(args, &obj); err != nil {
		return fmt.Errorf(`JSON: "arguments" is not an object: %v`, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, args); err != nil {
		return err
	}
	call.Name, call.Arguments = *v.Name, compact.String()
	return nil
}

func parseXMLCall(s string, call *ToolCall, tools []Tool) error {
	rest := strings.TrimPrefix(s, "<function=")
	end := strings.IndexByte(rest, '>')
	if end < 0 {
		return errors.New("XML: <function= without >")
	}
	call.Name = strings.TrimSpace(rest[:end])
	if call.Name == "" {
		return errors.New("XML: empty function name")
	}
	rest = rest[end+1:]
	schema := paramTypes(tools, call.Name)
	var args bytes.Buffer
	args.WriteByte('{')
	n := 0
	for {
		rest = strings.TrimLeft(rest, " \t\r\n")
		if strings.HasPrefix(rest, "</function>") {
			rest = strings.TrimSpace(rest[len("</function>"):])
			if rest != "" {
				return fmt.Errorf("XML: text after </function>: %q", clip(rest))
			}
			break
		}
		if rest == "" {
			break // a missing </function> at the end of output is tolerated
		}
		if !strings.HasPrefix(rest, "<parameter=") {
			return fmt.Errorf("XML: expected <parameter=…> or </function>, found %q", clip(rest))
		}
		rest = rest[len("<parameter="):]
		gt := strings.IndexByte(rest, '>')
		if gt < 0 {
			return errors.New("XML: <parameter= without >")
		}
		name := strings.TrimSpace(rest[:gt])
		rest = rest[gt+1:]
		closeAt := strings.Index(rest, "</parameter>")
		var value string
		if closeAt < 0 {
			// Tolerate a missing </parameter> before the next parameter or the end.
			next := strings.Index(rest, "<parameter=")
			if fn := strings.Index(rest, "</function>"); fn >= 0 && (next < 0 || fn < next) {
				next = fn
			}
			if next < 0 {
				next = len(rest)
			}
			value, rest = rest[:next], rest[next:]
		} else {
			value, rest = rest[:closeAt], rest[closeAt+len("</parameter>"):]
		}
		value = strings.TrimSuffix(strings.TrimPrefix(value, "\n"), "\n")
		if n > 0 {
			args.WriteByte(',')
		}
		key, _ := json.Marshal(name)
		args.Write(key)
		args.WriteByte(':')
		args.Write(typedValue(value, schema[name]))
		n++
	}
	args.WriteByte('}')
	call.Arguments = args.String()
	return nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// paramTypes maps a tool's parameter names to their JSON schema types.
func paramTypes(tools []Tool, name string) map[string]string {
	types := map[string]string{}
	for _, t := range tools {
		if t.Function.Name != name {
			continue
		}
		var schema struct {
			Properties map[string]struct {
				Type json.RawMessage `json:"type"`
			} `json:"properties"`
		}
		json.Unmarshal(t.Function.Parameters, &schema)
		for p, prop := range schema.Properties {
			var one string
			var many []string
			switch {
			case json.Unmarshal(prop.Type, &one) == nil:
				types[p] = one
			case json.Unmarshal(prop.Type, &many) == nil:
				for _, ty := range many { // ["integer", "null"]: the first non-null
					if ty != "null" {
						types[p] = ty
						break
					}
				}
			}
		}
	}
	return types
}

// typedValue converts an XML parameter value to JSON by its schema type;
// strings, unknown types and values that do not parse stay strings.
func typedValue(v, typ string) []byte {
	str := func() []byte { b, _ := json.Marshal(v); return b }
	t := strings.TrimSpace(v)
	switch typ {
	case "integer":
		if _, err := strconv.ParseInt(t, 10, 64); err == nil {
			return []byte(t)
		}
		if f, err := strconv.ParseFloat(t, 64); err == nil && f == float64(int64(f)) {
			return []byte(strconv.FormatInt(int64(f), 10))
		}
	case "number":
		if f, err := strconv.ParseFloat(t, 64); err == nil {
			b, _ := json.Marshal(f)
			return b
		}
	case "boolean":
		switch strings.ToLower(t) {
		case "true":
			return []byte("true")
		case "false":
			return []byte("false")
		}
	case "null":
		if t == "null" || t == "" {
			return []byte("null")
		}
	case "object", "array":
		if json.Valid([]byte(t)) {
			var buf bytes.Buffer
			json.Compact(&buf, []byte(t))
			return buf.Bytes()
		}
	}
	return str()
}
