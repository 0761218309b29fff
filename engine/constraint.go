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
	m, extra := e.answerSet(s)
	saved := make([]float32, len(extra))
	for i, id := range extra {
		saved[i] = row[id]
	}
	applyMask(row, m)
	for i, id := range extra {
		row[id] = saved[i]
	}
	if m.Empty() && len(extra) == 0 {
		return e.noToken(s)
	}
	return nil
}

func (e *Engine) noToken(s *sequence) error {
	return fmt.Errorf("engine: the grammar allows no token after %d generated tokens", s.generated)
}

// answerSet is what the grammar lets through in the answer (or before a
// possible reasoning block): the mask's tokens, and beside them extra, the
// ends of the sequence where the grammar accepts and <think> where a block
// may open. Ids outside the model's vocabulary are left out.
func (e *Engine) answerSet(s *sequence) (grammar.Mask, []int32) {
	g, r := s.guide, s.req
	m := r.Grammar.Mask(g.point)
	var extra []int32
	add := func(id int32) {
		if id >= 0 && int(id) < e.m.Config.VocabSize && (int(id) >= len(m)*64 || !m.Has(id)) {
			extra = append(extra, id)
		}
	}
	if g.point.Accepting() {
		for id := range r.stopIDs {
			add(id)
		}
		if !r.IgnoreEOS {
			for id := range e.eos {
				add(id)
			}
		}
	}
	if g.phase == phaseMayThink {
		add(e.think.open)
	}
	return m, extra
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
// complete (every parse has finished), so the sequence ends.
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
	return g.point.Final(), nil
}

// allows reports whether the guide's mask would let tok through, without
// computing the mask: a sampled token is checked by advancing the grammar
// over its bytes (transitions the masker caches).
func (e *Engine) allows(s *sequence, tok int32) bool {
	g, r := s.guide, s.req
	if g.point == nil {
		return true
	}
	if g.phase == phaseThinking {
		return !e.eos[tok] && !r.stopIDs[tok]
	}
	if g.phase == phaseMayThink && tok == e.think.open {
		return true
	}
	if r.stopIDs[tok] || !r.IgnoreEOS && e.eos[tok] {
		return g.point.Accepting()
	}
	if !e.tok.Known(tok) || e.tok.IsAdded(tok) && !e.tok.IsMarker(tok) {
		return false
	}
	return !r.Grammar.Advance(g.point, e.tok.TokenBytes(tok)).Dead()
}
