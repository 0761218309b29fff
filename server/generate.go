package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/govllm/govllm/engine"
)

// choiceOutput is an engine output tagged with its choice index
// (prompt index × n + completion index).
type choiceOutput struct {
	choice int
	engine.Output
}

// generation is a set of submitted requests whose outputs are merged.
type generation struct {
	s      *Server
	ctx    context.Context
	merged chan choiceOutput
	cancel context.CancelFunc
	start  time.Time
}

// timedOut is the error for a generation that ran past the request
// timeout, or nil.
func (g *generation) timedOut() error {
	if errors.Is(g.ctx.Err(), context.DeadlineExceeded) {
		return &apiError{Status: http.StatusGatewayTimeout, Type: "timeout",
			Message: fmt.Sprintf("the request ran past the server's request timeout of %v and was aborted", g.s.opts.RequestTimeout)}
	}
	return nil
}

// submit queues reqs (one per prompt) before any response is written, so
// that a refusal can still be an HTTP error. The context is the HTTP
// request's: a client that goes away cancels all of them.
func (s *Server) submit(ctx context.Context, reqs []engine.Request) (*generation, error) {
	if s.draining.Load() {
		return nil, submitErr(engine.ErrClosed)
	}
	var cancel context.CancelFunc
	if s.opts.RequestTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, s.opts.RequestTimeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	g := &generation{s: s, ctx: ctx, merged: make(chan choiceOutput), cancel: cancel, start: time.Now()}
	var wg sync.WaitGroup
	for i, r := range reqs {
		ch, err := s.eng.Submit(ctx, r)
		if err != nil {
			cancel()
			wg.Wait()
			return nil, submitErr(err)
		}
		wg.Add(1)
		go func(base int) {
			defer wg.Done()
			for o := range ch {
				select {
				case g.merged <- choiceOutput{choice: base + o.Index, Output: o}:
				case <-ctx.Done():
				}
			}
		}(i * r.N)
	}
	go func() {
		wg.Wait()
		close(g.merged)
	}()
	return g, nil
}

// run delivers every output, in arrival order, to each, and records
// metrics as completions finish. An error from each cancels the rest.
func (g *generation) run(each func(choiceOutput) error) error {
	defer g.cancel()
	last := map[int]time.Time{}
	var failed error
	for o := range g.merged {
		now := time.Now()
		if t, ok := last[o.choice]; ok && len(o.TokenIDs) > 0 {
			g.s.metrics.itl.Observe(now.Sub(t).Seconds())
		}
		last[o.choice] = now
		if o.Finished {
			g.s.metrics.finished(o.Output, now.Sub(g.start).Seconds())
			if o.Err != nil && failed == nil {
				failed = o.Err
			}
		}
		if failed != nil {
			continue // drain so that the forwarders end
		}
		if err := each(o); err != nil {
			failed = err
			g.cancel() // the client is gone: abort the rest
		}
	}
	if err := g.timedOut(); err != nil {
		return err
	}
	return failed
}

// tokenText is how a token is shown in logprobs.
func (s *Server) tokenText(id int32) (string, []int) {
	b := s.tok.TokenBytes(id)
	ints := make([]int, len(b))
	for i, x := range b {
		ints[i] = int(x)
	}
	text, _ := s.tok.Decode([]int32{id}, false)
	return text, ints
}
