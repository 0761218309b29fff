package grammar

import (
	"errors"
	"fmt"
	"strings"
)

// ErrGrammar is wrapped by every error about a grammar's text or shape.
var ErrGrammar = errors.New("grammar")

// span is an inclusive range of code points.
type span struct{ lo, hi rune }

// elem is one element of a sequence: a reference to a rule, or a class of
// code points (ranges, possibly negated).
type elem struct {
	rule   int // ≥ 0: the rule referred to; -1: a character class
	spans  []span
	negate bool
}

func (e elem) matches(r rune) bool {
	in := false
	for _, s := range e.spans {
		if r >= s.lo && r <= s.hi {
			in = true
			break
		}
	}
	return in != e.negate
}

// intersects reports whether the class matches some code point in
// [lo, hi].
func (e elem) intersects(lo, hi rune) bool {
	if !e.negate {
		for _, s := range e.spans {
			if s.lo <= hi && s.hi >= lo {
				return true
			}
		}
		return false
	}
	// Negated: some code point of [lo, hi] is outside every span. Walk up
	// from lo past the spans that cover it.
	for r := lo; r <= hi; {
		covered := false
		for _, s := range e.spans {
			if r >= s.lo && r <= s.hi {
				r, covered = s.hi+1, true
			}
		}
		if !covered {
			return true
		}
	}
	return false
}

// Grammar is a compiled grammar: rules of alternatives of sequences.
type Grammar struct {
	names []string
	rules [][][]elem // rule → alternatives → elements
	root  int
}

// check rejects references to undefined rules and left recursion (a rule
// that can reach itself without consuming input, which no stack-based
// matcher can expand).
func (g *Grammar) check(defined []bool) error {
	for r, alts := range g.rules {
		for _, seq := range alts {
			for _, e := range seq {
				if e.rule >= 0 && !defined[e.rule] {
					return fmt.Errorf("%w: rule %q refers to undefined rule %q", ErrGrammar, g.names[r], g.names[e.rule])
				}
			}
		}
	}
	nullable := make([]bool, len(g.rules))
	for changed := true; changed; {
		changed = false
		for r, alts := range g.rules {
			if nullable[r] {
				continue
			}
			for _, seq := range alts {
				if g.nullableSeq(seq, nullable) {
					nullable[r], changed = true, true
					break
				}
			}
		}
	}
	// Edges r → s where s can start r.
	state := make([]int8, len(g.rules)) // 0 new, 1 on the path, 2 done
	var visit func(r int, path []string) error
	visit = func(r int, path []string) error {
		state[r] = 1
		path = append(path, g.names[r])
		for _, seq := range g.rules[r] {
			for _, e := range seq {
				if e.rule < 0 {
					break
				}
				switch state[e.rule] {
				case 1:
					return fmt.Errorf("%w: left recursion: %s → %s", ErrGrammar, strings.Join(path, " → "), g.names[e.rule])
				case 0:
					if err := visit(e.rule, path); err != nil {
						return err
					}
				}
				if !nullable[e.rule] {
					break
				}
			}
		}
		state[r] = 2
		return nil
	}
	for r := range g.rules {
		if state[r] == 0 {
			if err := visit(r, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *Grammar) nullableSeq(seq []elem, nullable []bool) bool {
	for _, e := range seq {
		if e.rule < 0 || !nullable[e.rule] {
			return false
		}
	}
	return true
}
