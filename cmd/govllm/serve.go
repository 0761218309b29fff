package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/govllm/govllm/engine"
	"github.com/govllm/govllm/internal/defaultmodel"
	"github.com/govllm/govllm/model/qwen35"
	"github.com/govllm/govllm/server"
	"github.com/govllm/govllm/tokenizer"
	"github.com/spf13/cobra"
)

// serveFlags are vLLM's `serve` flags where they apply.
type serveFlags struct {
	host, apiKey, servedName, kvMemory, chatTemplate, device string
	port, maxModelLen, maxNumSeqs, maxBatched, maxQueued     int
	prefixCaching                                            bool
	requestTimeout                                           time.Duration
	maxRequestBytes                                          string
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve [MODEL]",
		Short: "Serve a model over the OpenAI-compatible HTTP API",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.apiKey == "" {
				f.apiKey = os.Getenv("GOVLLM_API_KEY")
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return serve(ctx, firstArg(args), f, nil)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.host, "host", "0.0.0.0", "address to listen on")
	fl.IntVar(&f.port, "port", 8000, "port to listen on")
	fl.StringVar(&f.apiKey, "api-key", "", "require this bearer key on /v1 and tokenizer endpoints (also GOVLLM_API_KEY)")
	fl.StringVar(&f.servedName, "served-model-name", "", "model name clients use (default: the model directory's name)")
	fl.IntVar(&f.maxModelLen, "max-model-len", 0, "prompt + output tokens at most (default: the model's)")
	fl.IntVar(&f.maxNumSeqs, "max-num-seqs", 64, "sequences per step at most")
	fl.IntVar(&f.maxBatched, "max-num-batched-tokens", 2048, "tokens per step at most")
	fl.StringVar(&f.kvMemory, "kv-cache-memory", "", "memory for the KV cache and state, e.g. 4GiB (default: a quarter of available memory, at most 4 GiB)")
	fl.BoolVar(&f.prefixCaching, "enable-prefix-caching", true, "reuse cached prefixes across requests")
	fl.StringVar(&f.chatTemplate, "chat-template", "", "Jinja file that replaces the model's chat template")
	fl.StringVar(&f.device, "device", "cpu", "backend device")
	fl.IntVar(&f.maxQueued, "max-queued-requests", 0, "requests waiting beyond the running ones before new ones get 503 with Retry-After (default 16 × --max-num-seqs)")
	fl.DurationVar(&f.requestTimeout, "request-timeout", 0, "abort a generation request that runs longer (e.g. 10m; answered 504); 0: no limit")
	fl.StringVar(&f.maxRequestBytes, "max-request-bytes", "32MiB", "largest request body accepted (413 beyond)")
	return cmd
}

func parseBytes(flag, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"G", 1 << 30}, {"M", 1 << 20}, {"B", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || v <= 0 {
				return 0, fmt.Errorf("%s %q: not a size", flag, s)
			}
			return int64(v * float64(u.mult)), nil
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%s %q: not a size (e.g. 4GiB)", flag, s)
	}
	return v, nil
}

// serve loads the model, starts the engine and the server, and runs until
// ctx ends; then it drains running requests and exits. ready, if set,
// receives the listening address.
func serve(ctx context.Context, modelDir string, f serveFlags, ready chan<- string) error {
	if modelDir == "" { // the embedded default model
		if f.servedName == "" {
			f.servedName = defaultmodel.Name
		}
		var err error
		if modelDir, err = modelOrDefault(""); err != nil {
			return err
		}
	}
	kvBytes, err := parseBytes("--kv-cache-memory", f.kvMemory)
	if err != nil {
		return err
	}
	bodyBytes, err := parseBytes("--max-request-bytes", f.maxRequestBytes)
	if err != nil {
		return err
	}
	be, err := newBackend(f.device)
	if err != nil {
		return err
	}
	tok, err := loadTokenizer(modelDir)
	if err != nil {
		return err
	}
	tmpl, err := loadTemplate(modelDir, f.chatTemplate)
	if err != nil {
		if f.chatTemplate != "" {
			return err
		}
		slog.Warn("serve: no chat template; /v1/chat/completions is disabled", "err", err)
		tmpl = nil
	}
	bar, progress := newProgress("loading weights")
	start := time.Now()
	m, err := qwen35.Load(modelDir, be, qwen35.Options{Progress: progress})
	bar.Finish()
	if err != nil {
		return err
	}
	defer m.Close()
	slog.Info("serve: model loaded", "dir", modelDir, "layers", m.Config.NumLayers, "elapsed", time.Since(start).Round(time.Millisecond))
	cfg := engine.Config{MaxNumSeqs: f.maxNumSeqs, MaxNumBatchedTokens: f.maxBatched, KVCacheBytes: kvBytes,
		NoPrefixCaching: !f.prefixCaching, MaxModelLen: f.maxModelLen, EOSTokenIDs: eosIDs(modelDir, m.Config, tok),
		MaxWaiting: f.maxQueued}
	eng, err := engine.New(m, tok, cfg)
	if err != nil {
		return err
	}
	defer eng.Close()
	name := f.servedName
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(filepath.Clean(modelDir)), ".gguf")
	}
	srv := server.New(eng, tok, server.Options{ModelName: name, APIKey: f.apiKey, Template: tmpl,
		MaxBodyBytes: bodyBytes, RequestTimeout: f.requestTimeout})
	ln, err := net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.port)))
	if err != nil {
		return err
	}
	httpSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 30 * time.Second}
	slog.Info("serve: listening", "addr", ln.Addr().String(), "model", name)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	slog.Info("serve: draining running requests")
	srv.Drain()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := httpSrv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	slog.Info("serve: stopped")
	return nil
}

// eosIDs are the stop tokens of config.json, generation_config.json and the
// tokenizer's eos token.
func eosIDs(dir string, cfg *qwen35.Config, tok *tokenizer.Tokenizer) []int32 {
	var ids []int32
	for id := range stopTokens(dir, cfg, tok) {
		ids = append(ids, id)
	}
	return ids
}
