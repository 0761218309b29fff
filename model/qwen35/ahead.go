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
// ForwardBatch asks for exactly that step, its tokens are restaged into
// the recording and it is issued without being recorded again; any other
// step drops it. The recording is what a step recorded on the spot would
// be, so the outputs do not change, only the host's time between steps.

// recordAhead can be turned off by tests, to compare.
var recordAhead = true

// ahead is a step recorded ahead and the sequences it was recorded for.
type ahead struct {
	rec    rt.Recording
	seqs   []Seq   // with placeholder tokens
	blocks []int32 // the seqs' Blocks, copied: the caller's may change
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

// stepped runs seqs as one recorded step (a CUDA graph where the step
// repeats an earlier one) and records the step after it while the GPU
// runs this one.
func (m *Model) stepped(st rt.Stepper, c *Cache, seqs []Seq) (stepOut, error) {
	then := func() { m.recordNext(st, c, seqs) }
	if a := c.ahead; a != nil {
		c.ahead = nil
		if a.follows(seqs) {
			out, err := m.issueAhead(a, c, seqs, then)
			if !errors.Is(err, rt.ErrStaleRecording) {
				return out, err
			}
			slog.Debug("qwen35: step recorded ahead not issued", "err", err)
		}
	}
	var out stepOut
	err := st.Step(func() error {
		var err error
		out, err = m.forward(c, seqs, ForwardOptions{})
		return err
	}, then)
	return out, err
}

// issueAhead puts seqs' tokens into the step recorded ahead and issues it.
func (m *Model) issueAhead(a *ahead, c *Cache, seqs []Seq, then func()) (stepOut, error) {
	b := &c.step // as the recording planned it
	for i, s := range seqs {
		if id := s.Tokens[0]; id < 0 || int(id) >= m.Config.VocabSize {
			return stepOut{}, fmt.Errorf("qwen35: %w: sequence %d: token id %d at index 0 is outside the vocabulary of %d", ErrInput, i, id, m.Config.VocabSize)
		}
		b.ids[i] = s.Tokens[0]
	}
	b.seqs = seqs
	if err := a.rec.Restage(b.ids); err != nil {
		return stepOut{}, fmt.Errorf("%w: %w", rt.ErrStaleRecording, err)
	}
	out := a.out // a is reused by the recording of the step after
	return out, a.rec.Issue(then)
}

// recordNext records the step that follows seqs if each goes on by one
// token in the blocks it has: run while the GPU runs seqs' step, it costs
// the host time the GPU would otherwise wait for.
func (m *Model) recordNext(st rt.Stepper, c *Cache, seqs []Seq) {
	c.ahead = nil
	// Only a step of the same shape as this one: its tensors are this
	// step's again, so recording it moves no buffer the GPU is using.
	if !recordAhead || c.arena.Err() != nil {
		return
	}
	a := &c.next
	a.seqs, a.blocks = a.seqs[:0], a.blocks[:0]
	for len(c.placeholder) < len(seqs) {
		c.placeholder = append(c.placeholder, 0)
	}
	for i, s := range seqs {
		if len(s.Tokens) != 1 || s.Start+2 > len(s.Blocks)*c.BlockSize {
			return
		}
		a.seqs = append(a.seqs, Seq{Tokens: c.placeholder[i : i+1], Start: s.Start + 1, Blocks: s.Blocks, Slot: s.Slot, Logits: s.Logits})
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
		slog.Debug("qwen35: next step not recorded ahead", "err", err)
		return
	}
	a.rec = rec
	c.ahead = a
}
