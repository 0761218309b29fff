package engine

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// BenchResult is one concurrency level of a throughput run.
type BenchResult struct {
	Concurrency     int
	Requests        int
	GeneratedTokens int
	Elapsed         time.Duration
	MeanTTFT        time.Duration
	MeanInterToken  time.Duration
}

// TokensPerSecond is the aggregate generation rate.
func (b BenchResult) TokensPerSecond() float64 {
	return float64(b.GeneratedTokens) / b.Elapsed.Seconds()
}

// Bench runs requests concurrency at a time until all are done and
// measures aggregate throughput. prompts are cycled over.
func (e *Engine) Bench(ctx context.Context, prompts [][]int32, concurrency, requests, maxTokens int) (BenchResult, error) {
	res := BenchResult{Concurrency: concurrency, Requests: requests}
	var (
		mu        sync.Mutex
		firstErr  error
		ttft, itl time.Duration
		next      int
		wg        sync.WaitGroup
	)
	start := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= requests || ctx.Err() != nil {
					return
				}
				ch, err := e.Submit(ctx, Request{Prompt: prompts[i%len(prompts)], MaxTokens: maxTokens, IgnoreEOS: true})
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				for out := range ch {
					if !out.Finished {
						continue
					}
					mu.Lock()
					res.GeneratedTokens += out.Usage.CompletionTokens
					ttft += out.Timings.TimeToFirstToken
					itl += out.Timings.MeanInterToken
					if out.Err != nil && firstErr == nil {
						firstErr = out.Err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	if requests > 0 {
		res.MeanTTFT, res.MeanInterToken = ttft/time.Duration(requests), itl/time.Duration(requests)
	}
	if firstErr != nil {
		return res, fmt.Errorf("engine: bench: %w", firstErr)
	}
	return res, nil
}
