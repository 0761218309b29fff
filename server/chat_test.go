package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/govllm/govllm/engine"
	"github.com/govllm/govllm/grammar"
	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/server"
	"github.com/govllm/govllm/tokenizer"
	"github.com/govllm/govllm/tokenizer/chat"
	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/openai/openai-go/packages/param"
)

// scripted is an engine that answers every request with fixed text pieces,
// to test what the server makes of model output the random fixtures cannot
// produce (tool calls, reasoning).
type scripted struct{ pieces []string }

func (s *scripted) Submit(ctx context.Context, r engine.Request) (<-chan engine.Output, error) {
	ch := make(chan engine.Output, len(s.pieces)+1)
	for _, p := range s.pieces {
		ch <- engine.Output{TokenIDs: []int32{1}, Text: p}
	}
	ch <- engine.Output{Finished: true, FinishReason: engine.FinishStop,
		Usage: engine.Usage{PromptTokens: len(r.Prompt), CompletionTokens: len(s.pieces)}}
	close(ch)
	return ch, nil
}
func (s *scripted) Stats() engine.Stats   { return engine.Stats{} }
func (s *scripted) Config() engine.Config { return engine.Config{MaxModelLen: 4096} }
func (s *scripted) Accepting() bool       { return true }
func (s *scripted) VocabSize() int        { return 151936 }
func (s *scripted) Capacity() int         { return 4096 }
func (s *scripted) GrammarVocab() *grammar.Vocab {
	return grammar.NewVocab(0, func(int32) []byte { return nil })
}

func scriptedClient(t *testing.T, pieces []string) openai.Client {
	dir := filepath.Join(oracle.Dir(t), "..", "tokenizers", "qwen3")
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.LoadTemplate(dir, filepath.Join(oracle.Dir(t), "..", "templates", "qwen3.5.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(server.New(&scripted{pieces: pieces}, tok, server.Options{ModelName: "m", Template: tmpl}).Handler())
	t.Cleanup(ts.Close)
	return openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey("none"), option.WithMaxRetries(0))
}

var weather = openai.ChatCompletionToolParam{Function: openai.FunctionDefinitionParam{
	Name: "get_weather",
	Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{
		"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}},
}}

// Qwen3.5's generation prompt opens <think>, so output starts as reasoning;
// the tool call arrives split across pieces.
var toolOutput = []string{"The user wants", " weather.\n</th", "ink>\n\nLet me check.\n<tool_", "call>\n<function=get_weather>\n<parameter=city>\nPa",
	"ris\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"}

func TestChatToolCallsAndReasoning(t *testing.T) {
	cli := scriptedClient(t, toolOutput)
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris for 3 days?")},
		Tools: []openai.ChatCompletionToolParam{weather}}
	resp, err := cli.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	c := resp.Choices[0]
	if c.FinishReason != "tool_calls" || c.Message.Content != "Let me check." || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("choice %+v", c)
	}
	call := c.Message.ToolCalls[0]
	if call.Function.Name != "get_weather" || call.Function.Arguments != `{"city":"Paris","days":3}` || !strings.HasPrefix(call.ID, "call_") {
		t.Fatalf("call %+v", call)
	}
	if rc := c.Message.JSON.ExtraFields["reasoning_content"].Raw(); rc != `"The user wants weather."` {
		t.Fatalf("reasoning_content %s", rc)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)}
	stream := cli.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	var reasoning strings.Builder
	argDeltas := 0
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		if len(ch.Choices) > 0 {
			var d struct {
				ReasoningContent string `json:"reasoning_content"`
			}
			json.Unmarshal([]byte(ch.Choices[0].Delta.RawJSON()), &d)
			reasoning.WriteString(d.ReasoningContent)
			for _, tc := range ch.Choices[0].Delta.ToolCalls {
				if tc.Index != 0 || (argDeltas == 0 && (tc.ID == "" || tc.Function.Name != "get_weather")) {
					t.Errorf("tool call delta %+v (the first must carry id and name)", tc)
				}
				argDeltas++
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	sc := acc.Choices[0]
	if sc.Message.Content != "Let me check." || len(sc.Message.ToolCalls) != 1 || sc.Message.ToolCalls[0].Function.Arguments != call.Function.Arguments || sc.FinishReason != "tool_calls" {
		t.Fatalf("streamed %+v", sc)
	}
	if argDeltas < 3 { // name, then the arguments in more than one piece
		t.Errorf("%d tool call deltas", argDeltas)
	}
	if reasoning.String() != "The user wants weather." {
		t.Fatalf("streamed reasoning %q", reasoning.String())
	}
}

func TestChatToolChoiceNoneAndMalformedCalls(t *testing.T) {
	cli := scriptedClient(t, []string{"</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>"})
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}
	resp, err := cli.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "m", Messages: msgs, Tools: []openai.ChatCompletionToolParam{weather}})
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Choices[0]; len(c.Message.ToolCalls) != 0 || !strings.Contains(c.Message.Content, `"city": }`) || c.FinishReason != "stop" {
		t.Fatalf("malformed call: %+v", c)
	}
	resp, err = cli.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "m", Messages: msgs, Tools: []openai.ChatCompletionToolParam{weather},
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}})
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Choices[0]; len(c.Message.ToolCalls) != 0 || !strings.HasPrefix(c.Message.Content, "<tool_call>") {
		t.Fatalf("tool_choice none: %+v", c)
	}
}
