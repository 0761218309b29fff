package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/server"
	"github.com/govllm/govllm/tokenizer"
	"github.com/govllm/govllm/tokenizer/chat"
)

// FuzzRequests posts hostile bodies to every endpoint that decodes one
// (the engine is scripted, the tokenizer and template real): the answer is
// a success or a 4xx error in JSON (an event stream for stream: true),
// never a panic or a 500.
func FuzzRequests(f *testing.F) {
	dir := filepath.Join(oracle.Dir(f), "..", "tokenizers", "qwen3")
	tok, err := tokenizer.Load(dir)
	if err != nil {
		f.Fatal(err)
	}
	tmpl, err := chat.LoadTemplate(dir, filepath.Join(oracle.Dir(f), "..", "templates", "qwen3.5.jinja"))
	if err != nil {
		f.Fatal(err)
	}
	h := server.New(&scripted{pieces: toolOutput}, tok, server.Options{ModelName: "m", Template: tmpl, MaxBodyBytes: 1 << 16}).Handler()
	paths := []string{"/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"}
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`,
		`{"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"n":2}`,
		`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required"}`,
		`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"integer"}}}}`,
		`{"prompt":"abc","logprobs":2,"guided_regex":"[a-z]+","max_tokens":3}`,
		`{"prompt":[1,2,3],"logit_bias":{"5":3},"stop":["x"],"seed":-1}`,
		`{"tokens":[1,2,999999999]}`,
		`{"messages":"nope","temperature":"hot"}`,
	} {
		for p := range paths {
			f.Add(uint8(p), body)
		}
	}
	f.Fuzz(func(t *testing.T, p uint8, body string) {
		path := paths[int(p)%len(paths)]
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		out := rec.Body.Bytes()
		switch {
		case rec.Code >= 500:
			t.Fatalf("%s %q: status %d: %s", path, body, rec.Code, out)
		case rec.Code == http.StatusOK && bytes.HasPrefix(out, []byte("data: ")):
		case !json.Valid(out):
			t.Fatalf("%s %q: status %d, not JSON: %q", path, body, rec.Code, out)
		}
	})
}
