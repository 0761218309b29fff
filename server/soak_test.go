package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govllm/govllm/engine"
	"github.com/govllm/govllm/server"
)

var soak = flag.Bool("soak", false, "run the full soak test: 1,200 requests from 32 clients (else a short one)")

// soakRequest is one request of the soak, drawn from its index.
type soakRequest struct {
	path       string
	body       []byte
	stream     bool
	disconnect int // streaming: chunks read before hanging up (0: read all)
}

var soakWords = strings.Fields("the a of to and in is it you that he was for on are with as I his they be at one have this from or had by hot word but what some we can out other were all there when up use your how said an each she which do their time if will way about many then them write would like so these her long make thing see him two has look more day could go come did number sound no most people my over know water than call first who may down side been now find any new work part take get place made live where after back little only round man year came show every good me give our under name very through just form sentence great think say help low line differ turn cause much mean before move right boy old too same tell does set three want air well also play small end put home read hand port large spell add even land here must big high such follow act why ask men change went light kind off need house picture try us again animal point mother world near build self earth father")

func newSoakRequest(i int) soakRequest {
	rng := rand.New(rand.NewPCG(uint64(i), 77))
	r := soakRequest{stream: rng.IntN(2) == 0}
	if r.stream && rng.IntN(5) == 0 { // ~20% of streaming clients hang up
		r.disconnect = 1 + rng.IntN(4)
	}
	body := map[string]any{"model": "qwen35-dense", "max_tokens": 1 + rng.IntN(48), "stream": r.stream,
		"ignore_eos": rng.IntN(2) == 0, "temperature": 0}
	if rng.IntN(4) == 0 { // seeded sampling is as reproducible as greedy
		body["temperature"], body["seed"] = 0.8, i
	}
	if rng.IntN(10) == 0 {
		body["n"] = 2
	}
	var words []string
	for range 1 + rng.IntN(60) {
		words = append(words, soakWords[rng.IntN(len(soakWords))])
	}
	text := strings.Join(words, " ")
	if rng.IntN(2) == 0 {
		r.path = "/v1/chat/completions"
		body["messages"] = []map[string]string{{"role": "user", "content": text}}
	} else {
		r.path = "/v1/completions"
		body["prompt"] = text
	}
	r.body, _ = json.Marshal(body)
	return r
}

// soakResult is what a client saw of one request.
type soakResult struct {
	texts     map[int]string // by choice
	status    int
	err       error
	aborted   bool // the client hung up as planned
	ttft      time.Duration
	completed bool
}

// do sends r and reads the answer, whole or as a stream; a stream that
// should disconnect is cut after that many chunks.
func (r soakRequest) do(ctx context.Context, client *http.Client, url string) soakResult {
	res := soakResult{texts: map[int]string{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", url+r.path, bytes.NewReader(r.body))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		res.err = err
		return res
	}
	defer resp.Body.Close()
	res.status = resp.StatusCode
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		res.err = fmt.Errorf("status %d: %s", resp.StatusCode, raw)
		return res
	}
	type choice struct {
		Index   int    `json:"index"`
		Text    string `json:"text"`
		Message *struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"message"`
		Delta *struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"delta"`
	}
	add := func(c choice) {
		res.texts[c.Index] += c.Text
		if c.Message != nil {
			res.texts[c.Index] += c.Message.ReasoningContent + "\x00" + c.Message.Content
		}
		if c.Delta != nil {
			res.texts[c.Index] += c.Delta.ReasoningContent + c.Delta.Content
		}
	}
	if !r.stream {
		var out struct{ Choices []choice }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			res.err = err
			return res
		}
		for _, c := range out.Choices {
			add(c)
		}
		res.completed = true
		return res
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	chunks := 0
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			res.completed = true
			break
		}
		var ev struct {
			Choices []choice
			Error   *struct{ Message string }
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			res.err = fmt.Errorf("event %q: %v", line, err)
			return res
		}
		if ev.Error != nil {
			res.err = fmt.Errorf("error event: %s", ev.Error.Message)
			return res
		}
		for _, c := range ev.Choices {
			if res.ttft == 0 && (c.Text != "" || c.Delta != nil && c.Delta.Content+c.Delta.ReasoningContent != "") {
				res.ttft = time.Since(start)
			}
			add(c)
		}
		if chunks++; r.disconnect > 0 && chunks >= r.disconnect {
			res.aborted = true
			return res // the deferred cancel and close hang up mid-stream
		}
	}
	if err := sc.Err(); err != nil && !res.completed {
		res.err = err
	}
	// A stream's text has reasoning and content run together; a whole
	// answer separates them. Compare like with like.
	return res
}

func peakRSS() int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestSoak drives the server with many concurrent clients mixing chat and
// completions, streaming and not, random prompt and output lengths, ~20%
// of streams hung up midway, more clients than --max-num-seqs and a KV
// budget small enough to force preemption. Every request must end within
// its deadline; every completed one must equal the same request run
// alone afterwards; then the block pool and state slots are empty, the
// goroutines back to their number before, and the peak RSS bounded.
// -soak runs 1,200 requests from 32 clients; without it, 160 from 16;
// -short (the race pass), 24 from 8.
func TestSoak(t *testing.T) {
	requests, clients := 160, 16
	if *soak {
		requests, clients = 1200, 32
	}
	if testing.Short() { // the race pass: fewer requests, the same checks
		requests, clients = 24, 8
	}
	// Room for the 8 sequences' states but for fewer of their KV blocks
	// than they need (~10 each): preemption.
	f := start(t, engine.Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 64, KVCacheBytes: 300 << 10, MaxWaiting: 4 * clients}, server.Options{})
	plan := f.eng.Plan()
	t.Logf("plan: %s", plan.String())
	transport := &http.Transport{MaxIdleConnsPerHost: clients}
	client := &http.Client{Transport: transport}
	time.Sleep(50 * time.Millisecond)
	baseline := runtime.NumGoroutine()

	results := make([]soakResult, requests)
	reqs := make([]soakRequest, requests)
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	begin := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= requests {
					return
				}
				reqs[i] = newSoakRequest(i)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				results[i] = reqs[i].do(ctx, client, f.url)
				if ctx.Err() != nil && !results[i].completed && !results[i].aborted {
					results[i].err = fmt.Errorf("no answer within the 60 s deadline (a hang): %v", results[i].err)
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(begin)
	var failed, aborted, completed int
	var ttfts []time.Duration
	for i, r := range results {
		switch {
		case r.err != nil:
			failed++
			if failed <= 5 {
				t.Errorf("request %d (%s): %v", i, reqs[i].body, r.err)
			}
		case r.aborted:
			aborted++
		case r.completed:
			completed++
			if r.ttft > 0 {
				ttfts = append(ttfts, r.ttft)
			}
		}
	}
	waitIdle(t, f.eng)
	stats := f.eng.Stats()
	if stats.UsedSlots != 0 || stats.UsedBlocks != 0 {
		t.Errorf("after the soak: %d blocks and %d state slots still held", stats.UsedBlocks, stats.UsedSlots)
	}
	// Each completed request again, alone: the same text.
	differ := 0
	for i, r := range results {
		if !r.completed || r.err != nil {
			continue
		}
		alone := reqs[i].do(context.Background(), client, f.url)
		if alone.err != nil || !mapsEqual(alone.texts, r.texts) {
			differ++
			if differ <= 5 {
				t.Errorf("request %d (%s): under load %v, alone %v (%v)", i, reqs[i].body, r.texts, alone.texts, alone.err)
			}
		}
	}
	transport.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > baseline+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > baseline+2 {
		buf := make([]byte, 1<<16)
		t.Errorf("goroutines: %d after, %d before:\n%s", g, baseline, buf[:runtime.Stack(buf, true)])
	}
	rss := peakRSS()
	if rss > 3<<30 {
		t.Errorf("peak RSS %d MiB", rss>>20)
	}
	slices.Sort(ttfts)
	pct := func(p float64) time.Duration {
		if len(ttfts) == 0 {
			return 0
		}
		return ttfts[min(len(ttfts)-1, int(p*float64(len(ttfts))))]
	}
	summary := fmt.Sprintf("soak: %d requests from %d clients in %v (max-num-seqs 8, %d KV blocks)\n"+
		"| requests | completed | aborted by clients | failed | preempted | identical alone | p50 TTFT | p99 TTFT | max RSS |\n"+
		"|---|---|---|---|---|---|---|---|---|\n"+
		"| %d | %d | %d | %d | %d | %d of %d | %v | %v | %d MiB |\n",
		requests, clients, elapsed.Round(time.Millisecond), plan.NumBlocks, requests, completed, aborted, failed,
		stats.Preemptions, completed-differ, completed, pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), rss>>20)
	t.Log(summary)
	if *soak {
		fmt.Print(summary)
	}
	if stats.Preemptions == 0 {
		t.Errorf("no preemption: the KV budget (%d blocks) did not bind", plan.NumBlocks)
	}
	if aborted == 0 {
		t.Error("no client hung up")
	}
}

func mapsEqual(a, b map[int]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
