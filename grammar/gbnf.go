package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxRepeat bounds {m,n} counts: each repetition is a copy of the element.
const maxRepeat = 1000

// ParseGBNF compiles a grammar in llama.cpp's GBNF: rules `name ::= body`
// with "literals", [character classes] (ranges, ^ negation), `.` (any
// character), rule references, (groups), alternatives `|`, and the
// postfix operators *, +, ? and {m}, {m,}, {m,n}; `#` starts a comment.
// Generation starts at rule root.
func ParseGBNF(src string) (*Grammar, error) {
	p := &gbnfParser{src: src, g: &Grammar{}, ids: map[string]int{}}
	g, err := p.parse()
	if err != nil {
		return nil, err
	}
	return g, nil
}

type gbnfParser struct {
	src     string
	pos     int
	g       *Grammar
	ids     map[string]int
	defined []bool
}

func (p *gbnfParser) errorf(format string, args ...any) error {
	line, col := 1, 1
	for _, r := range p.src[:min(p.pos, len(p.src))] {
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Errorf("%w: line %d, column %d: %s", ErrGrammar, line, col, fmt.Sprintf(format, args...))
}

func (p *gbnfParser) rule(name string) int {
	if id, ok := p.ids[name]; ok {
		return id
	}
	id := len(p.g.rules)
	p.ids[name] = id
	p.g.names = append(p.g.names, name)
	p.g.rules = append(p.g.rules, nil)
	p.defined = append(p.defined, false)
	return id
}

// fresh makes a rule for a group or a repetition, named after its parent.
func (p *gbnfParser) fresh(parent string, alts [][]elem) int {
	id := p.rule(fmt.Sprintf("%s_%d", parent, len(p.g.rules)))
	p.g.rules[id], p.defined[id] = alts, true
	return id
}

func (p *gbnfParser) parse() (*Grammar, error) {
	p.space(true)
	for p.pos < len(p.src) {
		name := p.name()
		if name == "" {
			return nil, p.errorf("expected a rule name")
		}
		p.space(false)
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			return nil, p.errorf("expected ::= after rule name %q", name)
		}
		p.pos += 3
		id := p.rule(name)
		if p.defined[id] {
			return nil, p.errorf("rule %q defined twice", name)
		}
		p.defined[id] = true // before the body, which may refer to it
		alts, err := p.alternatives(name, false)
		if err != nil {
			return nil, err
		}
		p.g.rules[id] = alts
		p.space(true)
	}
	root, ok := p.ids["root"]
	if !ok || !p.defined[root] {
		return nil, fmt.Errorf("%w: no rule named root", ErrGrammar)
	}
	p.g.root = root
	if err := p.g.check(p.defined); err != nil {
		return nil, err
	}
	return p.g, nil
}

// space skips blanks and comments; newlines too where newlines is set.
func (p *gbnfParser) space(newlines bool) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n'):
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

func isNameByte(c byte) bool {
	return c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func (p *gbnfParser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// atRuleStart reports whether a new rule definition starts at pos.
func (p *gbnfParser) atRuleStart() bool {
	save := p.pos
	defer func() { p.pos = save }()
	if p.name() == "" {
		return false
	}
	p.space(false)
	return strings.HasPrefix(p.src[p.pos:], "::=")
}

// alternatives parses `seq | seq ...` up to the end of the rule (the next
// definition or the end of the text) or, nested, up to the closing `)`.
func (p *gbnfParser) alternatives(rule string, nested bool) ([][]elem, error) {
	var alts [][]elem
	for {
		seq, err := p.sequence(rule, nested)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		p.space(true)
		if p.pos < len(p.src) && p.src[p.pos] == '|' {
			p.pos++
			continue
		}
		return alts, nil
	}
}

func (p *gbnfParser) sequence(rule string, nested bool) ([]elem, error) {
	var seq []elem
	for {
		p.space(true)
		if p.pos >= len(p.src) {
			if nested {
				return nil, p.errorf("missing )")
			}
			return seq, nil
		}
		c := p.src[p.pos]
		if c == '|' || c == ')' {
			if c == ')' && !nested {
				return nil, p.errorf("unexpected )")
			}
			return seq, nil
		}
		if !nested && p.atRuleStart() {
			return seq, nil
		}
		start := len(seq)
		switch {
		case c == '"':
			p.pos++
			for {
				if p.pos >= len(p.src) {
					return nil, p.errorf("unterminated string")
				}
				if p.src[p.pos] == '"' {
					p.pos++
					break
				}
				r, err := p.char()
				if err != nil {
					return nil, err
				}
				seq = append(seq, elem{rule: -1, spans: []span{{r, r}}})
			}
		case c == '[':
			e, err := p.class()
			if err != nil {
				return nil, err
			}
			seq = append(seq, e)
		case c == '.':
			p.pos++
			seq = append(seq, elem{rule: -1, spans: []span{{0, utf8.MaxRune}}})
		case c == '(':
			p.pos++
			alts, err := p.alternatives(rule, true)
			if err != nil {
				return nil, err
			}
			if p.pos >= len(p.src) || p.src[p.pos] != ')' {
				return nil, p.errorf("missing )")
			}
			p.pos++
			seq = append(seq, elem{rule: p.fresh(rule, alts)})
		case isNameByte(c):
			seq = append(seq, elem{rule: p.rule(p.name())})
		default:
			return nil, p.errorf("unexpected %q", c)
		}
		var err error
		if seq, err = p.postfix(rule, seq, start); err != nil {
			return nil, err
		}
	}
}

// postfix applies a repetition operator to what seq[start:] parsed last
// (a literal's operator applies to its whole string, as in llama.cpp).
func (p *gbnfParser) postfix(rule string, seq []elem, start int) ([]elem, error) {
	p.space(false)
	if p.pos >= len(p.src) {
		return seq, nil
	}
	lo, hi := 0, -1 // hi -1: unbounded
	switch p.src[p.pos] {
	case '*':
		p.pos++
	case '+':
		p.pos, lo = p.pos+1, 1
	case '?':
		p.pos, hi = p.pos+1, 1
	case '{':
		p.pos++
		var err error
		if lo, hi, err = p.counts(); err != nil {
			return nil, err
		}
	default:
		return seq, nil
	}
	item := append([]elem(nil), seq[start:]...)
	seq = seq[:start]
	for range lo {
		seq = append(seq, item...)
	}
	if hi < 0 { // item*: star ::= item star | ε
		star := p.fresh(rule, nil)
		p.g.rules[star] = [][]elem{append(append([]elem(nil), item...), elem{rule: star}), nil}
		return append(seq, elem{rule: star}), nil
	}
	// hi-lo optional copies, nested: opt ::= item opt' | ε.
	next := -1
	for range hi - lo {
		alt := append([]elem(nil), item...)
		if next >= 0 {
			alt = append(alt, elem{rule: next})
		}
		next = p.fresh(rule, [][]elem{alt, nil})
	}
	if next >= 0 {
		seq = append(seq, elem{rule: next})
	}
	return seq, nil
}

func (p *gbnfParser) counts() (lo, hi int, err error) {
	num := func() (int, bool) {
		p.space(false)
		start := p.pos
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
		}
		if start == p.pos {
			return 0, false
		}
		n, err := strconv.Atoi(p.src[start:p.pos])
		return n, err == nil && n <= maxRepeat
	}
	var ok bool
	if lo, ok = num(); !ok {
		return 0, 0, p.errorf("expected a count from 0 to %d in {}", maxRepeat)
	}
	hi = lo
	p.space(false)
	if p.pos < len(p.src) && p.src[p.pos] == ',' {
		p.pos++
		p.space(false)
		if p.pos < len(p.src) && p.src[p.pos] == '}' {
			hi = -1
		} else if hi, ok = num(); !ok || hi < lo {
			return 0, 0, p.errorf("expected a count from %d to %d after ,", lo, maxRepeat)
		}
	}
	p.space(false)
	if p.pos >= len(p.src) || p.src[p.pos] != '}' {
		return 0, 0, p.errorf("missing }")
	}
	p.pos++
	return lo, hi, nil
}

// class parses [...] at pos.
func (p *gbnfParser) class() (elem, error) {
	p.pos++ // [
	e := elem{rule: -1}
	if p.pos < len(p.src) && p.src[p.pos] == '^' {
		e.negate = true
		p.pos++
	}
	for {
		if p.pos >= len(p.src) {
			return e, p.errorf("unterminated character class")
		}
		if p.src[p.pos] == ']' {
			p.pos++
			return e, nil
		}
		lo, err := p.char()
		if err != nil {
			return e, err
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			if hi, err = p.char(); err != nil {
				return e, err
			}
			if hi < lo {
				return e, p.errorf("range %q-%q is reversed", lo, hi)
			}
		}
		e.spans = append(e.spans, span{lo, hi})
	}
}

// char reads one literal character, escapes included.
func (p *gbnfParser) char() (rune, error) {
	if p.src[p.pos] != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		if r == utf8.RuneError && n <= 1 {
			return 0, p.errorf("invalid UTF-8")
		}
		p.pos += n
		return r, nil
	}
	p.pos++
	if p.pos >= len(p.src) {
		return 0, p.errorf("unterminated escape")
	}
	c := p.src[p.pos]
	p.pos++
	switch c {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '\\', '"', '[', ']', '-', '^':
		return rune(c), nil
	case 'x', 'u', 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
		if p.pos+n > len(p.src) {
			return 0, p.errorf("short \\%c escape", c)
		}
		v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
		if err != nil || v > utf8.MaxRune {
			return 0, p.errorf("bad \\%c escape %q", c, p.src[p.pos:p.pos+n])
		}
		p.pos += n
		return rune(v), nil
	}
	return 0, p.errorf("unknown escape \\%c", c)
}
