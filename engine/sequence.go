package engine

import (
	"context"
	"sync"
	"time"

	"github.com/govllm/govllm/tokenizer"
)

// request is a submitted Request and its completions.
type request struct {
	Request
	ctx     context.Context
	out     *outbox
	seqs    []*sequence
	open    int // unfinished completions
	stopIDs map[int32]bool
	arrival time.Time
}

// sequence is one completion: its tokens, what of them is in the cache,
// and its output state.
type sequence struct {
	req      *request
	index    int
	tokens   []int32 // prompt, then generated
	computed int     // tokens whose keys, values and state are in the cache
	blocks   []int32
	hashes   []uint64 // hashes[i]: prefix hash of tokens[:i]
	slot     int      // DeltaNet state slot, -1 when not running
	sampler  *Sampler
	decoder  *tokenizer.StreamDecoder
	stop     *stopMatcher
	seen     map[int32]bool // for the repetition penalty
	counts   map[int32]int  // output token counts, for presence/frequency
	cached   int            // prompt tokens served from the prefix cache
	guide    *guide         // reasoning block and grammar
	done     bool

	generated                   int
	scheduledAt, first, last    time.Time
	interTokenSum               time.Duration
	promptLen, registeredBlocks int
}

// hashesUpTo extends the prefix hashes to cover tokens[:n].
func (s *sequence) hashesUpTo(n int) []uint64 {
	if len(s.hashes) == 0 {
		s.hashes = []uint64{fnvOffset}
	}
	for i := len(s.hashes) - 1; i < n; i++ {
		s.hashes = append(s.hashes, hashToken(s.hashes[i], s.tokens[i]))
	}
	return s.hashes
}

// outbox queues a request's outputs without bounds, so that the engine
// never waits for a slow reader, and forwards them to the reader's channel.
type outbox struct {
	mu     sync.Mutex
	items  []Output
	closed bool
	notify chan struct{}
	ch     chan Output
}

// newOutbox makes the queue; its forwarder starts once the request is
// accepted.
func newOutbox() *outbox {
	return &outbox{notify: make(chan struct{}, 1), ch: make(chan Output)}
}

// put queues an output; last closes the stream after it.
func (o *outbox) put(out Output, last bool) {
	o.mu.Lock()
	o.items = append(o.items, out)
	o.closed = o.closed || last
	o.mu.Unlock()
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

func (o *outbox) forward(ctx context.Context) {
	defer close(o.ch)
	for {
		o.mu.Lock()
		items, closed := o.items, o.closed
		o.items = nil
		o.mu.Unlock()
		for _, it := range items {
			if ctx.Err() != nil && !it.Finished {
				continue // the reader cancelled: only the final output matters
			}
			select {
			case o.ch <- it:
			case <-ctx.Done():
				if it.Finished { // give a reader still listening the final output
					select {
					case o.ch <- it:
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
		}
		if closed {
			return
		}
		<-o.notify
	}
}
