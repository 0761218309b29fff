package grammar

import (
	"encoding/binary"
	"slices"
	"strings"
	"unicode/utf8"
)

// frame is a place in a sequence: the next element to match is element
// idx of alternative alt of rule rule. A stack is a linked list of frames,
// the top first; stacks share their tails.
type frame struct {
	rule, alt, idx int32
	next           *frame
}

// frames allocates the frames of one step, in chunks, and interns them:
// a frame made twice with the same continuation is one frame, so that an
// expansion reached again is seen (grammars with nested nullable
// repetitions reach the same frames along exponentially many paths).
type frames struct {
	buf      []frame
	byValue  map[frame]*frame
	expanded map[*frame]bool
}

func (a *frames) make(rule, alt, idx int32, next *frame) *frame {
	k := frame{rule, alt, idx, next}
	if f, ok := a.byValue[k]; ok {
		return f
	}
	if len(a.buf) == cap(a.buf) { // a new chunk: the old one stays for its frames
		a.buf = make([]frame, 0, min(4096, max(16, 2*cap(a.buf))))
	}
	a.buf = append(a.buf, k)
	f := &a.buf[len(a.buf)-1]
	if a.byValue == nil {
		a.byValue, a.expanded = map[frame]*frame{}, map[*frame]bool{}
	}
	a.byValue[k] = f
	return f
}

// State is where a generation is in the grammar: every parse stack that
// the input so far leaves alive, each topped by a character class (or
// empty: the input may end there), plus the bytes of a code point not yet
// complete. A State is immutable; Advance returns a new one.
type State struct {
	g       *Grammar
	stacks  []*frame // nil entries are finished parses
	partial []byte   // a code point's leading bytes
	key     string
}

// Start is the state before any input.
func (g *Grammar) Start() *State {
	var stacks []*frame
	a := &frames{}
	for alt := range g.rules[g.root] {
		stacks = g.expand(a, stacks, a.make(int32(g.root), int32(alt), 0, nil))
	}
	return newState(g, stacks, nil)
}

// expand appends to out the stacks that f leads to once rule references
// and finished sequences at its top are resolved, so that each is topped
// by a character class (or is nil: finished).
func (g *Grammar) expand(a *frames, out []*frame, f *frame) []*frame {
	for f != nil {
		if a.expanded[f] { // its stacks are in out already
			return out
		}
		if a.expanded == nil {
			a.byValue, a.expanded = map[frame]*frame{}, map[*frame]bool{}
		}
		a.expanded[f] = true
		seq := g.rules[f.rule][f.alt]
		if int(f.idx) == len(seq) {
			f = f.next // the sequence is done; its caller resumes
			continue
		}
		e := seq[f.idx]
		if e.rule < 0 {
			return append(out, f)
		}
		// The caller resumes after the reference; a reference that ends its
		// sequence returns straight to the caller's caller, so repetition
		// (star ::= item star) does not deepen the stack.
		ret := f.next
		if int(f.idx)+1 < len(seq) {
			ret = a.make(f.rule, f.alt, f.idx+1, f.next)
		}
		for alt := range g.rules[e.rule] {
			out = g.expand(a, out, a.make(int32(e.rule), int32(alt), 0, ret))
		}
		return out
	}
	return append(out, nil)
}

func stackKey(b []byte, f *frame) []byte {
	for ; f != nil; f = f.next {
		b = binary.AppendUvarint(b, uint64(f.rule)+1)
		b = binary.AppendUvarint(b, uint64(f.alt))
		b = binary.AppendUvarint(b, uint64(f.idx))
	}
	return append(b, 0) // no frame's rule varint starts with 0
}

// newState dedups stacks (equal stacks lead to equal futures) and keys the
// state for caching.
func newState(g *Grammar, stacks []*frame, partial []byte) *State {
	keys := make([]string, 0, len(stacks))
	kept := stacks[:0]
	seen := map[string]bool{}
	var buf []byte
	for _, f := range stacks {
		buf = stackKey(buf[:0], f)
		k := string(buf)
		if seen[k] {
			continue
		}
		seen[k] = true
		keys = append(keys, k)
		kept = append(kept, f)
	}
	slices.Sort(keys)
	key := string(rune(len(partial))) + string(partial) + strings.Join(keys, "")
	return &State{g: g, stacks: kept, partial: partial, key: key}
}

// Dead reports whether no continuation of the input can match.
func (s *State) Dead() bool { return len(s.stacks) == 0 }

// Accepting reports whether the input so far is a whole match.
func (s *State) Accepting() bool {
	if len(s.partial) > 0 {
		return false
	}
	return slices.Contains(s.stacks, nil)
}

// intersects reports whether some stack's class holds a code point in
// [lo, hi].
func (s *State) intersects(lo, hi rune) bool {
	for _, f := range s.stacks {
		if f != nil && s.g.rules[f.rule][f.alt][f.idx].intersects(lo, hi) {
			return true
		}
	}
	return false
}

// Final reports whether the input is a whole match that nothing can
// extend: every parse has finished.
func (s *State) Final() bool {
	if len(s.partial) > 0 || len(s.stacks) == 0 {
		return false
	}
	for _, f := range s.stacks {
		if f != nil {
			return false
		}
	}
	return true
}

// Key identifies the state: equal keys accept the same continuations.
func (s *State) Key() string { return s.key }

// AdvanceRune returns the state after code point r (dead if the grammar
// has no place for it).
func (s *State) AdvanceRune(r rune) *State {
	return newState(s.g, s.g.stepRune(&frames{}, nil, s.stacks, r), nil)
}

// stepRune appends to out the stacks that r leads to from stacks.
func (g *Grammar) stepRune(a *frames, out, stacks []*frame, r rune) []*frame {
	for _, f := range stacks {
		if f == nil || !g.rules[f.rule][f.alt][f.idx].matches(r) {
			continue
		}
		out = g.expand(a, out, a.make(f.rule, f.alt, f.idx+1, f.next))
	}
	return out
}

// stepByte advances stacks, with partial the leading bytes of a code point
// already read, by byte b: it returns the stacks after a completed code
// point (appended to out), or the stacks that a code point starting with
// the longer partial can continue; ok is false when none can.
func (g *Grammar) stepByte(a *frames, out, stacks []*frame, partial []byte, b byte) (next []*frame, rest []byte, ok bool) {
	if len(partial) == 0 && b < utf8.RuneSelf {
		out = g.stepRune(a, out, stacks, rune(b))
		return out, partial, len(out) > 0
	}
	p := append(partial, b)
	if !utf8.FullRune(p) {
		lo, hi, valid := runeRange(p)
		if !valid {
			return nil, nil, false
		}
		for _, f := range stacks {
			if f != nil && g.rules[f.rule][f.alt][f.idx].intersects(lo, hi) {
				out = append(out, f)
			}
		}
		return out, p, len(out) > 0
	}
	r, n := utf8.DecodeRune(p)
	if r == utf8.RuneError && n <= 1 {
		return nil, nil, false
	}
	out = g.stepRune(a, out, stacks, r)
	return out, p[:0], len(out) > 0
}

// AdvanceByte returns the state after one byte of UTF-8 input.
func (s *State) AdvanceByte(b byte) *State {
	if s.Dead() {
		return s
	}
	next, rest, ok := s.g.stepByte(&frames{}, nil, s.stacks, append([]byte(nil), s.partial...), b)
	if !ok {
		return &State{g: s.g, key: "dead"}
	}
	if len(rest) == 0 {
		rest = nil
	}
	return newState(s.g, next, rest)
}

// runeRange is the range of code points whose UTF-8 encoding starts with
// p (shorter than a whole one); valid is false if none does.
func runeRange(p []byte) (lo, hi rune, valid bool) {
	need, lo1, hi1, ok := utf8Lead(p[0])
	if !ok {
		return 0, 0, false
	}
	n := int(need) + 1
	var lob, hib [4]byte
	copy(lob[:], p)
	copy(hib[:], p)
	for i := len(p); i < n; i++ {
		lob[i], hib[i] = 0x80, 0xBF
	}
	if len(p) == 1 { // the second byte's range, narrower after E0, ED, F0 and F4
		lob[1], hib[1] = lo1, hi1
	}
	l, ln := utf8.DecodeRune(lob[:n])
	h, hn := utf8.DecodeRune(hib[:n])
	if l == utf8.RuneError && ln <= 1 || h == utf8.RuneError && hn <= 1 {
		return 0, 0, false
	}
	return l, h, true
}

// Advance returns the state after the bytes b.
func (s *State) Advance(b []byte) *State {
	for _, c := range b {
		if s = s.AdvanceByte(c); s.Dead() {
			return s
		}
	}
	return s
}

// Match reports whether the whole of text matches the grammar.
func (g *Grammar) Match(text string) bool { return g.Start().Advance([]byte(text)).Accepting() }
