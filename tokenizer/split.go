package tokenizer

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// splitter finds the regex matches of a pre-tokenizer: it returns the byte
// ranges [start, end) of successive matches in s.
type splitter interface {
	matches(s string, yield func(start, end int))
}

// The Split patterns the hand-written splitter implements. Qwen2/Qwen3 and
// Qwen3.5 differ in where combining marks (\p{M}) go.
const (
	patternQwen3  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patternQwen35 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patternGPT2 is what ByteLevel's use_regex applies.
	patternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

func newSplitter(pattern string) (splitter, error) {
	switch pattern {
	case patternQwen3:
		return &qwenSplitter{marksAreLetters: false}, nil
	case patternQwen35:
		return &qwenSplitter{marksAreLetters: true}, nil
	}
	return newRegexSplitter(pattern)
}

// regexSplitter runs any pattern with .NET-style semantics (lookaround,
// \p{..}, (?i:..)), as the Rust tokenizers' Oniguruma does.
type regexSplitter struct{ re *regexp2.Regexp }

func newRegexSplitter(pattern string) (*regexSplitter, error) {
	re, err := regexp2.Compile(pattern, regexp2.Unicode)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: split pattern %q: %w", pattern, err)
	}
	return &regexSplitter{re: re}, nil
}

func (r *regexSplitter) matches(s string, yield func(start, end int)) {
	// regexp2 works on runes; map rune indexes back to byte offsets.
	runes := []rune(s)
	offsets := make([]int, len(runes)+1)
	off := 0
	for i, c := range runes {
		offsets[i] = off
		off += utf8.RuneLen(c) // s is valid UTF-8: Encode replaced invalid bytes
	}
	offsets[len(runes)] = off
	m, _ := r.re.FindRunesMatch(runes)
	for m != nil {
		if m.Length > 0 {
			yield(offsets[m.Index], offsets[m.Index+m.Length])
		}
		m, _ = r.re.FindNextMatch(m)
	}
}

// qwenSplitter is patternQwen3 (or patternQwen35) written out by hand:
// alternatives are tried in order at each position, as a backtracking
// engine does, with each one's backtracking resolved in closed form.
type qwenSplitter struct{ marksAreLetters bool }

func isSpace(r rune) bool   { return unicode.IsSpace(r) }
func isNewline(r rune) bool { return r == '\r' || r == '\n' }
func isNumber(r rune) bool  { return unicode.IsNumber(r) }

func (q *qwenSplitter) isLetter(r rune) bool {
	return unicode.IsLetter(r) || (q.marksAreLetters && unicode.IsMark(r))
}

func (q *qwenSplitter) matches(s string, yield func(start, end int)) {
	for p := 0; p < len(s); {
		n := q.match(s, p)
		yield(p, p+n)
		p += n
	}
}

func at(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	return utf8.DecodeRuneInString(s[i:])
}

// match returns the length of the match at p (always ≥ 1: the last two
// alternatives and the punctuation one cover every character).
func (q *qwenSplitter) match(s string, p int) int {
	r0, n0 := at(s, p)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r0 == '\'' {
		if n := contraction(s, p+1); n > 0 {
			return 1 + n
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+ (letters include marks for Qwen3.5)
	if q.isLetter(r0) {
		return q.letters(s, p)
	}
	if !isNewline(r0) && !isNumber(r0) && !unicode.IsLetter(r0) {
		if r1, _ := at(s, p+n0); q.isLetter(r1) {
			return n0 + q.letters(s, p+n0)
		}
	}
	// \p{N}
	if isNumber(r0) {
		return n0
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*' (marks excluded too for Qwen3.5)
	start := p
	if r0 == ' ' {
		start += n0
	}
	if n := q.punct(s, start); n > 0 {
		end := start + n
		for {
			r, size := at(s, end)
			if !isNewline(r) {
				break
			}
			end += size
		}
		return end - p
	}
	// The remaining alternatives start with whitespace.
	end, lastNewline := p, -1
	for {
		r, size := at(s, end)
		if size == 0 || !isSpace(r) {
			break
		}
		if isNewline(r) {
			lastNewline = end + size
		}
		end += size
	}
	if end == p { // unreachable for valid input: every rune is L, N, \s or other
		return n0
	}
	// \s*[\r\n]+: up to the last newline of the whitespace run.
	if lastNewline > 0 {
		return lastNewline - p
	}
	// \s+(?!\S): the run, or all of it but its last character when a
	// non-space follows.
	if end == len(s) {
		return end - p
	}
	_, lastSize := utf8.DecodeLastRuneInString(s[:end])
	if end-lastSize > p {
		return end - lastSize - p
	}
	// \s+
	return end - p
}

func (q *qwenSplitter) letters(s string, p int) int {
	end := p
	for {
		r, size := at(s, end)
		if size == 0 || !q.isLetter(r) {
			return end - p
		}
		end += size
	}
}

func (q *qwenSplitter) punct(s string, p int) int {
	end := p
	for {
		r, size := at(s, end)
		if size == 0 || isSpace(r) || q.isLetter(r) || unicode.IsLetter(r) || isNumber(r) {
			return end - p
		}
		end += size
	}
}

// contraction matches s|t|re|ve|m|ll|d case-insensitively at p and returns
// its byte length, or 0.
func contraction(s string, p int) int {
	r0, n0 := at(s, p)
	r1, n1 := at(s, p+n0)
	f0, f1 := foldASCII(r0), foldASCII(r1)
	switch {
	case f0 == 'r' && f1 == 'e', f0 == 'v' && f1 == 'e', f0 == 'l' && f1 == 'l':
		return n0 + n1
	case f0 == 's' || f0 == 't' || f0 == 'm' || f0 == 'd':
		return n0
	}
	return 0
}

// foldASCII lower-cases a rune under Unicode simple case folding as far as
// the contraction letters go (ſ, U+017F, folds to s).
func foldASCII(r rune) rune {
	switch {
	case r >= 'A' && r <= 'Z':
		return r + 'a' - 'A'
	case r == 'ſ':
		return 's'
	}
	return r
}
