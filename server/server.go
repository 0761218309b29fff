package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/govllm/govllm/engine"
	"github.com/govllm/govllm/grammar"
	"github.com/govllm/govllm/tokenizer"
	"github.com/govllm/govllm/tokenizer/chat"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Version is reported by /version.
const Version = "0.1.0"

// Options configure a Server.
type Options struct {
	ModelName    string         // the served model name clients must use
	APIKey       string         // empty: no authentication
	Template     *chat.Template // nil: chat completions are refused
	MaxBodyBytes int64          // default 32 MiB
	// RequestTimeout bounds a generation request from arrival to its last
	// token; past it the request is aborted and answered 504 (or an error
	// event, streaming). 0: no bound.
	RequestTimeout time.Duration
}

// Engine is what the server needs of an engine; *engine.Engine is one, and
// tests plug in a scripted one.
type Engine interface {
	Submit(ctx context.Context, r engine.Request) (<-chan engine.Output, error)
	Stats() engine.Stats
	Config() engine.Config
	Accepting() bool
	VocabSize() int
	Capacity() int
	GrammarVocab() *grammar.Vocab
}

// Server serves the OpenAI API for one model.
type Server struct {
	eng      Engine
	tok      *tokenizer.Tokenizer
	opts     Options
	metrics  *metrics
	mux      *http.ServeMux
	draining atomic.Bool
	grammars grammarCache
	created  int64
}

// New builds the server; Handler serves it.
func New(eng Engine, tok *tokenizer.Tokenizer, opts Options) *Server {
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = 32 << 20
	}
	s := &Server{eng: eng, tok: tok, opts: opts, metrics: newMetrics(eng, opts.ModelName), mux: http.NewServeMux(), created: time.Now().Unix()}
	s.mux.HandleFunc("GET /v1/models", s.auth(s.models))
	s.mux.HandleFunc("POST /v1/completions", s.auth(s.completions))
	s.mux.HandleFunc("POST /v1/chat/completions", s.auth(s.chatCompletions))
	s.mux.HandleFunc("POST /tokenize", s.auth(s.tokenize))
	s.mux.HandleFunc("POST /detokenize", s.auth(s.detokenize))
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]string{"version": Version})
	})
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	return s
}

// Handler is the HTTP handler, with an access log (method, path, status,
// duration; never request or response data) at info level.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		s.mux.ServeHTTP(sw, r)
		slog.Info("http", "method", r.Method, "path", r.URL.Path, "status", sw.status,
			"duration", time.Since(start).Round(time.Microsecond), "bytes", sw.bytes)
	})
}

// statusWriter records what a handler answered, for the access log; it
// passes Flush on, which streaming needs.
type statusWriter struct {
	http.ResponseWriter
	status, bytes int
	wrote         bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Drain makes /health fail and new generations be refused, so that a
// load balancer moves away while running requests finish.
func (s *Server) Drain() { s.draining.Store(true) }

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.opts.APIKey != "" {
			key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(key), []byte(s.opts.APIKey)) != 1 {
				writeError(w, &apiError{Status: http.StatusUnauthorized, Type: "authentication_error", Message: "missing or invalid API key"})
				return
			}
		}
		h(w, r)
	}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() || !s.eng.Accepting() {
		writeError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "service_unavailable", Message: "the engine does not accept work"})
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{"object": "list", "data": []map[string]any{{
		"id": s.opts.ModelName, "object": "model", "created": s.created, "owned_by": "govllm",
		"max_model_len": s.eng.Config().MaxModelLen,
	}}})
}

// checkModel answers 404 for a model name that is not served.
func (s *Server) checkModel(name string) error {
	if name != "" && name != s.opts.ModelName {
		code := "model_not_found"
		p := "model"
		return &apiError{Status: http.StatusNotFound, Type: "NotFoundError", Param: &p, Code: &code,
			Message: "the model `" + name + "` does not exist; this server serves `" + s.opts.ModelName + "`"}
	}
	return nil
}

// submitErr maps engine refusals to HTTP errors.
func submitErr(err error) error {
	switch {
	case errors.Is(err, engine.ErrQueueFull):
		return &apiError{Status: http.StatusServiceUnavailable, Type: "service_unavailable", Message: err.Error(), RetryAfter: 1}
	case errors.Is(err, engine.ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Type: "service_unavailable", Message: err.Error()}
	case errors.Is(err, engine.ErrRequest), errors.Is(err, engine.ErrSampling):
		return badRequest("", "%v", err)
	}
	return err
}

func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model            string          `json:"model"`
		Prompt           *string         `json:"prompt"`
		Messages         json.RawMessage `json:"messages"`
		AddGenPrompt     *bool           `json:"add_generation_prompt"`
		ChatTemplateArgs json.RawMessage `json:"chat_template_kwargs"`
	}
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := s.checkModel(req.Model); err != nil {
		writeError(w, err)
		return
	}
	var text string
	switch {
	case req.Prompt != nil:
		text = *req.Prompt
	case len(req.Messages) > 0:
		if s.opts.Template == nil {
			writeError(w, badRequest("messages", "the model has no chat template"))
			return
		}
		var err error
		if text, err = s.opts.Template.Render(chat.Request{Messages: req.Messages, AddGenerationPrompt: req.AddGenPrompt == nil || *req.AddGenPrompt, Kwargs: req.ChatTemplateArgs}); err != nil {
			writeError(w, badRequest("messages", "%v", err))
			return
		}
	default:
		writeError(w, badRequest("prompt", "give prompt or messages"))
		return
	}
	ids := s.tok.Encode(text)
	if ids == nil {
		ids = []int32{}
	}
	writeJSON(w, map[string]any{"count": len(ids), "max_model_len": s.eng.Config().MaxModelLen, "tokens": ids})
}

func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string  `json:"model"`
		Tokens []int32 `json:"tokens"`
	}
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := s.checkModel(req.Model); err != nil {
		writeError(w, err)
		return
	}
	text, err := s.tok.Decode(req.Tokens, false)
	if err != nil {
		writeError(w, badRequest("tokens", "%v", err))
		return
	}
	writeJSON(w, map[string]string{"prompt": text})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func randomID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// sse writes server-sent events: "data: {json}\n\n" and "data: [DONE]\n\n".
type sse struct {
	w       http.ResponseWriter
	flusher http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	if f != nil {
		f.Flush() // the client sees the stream open while the request waits in the queue
	}
	return &sse{w: w, flusher: f}
}

func (e *sse) send(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := e.w.Write(append(append([]byte("data: "), raw...), '\n', '\n')); err != nil {
		return err
	}
	if e.flusher != nil {
		e.flusher.Flush()
	}
	return nil
}

func (e *sse) done() {
	e.w.Write([]byte("data: [DONE]\n\n"))
	if e.flusher != nil {
		e.flusher.Flush()
	}
}
