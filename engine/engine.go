package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/govllm/govllm/grammar"
	"github.com/govllm/govllm/model/qwen35"
	"github.com/govllm/govllm/tokenizer"
)

// Engine runs many requests together: each step schedules running and
// waiting sequences into one batched forward, then samples and streams.
type Engine struct {
	m     *qwen35.Model
	tok   *tokenizer.Tokenizer
	cfg   Config
	plan  Plan
	cache *qwen35.Cache
	pool  *blockPool
	ckpts *checkpointPool
	eos   map[int32]bool
	think struct{ open, close int32 } // <think> and </think>, -1 if absent

	vocabOnce sync.Once
	vocab     *grammar.Vocab

	// Owned by the loop goroutine.
	waiting, running []*sequence
	freeSlots        []int
	idleSteps        int

	mu      sync.Mutex // guards inbox, aborts, stats, closed
	inbox   []*request
	aborts  []*request
	stats   Stats
	closed  bool
	wake    chan struct{}
	stopped chan struct{}
}

// Stats are the engine's counters.
type Stats struct {
	Steps              int
	Running, Waiting   int
	UsedBlocks, Blocks int
	UsedSlots, Slots   int // recurrent-state slots held by running sequences
	Preemptions        int
	PromptTokens       int // prompt tokens admitted (prefix cache queries)
	CachedTokens       int // of those, served from the prefix cache
	GeneratedTokens    int
	Checkpoints        int
	CheckpointBytes    int64
}

// ErrClosed is returned by Submit after Close.
var ErrClosed = errors.New("engine: closed")

// ErrQueueFull is returned by Submit when MaxWaiting requests wait already.
var ErrQueueFull = errors.New("engine: the request queue is full")

// New sizes the caches for m, logs the memory plan and starts the loop.
func New(m *qwen35.Model, tok *tokenizer.Tokenizer, cfg Config) (*Engine, error) {
	cfg, plan, err := cfg.resolve(m)
	if err != nil {
		return nil, err
	}
	cache, err := m.NewCache(cfg.BlockSize, plan.NumBlocks, plan.NumSlots)
	if err != nil {
		return nil, err
	}
	e := &Engine{m: m, tok: tok, cfg: cfg, plan: plan, cache: cache,
		pool: newBlockPool(plan.NumBlocks), ckpts: newCheckpointPool(plan.CheckpointBytes),
		eos: map[int32]bool{}, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	eos := cfg.EOSTokenIDs
	if len(eos) == 0 {
		for _, id := range m.Config.EOSTokenIDs {
			eos = append(eos, int32(id))
		}
	}
	for _, id := range eos {
		e.eos[id] = true
	}
	e.think.open, e.think.close = -1, -1
	if id, ok := tok.TokenID("<think>"); ok {
		e.think.open = id
	}
	if id, ok := tok.TokenID("</think>"); ok {
		e.think.close = id
	}
	for i := plan.NumSlots - 1; i >= 0; i-- {
		e.freeSlots = append(e.freeSlots, i)
	}
	e.stats.Blocks, e.stats.Slots = plan.NumBlocks, plan.NumSlots
	slog.Info("engine: memory plan", "plan", plan.String(), "max_num_seqs", cfg.MaxNumSeqs,
		"max_num_batched_tokens", cfg.MaxNumBatchedTokens, "block_size", cfg.BlockSize, "prefix_caching", !cfg.NoPrefixCaching)
	go e.loop()
	return e, nil
}

// Accepting reports whether the engine takes new requests.
func (e *Engine) Accepting() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.closed
}

// VocabSize is the model's vocabulary size.
func (e *Engine) VocabSize() int { return e.m.Config.VocabSize }

// Capacity is the number of positions the KV cache holds.
func (e *Engine) Capacity() int {
	if e.plan.BlockBytes == 0 {
		return e.cfg.MaxModelLen
	}
	return e.plan.NumBlocks * e.cfg.BlockSize
}

// Plan is the memory plan in force.
func (e *Engine) Plan() Plan { return e.plan }

// Config is the resolved configuration.
func (e *Engine) Config() Config { return e.cfg }

// Stats returns a copy of the counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// Submit queues a request. Outputs arrive on the channel, which closes
// after the last one; cancelling ctx aborts the request.
func (e *Engine) Submit(ctx context.Context, r Request) (<-chan Output, error) {
	if err := r.validate(e.cfg.MaxModelLen); err != nil {
		return nil, err
	}
	for _, id := range r.Prompt {
		if id < 0 || int(id) >= e.m.Config.VocabSize {
			return nil, fmt.Errorf("%w: prompt token %d is outside the vocabulary of %d", ErrRequest, id, e.m.Config.VocabSize)
		}
	}
	if (r.ThinkingBudget != nil || r.Grammar != nil) && r.Reasoning != ReasoningNone && e.think.close < 0 {
		return nil, fmt.Errorf("%w: the tokenizer has no </think> token to end reasoning with", ErrRequest)
	}
	if r.Grammar != nil && r.Grammar.Vocab() != e.GrammarVocab() {
		return nil, fmt.Errorf("%w: the grammar was prepared for another vocabulary", ErrRequest)
	}
	if need := (len(r.Prompt) + r.MaxTokens + e.cfg.BlockSize - 1) / e.cfg.BlockSize; need > e.plan.NumBlocks && e.plan.BlockBytes > 0 {
		return nil, fmt.Errorf("%w: %d prompt + %d output tokens need %d KV blocks, the cache has %d", ErrRequest, len(r.Prompt), r.MaxTokens, need, e.plan.NumBlocks)
	}
	req := &request{Request: r, ctx: ctx, out: newOutbox(), stopIDs: map[int32]bool{}, arrival: time.Now()}
	for _, id := range r.StopTokenIDs {
		req.stopIDs[id] = true
	}
	for i := range r.N {
		s, err := e.newSequence(req, i)
		if err != nil {
			return nil, err
		}
		req.seqs = append(req.seqs, s)
	}
	req.open = r.N
	e.mu.Lock()
	var refused error
	switch {
	case e.closed:
		refused = ErrClosed
	case e.stats.Waiting+len(e.inbox) >= e.cfg.MaxWaiting:
		refused = ErrQueueFull
	}
	if refused != nil {
		e.mu.Unlock()
		return nil, refused
	}
	e.inbox = append(e.inbox, req)
	e.mu.Unlock()
	go req.out.forward(ctx)
	e.signal()
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				e.mu.Lock()
				e.aborts = append(e.aborts, req)
				e.mu.Unlock()
				e.signal()
			case <-e.stopped:
			}
		}()
	}
	return req.out.ch, nil
}

func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Close stops the loop and aborts what is still running.
func (e *Engine) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	e.mu.Unlock()
	e.signal()
	<-e.stopped
	e.cache.Close()
}

func (e *Engine) loop() {
	defer close(e.stopped)
	for {
		e.mu.Lock()
		inbox, aborts, closed := e.inbox, e.aborts, e.closed
		e.inbox, e.aborts = nil, nil
		e.mu.Unlock()
		for _, r := range inbox {
			e.waiting = append(e.waiting, r.seqs...)
		}
		for _, r := range aborts {
			e.abort(r, FinishAbort, nil)
		}
		e.publish()
		if closed {
			for _, s := range append(slices.Clone(e.running), e.waiting...) {
				e.abort(s.req, FinishAbort, ErrClosed)
			}
			return
		}
		if len(e.waiting)+len(e.running) == 0 {
			<-e.wake
			continue
		}
		e.step()
	}
}

// step is one engine iteration: schedule, run the batch, handle its output.
func (e *Engine) step() {
	batch := e.schedule()
	if len(batch) == 0 {
		// A step may preempt everything it had; the next one readmits. Two
		// empty steps with nothing running mean the first waiting request
		// cannot fit: fail it rather than spin.
		e.idleSteps++
		if e.idleSteps > 1 && len(e.running) == 0 && len(e.waiting) > 0 {
			e.abort(e.waiting[0].req, FinishAbort, fmt.Errorf("engine: the request does not fit in the cache"))
		}
		return
	}
	e.idleSteps = 0
	logits, tokens, err := e.run(batch)
	if err != nil {
		for _, sc := range batch {
			e.abort(sc.seq.req, FinishAbort, err)
		}
		return
	}
	e.postprocess(batch, logits, tokens)
	e.mu.Lock()
	e.stats.Steps++
	e.mu.Unlock()
	e.publish()
}

// publish copies the loop's gauges into the stats.
func (e *Engine) publish() {
	e.mu.Lock()
	e.stats.Running, e.stats.Waiting = len(e.running), len(e.waiting)
	e.stats.UsedBlocks = e.pool.used()
	e.stats.UsedSlots = e.plan.NumSlots - len(e.freeSlots)
	e.stats.Checkpoints, e.stats.CheckpointBytes = len(e.ckpts.byHash), e.ckpts.bytes
	e.mu.Unlock()
}

// run is the model runner: one batched forward over the scheduled tokens.
// It returns the logits row of each sequence that samples, or where the
// row would only be reduced to its largest entry, the token itself (-1
// otherwise): the argmax is taken where the logits are, and on a GPU the
// row never crosses to the host.
func (e *Engine) run(batch []scheduled) ([][]float32, []int32, error) {
	seqs := make([]qwen35.Seq, len(batch))
	for i, sc := range batch {
		s := sc.seq
		mode := qwen35.NoLogits
		switch {
		case sc.sample && e.greedyRow(s):
			mode = qwen35.LastToken
		case sc.sample:
			mode = qwen35.LastLogits
		}
		seqs[i] = qwen35.Seq{Tokens: s.tokens[s.computed : s.computed+sc.n], Start: s.computed, Blocks: s.blocks, Slot: s.slot, Logits: mode}
	}
	logits, err := e.m.ForwardBatch(e.cache, seqs, qwen35.ForwardOptions{})
	if err != nil {
		return nil, nil, err
	}
	rows, tokens := make([][]float32, len(batch)), make([]int32, len(batch))
	v, r := e.m.Config.VocabSize, 0
	for i := range batch {
		tokens[i] = -1
		switch seqs[i].Logits {
		case qwen35.LastLogits:
			rows[i] = logits.F32()[r*v : (r+1)*v]
			r++
		case qwen35.LastToken:
			tokens[i] = seqs[i].Next
		}
	}
	return rows, tokens, nil
}

// newSequence is req's completion i: its own sampler (seeded apart from
// the others') and its decoding state.
func (e *Engine) newSequence(req *request, i int) (*sequence, error) {
	r := &req.Request
	p := r.Sampling
	if p.Seed != nil && i > 0 {
		seed := *p.Seed + uint64(i)
		p.Seed = &seed
	}
	sampler, err := NewSampler(p)
	if err != nil {
		return nil, err
	}
	s := &sequence{req: req, index: i, tokens: slices.Clone(r.Prompt), promptLen: len(r.Prompt), slot: -1,
		sampler: sampler, decoder: e.tok.NewStreamDecoder(!r.KeepSpecial), stop: newStopMatcher(r.StopStrings), guide: newGuide(r)}
	if sampler.Penalized() {
		s.seen, s.counts = map[int32]bool{}, map[int32]int{}
		for _, id := range r.Prompt {
			s.seen[id] = true
		}
	}
	return s, nil
}

// greedyRow reports whether s's next token is the argmax of its raw
// logits: greedy, with nothing that changes or reads the row first
// (penalties and bias, min_tokens' mask, a grammar, logprobs).
func (e *Engine) greedyRow(s *sequence) bool {
	r := s.req
	return s.sampler.Greedy() && s.seen == nil && s.generated >= r.MinTokens && s.guide.point == nil &&
		!r.Logprobs && r.TopLogprobs == 0
}

// postprocess advances each scheduled sequence past the tokens it ran and
// samples where a sequence reached its end, from its logits row or the
// token run chose.
func (e *Engine) postprocess(batch []scheduled, logits [][]float32, tokens []int32) {
	now := time.Now()
	for i, sc := range batch {
		s := sc.seq
		s.computed += sc.n
		e.registerBlocks(s)
		if !e.cfg.NoPrefixCaching && s.computed%e.cfg.CheckpointInterval == 0 && s.computed < len(s.tokens) {
			e.checkpoint(s)
		}
		if sc.sample {
			e.sample(s, logits[i], tokens[i], now)
		}
	}
}

// maxRejections bounds the draws checked against a grammar before its mask
// is computed.
const maxRejections = 8

// sample picks s's next token from raw, its logits row, or where raw is
// nil takes chosen, the row's argmax (see greedyRow), and emits it.
func (e *Engine) sample(s *sequence, raw []float32, chosen int32, now time.Time) {
	r := s.req
	row := raw
	forced := e.forced(s)
	mask := s.generated < r.MinTokens
	constrained := s.guide.point != nil
	if forced < 0 && (mask || s.seen != nil || constrained && s.sampler.Ranked()) {
		row = slices.Clone(raw)
	}
	if mask && forced < 0 { // min_tokens: no end of sequence yet
		for id := range r.stopIDs {
			row[id] = float32(math.Inf(-1))
		}
		if !r.IgnoreEOS {
			for id := range e.eos {
				row[id] = float32(math.Inf(-1))
			}
		}
	}
	if s.seen != nil && forced < 0 {
		s.sampler.Penalize(row, s.seen, s.counts)
	}
	tok := forced
	switch {
	case forced >= 0:
	case raw == nil:
		tok = chosen
	case constrained && !s.sampler.Ranked():
		// Rejection sampling: draw from the whole row until the grammar
		// allows the token (greedy: take the next best), which is exact for
		// greedy and plain temperature sampling and needs no mask in most
		// steps; after a few rejections the allowed set is small, and the
		// mask (cached where states recur) is cheaper: draw from the masked
		// row, also exact (p(t) + (1-Z)·p(t)/Z = p(t)/Z).
		tok = s.sampler.Sample(row)
		for try := 0; !e.allows(s, tok); try++ {
			if try < maxRejections {
				tok = s.sampler.Again(row)
				continue
			}
			if s.guide.phase == phaseThinking { // only the ends are barred
				row = slices.Clone(row)
				e.constrain(s, row)
				tok = s.sampler.Sample(row)
			} else {
				m, extra := e.answerSet(s)
				tok = s.sampler.RedrawIn(row, m, extra)
			}
			if tok < 0 {
				e.finish(s, FinishAbort, Output{Index: s.index}, e.noToken(s))
				return
			}
			break
		}
	case constrained:
		if err := e.constrain(s, row); err != nil {
			e.finish(s, FinishAbort, Output{Index: s.index}, err)
			return
		}
		tok = s.sampler.Sample(row)
	default:
		tok = s.sampler.Sample(row)
	}
	s.tokens = append(s.tokens, tok)
	s.generated++
	if s.seen != nil {
		s.seen[tok] = true
		s.counts[tok]++
	}
	if s.generated == 1 {
		s.first = now
	} else {
		s.interTokenSum += now.Sub(s.last)
	}
	s.last = now
	e.mu.Lock()
	e.stats.GeneratedTokens++
	e.mu.Unlock()

	out := Output{Index: s.index, TokenIDs: []int32{tok}}
	if r.Logprobs || r.TopLogprobs > 0 {
		chosen, top := Logprobs(raw, tok, r.TopLogprobs)
		out.Logprobs, out.TopLogprobs = []TokenLogprob{chosen}, [][]TokenLogprob{top}
	}
	complete, err := e.advance(s, tok)
	if err != nil {
		e.finish(s, FinishAbort, out, err)
		return
	}
	finish := FinishReason("")
	if (!r.IgnoreEOS && e.eos[tok]) || r.stopIDs[tok] {
		finish = FinishStop
		out.Text = s.stop.flush()
	} else {
		var delta string
		if e.tok.Known(tok) { // ids past the tokenizer's (padding) have no text
			var err error
			if delta, err = s.decoder.Add(tok); err != nil {
				e.finish(s, FinishAbort, out, err)
				return
			}
		}
		var stopped bool
		out.Text, stopped = s.stop.push(delta)
		if stopped {
			finish = FinishStop
		}
	}
	if finish == "" && (complete || s.generated >= r.MaxTokens || len(s.tokens) >= e.cfg.MaxModelLen) {
		finish = FinishLength
		if complete { // the grammar has nothing more to add
			finish = FinishStop
		}
		tail, _ := s.stop.push(s.decoder.Flush())
		out.Text += tail + s.stop.flush()
	}
	if finish != "" {
		e.finish(s, finish, out, nil)
		return
	}
	r.out.put(out, false)
}

// finish ends a sequence: the final output, a checkpoint of its state for
// the next turn of a conversation, and its blocks and slot freed.
func (e *Engine) finish(s *sequence, reason FinishReason, out Output, err error) {
	if s.done {
		return
	}
	if err == nil && reason != FinishAbort && !e.cfg.NoPrefixCaching && s.slot >= 0 && s.computed > 0 {
		e.checkpoint(s)
	}
	s.done = true
	e.release(s)
	e.running = slices.DeleteFunc(e.running, func(x *sequence) bool { return x == s })
	e.waiting = slices.DeleteFunc(e.waiting, func(x *sequence) bool { return x == s })
	r := s.req
	out.Index, out.Finished, out.FinishReason, out.Err = s.index, true, reason, err
	out.Usage = Usage{PromptTokens: s.promptLen, CompletionTokens: s.generated, CachedTokens: s.cached}
	if !s.scheduledAt.IsZero() {
		out.Timings.Queue = s.scheduledAt.Sub(r.arrival)
	}
	if !s.first.IsZero() {
		out.Timings.TimeToFirstToken = s.first.Sub(r.arrival)
	}
	if s.generated > 1 {
		out.Timings.MeanInterToken = s.interTokenSum / time.Duration(s.generated-1)
	}
	r.open--
	r.out.put(out, r.open == 0)
}

// abort ends every unfinished completion of r.
func (e *Engine) abort(r *request, reason FinishReason, err error) {
	for _, s := range r.seqs {
		e.finish(s, reason, Output{}, err)
	}
}
