package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/openai/openai-go/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/govllm/govllm/engine"
	"github.com/govllm/govllm/internal/jsonref"
	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/server"
	"github.com/govllm/govllm/tokenizer/chat"
)

func referenceSchema(t *testing.T, schema string) *jsonschema.Schema {
	return jsonref.Compile(t, schema)
}

func validJSON(ref *jsonschema.Schema, text string) error { return jsonref.Validate(ref, text) }

// e2eSchemas are bounded (strings, arrays and nesting have limits) so that
// a random model ends each within max_tokens.
var e2eSchemas = []string{
	`{"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}, "age": {"type": "integer"}}, "required": ["name", "age"]}`,
	`{"type": "object", "properties": {"ok": {"type": "boolean"}, "note": {"type": ["string", "null"], "maxLength": 6}}, "required": ["ok"]}`,
	`{"enum": ["yes", "no", "maybe"]}`,
	`{"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 4}`,
	`{"type": "object", "properties": {"when": {"type": "string", "format": "date"}, "at": {"type": "string", "format": "time"}}, "required": ["when", "at"]}`,
	`{"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}, "ip": {"type": "string", "format": "ipv4"}}, "required": ["id", "ip"]}`,
	`{"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2,4}$"}}, "required": ["code"]}`,
	`{"type": "object", "properties": {"point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}], "items": false, "minItems": 2}}, "required": ["point"]}`,
	`{"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"err": {"type": "string", "maxLength": 8}}, "required": ["err"]}]}`,
	`{"type": "object", "properties": {"user": {"type": "object", "properties": {"first": {"type": "string", "maxLength": 6}, "last": {"type": "string", "maxLength": 6}}, "required": ["first", "last"]}, "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}}, "required": ["user", "tags"]}`,
	`{"type": "object", "properties": {"kind": {"const": "event"}, "count": {"type": "number"}}, "required": ["kind", "count"]}`,
	`{"type": "string", "minLength": 2, "maxLength": 12}`,
	`{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}}}`,
	`{"type": "object", "properties": {"x": {"type": "null"}, "y": {"type": "string", "maxLength": 4}}, "required": ["x"], "additionalProperties": false}`,
	`{"$defs": {"leaf": {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]}}, "type": "object", "properties": {"left": {"$ref": "#/$defs/leaf"}, "right": {"$ref": "#/$defs/leaf"}}, "required": ["left", "right"]}`,
	`{"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 3}`,
	`{"type": "object", "properties": {"level": {"type": "string", "enum": ["low", "mid", "high"]}, "score": {"type": "integer"}}, "required": ["level", "score"], "additionalProperties": false}`,
	`{"type": "boolean"}`,
	`{"type": "object", "properties": {"ts": {"type": "string", "format": "date-time"}}, "required": ["ts"]}`,
	`{"type": "object", "properties": {"items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string", "maxLength": 5}, "qty": {"type": "integer"}}, "required": ["sku", "qty"]}, "maxItems": 2}}, "required": ["items"]}`,
}

func qwen35Template(t *testing.T, fx string) *chat.Template {
	t.Helper()
	tmpl, err := chat.LoadTemplate(filepath.Join(oracle.Dir(t), fx), filepath.Join(oracle.Dir(t), "..", "templates", "qwen3.5.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// TestStructuredOutputsValidate runs 200 schema × prompt cases through the
// API on the dense fixture (random weights, sampled at temperature 1: an
// adversarial sampler), half with thinking on (Qwen3.5's template opens
// <think>; a thinking budget ends it) and half off: every output parses
// and validates against its schema, and the reasoning stays free text.
func TestStructuredOutputsValidate(t *testing.T) {
	computeOnly(t)
	if len(e2eSchemas)*5*2 != 200 {
		t.Fatalf("%d cases", len(e2eSchemas)*10)
	}
	// The fixture's own template is Qwen3's; Qwen3.5's opens reasoning.
	f := start(t, engine.Config{MaxNumSeqs: 16}, server.Options{Template: qwen35Template(t, "qwen35-dense")})
	prompts := []string{"Give me the record.", "JSON please", "Describe a user.", "What now?", "Fill in the form for order 42."}
	type result struct {
		name      string
		err       error
		reasoning bool
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
		sem     = make(chan struct{}, 16)
	)
	for si, schema := range e2eSchemas {
		ref := referenceSchema(t, schema)
		var schemaValue map[string]any
		if err := json.Unmarshal([]byte(schema), &schemaValue); err != nil {
			t.Fatal(err)
		}
		for pi, prompt := range prompts {
			for _, think := range []bool{true, false} {
				name := fmt.Sprintf("schema %d, prompt %d, thinking %v", si, pi, think)
				seed := int64(si*100 + pi*10)
				opts := []option.RequestOption{option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": think})}
				if think {
					opts = append(opts, option.WithJSONSet("thinking_token_budget", 3+(si+pi)%20))
				}
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					resp, err := f.cli.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
						Model:       "qwen35-dense",
						Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
						Temperature: openai.Float(1),
						Seed:        openai.Int(seed),
						MaxTokens:   openai.Int(600),
						ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
							JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "out", Schema: schemaValue}}},
					}, opts...)
					r := result{name: name}
					switch {
					case err != nil:
						r.err = err
					case resp.Choices[0].FinishReason != "stop":
						r.err = fmt.Errorf("finish reason %q, content %q", resp.Choices[0].FinishReason, resp.Choices[0].Message.Content)
					default:
						msg := resp.Choices[0].Message
						if err := validJSON(ref, msg.Content); err != nil {
							r.err = fmt.Errorf("content %q: %v", msg.Content, err)
						}
						rc := msg.JSON.ExtraFields["reasoning_content"].Raw()
						r.reasoning = rc != "" && rc != "null" && rc != `""`
						if !think && r.reasoning {
							r.err = fmt.Errorf("reasoning %s with thinking off", rc)
						}
					}
					mu.Lock()
					results = append(results, r)
					mu.Unlock()
				}()
			}
		}
	}
	wg.Wait()
	reasoned := 0
	for _, r := range results {
		if r.err != nil {
			t.Errorf("%s: %v", r.name, r.err)
		}
		if r.reasoning {
			reasoned++
		}
	}
	// With a budget of at least 3 tokens, reasoning is empty only where the
	// model closed it at once.
	if reasoned < 90 {
		t.Errorf("only %d of 100 thinking cases have reasoning", reasoned)
	}
	t.Logf("%d cases valid, %d with reasoning", len(results), reasoned)
}

// post sends a JSON body and decodes the reply.
func post(t *testing.T, f *fixture, path string, body map[string]any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", f.url+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func firstChoice(t *testing.T, out map[string]any) map[string]any {
	t.Helper()
	choices, _ := out["choices"].([]any)
	if len(choices) == 0 {
		t.Fatalf("no choices in %v", out)
	}
	return choices[0].(map[string]any)
}

// TestStructuredOutputKinds covers the other ways to ask for a constraint
// (json_object, vLLM's guided_* and structured_outputs, llama.cpp's
// grammar, on chat and completions) and the errors.
func TestStructuredOutputKinds(t *testing.T) {
	computeOnly(t)
	f := start(t, engine.Config{MaxNumSeqs: 8}, server.Options{Template: qwen35Template(t, "qwen35-dense")})
	chatBody := func(extra map[string]any) map[string]any {
		b := map[string]any{"model": "qwen35-dense", "messages": []map[string]string{{"role": "user", "content": "hi"}},
			"temperature": 1, "seed": 3, "max_tokens": 300, "chat_template_kwargs": map[string]any{"enable_thinking": false}}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	regexOK := func(re string) func(string) error {
		return func(s string) error {
			if !regexp.MustCompile("^(?:" + re + ")$").MatchString(s) {
				return fmt.Errorf("%q does not match %s", s, re)
			}
			return nil
		}
	}
	for _, c := range []struct {
		name  string
		extra map[string]any
		check func(string) error
	}{
		{"guided_regex", map[string]any{"guided_regex": `[a-f]{3,6}-\d\d`}, regexOK(`[a-f]{3,6}-\d\d`)},
		{"structured_outputs.regex", map[string]any{"structured_outputs": map[string]any{"regex": `(yes|no)!`}}, regexOK(`(yes|no)!`)},
		{"guided_choice", map[string]any{"guided_choice": []string{"red", "green", "blue \"sky\""}}, regexOK(`red|green|blue "sky"`)},
		{"grammar", map[string]any{"grammar": `root ::= "(" [0-9]{1,3} ("," [0-9]{1,3})* ")"`}, regexOK(`\(\d{1,3}(,\d{1,3})*\)`)},
		{"guided_json string", map[string]any{"guided_json": `{"type": "integer"}`}, regexOK(`\s*-?(0|[1-9]\d*)\s*`)},
	} {
		for _, think := range []bool{false, true} {
			body := chatBody(c.extra)
			if think {
				body["chat_template_kwargs"], body["thinking_token_budget"] = map[string]any{"enable_thinking": true}, 4
			}
			status, out := post(t, f, "/v1/chat/completions", body)
			if status != 200 {
				t.Fatalf("%s: status %d: %v", c.name, status, out)
			}
			ch := firstChoice(t, out)
			msg := ch["message"].(map[string]any)
			content, _ := msg["content"].(string)
			if ch["finish_reason"] != "stop" {
				t.Errorf("%s: finish %v, content %q", c.name, ch["finish_reason"], content)
				continue
			}
			if err := c.check(content); err != nil {
				t.Errorf("%s (thinking %v): %v", c.name, think, err)
			}
			if rc, _ := msg["reasoning_content"].(string); think != (rc != "") {
				t.Errorf("%s (thinking %v): reasoning %q", c.name, think, rc)
			}
		}
	}
	// json_object has no bound on its size: those that end must be objects.
	ended := 0
	for seed := range 8 {
		body := chatBody(map[string]any{"response_format": map[string]any{"type": "json_object"}, "seed": seed, "max_tokens": 500})
		_, out := post(t, f, "/v1/chat/completions", body)
		ch := firstChoice(t, out)
		if ch["finish_reason"] != "stop" {
			continue
		}
		ended++
		content := ch["message"].(map[string]any)["content"].(string)
		var obj map[string]any
		if err := json.Unmarshal([]byte(content), &obj); err != nil {
			t.Errorf("json_object: %q: %v", content, err)
		}
	}
	t.Logf("json_object: %d of 8 ended within 500 tokens", ended)
	// Completions: the prompt as given, constrained from the first token.
	status, out := post(t, f, "/v1/completions", map[string]any{"model": "qwen35-dense", "prompt": "Answer:", "temperature": 1, "seed": 5,
		"max_tokens": 200, "response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "n",
			"schema": map[string]any{"type": "array", "items": map[string]any{"type": "boolean"}, "maxItems": 3}}}})
	if status != 200 {
		t.Fatalf("completions: %d %v", status, out)
	}
	if text := firstChoice(t, out)["text"].(string); validJSON(referenceSchema(t, `{"type": "array", "items": {"type": "boolean"}, "maxItems": 3}`), text) != nil {
		t.Errorf("completions: %q", text)
	}
	for _, c := range []struct {
		name  string
		extra map[string]any
		param string
		says  string
	}{
		{"unsupported keyword", map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "n",
			"schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": 0}}}}}},
			"response_format.json_schema.schema", `at /properties/n: keyword "minimum" is not supported`},
		{"two constraints", map[string]any{"guided_regex": "a", "grammar": `root ::= "a"`}, "grammar", "only one constraint"},
		{"bad regex", map[string]any{"guided_regex": "(a"}, "guided_regex", "missing closing )"},
		{"bad grammar", map[string]any{"guided_grammar": "root ::= x"}, "guided_grammar", "undefined rule"},
		{"no schema", map[string]any{"response_format": map[string]any{"type": "json_schema"}}, "response_format.json_schema.schema", "needs json_schema.schema"},
		{"negative budget", map[string]any{"thinking_token_budget": -1}, "thinking_token_budget", "must be ≥ 0"},
		{"required without tools", map[string]any{"tool_choice": "required"}, "tool_choice", "needs tools"},
	} {
		status, out := post(t, f, "/v1/chat/completions", chatBody(c.extra))
		e, _ := out["error"].(map[string]any)
		if status != 400 || e == nil || e["param"] != c.param || !strings.Contains(fmt.Sprint(e["message"]), c.says) {
			t.Errorf("%s: status %d, error %v; want 400 on %s saying %q", c.name, status, out, c.param, c.says)
		}
	}
}

// TestToolChoiceConstrainsCalls: with tool_choice required or a named
// function, the random model's output is a tool call whose arguments match
// the tool's schema, in Qwen3.5's XML format and in Qwen3's JSON one, with
// thinking on and off. (Parallel calls are off: a random model would chain
// calls up to max_tokens; the grammar test covers several.)
func TestToolChoiceConstrainsCalls(t *testing.T) {
	computeOnly(t)
	tools := []map[string]any{
		{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": map[string]any{"type": "object",
			"properties": map[string]any{"city": map[string]any{"type": "string", "maxLength": 10}, "days": map[string]any{"type": "integer"}},
			"required":   []string{"city", "days"}}}},
		{"type": "function", "function": map[string]any{"name": "lights", "parameters": map[string]any{"type": "object",
			"properties": map[string]any{"on": map[string]any{"type": "boolean"}, "rooms": map[string]any{"type": "array",
				"items": map[string]any{"enum": []string{"hall", "bed"}}, "maxItems": 2}}, "required": []string{"on"}}}},
	}
	refs := map[string]*jsonschema.Schema{}
	for _, tool := range tools {
		fn := tool["function"].(map[string]any)
		b, _ := json.Marshal(fn["parameters"])
		refs[fn["name"].(string)] = referenceSchema(t, string(b))
	}
	for _, tmpl := range []string{"qwen3.5 (XML calls)", "qwen3 (JSON calls)"} {
		opts := server.Options{}
		if strings.HasPrefix(tmpl, "qwen3.5") {
			opts.Template = qwen35Template(t, "qwen35-dense")
		}
		f := start(t, engine.Config{MaxNumSeqs: 8}, opts)
		for i, choice := range []any{"required", map[string]any{"type": "function", "function": map[string]any{"name": "lights"}}} {
			for _, think := range []bool{false, true} {
				for seed := range 3 {
					body := map[string]any{"model": "qwen35-dense", "messages": []map[string]string{{"role": "user", "content": "do it"}},
						"tools": tools, "tool_choice": choice, "parallel_tool_calls": false, "temperature": 1, "seed": seed, "max_tokens": 400,
						"chat_template_kwargs": map[string]any{"enable_thinking": think}}
					if think {
						body["thinking_token_budget"] = 5
					}
					name := fmt.Sprintf("%s, choice %d, thinking %v, seed %d", tmpl, i, think, seed)
					status, out := post(t, f, "/v1/chat/completions", body)
					if status != 200 {
						t.Fatalf("%s: %d %v", name, status, out)
					}
					ch := firstChoice(t, out)
					msg := ch["message"].(map[string]any)
					calls, _ := msg["tool_calls"].([]any)
					if ch["finish_reason"] != "tool_calls" || len(calls) == 0 {
						t.Errorf("%s: finish %v, message %v", name, ch["finish_reason"], msg)
						continue
					}
					for _, c := range calls {
						fn := c.(map[string]any)["function"].(map[string]any)
						ref := refs[fmt.Sprint(fn["name"])]
						if ref == nil || i == 1 && fn["name"] != "lights" {
							t.Errorf("%s: call to %v", name, fn["name"])
							continue
						}
						if err := validJSON(ref, fmt.Sprint(fn["arguments"])); err != nil {
							t.Errorf("%s: arguments %v: %v", name, fn["arguments"], err)
						}
					}
				}
			}
		}
	}
}

// TestStructuredStreamingMatches: a streamed constrained completion with
// thinking on is the same text as the whole one (same seed), reasoning in
// reasoning deltas and the schema's JSON in content deltas.
func TestStructuredStreamingMatches(t *testing.T) {
	f := start(t, engine.Config{MaxNumSeqs: 4}, server.Options{Template: qwen35Template(t, "qwen35-dense")})
	schema := e2eSchemas[9]
	var v map[string]any
	json.Unmarshal([]byte(schema), &v)
	params := openai.ChatCompletionNewParams{Model: "qwen35-dense", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a user")},
		Temperature: openai.Float(1), Seed: openai.Int(11), MaxTokens: openai.Int(500),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "u", Schema: v}}}}
	opt := option.WithJSONSet("thinking_token_budget", 6)
	full, err := f.cli.Chat.Completions.New(context.Background(), params, opt)
	if err != nil {
		t.Fatal(err)
	}
	stream := f.cli.Chat.Completions.NewStreaming(context.Background(), params, opt)
	var content, reasoning strings.Builder
	for stream.Next() {
		if ch := stream.Current(); len(ch.Choices) > 0 {
			content.WriteString(ch.Choices[0].Delta.Content)
			var rc string
			json.Unmarshal([]byte(ch.Choices[0].Delta.JSON.ExtraFields["reasoning_content"].Raw()), &rc)
			reasoning.WriteString(rc)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	var fullReasoning string
	json.Unmarshal([]byte(full.Choices[0].Message.JSON.ExtraFields["reasoning_content"].Raw()), &fullReasoning)
	if content.String() != full.Choices[0].Message.Content || reasoning.String() != fullReasoning || fullReasoning == "" {
		t.Fatalf("streamed %q / %q, whole %q / %q", reasoning.String(), content.String(), fullReasoning, full.Choices[0].Message.Content)
	}
	if err := validJSON(referenceSchema(t, schema), content.String()); err != nil {
		t.Fatalf("%q: %v", content.String(), err)
	}
}

// computeOnly skips a test in the race pass (-short, README.md): its work
// is computation, which -race slows tenfold, not concurrency; the pass
// without -race runs it.
func computeOnly(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("computation, not concurrency: runs in the pass without -race")
	}
}
