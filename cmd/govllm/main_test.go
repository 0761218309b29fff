package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/model/qwen35"
	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/backends"
	"github.com/govllm/govllm/tokenizer"
	"github.com/govllm/govllm/tokenizer/chat"
)

func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func idList(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}

func TestLogitsCommandWritesTransformersLogits(t *testing.T) {
	fx := oracle.Load(t, "qwen35moe-vlayout")
	c := fx.Cases[1]
	want := oracle.ReadF32(t, c.Logits)
	for _, mode := range []string{"full", "chunked:3", "decode"} {
		out := filepath.Join(t.TempDir(), "logits.f32")
		if _, err := execute(t, "logits", "--model", fx.Dir, "--ids", idList(c.IDs), "--mode", mode, "--out", out); err != nil {
			t.Fatal(err)
		}
		got := oracle.ReadF32(t, out)
		if d, _ := oracle.MaxDiff(got, want); len(got) != len(want) || d > 1e-3 {
			t.Errorf("%s: %d values, max diff %g", mode, len(got), d)
		}
	}
	text, err := execute(t, "logits", "--model", fx.Dir, "--ids", idList(c.IDs[:2]))
	if err != nil || strings.Count(text, "\n") != 2 || !strings.HasPrefix(text, "0: ") {
		t.Fatalf("top-5 listing: %q, %v", text, err)
	}
}

func TestLogitsCommandRejectsBadFlags(t *testing.T) {
	dir := filepath.Join(oracle.Dir(t), "qwen35-dense")
	for _, args := range [][]string{
		{"logits", "--model", dir, "--ids", "1,x"},
		{"logits", "--model", dir, "--ids", "1,2", "--mode", "chunked:0"},
		{"logits", "--model", dir, "--ids", "1,2", "--mode", "sideways"},
		{"logits", "--model", dir, "--ids", "1,99999"},
		{"logits", "--model", t.TempDir(), "--ids", "1"},
	} {
		if _, err := execute(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestOpsMatrixListsEveryOp(t *testing.T) {
	text, err := execute(t, "ops")
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range rt.Ops() {
		if !strings.Contains(text, op.String()+" ") {
			t.Errorf("matrix lacks %s", op)
		}
	}
}

func TestOpsForModel(t *testing.T) {
	dir := filepath.Join(oracle.Dir(t), "qwen35-dense-norope")
	text, err := execute(t, "ops", "--model", dir)
	if err != nil || !strings.Contains(text, "split_query_gate") || strings.Contains(text, "MISSING") {
		t.Fatalf("%v\n%s", err, text)
	}
	// With the split op removed, the listing marks it and the status is 1.
	reg, err := backends.Registry()
	if err != nil {
		t.Fatal(err)
	}
	_, paths, err := qwen35.Plan(dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err = printModelCoverage(&buf, reg.Without(rt.OpSplitQueryGate, rt.CPU), rt.CPU, paths)
	var missing *rt.MissingOpsError
	if exitCode(err) != 1 || !errors.As(err, &missing) || !missing.Has(rt.OpSplitQueryGate) {
		t.Fatalf("err = %v (exit %d)", err, exitCode(err))
	}
	marked := false
	for _, line := range strings.Split(buf.String(), "\n") {
		f := strings.Fields(line)
		marked = marked || (len(f) == 3 && f[1] == "split_query_gate" && f[2] == "MISSING")
	}
	if !marked {
		t.Fatalf("listing does not mark the op missing:\n%s", buf.String())
	}
}

func TestTokenizeDetokenizeTemplateCommands(t *testing.T) {
	computeOnly(t)
	dir := filepath.Join(oracle.Dir(t), "..", "tokenizers", "qwen3")
	run := func(stdin string, args ...string) string {
		t.Helper()
		cmd := newRootCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetIn(strings.NewReader(stdin))
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out.String()
	}
	if got := run("{\"text\": \"Hello world\"}\n\n{\"text\": \"\"}\n", "tokenize", "--model", dir); got != "{\"ids\":[9707,1879]}\n{\"ids\":[]}\n" {
		t.Errorf("tokenize: %q", got)
	}
	if got := run("", "tokenize", "--model", dir, "--text", "Hello world"); got != "{\"ids\":[9707,1879]}\n" {
		t.Errorf("tokenize --text: %q", got)
	}
	if got := run(`{"ids": [9707, 1879, 151645]}`, "detokenize", "--model", dir, "--skip-special-tokens"); got != "{\"text\":\"Hello world\"}\n" {
		t.Errorf("detokenize: %q", got)
	}
	var doc struct {
		Cases []struct {
			Messages            json.RawMessage `json:"messages"`
			Tools               json.RawMessage `json:"tools"`
			Kwargs              json.RawMessage `json:"kwargs"`
			AddGenerationPrompt bool            `json:"add_generation_prompt"`
			Rendered            string          `json:"rendered"`
		}
	}
	raw, _ := os.ReadFile(filepath.Join(oracle.Dir(t), "chat_qwen35.json"))
	json.Unmarshal(raw, &doc)
	c := doc.Cases[len(doc.Cases)-1]
	req, _ := json.Marshal(map[string]any{"messages": c.Messages, "tools": c.Tools, "add_generation_prompt": c.AddGenerationPrompt, "chat_template_kwargs": c.Kwargs})
	tmpl := filepath.Join(oracle.Dir(t), "..", "templates", "qwen3.5.jinja")
	if got := run(string(req), "template", "--model", dir, "--chat-template", tmpl); got != c.Rendered {
		t.Errorf("template:\n got %q\nwant %q", got, c.Rendered)
	}
	for _, args := range [][]string{
		{"tokenize", "--model", dir},
		{"detokenize", "--model", dir},
	} {
		cmd := newRootCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetIn(strings.NewReader("{\"text\": 1}\n"))
		cmd.SetArgs(args)
		if err := cmd.Execute(); err == nil {
			t.Errorf("%v accepted a bad line", args)
		}
	}
}

// TestRunChatsGreedily: `govllm run` renders the chat prompt into the ids
// transformers gives (tokenizer_oracle.json), then prints the text of the
// greedy continuation, which the model package holds to transformers.
func TestRunChatsGreedily(t *testing.T) {
	fx := oracle.Load(t, "qwen35-dense")
	var ref struct {
		PromptIDs []int32 `json:"prompt_ids"`
	}
	raw, _ := os.ReadFile(filepath.Join(fx.Dir, "tokenizer_oracle.json"))
	json.Unmarshal(raw, &ref)
	tok, err := tokenizer.Load(fx.Dir)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.LoadTemplate(fx.Dir, "")
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := tmpl.RenderString("def add(a, b):", nil)
	if err != nil || !slices.Equal(tok.Encode(prompt), ref.PromptIDs) {
		t.Fatalf("chat prompt %q does not encode to transformers' ids (%v)", prompt, err)
	}
	m, err := qwen35.Load(fx.Dir, rt.NewBackend(mustRegistry(t), rt.CPU), qwen35.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	stop := stopTokens(fx.Dir, m.Config, tok)
	st, input, ids := m.NewState(), ref.PromptIDs, []int32(nil)
	for range 12 {
		lg, err := m.Forward(st, input, qwen35.ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v := m.Config.VocabSize
		row := lg.F32()[(lg.Dim(0)-1)*v : lg.Dim(0)*v]
		next := int32(0)
		for i, x := range row {
			if x > row[next] {
				next = int32(i)
			}
		}
		if stop[next] {
			break
		}
		ids = append(ids, next)
		input = []int32{next}
	}
	want, _ := tok.Decode(ids, true)
	out, err := execute(t, "run", "--model", fx.Dir, "--max-tokens", "12", "def add(a, b):")
	if err != nil {
		t.Fatal(err)
	}
	if out != want+"\n" {
		t.Fatalf("run printed %q, want %q", out, want+"\n")
	}
	seeded := func() string {
		out, err := execute(t, "run", "--model", fx.Dir, "--max-tokens", "12", "--temperature", "0.8", "--seed", "7", "hi")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if a, b := seeded(), seeded(); a != b {
		t.Fatalf("seeded runs differ: %q vs %q", a, b)
	}
}

func mustRegistry(t *testing.T) *rt.Registry {
	reg, err := backends.Registry()
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestBenchCommand(t *testing.T) {
	dir := filepath.Join(oracle.Dir(t), "qwen35-dense")
	out, err := execute(t, "bench", "-m", dir, "-p", "8", "-n", "4", "-r", "2", "-t", "2", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rs []benchResult
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("bench -o json: %v\n%s", err, out)
	}
	if len(rs) != 2 || rs[0].NPrompt != 8 || rs[0].NGen != 0 || rs[1].NPrompt != 0 || rs[1].NGen != 4 {
		t.Fatalf("bench tests: %+v", rs)
	}
	for _, r := range rs {
		if r.AvgTs <= 0 || len(r.SamplesTs) != 2 || len(r.SamplesNs) != 2 || r.NThreads != 2 || r.ModelParams == 0 {
			t.Errorf("bench result: %+v", r)
		}
	}
	out, err = execute(t, "bench", "-m", dir, "-p", "8", "-n", "4", "-r", "1")
	if err != nil || !strings.Contains(out, "| pp8 ") || !strings.Contains(out, "| tg4 ") {
		t.Fatalf("bench table (%v):\n%s", err, out)
	}
	out, err = execute(t, "bench", "-m", dir, "-p", "8", "-n", "4", "-r", "1", "--concurrency", "3", "--greedy", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	rs = nil
	if err := json.Unmarshal([]byte(out), &rs); err != nil || len(rs) != 1 || rs[0].NSeqs != 3 || rs[0].NGen != 4 || rs[0].AvgTs <= 0 {
		t.Fatalf("bench --concurrency 3 (%v): %s", err, out)
	}
	for _, bad := range [][]string{{"-r", "0"}, {"-o", "xml"}, {"-p", "x"}, {"--concurrency", "0"}} {
		if _, err := execute(t, append([]string{"bench", "-m", dir}, bad...)...); err == nil {
			t.Errorf("bench %v accepted", bad)
		}
	}
}

// TestServeDrainsOnShutdown: a request running when the server is told to
// stop (SIGTERM cancels the context) still completes, then serve returns.
func TestServeDrainsOnShutdown(t *testing.T) {
	dir := filepath.Join(oracle.Dir(t), "qwen35-dense")
	ctx, stop := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	f := serveFlags{host: "127.0.0.1", port: 0, maxNumSeqs: 4, maxBatched: 256, kvMemory: "16MiB", prefixCaching: true, device: "cpu", apiKey: "k"}
	go func() { done <- serve(ctx, dir, f, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/completions", strings.NewReader(`{"prompt": [1, 2], "max_tokens": 400, "ignore_eos": true, "stream": true}`))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	stop() // as SIGTERM does
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(raw), `"finish_reason":"length"`) || !strings.HasSuffix(string(raw), "data: [DONE]\n\n") {
		t.Fatalf("the running request did not complete: %.300s", raw)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/health"); err == nil {
		t.Fatal("still listening after shutdown")
	}
}

func TestBenchServeAgainstAServer(t *testing.T) {
	dir := filepath.Join(oracle.Dir(t), "qwen35-dense")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- serve(ctx, dir, serveFlags{host: "127.0.0.1", maxNumSeqs: 8, maxBatched: 256, kvMemory: "16MiB", prefixCaching: true, device: "cpu"}, ready)
	}()
	addr := <-ready
	out, err := execute(t, "bench", "serve", "--url", "http://"+addr, "--num-prompts", "6", "--concurrency", "3", "--input-len", "10", "--output-len", "8")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Successful requests:            6", "Total generated tokens:         48", "TTFT (ms)", "TPOT (ms)", "ITL  (ms)"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench serve output lacks %q:\n%s", want, out)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestInspectAndChat(t *testing.T) {
	dir := filepath.Join(oracle.Dir(t), "qwen35moe-vlayout")
	out, err := execute(t, "inspect", dir)
	if err != nil || !strings.Contains(out, "layers        4: LLLF") || !strings.Contains(out, "mtp.fc.weight") || !strings.Contains(out, "experts       4, top 2") {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	if _, err := execute(t, "inspect", filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	cmd := newRootCmd()
	var buf bytes.Buffer
	cmd.SetOut(&buf)
	cmd.SetIn(strings.NewReader("hello\nhow are you?\n/reset\nagain\n/exit\nignored\n"))
	cmd.SetArgs([]string{"chat", dir, "--max-tokens", "4", "--temperature", "0"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "\n"); n != 3 {
		t.Fatalf("chat printed %d replies: %q", n, buf.String())
	}
}

// TestGGUFWherever: the commands take a .gguf file where they take a
// folder; the f32 file written by llama.cpp's converter chats like the
// safetensors checkpoint it came from.
func TestGGUFWherever(t *testing.T) {
	fx := oracle.Load(t, "qwen35-dense")
	file := filepath.Join(fx.Dir, "gguf", "qwen35-dense-f32.gguf")
	fromDir, err := execute(t, "run", "--model", fx.Dir, "--max-tokens", "12", "def add(a, b):")
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := execute(t, "run", "--model", file, "--max-tokens", "12", "def add(a, b):")
	if err != nil || fromFile != fromDir {
		t.Fatalf("run on the GGUF: %q (%v), on the folder: %q", fromFile, err, fromDir)
	}
	if out, err := execute(t, "inspect", file); err != nil || !strings.Contains(out, "qwen35.rope.dimension_count = 8") || !strings.Contains(out, "blk.3.attn_q.weight") {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	if out, err := execute(t, "ops", "--model", file); err != nil || !strings.Contains(out, "covers every op") {
		t.Fatalf("ops: %v\n%s", err, out)
	}
	if out, err := execute(t, "tokenize", "--model", file, "--text", "def add(a, b):"); err != nil || !strings.HasPrefix(out, `{"ids":[`) {
		t.Fatalf("tokenize: %v %s", err, out)
	}
}

// TestDefaultModel: with no model, run answers with English text, and serve
// lists the model as govllm-default.
func TestDefaultModel(t *testing.T) {
	computeOnly(t)
	start := time.Now()
	out, err := execute(t, "run", "--max-tokens", "40", "Tell me a story.")
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	letters := 0
	for _, r := range out {
		if unicode.IsLetter(r) && r < 128 || r == ' ' {
			letters++
		}
	}
	t.Logf("default model in %v: %q", elapsed, out)
	if len(strings.Fields(out)) < 10 || float64(letters) < 0.8*float64(len([]rune(out))) {
		t.Fatalf("not English text: %q", out)
	}
	ctx, stop := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- serve(ctx, "", serveFlags{host: "127.0.0.1", maxNumSeqs: 2, maxBatched: 256, kvMemory: "16MiB", prefixCaching: true, device: "cpu"}, ready)
	}()
	addr := <-ready
	resp, err := http.Get("http://" + addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(raw), `"id":"govllm-default"`) {
		t.Fatalf("/v1/models: %s", raw)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
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
