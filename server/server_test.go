package server_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govllm/govllm/engine"
	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/model/qwen35"
	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/cpu"
	"github.com/govllm/govllm/server"
	"github.com/govllm/govllm/tokenizer"
	"github.com/govllm/govllm/tokenizer/chat"
	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/openai/openai-go/packages/param"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	os.Exit(m.Run())
}

const apiKey = "test-key"

type fixture struct {
	url string
	eng *engine.Engine
	tok *tokenizer.Tokenizer
	fx  *oracle.Fixture
	cli openai.Client
}

func start(t *testing.T, cfg engine.Config, opts server.Options) *fixture {
	t.Helper()
	fx := oracle.Load(t, "qwen35-dense")
	reg := rt.NewRegistry()
	if err := cpu.Register(reg); err != nil {
		t.Fatal(err)
	}
	m, err := qwen35.Load(fx.Dir, rt.NewBackend(reg, rt.CPU), qwen35.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(fx.Dir)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.LoadTemplate(fx.Dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.KVCacheBytes == 0 {
		cfg.KVCacheBytes = 32 << 20
	}
	eng, err := engine.New(m, tok, cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts.ModelName, opts.APIKey = "qwen35-dense", apiKey
	if opts.Template == nil {
		opts.Template = tmpl
	}
	ts := httptest.NewServer(server.New(eng, tok, opts).Handler())
	t.Cleanup(func() { ts.Close(); eng.Close(); m.Close() })
	cli := openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey(apiKey), option.WithMaxRetries(0))
	return &fixture{url: ts.URL, eng: eng, tok: tok, fx: fx, cli: cli}
}

// text decodes ids as the server streams them: ids past the tokenizer's
// vocabulary (the model's padding) have no text.
func (f *fixture) text(ids []int32) string {
	var known []int32
	for _, id := range ids {
		if f.tok.Known(id) {
			known = append(known, id)
		}
	}
	s, err := f.tok.Decode(known, true)
	if err != nil {
		panic(err)
	}
	return s
}

func tokens64(ids []int32) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return out
}

// TestCompletionsMatchTransformersGreedy: token-id prompt, greedy, ignore_eos:
// the text is that of transformers' greedy ids; logprobs match its logits.
func TestCompletionsMatchTransformersGreedy(t *testing.T) {
	f := start(t, engine.Config{}, server.Options{})
	g := f.fx.Greedy
	resp, err := f.cli.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:       "qwen35-dense",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: tokens64(g.Prompt)},
		MaxTokens:   openai.Int(int64(len(g.Output))),
		Temperature: openai.Float(0),
		Logprobs:    openai.Int(2),
	}, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	want := f.text(g.Output)
	c := resp.Choices[0]
	if c.Text != want || c.FinishReason != "length" {
		t.Fatalf("text %q (%s), want %q", c.Text, c.FinishReason, want)
	}
	if resp.Usage.PromptTokens != int64(len(g.Prompt)) || resp.Usage.CompletionTokens != int64(len(g.Output)) {
		t.Fatalf("usage %+v", resp.Usage)
	}
	ref := oracle.ReadF32(t, f.fx.Cases[len(f.fx.Cases)-1].Logits)
	v := 512
	if len(c.Logprobs.TokenLogprobs) != len(g.Output) {
		t.Fatalf("%d logprobs", len(c.Logprobs.TokenLogprobs))
	}
	for i, lp := range c.Logprobs.TokenLogprobs {
		row := ref[(len(g.Prompt)-1+i)*v : (len(g.Prompt)+i)*v]
		mx, sum := math.Inf(-1), 0.0
		for _, x := range row {
			mx = math.Max(mx, float64(x))
		}
		for _, x := range row {
			sum += math.Exp(float64(x) - mx)
		}
		if want := float64(row[g.Output[i]]) - mx - math.Log(sum); math.Abs(lp-want) > 1e-3 {
			t.Errorf("logprob %d: %v, want %v", i, lp, want)
		}
	}
}

func TestChatStreamingWithUsage(t *testing.T) {
	f := start(t, engine.Config{}, server.Options{})
	params := openai.ChatCompletionNewParams{
		Model:         "qwen35-dense",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("def add(a, b):")},
		MaxTokens:     openai.Int(10),
		Temperature:   openai.Float(0),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
	}
	full, err := f.cli.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	stream := f.cli.Chat.Completions.NewStreaming(context.Background(), params)
	var text strings.Builder
	var usageChunks int
	var finish string
	for stream.Next() {
		ch := stream.Current()
		if len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
			if ch.Choices[0].FinishReason != "" {
				finish = ch.Choices[0].FinishReason
			}
		}
		if ch.Usage.TotalTokens > 0 {
			usageChunks++
			if len(ch.Choices) != 0 || ch.Usage.CompletionTokens != full.Usage.CompletionTokens {
				t.Errorf("usage chunk %+v", ch)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// Non-streamed content is the parsed message; streamed deltas must add up to it.
	if text.String() != full.Choices[0].Message.Content || finish != string(full.Choices[0].FinishReason) || usageChunks != 1 {
		t.Fatalf("stream %q (%s, %d usage chunks), full %q (%s)", text.String(), finish, usageChunks, full.Choices[0].Message.Content, full.Choices[0].FinishReason)
	}
}

func TestToolsRoundTrip(t *testing.T) {
	f := start(t, engine.Config{}, server.Options{})
	tool := openai.ChatCompletionToolParam{Function: openai.FunctionDefinitionParam{
		Name:        "get_weather",
		Description: openai.String("Get the weather"),
		Parameters:  openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	}}
	assistant := openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallParam{{
		ID: "call_1", Function: openai.ChatCompletionMessageToolCallFunctionParam{Name: "get_weather", Arguments: `{"city": "Paris"}`},
	}}}
	resp, err := f.cli.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "qwen35-dense",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("Weather in Paris?"),
			{OfAssistant: &assistant},
			openai.ToolMessage(`{"temp": 21}`, "call_1"),
		},
		Tools:       []openai.ChatCompletionToolParam{tool},
		ToolChoice:  openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")},
		MaxTokens:   openai.Int(6),
		Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The rendered prompt holds the tool schema, the call and the response.
	if resp.Usage.PromptTokens < 100 || resp.Choices[0].Message.Role != "assistant" {
		t.Fatalf("response %+v", resp)
	}
	_, err = f.cli.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "qwen35-dense", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")},
		Tools: []openai.ChatCompletionToolParam{tool},
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfChatCompletionNamedToolChoice: &openai.ChatCompletionNamedToolChoiceParam{
			Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "no_such_tool"}}},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "tool_choice" {
		t.Fatalf("unknown named tool: %v", err)
	}
}

func TestAuthModelAndParameterErrors(t *testing.T) {
	f := start(t, engine.Config{}, server.Options{MaxBodyBytes: 4096})
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
	bad := openai.NewClient(option.WithBaseURL(f.url+"/v1/"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
	_, err := bad.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "qwen35-dense", Messages: msgs})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("wrong key: %v", err)
	}
	_, err = f.cli.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-9", Messages: msgs})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Param != "model" {
		t.Fatalf("unknown model: %v", err)
	}
	_, err = f.cli.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "qwen35-dense", Messages: msgs, Temperature: openai.Float(7)})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "temperature" {
		t.Fatalf("temperature 7: %v", err)
	}
	for _, c := range []struct {
		body   string
		status int
		param  string
	}{
		{`{"prompt": "a", "temperature": "hot"}`, 400, "temperature"},
		{`{"prompt": "a", "max_tokens": 0}`, 400, "max_tokens"},
		{`{"prompt": {"x": 1}}`, 400, "prompt"},
		{`{"prompt": "a"`, 400, ""},
		{`{"prompt": "` + strings.Repeat("a", 5000) + `"}`, 413, ""},
	} {
		req, _ := http.NewRequest("POST", f.url+"/v1/completions", strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+apiKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(raw), `"error"`) || (c.param != "" && !strings.Contains(string(raw), `"param":"`+c.param+`"`)) {
			t.Errorf("%.40s: %d %s", c.body, resp.StatusCode, raw)
		}
	}
}

// TestSSEFraming reads a stream byte by byte: every event is one
// "data: {json}" line and a blank line, ending with "data: [DONE]".
func TestSSEFraming(t *testing.T) {
	f := start(t, engine.Config{}, server.Options{})
	body := `{"prompt": [1, 2, 3], "max_tokens": 5, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}, "stop": ["zz"]}`
	req, _ := http.NewRequest("POST", f.url+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	raw, _ := io.ReadAll(resp.Body)
	if !strings.HasSuffix(string(raw), "data: [DONE]\n\n") {
		t.Fatalf("stream does not end with [DONE]: %q", raw)
	}
	events := strings.Split(strings.TrimSuffix(string(raw), "\n\n"), "\n\n")
	for i, ev := range events {
		if !strings.HasPrefix(ev, "data: ") || strings.Contains(ev, "\n") {
			t.Fatalf("event %d is not one data line: %q", i, ev)
		}
	}
	if n := strings.Count(string(raw), `"usage"`); n != 1 || !strings.Contains(events[len(events)-2], `"usage"`) {
		t.Fatalf("usage appears %d times, not only in the last event", n)
	}
}

func TestMetricsMove(t *testing.T) {
	f := start(t, engine.Config{}, server.Options{})
	read := func() map[string]float64 {
		resp, err := http.Get(f.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for name, fam := range fams {
			for _, m := range fam.Metric {
				ok := false
				for _, l := range m.Label {
					ok = ok || (l.GetName() == "model_name" && l.GetValue() == "qwen35-dense")
				}
				if !ok {
					continue
				}
				switch {
				case m.Counter != nil:
					out[name] += m.Counter.GetValue()
				case m.Gauge != nil:
					out[name] = m.Gauge.GetValue()
				case m.Histogram != nil:
					out[name] = float64(m.Histogram.GetSampleCount())
				}
			}
		}
		return out
	}
	before := read()
	for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
		"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
		"vllm:e2e_request_latency_seconds", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"} {
		if _, ok := before[name]; !ok {
			t.Errorf("metric %s missing", name)
		}
	}
	_, err := f.cli.Completions.New(context.Background(), openai.CompletionNewParams{Model: "qwen35-dense",
		Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: []int64{5, 6, 7, 8}}, MaxTokens: openai.Int(4)}, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	after := read()
	if after["vllm:prompt_tokens_total"]-before["vllm:prompt_tokens_total"] != 4 || after["vllm:generation_tokens_total"]-before["vllm:generation_tokens_total"] != 4 ||
		after["vllm:request_success_total"] != before["vllm:request_success_total"]+1 || after["vllm:e2e_request_latency_seconds"] != before["vllm:e2e_request_latency_seconds"]+1 ||
		after["vllm:inter_token_latency_seconds"] < before["vllm:inter_token_latency_seconds"]+3 || after["vllm:prefix_cache_queries_total"] < 4 {
		t.Fatalf("before %v\nafter %v", before, after)
	}
}

func waitIdle(t *testing.T, e *engine.Engine) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for st := e.Stats(); st.UsedBlocks != 0 || st.Running != 0 || st.Waiting != 0; st = e.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("engine still busy: %+v", st)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestDisconnectMidStreamFreesBlocks(t *testing.T) {
	f := start(t, engine.Config{}, server.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"prompt": [1, 2, 3], "max_tokens": 3000, "ignore_eos": true, "stream": true}`
	req, _ := http.NewRequestWithContext(ctx, "POST", f.url+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q, %v", line, err)
	}
	if f.eng.Stats().GeneratedTokens == 0 {
		t.Fatal("nothing generated yet")
	}
	cancel()
	resp.Body.Close()
	waitIdle(t, f.eng)
	if got := f.eng.Stats().GeneratedTokens; got >= 3000 {
		t.Fatalf("the request ran to the end (%d tokens) after the client left", got)
	}
}

func TestQueueFullIs503(t *testing.T) {
	f := start(t, engine.Config{MaxNumSeqs: 1, MaxWaiting: 1}, server.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := `{"prompt": [1, 2, 3], "max_tokens": 3000, "ignore_eos": true, "stream": true}`
	var wg sync.WaitGroup
	// One runs, one waits. Each is sent only once the engine has settled the
	// one before, so the second cannot find the first still waiting.
	settled := []func(engine.Stats) bool{
		func(st engine.Stats) bool { return st.Running == 1 },
		func(st engine.Stats) bool { return st.Running == 1 && st.Waiting == 1 },
	}
	for i := range 2 {
		req, _ := http.NewRequestWithContext(ctx, "POST", f.url+"/v1/completions", strings.NewReader(long))
		req.Header.Set("Authorization", "Bearer "+apiKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i+1, resp.StatusCode)
		}
		wg.Add(1)
		go func() { defer wg.Done(); io.Copy(io.Discard, resp.Body); resp.Body.Close() }()
		deadline := time.Now().Add(5 * time.Second)
		for st := f.eng.Stats(); !settled[i](st); st = f.eng.Stats() {
			if time.Now().After(deadline) {
				t.Fatalf("after request %d: %+v", i+1, st)
			}
			time.Sleep(time.Millisecond)
		}
	}
	_, err := f.cli.Completions.New(context.Background(), openai.CompletionNewParams{Model: "qwen35-dense",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")}, MaxTokens: openai.Int(2)})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 {
		t.Fatalf("third request: %v", err)
	}
	if ra := apiErr.Response.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q", ra)
	}
	cancel()
	wg.Wait()
	waitIdle(t, f.eng)
}

func TestConcurrentClients(t *testing.T) {
	f := start(t, engine.Config{MaxNumBatchedTokens: 16}, server.Options{})
	full, p := f.fx.Greedy.Full, len(f.fx.Greedy.Prompt)
	var wg sync.WaitGroup
	for j := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := f.cli.Completions.New(context.Background(), openai.CompletionNewParams{Model: "qwen35-dense",
				Prompt:    openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: tokens64(full[:p+j])},
				MaxTokens: openai.Int(int64(len(full) - p - j)), Temperature: openai.Float(0)}, option.WithJSONSet("ignore_eos", true))
			if err != nil {
				t.Error(err)
				return
			}
			if want := f.text(full[p+j:]); resp.Choices[0].Text != want {
				t.Errorf("client %d: %q, want %q", j, resp.Choices[0].Text, want)
			}
		}()
	}
	wg.Wait()
}

func TestTokenizeHealthVersionModels(t *testing.T) {
	f := start(t, engine.Config{}, server.Options{})
	post := func(path, body string) string {
		req, _ := http.NewRequest("POST", f.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+apiKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return string(raw)
	}
	want := f.tok.Encode("Hello world")
	if got := post("/tokenize", `{"prompt": "Hello world"}`); !strings.Contains(got, `"count":`+itoa(len(want))) {
		t.Errorf("tokenize: %s", got)
	}
	if got := post("/detokenize", `{"tokens": [39, 468]}`); !strings.Contains(got, `"prompt":`) {
		t.Errorf("detokenize: %s", got)
	}
	for path, code := range map[string]int{"/health": 200, "/version": 200} {
		resp, err := http.Get(f.url + path)
		if err != nil || resp.StatusCode != code {
			t.Errorf("%s: %v %v", path, err, resp)
		}
	}
	models, err := f.cli.Models.List(context.Background())
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != "qwen35-dense" {
		t.Fatalf("models: %v %+v", err, models)
	}
	f.eng.Close()
	if resp, _ := http.Get(f.url + "/health"); resp.StatusCode != 503 {
		t.Errorf("health after the engine closed: %d", resp.StatusCode)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestRequestTimeoutIs504: a request that runs past --request-timeout is
// aborted (its sequence freed) and answered 504, or an error event when
// streaming.
func TestRequestTimeoutIs504(t *testing.T) {
	f := start(t, engine.Config{MaxNumSeqs: 2}, server.Options{RequestTimeout: 100 * time.Millisecond})
	long := `{"prompt": [1, 2, 3], "max_tokens": 4000, "ignore_eos": true}`
	req, _ := http.NewRequest("POST", f.url+"/v1/completions", strings.NewReader(long))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 504 || !strings.Contains(string(body), "request timeout of 100ms") {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("answered after %v", d)
	}
	req, _ = http.NewRequest("POST", f.url+"/v1/completions", strings.NewReader(strings.Replace(long, "}", `, "stream": true}`, 1)))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"message":"the request ran past`) || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Fatalf("stream: %s", body[max(0, len(body)-300):])
	}
	waitIdle(t, f.eng)
}

// TestLogsHoldNoRequestData: at info level the server logs each request's
// method, path, status and duration, and nothing of what was asked or
// answered.
func TestLogsHoldNoRequestData(t *testing.T) {
	var logs syncBuffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	defer slog.SetDefault(old)
	f := start(t, engine.Config{}, server.Options{})
	const secret = "TOPSECRET-PROMPT-42"
	_, err := f.cli.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "qwen35-dense",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(secret)}, MaxTokens: openai.Int(3)})
	if err != nil {
		t.Fatal(err)
	}
	post := func(body string) {
		req, _ := http.NewRequest("POST", f.url+"/v1/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+apiKey)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	post(`{"prompt": "` + secret + `", "max_tokens": 2}`)
	post(`{"prompt": "` + secret + `", "temperature": "` + secret + `"}`) // an error that quotes the field
	out := logs.String()
	if strings.Contains(out, secret) || strings.Contains(out, apiKey) {
		t.Fatalf("request data in the logs:\n%s", out)
	}
	if !strings.Contains(out, "path=/v1/chat/completions status=200") || !strings.Contains(out, "status=400") {
		t.Fatalf("no access log lines:\n%s", out)
	}
}

// syncBuffer is a bytes.Buffer safe for the handler's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
