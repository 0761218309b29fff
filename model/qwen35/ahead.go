package qwen35

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"

	rt "github.com/govllm/govllm/runtime"
)

// A decode step's work does not depend on its tokens' values until the
// GPU runs it: only their staged copy does. So while the GPU runs step N,
// the host records step N+1 as it would be if every sequence went on by
// one token (vLLM's async scheduling overlaps the same way). If the next
// step asked for is exactly that one, its tokens are restaged into the
// recording, or where they are step N's greedy tokens, fed to it from
// where N leaves them on the device (LaunchNext), so that it is issued
// before N ends; any other step drops the recording. The recording is
// what a step recorded on the spot would be, so the outputs do not change,
// only the host's time between steps.

// recordAhead can be turned off by tests, to compare.
var recordAhead = true

// ErrNotChained is LaunchNext's refusal: the backend or the steps do not
// allow the step to be issued before the one it follows ends. Nothing was
// issued; launch the step once its tokens are known instead.
var ErrNotChained = errors.New("qwen35: the step cannot be issued behind the last one")

// ahead is a step recorded ahead and the sequences it was recorded for.
type ahead struct {
	rec    rt.Recording
	seqs   []Seq   // with placeholder tokens
	blocks []int32 // the seqs' Blocks, copied: the caller's may change
	ids    []int32 // the token ids it staged
	out    stepOut
}

// follows reports whether seqs are the step a was recorded for.
func (a *ahead) follows(seqs []Seq) bool {
	if len(seqs) != len(a.seqs) {
		return false
	}
	off := 0
	for i, s := range seqs {
		p := a.seqs[i]
		if len(s.Tokens) != 1 || s.Start != p.Start || s.Slot != p.Slot || s.Logits != p.Logits ||
			!slices.Equal(s.Blocks, a.blocks[off:off+len(p.Blocks)]) {
			return false
		}
		off += len(p.Blocks)
	}
	return true
}

// Launched is a step issued to the backend and not necessarily finished.
// It is the cache's: the second Launch or LaunchNext after it reuses it.
type Launched struct {
	c      *Cache
	seqs   []Seq // the caller's: Wait sets their Next
	out    stepOut
	issued rt.Issued // nil where the step ran eagerly
	tokens []int32   // the greedy tokens in seqs' order, once known
	waited bool
	logits *rt.Tensor
	err    error

	planned []Seq // LaunchNext's sequences, their tokens in ids
	ids     []int32
}

// Tokens are the step's greedy tokens, one per LastToken sequence in
// order; valid after Wait.
func (l *Launched) Tokens() []int32 { return l.tokens }

// Wait waits for the step and returns its logits as ForwardBatch does; it
// sets the LastToken sequences' Next. Waiting again returns the same.
func (l *Launched) Wait() (*rt.Tensor, error) {
	if l.waited {
		return l.logits, l.err
	}
	l.waited = true
	l.logits, l.err = l.wait()
	return l.logits, l.err
}

func (l *Launched) wait() (*rt.Tensor, error) {
	c := l.c
	var err error
	if l.issued != nil {
		err = l.issued.Wait()
	} else {
		err = c.mem.Sync() // a kernel's failure, named by its op
	}
	if err != nil {
		return nil, err
	}
	if l.out.host != nil { // read back by the step
		l.tokens = append(l.tokens[:0], l.out.host.I32()...)
	}
	k := 0
	for i := range l.seqs {
		if l.seqs[i].Logits == LastToken {
			l.seqs[i].Next = l.tokens[k]
			k++
		}
	}
	logits, err := toHost(c, &c.logits, l.out.logits)
	if err != nil {
		return nil, fmt.Errorf("qwen35: logits to the host: %w", err)
	}
	return logits, nil
}

// newLaunched takes the cache's older Launched for a new step, waiting for
// what it held.
func (c *Cache) newLaunched(seqs []Seq) *Launched {
	l := &c.launched[c.launches%2]
	c.launches++
	if !l.waited && l.c != nil {
		l.Wait()
	}
	*l = Launched{c: c, seqs: seqs, tokens: l.tokens[:0], planned: l.planned[:0], ids: l.ids[:0]}
	return l
}

// drain waits for the steps launched and not waited for: the cache's
// memory is about to be used outside a step.
func (c *Cache) drain() {
	for i := range c.launched {
		if l := &c.launched[i]; l.c != nil && !l.waited {
			l.Wait() // its error is its caller's, who waits for it too
		}
	}
}

// Overlaps reports whether LaunchNext can issue a step before the one it
// follows ends (a GPU that records steps, one rank).
func (m *Model) Overlaps() bool {
	_, ok := m.be.Memory().(rt.Stepper)
	return ok && m.allReduce == nil && recordAhead
}

// Launch issues one step over seqs, as ForwardBatch does, and returns
// without waiting for it where the backend allows.
func (m *Model) Launch(c *Cache, seqs []Seq, fo ForwardOptions) (*Launched, error) {
	c.drain()
	l := c.newLaunched(seqs)
	var err error
	if st, ok := m.be.Memory().(rt.Stepper); ok && fo.Hidden == nil { // an observer reads activations mid-step
		l.out, l.issued, err = m.stepped(st, c, seqs)
	} else {
		l.out, err = m.forward(c, seqs, fo)
	}
	return settle(c, l, err)
}

// settle finishes launching l, whose step returned err: a step the arena
// refused fails with that (what the ops refused follows from it), a failed
// step is waited for, and greedy tokens left in host memory (the CPU's)
// are kept, since the next step's buffers are the same.
func settle(c *Cache, l *Launched, err error) (*Launched, error) {
	if e := c.arena.Err(); e != nil {
		err = fmt.Errorf("qwen35: step activations: %w", e)
	}
	if err != nil {
		l.waited, l.err = true, err
		if l.issued != nil {
			l.issued.Wait()
		}
		return nil, err
	}
	if t := l.out.tokens; t != nil && !t.OnDevice() {
		l.tokens = append(l.tokens[:0], t.I32()...)
	}
	return l, nil
}

// LaunchNext issues the step that follows prev, the last step launched on
// c, in which each of prev's sequences (each one LastToken token) goes on
// by the token prev chose for it: seqs are those sequences in prev's
// order, at the next position, their Tokens ignored. On a GPU it is issued
// behind prev, before prev's tokens reach the host: it takes them from
// where prev leaves them on the device. ErrNotChained where that cannot
// be done.
func (m *Model) LaunchNext(c *Cache, prev *Launched, seqs []Seq) (*Launched, error) {
	if err := m.chains(c, prev, seqs); err != nil {
		return nil, err
	}
	st, gpu := m.be.Memory().(rt.Stepper)
	if !gpu || prev.issued == nil {
		if !prev.waited {
			if _, err := prev.Wait(); err != nil {
				return nil, err
			}
		}
		l := c.newLaunched(seqs)
		l.ids = append(l.ids, prev.tokens...)
		for i, s := range seqs {
			s.Tokens = l.ids[i : i+1]
			l.planned = append(l.planned, s)
		}
		var err error
		l.out, err = m.forward(c, l.planned, ForwardOptions{})
		return settle(c, l, err)
	}
	a := c.ahead
	c.ahead = nil
	if a == nil || !a.follows(seqs) {
		if a = m.record(st, c, seqs); a == nil {
			return nil, fmt.Errorf("%w: the step could not be recorded", ErrNotChained)
		}
	}
	if err := a.rec.Feed(a.ids, prev.out.tokens); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotChained, err)
	}
	issued, err := a.rec.Issue()
	if errors.Is(err, rt.ErrStaleRecording) {
		return nil, fmt.Errorf("%w: %w", ErrNotChained, err)
	}
	if err != nil {
		return nil, err
	}
	l := c.newLaunched(seqs)
	l.out, l.issued = a.out, issued // a is reused by the recording of the step after
	m.recordNext(st, c, seqs)
	return l, nil
}

// chains checks that seqs can follow prev, fed its tokens.
func (m *Model) chains(c *Cache, prev *Launched, seqs []Seq) error {
	switch {
	case prev == nil || prev.c != c || prev != &c.launched[(c.launches+1)%2]:
		return fmt.Errorf("%w: the step before is not the last launched on this cache", ErrNotChained)
	case prev.err != nil:
		return fmt.Errorf("%w: the step before failed", ErrNotChained)
	case m.allReduce != nil:
		return fmt.Errorf("%w: tensor-parallel steps are issued one at a time", ErrNotChained)
	case len(seqs) != len(prev.seqs):
		return fmt.Errorf("%w: %d sequences follow a step of %d", ErrNotChained, len(seqs), len(prev.seqs))
	}
	for i, s := range seqs {
		p := prev.seqs[i]
		if len(p.Tokens) != 1 || p.Logits != LastToken || s.Logits != LastToken || s.Slot != p.Slot || s.Start != p.Start+1 {
			return fmt.Errorf("%w: sequence %d is not the one-token greedy step after the last", ErrNotChained, i)
		}
	}
	return nil
}

// stepped runs seqs as one recorded step (a CUDA graph where the step
// repeats an earlier one), issued and not waited for, and records the
// step after it while the GPU runs this one.
func (m *Model) stepped(st rt.Stepper, c *Cache, seqs []Seq) (stepOut, rt.Issued, error) {
	var out stepOut
	var issued rt.Issued
	if a := c.ahead; a != nil {
		c.ahead = nil
		if a.follows(seqs) {
			var err error
			issued, err = m.issueAhead(a, seqs)
			if err != nil && !errors.Is(err, rt.ErrStaleRecording) {
				return stepOut{}, nil, err
			}
			if err != nil {
				slog.Debug("qwen35: step recorded ahead not issued", "err", err)
			}
			out = a.out // a is reused by the recording of the step after
		}
	}
	if issued == nil {
		var err error
		issued, err = st.Step(func() error {
			var err error
			out, err = m.forward(c, seqs, ForwardOptions{})
			return err
		})
		if err != nil {
			return stepOut{}, nil, err
		}
	}
	m.recordNext(st, c, seqs)
	return out, issued, nil
}

// issueAhead puts seqs' tokens into the step recorded ahead and issues it.
func (m *Model) issueAhead(a *ahead, seqs []Seq) (rt.Issued, error) {
	for i, s := range seqs {
		if id := s.Tokens[0]; id < 0 || int(id) >= m.Config.VocabSize {
			return nil, fmt.Errorf("qwen35: %w: sequence %d: token id %d at index 0 is outside the vocabulary of %d", ErrInput, i, id, m.Config.VocabSize)
		}
		a.ids[i] = s.Tokens[0]
	}
	if err := a.rec.Restage(a.ids); err != nil {
		return nil, fmt.Errorf("%w: %w", rt.ErrStaleRecording, err)
	}
	return a.rec.Issue()
}

// recordNext records the step that follows seqs if each goes on by one
// token in the blocks it has: run while the GPU runs seqs' step, it costs
// the host time the GPU would otherwise wait for.
func (m *Model) recordNext(st rt.Stepper, c *Cache, seqs []Seq) {
	c.ahead = nil
	if !recordAhead {
		return
	}
	next := c.nextSeqs[:0]
	for _, s := range seqs {
		if len(s.Tokens) != 1 || s.Start+2 > len(s.Blocks)*c.BlockSize {
			return
		}
		s.Start++
		next = append(next, s)
	}
	c.nextSeqs = next
	c.ahead = m.record(st, c, next)
}

// record records seqs (one token each) as the step after the one issued
// last, with placeholder tokens; nil where it cannot be recorded ahead.
func (m *Model) record(st rt.Stepper, c *Cache, seqs []Seq) *ahead {
	// Only a step of the same shape as the one running: its tensors are
	// that step's again, so recording it moves no buffer the GPU is using.
	if !recordAhead || c.arena.Err() != nil {
		return nil
	}
	a := &c.next
	a.seqs, a.blocks = a.seqs[:0], a.blocks[:0]
	for len(c.placeholder) < len(seqs) {
		c.placeholder = append(c.placeholder, 0)
	}
	for i, s := range seqs {
		if len(s.Tokens) != 1 {
			return nil
		}
		a.seqs = append(a.seqs, Seq{Tokens: c.placeholder[i : i+1], Start: s.Start, Blocks: s.Blocks, Slot: s.Slot, Logits: s.Logits})
		a.blocks = append(a.blocks, s.Blocks...)
	}
	rec, err := st.Record(func() error {
		var err error
		a.out, err = m.forward(c, a.seqs, ForwardOptions{})
		return err
	})
	if err == nil && c.arena.Err() != nil {
		err = c.arena.Err()
	}
	if err != nil {
		c.arena.Reset() // its error was the recording's, not this step's
		slog.Debug("qwen35: step not recorded ahead", "err", err)
		return nil
	}
	a.rec, a.ids = rec, c.step.ids
	return a
}
