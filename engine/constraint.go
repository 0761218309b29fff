package engine

import (
	"fmt"
	"math"

	"github.com/govllm/govllm/grammar"
)

// Reasoning says where a completion's reasoning block (<think> … </think>)
// can be. The grammar of a constrained request applies after it, and the
// reasoning stays free text.
type Reasoning uint8

const (
	ReasoningNone Reasoning = iota // the output is all answer
	ReasoningMay                   // the model may open a block with its first token
	ReasoningOpen                  // the prompt opened the block: the output starts in it
)

// phase is where a sequence is relative to its reasoning block.
type phase uint8

const (
	phaseAnswer   phase = iota
	phaseMayThink       // the first token may open a block
	phaseThinking
)

// guide is a sequence's place in its reasoning block and its grammar.
type guide struct {
	phase   phase
	point   *grammar.Point // nil: unconstrained
	thought int            // tokens generated inside the block
}

func newGuide(r *Request) *guide {
	g := &guide{}
	switch r.Reasoning {
	case ReasoningMay:
		g.phase = phaseMayThink
	case ReasoningOpen:
		g.phase = phaseThinking
	}
	if r.Grammar != nil {
		g.point = r.Grammar.Start()
	}
	return g
}

// GrammarVocab is the tokenizer's vocabulary prepared for grammar masks,
// built once, on first use. Added tokens other than the reasoning and
// tool-call tags (which grammars of tool calls spell) and ids without text
// take no part: a grammar constrains text.
func (e *Engine) GrammarVocab() *grammar.Vocab {
	e.vocabOnce.Do(func() {
		e.vocab = grammar.NewVocab(e.tok.VocabSize(), func(id int32) []byte {
			if e.tok.IsAdded(id) && !e.tok.IsMarker(id) || !e.tok.Known(id) {
				return nil
			}
			return e.tok.TokenBytes(id)
		})
	})
	return e.vocab
}

// forced is the token a sequence must take now, or -1: the end of its
// reasoning block when the thinking budget is spent.
func (e *Engine) forced(s *sequence) int32 {
	r := s.req
	if s.guide.phase == phaseThinking && r.ThinkingBudget != nil && s.guide.thought >= *r.ThinkingBudget {
		return e.think.close
	}
	return -1
}

// constrain masks row to what the guide allows: in the answer, the
// grammar's tokens, and the end of the sequence only where the grammar
// accepts; while thinking under a grammar, anything but the end (an answer
// must follow); before a possible block, the grammar's tokens or <think>.
func (e *Engine) constrain(s *sequence, row []float32) error {
	g, r := s.guide, s.req
	if g.point == nil {
		return nil
	}
	ninf := float32(math.Inf(-1))
	if g.phase == phaseThinking {
		for id := range e.eos {
			row[id] = ninf
		}
		for id := range r.stopIDs {
			row[id] = ninf
		}
		return nil
	}
	m := r.Grammar.Mask(g.point)
	keep := func(id int32) (float32, bool) {
		if id < 0 || int(id) >= len(row) {
			return 0, false
		}
		return row[id], true
	}
	var ends []int32
	var endLogits []float32
	if g.point.Accepting() {
		for id := range r.stopIDs {
			ends = append(ends, id)
		}
		if !r.IgnoreEOS {
			for id := range e.eos {
				ends = append(ends, id)
			}
		}
	}
	if g.phase == phaseMayThink && e.think.open >= 0 {
		ends = append(ends, e.think.open)
	}
	for _, id := range ends {
		l, _ := keep(id)
		endLogits = append(endLogits, l)
	}
	applyMask(row, m)
	allowed := !m.Empty()
	for i, id := range ends {
		if _, ok := keep(id); ok {
			row[id], allowed = endLogits[i], true
		}
	}
	if !allowed {
		return fmt.Errorf("engine: the grammar allows no token after %d generated tokens", s.generated)
	}
	return nil
}

// applyMask sets the logits of the ids outside m to -inf.
func applyMask(row []float32, m grammar.Mask) {
	ninf := float32(math.Inf(-1))
	for w, bits := range m {
		if bits == ^uint64(0) {
			continue
		}
		base := w * 64
		for b := range min(64, len(row)-base) {
			if bits&(1<<b) == 0 {
				row[base+b] = ninf
			}
		}
	}
	for i := len(m) * 64; i < len(row); i++ {
		row[i] = ninf
	}
}

// advance moves the guide past tok and reports whether the grammar is
// complete (it accepts and allows nothing more), so the sequence ends.
func (e *Engine) advance(s *sequence, tok int32) (complete bool, err error) {
	g, r := s.guide, s.req
	switch g.phase {
	case phaseMayThink:
		if tok == e.think.open {
			g.phase = phaseThinking
			return false, nil
		}
		g.phase = phaseAnswer
	case phaseThinking:
		if tok == e.think.close {
			g.phase = phaseAnswer
		} else {
			g.thought++
		}
		return false, nil
	}
	if g.point == nil || e.eos[tok] || r.stopIDs[tok] {
		return false, nil
	}
	g.point = r.Grammar.Advance(g.point, e.tok.TokenBytes(tok))
	if g.point.Dead() {
		return false, fmt.Errorf("engine: token %d left the grammar", tok)
	}
	return g.point.Accepting() && r.Grammar.Mask(g.point).Empty(), nil
}
