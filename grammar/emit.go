package grammar

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// emitter writes GBNF rules for the compilers of JSON Schema and regular
// expressions, which build grammars as text, as llama.cpp does, so that
// what they make can be read (Grammar.String) and goes through one parser.
type emitter struct {
	lines  []string
	names  map[string]bool
	bodies map[string]string // body → the rule that shared made of it
}

func newEmitter() *emitter { return &emitter{names: map[string]bool{}, bodies: map[string]string{}} }

// shared is a rule for body, one per distinct body.
func (e *emitter) shared(base, body string) string {
	if name, ok := e.bodies[body]; ok {
		return name
	}
	name := e.rule(base, body)
	e.bodies[body] = name
	return name
}

// rule adds `name ::= body` under a fresh name made from base.
func (e *emitter) rule(base, body string) string {
	var b strings.Builder
	for i := 0; i < len(base) && b.Len() < 40; i++ {
		if isNameByte(base[i]) {
			b.WriteByte(base[i])
		} else {
			b.WriteByte('-')
		}
	}
	name := b.String()
	if name == "" {
		name = "r"
	}
	for i := 1; e.names[name]; i++ {
		name = fmt.Sprintf("%s-%d", strings.TrimRight(b.String(), "0123456789-"), i)
	}
	e.define(name, body)
	return name
}

// define adds `name ::= body` once.
func (e *emitter) define(name, body string) string {
	if !e.names[name] {
		e.names[name] = true
		e.lines = append(e.lines, name+" ::= "+body)
	}
	return name
}

// text is the grammar with root ::= body first.
func (e *emitter) text(body string) string {
	return "root ::= " + body + "\n" + strings.Join(e.lines, "\n") + "\n"
}

// gbnfLiteral quotes s as a GBNF literal.
func gbnfLiteral(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			writeRune(&b, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// gbnfClass writes a character class of the spans.
func gbnfClass(spans []span, negate bool) string {
	var b strings.Builder
	b.WriteByte('[')
	if negate {
		b.WriteByte('^')
	}
	for _, s := range spans {
		classRune(&b, s.lo)
		if s.hi != s.lo {
			b.WriteByte('-')
			classRune(&b, s.hi)
		}
	}
	b.WriteByte(']')
	return b.String()
}

func classRune(b *strings.Builder, r rune) {
	switch r {
	case '\\', ']', '[', '-', '^', '"':
		b.WriteByte('\\')
		b.WriteRune(r)
	default:
		writeRune(b, r)
	}
}

// writeRune writes r plainly if it is printable ASCII or a valid non-ASCII
// code point, as an escape otherwise.
func writeRune(b *strings.Builder, r rune) {
	switch {
	case r >= 0x20 && r < 0x7f:
		b.WriteRune(r)
	case r < 0x100:
		fmt.Fprintf(b, `\x%02X`, r)
	case r < 0x10000 && utf8.ValidRune(r):
		b.WriteRune(r)
	case r < 0x10000:
		fmt.Fprintf(b, `\u%04X`, r)
	default:
		fmt.Fprintf(b, `\U%08X`, r)
	}
}
