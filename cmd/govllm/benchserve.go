package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
)

type benchServeFlags struct {
	url, model, apiKey                           string
	numPrompts, concurrency, inputLen, outputLen int
}

func newBenchServeCmd() *cobra.Command {
	var f benchServeFlags
	cmd := &cobra.Command{
		Use:   "serve --url URL",
		Short: "Load an OpenAI-compatible server and report TTFT, TPOT, ITL percentiles and throughput",
		Long: "Sends --num-prompts streaming completions (random-word prompts of about --input-len words,\n" +
			"--output-len tokens each with ignore_eos), --concurrency at a time, like `vllm bench serve`.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return benchServe(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", "http://127.0.0.1:8000", "server base URL")
	fl.StringVar(&f.model, "model", "", "model name (default: the first of /v1/models)")
	fl.StringVar(&f.apiKey, "api-key", "", "bearer key")
	fl.IntVar(&f.numPrompts, "num-prompts", 32, "requests to send")
	fl.IntVar(&f.concurrency, "concurrency", 8, "requests in flight at most")
	fl.IntVar(&f.inputLen, "input-len", 64, "prompt length in words")
	fl.IntVar(&f.outputLen, "output-len", 64, "tokens to generate per request")
	return cmd
}

type requestTiming struct {
	ttft, e2e time.Duration
	itl       []time.Duration
	tokens    int
	err       error
}

func benchServe(ctx context.Context, w io.Writer, f benchServeFlags) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if f.numPrompts < 1 || f.concurrency < 1 || f.inputLen < 1 || f.outputLen < 1 {
		return fmt.Errorf("--num-prompts, --concurrency, --input-len and --output-len must be positive")
	}
	base := strings.TrimRight(f.url, "/")
	do := func(method, path string, body any) (*http.Response, error) {
		var rd io.Reader
		if body != nil {
			raw, _ := json.Marshal(body)
			rd = bytes.NewReader(raw)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if f.apiKey != "" {
			req.Header.Set("Authorization", "Bearer "+f.apiKey)
		}
		return http.DefaultClient.Do(req)
	}
	if f.model == "" {
		resp, err := do("GET", "/v1/models", nil)
		if err != nil {
			return err
		}
		var list struct{ Data []struct{ ID string } }
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil || len(list.Data) == 0 {
			return fmt.Errorf("GET /v1/models: no model listed (%v)", err)
		}
		f.model = list.Data[0].ID
	}
	words := strings.Fields("the of and to in is that for it as was with be by on not he this are or his from at which but have an they you were her she there one all we their")
	rng := rand.New(rand.NewPCG(7, 7))
	prompts := make([]string, f.numPrompts)
	for i := range prompts {
		ws := make([]string, f.inputLen)
		for j := range ws {
			ws[j] = words[rng.IntN(len(words))]
		}
		prompts[i] = strings.Join(ws, " ")
	}
	one := func(prompt string) requestTiming {
		var t requestTiming
		start := time.Now()
		resp, err := do("POST", "/v1/completions", map[string]any{"model": f.model, "prompt": prompt, "max_tokens": f.outputLen,
			"ignore_eos": true, "stream": true, "stream_options": map[string]bool{"include_usage": true}, "temperature": 0})
		if err != nil {
			t.err = err
			return t
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			raw, _ := io.ReadAll(resp.Body)
			t.err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(raw))
			return t
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		last := time.Time{}
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			var chunk struct {
				Choices []struct{ Text string }
				Usage   *struct {
					CompletionTokens int `json:"completion_tokens"`
				}
			}
			if json.Unmarshal([]byte(data), &chunk) != nil {
				continue
			}
			now := time.Now()
			if len(chunk.Choices) > 0 && chunk.Choices[0].Text != "" {
				if last.IsZero() {
					t.ttft = now.Sub(start)
				} else {
					t.itl = append(t.itl, now.Sub(last))
				}
				last = now
			}
			if chunk.Usage != nil {
				t.tokens = chunk.Usage.CompletionTokens
			}
		}
		t.e2e, t.err = time.Since(start), sc.Err()
		return t
	}
	slog.Info("bench serve: running", "url", base, "model", f.model, "prompts", f.numPrompts, "concurrency", f.concurrency)
	results := make([]requestTiming, f.numPrompts)
	sem := make(chan struct{}, f.concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for i, p := range prompts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			results[i] = one(p)
			<-sem
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var ttft, tpot, itl []time.Duration
	tokens, ok := 0, 0
	for _, r := range results {
		if r.err != nil {
			return fmt.Errorf("bench serve: %w", r.err)
		}
		ok++
		tokens += r.tokens
		ttft = append(ttft, r.ttft)
		itl = append(itl, r.itl...)
		if r.tokens > 1 {
			tpot = append(tpot, (r.e2e-r.ttft)/time.Duration(r.tokens-1))
		}
	}
	fmt.Fprintf(w, "Successful requests:            %d\n", ok)
	fmt.Fprintf(w, "Benchmark duration (s):         %.2f\n", elapsed.Seconds())
	fmt.Fprintf(w, "Total generated tokens:         %d\n", tokens)
	fmt.Fprintf(w, "Request throughput (req/s):     %.2f\n", float64(ok)/elapsed.Seconds())
	fmt.Fprintf(w, "Output token throughput (tok/s): %.2f\n", float64(tokens)/elapsed.Seconds())
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"TTFT", ttft}, {"TPOT", tpot}, {"ITL", itl}} {
		mean, p50, p99 := stats(m.d)
		fmt.Fprintf(w, "%-4s (ms): mean %.2f  median %.2f  p99 %.2f\n", m.name, mean, p50, p99)
	}
	return nil
}

// stats returns mean, median and 99th percentile in milliseconds.
func stats(d []time.Duration) (mean, p50, p99 float64) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, x := range s {
		sum += x
	}
	ms := func(x time.Duration) float64 { return float64(x) / 1e6 }
	pct := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return ms(sum / time.Duration(len(s))), ms(pct(0.5)), ms(pct(0.99))
}
