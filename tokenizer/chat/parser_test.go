package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// feed streams text in pieces of the given size and collects the result.
func feed(text string, size int, opts ParserOptions) (content, reasoning string, calls []*ToolCall) {
	p := NewParser(opts)
	var c, r strings.Builder
	collect := func(events []Event) {
		for _, e := range events {
			switch e.Kind {
			case Content:
				c.WriteString(e.Text)
			case Reasoning:
				r.WriteString(e.Text)
			case ToolCallDone:
				calls = append(calls, e.Call)
			}
		}
	}
	for i := 0; i < len(text); i += size {
		collect(p.Push(text[i:min(i+size, len(text))]))
	}
	collect(p.Close())
	return c.String(), r.String(), calls
}

var weatherTool = func() []Tool {
	var tools []Tool
	json.Unmarshal([]byte(`[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
		"properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
		"ratio": {"type": ["number", "null"]}, "tags": {"type": "array"}}}}}]`), &tools)
	return tools
}()

func TestParser(t *testing.T) {
	all := ParserOptions{Reasoning: true, ToolCalls: true, Tools: weatherTool}
	open := all
	open.InReasoning = true
	cases := []struct {
		name               string
		opts               ParserOptions
		text               string
		content, reasoning string
		calls              []string // name + arguments
	}{
		{"reasoning then answer", open, "Let me think.\nStill.\n</think>\n\nThe answer is 4.", "The answer is 4.", "Let me think.\nStill.", nil},
		{"model opens think itself", all, "<think>\nhm\n</think>\n\nok", "ok", "hm", nil},
		{"thinking disabled: plain content", all, "Just an answer.\n", "Just an answer.\n", "", nil},
		{"JSON tool call", all, "Checking.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			"Checking.", "", []string{`get_weather {"city":"Paris"}`}},
		{"two JSON calls", all, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>",
			"", "", []string{`a {}`, `b {"x":1}`}},
		{"XML call typed by schema", open, "I'll look it up.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=metric>\nTrue\n</parameter>\n<parameter=ratio>\n0.5\n</parameter>\n<parameter=tags>\n[\"a\", \"b\"]\n</parameter>\n</function>\n</tool_call>",
			"", "I'll look it up.", []string{`get_weather {"city":"New York","days":3,"metric":true,"ratio":0.5,"tags":["a","b"]}`}},
		{"tool call closes open reasoning", open, "I should call the tool.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>",
			"", "I should call the tool.", []string{`get_weather {"city":"Rome"}`}},
		{"unterminated call at the end", all, "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>",
			"", "", []string{`get_weather {"city":"Oslo"}`}},
		{"angle brackets that are not tags", all, "a < b and <b>bold</b> <thin", "a < b and <b>bold</b> <thin", "", nil},
		{"no tool parsing without tools", ParserOptions{Reasoning: true}, "<tool_call>{}</tool_call>", "<tool_call>{}</tool_call>", "", nil},
	}
	for _, c := range cases {
		for _, size := range []int{1, 2, 3, 7, 1000} {
			content, reasoning, calls := feed(c.text, size, c.opts)
			if content != c.content || reasoning != c.reasoning {
				t.Errorf("%s (pieces of %d): content %q reasoning %q, want %q and %q", c.name, size, content, reasoning, c.content, c.reasoning)
			}
			if len(calls) != len(c.calls) {
				t.Errorf("%s (pieces of %d): %d calls, want %d", c.name, size, len(calls), len(c.calls))
				continue
			}
			for i, call := range calls {
				if call.Err != nil || call.Name+" "+call.Arguments != c.calls[i] || call.Index != i {
					t.Errorf("%s (pieces of %d): call %d = %d %q %q %v, want %q", c.name, size, i, call.Index, call.Name, call.Arguments, call.Err, c.calls[i])
				}
			}
		}
	}
}

func TestMalformedToolCallsKeepRawText(t *testing.T) {
	for _, body := range []string{
		`{"name": "f", "arguments": {"x": }`,
		`{"arguments": {}}`,
		`<function=f><parameter=x`,
		`call f(x=1)`,
		`{"name": "f", "arguments": [1, 2]}`,
	} {
		_, _, calls := ParseAll("<tool_call>\n"+body+"\n</tool_call>", ParserOptions{ToolCalls: true})
		if len(calls) != 1 || !errors.Is(calls[0].Err, ErrToolCall) || !strings.Contains(calls[0].Raw, body) {
			t.Errorf("%q: %+v", body, calls)
		}
	}
}

func TestPromptOpensReasoning(t *testing.T) {
	if !PromptOpensReasoning("<|im_start|>assistant\n<think>\n") {
		t.Error("open think block not seen")
	}
	if PromptOpensReasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n") {
		t.Error("empty think block (enable_thinking false) read as open")
	}
}

// TestToolCallArgumentsStream: a call's name comes first, then argument
// deltas that add up to a JSON object equal to the final arguments.
func TestToolCallArgumentsStream(t *testing.T) {
	for _, text := range []string{
		"<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
		"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"tags\": [\"a\", \"{\"]}}\n</tool_call>",
	} {
		p := NewParser(ParserOptions{ToolCalls: true, Tools: weatherTool})
		var events []Event
		for i := range len(text) {
			events = append(events, p.Push(text[i:i+1])...)
		}
		events = append(events, p.Close()...)
		var starts, deltas int
		var args strings.Builder
		var done *ToolCall
		for _, e := range events {
			switch e.Kind {
			case ToolCallStart:
				starts++
				if e.Call.Name != "get_weather" || deltas > 0 {
					t.Fatalf("start %+v after %d deltas", e.Call, deltas)
				}
			case ToolCallArgs:
				deltas++
				args.WriteString(e.Text)
			case ToolCallDone:
				done = e.Call
			}
		}
		if starts != 1 || deltas < 2 || done == nil || done.Err != nil {
			t.Fatalf("%d starts, %d deltas, done %+v", starts, deltas, done)
		}
		var a, b any
		if json.Unmarshal([]byte(args.String()), &a) != nil || json.Unmarshal([]byte(done.Arguments), &b) != nil {
			t.Fatalf("streamed %q, final %q", args.String(), done.Arguments)
		}
		if ja, _ := json.Marshal(a); string(ja) != mustCompact(done.Arguments) {
			t.Fatalf("streamed %q, final %q", args.String(), done.Arguments)
		}
	}
}

func mustCompact(s string) string {
	var v any
	json.Unmarshal([]byte(s), &v)
	b, _ := json.Marshal(v)
	return string(b)
}
