package engine

import (
	"log/slog"
	"slices"
	"time"
)

// scheduled is one sequence's share of a step: n tokens from its first
// uncomputed one, and whether the step ends with sampling its next token.
type scheduled struct {
	seq    *sequence
	n      int
	sample bool
}

// schedule picks the step's batch, as vLLM's V1 scheduler does: running
// sequences first, oldest first, then waiting ones while the token budget,
// the sequence limit, state slots and KV blocks allow. Prefill is chunked
// to the budget. When blocks run out, the newest running sequence is
// preempted (freed, to be recomputed later).
func (e *Engine) schedule() []scheduled {
	budget := e.cfg.MaxNumBatchedTokens
	var batch []scheduled
	for i := 0; i < len(e.running) && budget > 0; i++ {
		s := e.running[i]
		n := e.chunk(s, budget)
		preempted := false
		for !e.reserve(s, s.computed+n) {
			victim := e.running[len(e.running)-1]
			e.preempt(victim)
			if victim == s {
				preempted = true
				break
			}
		}
		if preempted {
			break
		}
		batch = append(batch, scheduled{s, n, s.computed+n == len(s.tokens)})
		budget -= n
	}
	for len(e.waiting) > 0 && budget > 0 && len(e.running) < e.cfg.MaxNumSeqs && len(e.freeSlots) > 0 {
		s := e.waiting[0]
		if err := e.admit(s); err != nil {
			e.abort(s.req, FinishAbort, err) // takes it off the queue
			continue
		}
		n := e.chunk(s, budget)
		if !e.reserve(s, s.computed+n) {
			e.release(s)
			s.computed, s.registeredBlocks = 0, 0
			if s.scheduledAt.IsZero() {
				s.cached = 0
			}
			break
		}
		e.waiting = e.waiting[1:]
		e.running = append(e.running, s)
		if s.scheduledAt.IsZero() { // first admission: count the prompt and its cache hit
			s.scheduledAt = time.Now()
			e.mu.Lock()
			e.stats.PromptTokens += s.promptLen
			e.stats.CachedTokens += s.cached
			e.mu.Unlock()
		}
		batch = append(batch, scheduled{s, n, s.computed+n == len(s.tokens)})
		budget -= n
	}
	return batch
}

// chunk is how many of s's uncomputed tokens run this step: within the
// budget, and stopping at the next checkpoint boundary of a long prefill.
func (e *Engine) chunk(s *sequence, budget int) int {
	n := min(len(s.tokens)-s.computed, budget)
	if !e.cfg.NoPrefixCaching {
		next := (s.computed/e.cfg.CheckpointInterval + 1) * e.cfg.CheckpointInterval
		if next < s.computed+n && next < len(s.tokens) {
			n = next - s.computed
		}
	}
	return n
}

// reserve gives s blocks for positions [0, upto).
func (e *Engine) reserve(s *sequence, upto int) bool {
	for len(s.blocks)*e.cfg.BlockSize < upto {
		b, ok := e.pool.alloc()
		if !ok {
			return false
		}
		s.blocks = append(s.blocks, b)
	}
	return true
}

// admit gives a waiting sequence a state slot and, with prefix caching,
// the longest cached prefix of its tokens.
func (e *Engine) admit(s *sequence) error {
	s.slot = e.freeSlots[len(e.freeSlots)-1]
	e.freeSlots = e.freeSlots[:len(e.freeSlots)-1]
	if err := e.cache.ResetSlot(s.slot); err != nil {
		return err
	}
	if e.cfg.NoPrefixCaching {
		return nil
	}
	h := s.hashesUpTo(len(s.tokens))
	bs := e.cfg.BlockSize
	for l := len(s.tokens) - 1; l > 0; l-- {
		ck := e.ckpts.find(h[l], s.tokens[:l])
		if ck == nil {
			continue
		}
		full := l / bs
		ok := true
		for i := range full {
			if !e.pool.has(h[(i+1)*bs]) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		for i := range full {
			b, _ := e.pool.lookup(h[(i+1)*bs])
			s.blocks = append(s.blocks, b)
		}
		if ck.snap.Rows > 0 {
			b, got := e.pool.alloc()
			if !got {
				e.releaseBlocks(s)
				return nil
			}
			s.blocks = append(s.blocks, b)
		}
		tail := -1
		if ck.snap.Rows > 0 {
			tail = int(s.blocks[full])
		}
		if err := e.cache.Restore(ck.snap, s.slot, tail); err != nil {
			// A snapshot that no longer fits is a miss; the slot is reset.
			e.releaseBlocks(s)
			return e.cache.ResetSlot(s.slot)
		}
		s.computed, s.registeredBlocks = l, full
		if s.scheduledAt.IsZero() {
			s.cached = min(l, s.promptLen)
		}
		return nil
	}
	return nil
}

// registerBlocks records the hashes of s's newly completed full blocks.
func (e *Engine) registerBlocks(s *sequence) {
	if e.cfg.NoPrefixCaching {
		return
	}
	bs := e.cfg.BlockSize
	full := s.computed / bs
	if full <= s.registeredBlocks {
		return
	}
	h := s.hashesUpTo(full * bs)
	for i := s.registeredBlocks; i < full; i++ {
		e.pool.register(s.blocks[i], h[(i+1)*bs])
	}
	s.registeredBlocks = full
}

// checkpoint saves s's state after its computed tokens.
func (e *Engine) checkpoint(s *sequence) {
	l, bs := s.computed, e.cfg.BlockSize
	tail, rows := -1, l%bs
	if rows > 0 {
		tail = int(s.blocks[l/bs])
	}
	snap, err := e.cache.Save(s.slot, tail, rows)
	if err != nil {
		slog.Warn("engine: no prefix checkpoint", "err", err) // a cache miss later, nothing worse
		return
	}
	h := s.hashesUpTo(l)
	e.ckpts.add(h[l], s.tokens[:l], snap)
}

// preempt frees a running sequence and puts it back at the front of the
// queue; its tokens so far are recomputed when it is scheduled again.
func (e *Engine) preempt(s *sequence) {
	e.release(s)
	s.computed, s.registeredBlocks = 0, 0
	e.running = slices.DeleteFunc(e.running, func(x *sequence) bool { return x == s })
	e.waiting = append([]*sequence{s}, e.waiting...)
	e.mu.Lock()
	e.stats.Preemptions++
	e.mu.Unlock()
}

func (e *Engine) releaseBlocks(s *sequence) {
	for _, b := range s.blocks {
		e.pool.release(b)
	}
	s.blocks = s.blocks[:0]
}

// release gives back s's blocks and state slot.
func (e *Engine) release(s *sequence) {
	e.releaseBlocks(s)
	if s.slot >= 0 {
		e.freeSlots = append(e.freeSlots, s.slot)
		s.slot = -1
	}
}
