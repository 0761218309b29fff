package grammar

import (
	"fmt"
	"regexp/syntax"
	"strings"
	"unicode"
)

// FromRegex compiles a regular expression in Go's syntax (RE2, which vLLM's
// guided_regex patterns are written for) into a grammar of the texts it
// matches whole.
func FromRegex(pattern string) (*Grammar, error) {
	e := newEmitter()
	body, err := regexBody(e, pattern, rawText, true)
	if err != nil {
		return nil, err
	}
	return ParseGBNF(e.text(body))
}

// alphabet says how a code point the regex matches is written in the
// output: as itself, or as it appears inside a JSON string.
type alphabet int

const (
	rawText  alphabet = iota
	jsonText          // inside a JSON string: escapes where JSON needs them, and for '<'
	xmlText           // an XML tool-call value: raw, without '<'
)

// regexBody compiles pattern to a GBNF expression. whole: the pattern must
// match the whole text (guided_regex); otherwise, as JSON Schema's
// pattern, it may match anywhere unless anchored with ^ and $.
func regexBody(e *emitter, pattern string, a alphabet, whole bool) (string, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", fmt.Errorf("%w: regex %q: %v", ErrGrammar, pattern, err)
	}
	rc := &regexCompiler{e: e, a: a}
	// Anchors may start and end the pattern; elsewhere they would need
	// look-around, which a grammar has not.
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = re.Sub
	}
	begin, end := whole, whole
	if len(subs) > 0 && subs[0].Op == syntax.OpBeginText {
		begin, subs = true, subs[1:]
	}
	if len(subs) > 0 && subs[len(subs)-1].Op == syntax.OpEndText {
		end, subs = true, subs[:len(subs)-1]
	}
	var parts []string
	if !begin {
		parts = append(parts, rc.anyChar(true)+"*")
	}
	for _, s := range subs {
		p, err := rc.expr(s)
		if err != nil {
			return "", fmt.Errorf("%w: regex %q: %v", ErrGrammar, pattern, err)
		}
		parts = append(parts, p)
	}
	if !end {
		parts = append(parts, rc.anyChar(true)+"*")
	}
	if len(parts) == 0 {
		return `""`, nil
	}
	return strings.Join(parts, " "), nil
}

type regexCompiler struct {
	e *emitter
	a alphabet
}

func (rc *regexCompiler) expr(re *syntax.Regexp) (string, error) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return `""`, nil
	case syntax.OpNoMatch:
		return "", fmt.Errorf("it matches nothing")
	case syntax.OpLiteral:
		var parts []string
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				parts = append(parts, rc.class(foldSpans(r)))
			} else {
				parts = append(parts, rc.class([]span{{r, r}}))
			}
		}
		return strings.Join(parts, " "), nil
	case syntax.OpCharClass:
		var spans []span
		for i := 0; i+1 < len(re.Rune); i += 2 {
			spans = append(spans, span{re.Rune[i], re.Rune[i+1]})
		}
		if len(spans) == 0 {
			return "", fmt.Errorf("an empty character class matches nothing")
		}
		return rc.class(spans), nil
	case syntax.OpAnyCharNotNL:
		return rc.anyChar(false), nil
	case syntax.OpAnyChar:
		return rc.anyChar(true), nil
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		return "", fmt.Errorf("anchors (^ $ \\A \\z) are supported only at the start and end of the pattern")
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return "", fmt.Errorf(`word boundaries (\b \B) are not supported`)
	case syntax.OpCapture:
		return rc.expr(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		sub, err := rc.expr(re.Sub[0])
		if err != nil {
			return "", err
		}
		return "(" + sub + ")" + map[syntax.Op]string{syntax.OpStar: "*", syntax.OpPlus: "+", syntax.OpQuest: "?"}[re.Op], nil
	case syntax.OpRepeat:
		sub, err := rc.expr(re.Sub[0])
		if err != nil {
			return "", err
		}
		if re.Max < 0 {
			return fmt.Sprintf("(%s){%d,}", sub, re.Min), nil
		}
		return fmt.Sprintf("(%s){%d,%d}", sub, re.Min, re.Max), nil
	case syntax.OpConcat, syntax.OpAlternate:
		sep := map[syntax.Op]string{syntax.OpConcat: " ", syntax.OpAlternate: " | "}[re.Op]
		var parts []string
		for _, s := range re.Sub {
			p, err := rc.expr(s)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return "(" + strings.Join(parts, sep) + ")", nil
	}
	return "", fmt.Errorf("unsupported construct %v", re.Op)
}

// foldSpans is r and the code points that case folding makes equal to it.
func foldSpans(r rune) []span {
	spans := []span{{r, r}}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		spans = append(spans, span{f, f})
	}
	return spans
}

// anyChar is any code point (newline excluded unless nl).
func (rc *regexCompiler) anyChar(nl bool) string {
	if nl {
		return rc.class([]span{{0, unicode.MaxRune}})
	}
	return rc.class([]span{{0, '\n' - 1}, {'\n' + 1, unicode.MaxRune}})
}

// class is a character class in the output alphabet. In a JSON string the
// code points that must be escaped are written as their one escape each.
func (rc *regexCompiler) class(spans []span) string {
	if rc.a == xmlText {
		var kept []span
		for _, s := range spans {
			if s.lo <= '<' && s.hi >= '<' {
				if s.lo < '<' {
					kept = append(kept, span{s.lo, '<' - 1})
				}
				if s.hi > '<' {
					kept = append(kept, span{'<' + 1, s.hi})
				}
				continue
			}
			kept = append(kept, s)
		}
		if len(kept) == 0 {
			// Only '<', which would cut the value short: nothing matches.
			return gbnfClass([]span{{0, unicode.MaxRune}}, true)
		}
		spans = kept
	}
	if rc.a != jsonText {
		if len(spans) == 1 && spans[0].lo == spans[0].hi {
			return gbnfLiteral(string(spans[0].lo))
		}
		return gbnfClass(spans, false)
	}
	var plain []span
	var escapes []string
	for _, s := range spans {
		for lo := s.lo; lo <= s.hi; {
			if esc, ok := jsonEscape(lo); ok {
				escapes = append(escapes, gbnfLiteral(esc))
				lo++
				continue
			}
			hi := lo
			for hi < s.hi {
				if _, ok := jsonEscape(hi + 1); ok {
					break
				}
				hi++
				if hi >= 0x80 { // the rest of the span needs no escape
					hi = s.hi
				}
			}
			plain = append(plain, span{lo, hi})
			lo = hi + 1
			if hi == unicode.MaxRune {
				break
			}
		}
	}
	var alts []string
	if len(plain) > 0 {
		alts = append(alts, gbnfClass(plain, false))
	}
	alts = append(alts, escapes...)
	if len(alts) == 1 {
		return alts[0]
	}
	return rc.e.shared("char", strings.Join(alts, " | "))
}

// jsonEscape is how a JSON string writes r if r cannot appear as itself,
// and '<' (see schemaCompiler).
func jsonEscape(r rune) (string, bool) {
	switch r {
	case '<':
		return `\u003c`, true
	case '"':
		return `\"`, true
	case '\\':
		return `\\`, true
	case '\n':
		return `\n`, true
	case '\t':
		return `\t`, true
	case '\r':
		return `\r`, true
	case '\b':
		return `\b`, true
	case '\f':
		return `\f`, true
	}
	if r < 0x20 || r == 0x7f {
		return fmt.Sprintf(`\u%04x`, r), true
	}
	return "", false
}
