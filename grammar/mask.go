package grammar

import (
	"sort"
	"sync"
	"unicode/utf8"
)

// Vocab is a vocabulary prepared for masking, once per tokenizer: every
// token's bytes in a prefix trie. Special tokens (end of sequence, chat
// markers) are not text and take no part in matching; the caller decides
// which of them a finished match allows.
type Vocab struct {
	size    int
	entries []trieEntry // the trie in pre-order, so that a walk reads memory in order
	tokens  []int32
}

// trieEntry is one trie node below the root: the byte that leads to it,
// its depth (1 for the root's children), where its subtree ends in the
// entries, and the tokens whose bytes end here.
type trieEntry struct {
	b            byte
	depth        uint16
	end          int32
	tokLo, tokHi int32
}

// NewVocab builds the trie of tokens; bytes(id) is nil for a special or
// unused id.
func NewVocab(size int, bytes func(id int32) []byte) *Vocab {
	type node struct {
		kids   map[byte]int32
		tokens []int32
	}
	nodes := []node{{}}
	for id := range int32(size) {
		b := bytes(id)
		if len(b) == 0 || len(b) > 0xffff {
			continue
		}
		n := int32(0)
		for _, c := range b {
			k, ok := nodes[n].kids[c]
			if !ok {
				if nodes[n].kids == nil {
					nodes[n].kids = map[byte]int32{}
				}
				k = int32(len(nodes))
				nodes[n].kids[c] = k
				nodes = append(nodes, node{})
			}
			n = k
		}
		nodes[n].tokens = append(nodes[n].tokens, id)
	}
	v := &Vocab{size: size, entries: make([]trieEntry, 0, len(nodes)-1)}
	var visit func(n int32, b byte, depth int)
	visit = func(n int32, b byte, depth int) {
		i := len(v.entries)
		if depth > 0 {
			lo := int32(len(v.tokens))
			v.tokens = append(v.tokens, nodes[n].tokens...)
			v.entries = append(v.entries, trieEntry{b: b, depth: uint16(depth), tokLo: lo, tokHi: int32(len(v.tokens))})
		}
		keys := make([]int, 0, len(nodes[n].kids))
		for c := range nodes[n].kids {
			keys = append(keys, int(c))
		}
		sort.Ints(keys)
		for _, c := range keys {
			visit(nodes[n].kids[byte(c)], byte(c), depth+1)
		}
		if depth > 0 {
			v.entries[i].end = int32(len(v.entries))
		}
	}
	visit(0, 0, 0)
	return v
}

// Size is the number of token ids.
func (v *Vocab) Size() int { return v.size }

// Mask is a set of token ids.
type Mask []uint64

// Has reports whether id is in the set.
func (m Mask) Has(id int32) bool { return m[id>>6]&(1<<(id&63)) != 0 }

func (m Mask) set(id int32) { m[id>>6] |= 1 << (id & 63) }

// Empty reports whether the set has no id.
func (m Mask) Empty() bool {
	for _, w := range m {
		if w != 0 {
			return false
		}
	}
	return true
}

// Point is a state of a masker's automaton: a grammar State interned, with
// its transitions found as they are needed and its mask once asked for.
// Points are shared by every sequence that uses the masker.
//
// Transitions by ASCII byte are a table. A code point of several bytes is
// read whole (its leading bytes only prune: is any class of the stacks
// able to hold a code point that starts so?), and its transition is keyed
// by which stacks' classes match it, since that alone decides the next
// state: inside a JSON string every character but a few leads to one
// point, so a state needs no points for partial code points, and a new
// state costs a handful of transitions, not thousands.
type Point struct {
	s     *State
	ascii *[utf8.RuneSelf]*Point // nil entries not yet computed
	bySig map[uint64]*Point      // by the set of stacks a code point matches
	mask  Mask
	// wide: where every non-ASCII code point leads, if they all lead to
	// one point (each stack's class holds all of them or none), which
	// spares the walk the stacks for most multi-byte characters.
	wide      *Point
	wideKnown bool
}

// uniformWide computes p.wide: nil if non-ASCII code points differ.
func (mk *Masker) uniformWide(p *Point) *Point {
	if p.wideKnown {
		return p.wide
	}
	if len(p.s.partial) > 0 { // its stacks wait for a particular code point
		p.wideKnown = true
		return nil
	}
	p.wideKnown = true
	uniform := true
	for _, f := range p.s.stacks {
		if f == nil {
			continue
		}
		e := p.s.g.rules[f.rule][f.alt][f.idx]
		all := !elem{rule: -1, spans: e.spans, negate: !e.negate}.intersects(utf8.RuneSelf, utf8.MaxRune)
		none := !e.intersects(utf8.RuneSelf, utf8.MaxRune)
		uniform = uniform && (all || none)
	}
	if uniform {
		p.wide = mk.stepRune(p, 0x4E00) // any non-ASCII code point will do
	}
	return p.wide
}

// dead is the point every transition that the grammar rejects leads to.
var dead = &Point{s: &State{key: "dead"}}

// Accepting reports whether the input so far is a whole match.
func (p *Point) Accepting() bool { return p.s.Accepting() }

// Dead reports whether no continuation can match.
func (p *Point) Dead() bool { return p.s.Dead() }

// Final reports whether the input is a whole match that nothing extends.
func (p *Point) Final() bool { return p.s.Final() }

// Masker computes the masks of one grammar over one vocabulary: the tokens
// whose bytes, appended at a point, leave it alive. It is a lazy
// automaton: points are interned by their stacks, so a state that recurs
// (inside a JSON string every character leads back to one) is one point,
// and the trie walk that makes a mask follows transitions computed once.
type Masker struct {
	g     *Grammar
	v     *Vocab
	mu    sync.Mutex
	byKey map[string]*Point
	masks int
}

// Bounds on a masker's memory (a point's ASCII transitions take 1 KiB, a mask
// ~19 KiB at 151k tokens): past them the automaton starts afresh. Points
// held by sequences stay valid; they just no longer share.
const (
	maxPoints = 8192
	maxMasks  = 512
)

// NewMasker returns a masker of g over v.
func NewMasker(g *Grammar, v *Vocab) *Masker {
	return &Masker{g: g, v: v, byKey: map[string]*Point{}}
}

// Vocab is the vocabulary the masker masks.
func (mk *Masker) Vocab() *Vocab { return mk.v }

// Grammar is the masker's grammar.
func (mk *Masker) Grammar() *Grammar { return mk.g }

// Start is the point before any input.
func (mk *Masker) Start() *Point { return mk.At(mk.g.Start()) }

// At interns s, a state of the masker's grammar.
func (mk *Masker) At(s *State) *Point {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	return mk.intern(s)
}

func (mk *Masker) intern(s *State) *Point {
	if s.Dead() {
		return dead
	}
	if p, ok := mk.byKey[s.key]; ok {
		return p
	}
	p := &Point{s: s}
	mk.byKey[s.key] = p
	return p
}

// step is the transition of p (with no partial code point) by an ASCII
// byte; mu is held.
func (mk *Masker) step(p *Point, b byte) *Point {
	if p == dead {
		return dead
	}
	if p.ascii == nil {
		p.ascii = new([utf8.RuneSelf]*Point)
	}
	if q := p.ascii[b]; q != nil {
		return q
	}
	q := mk.intern(p.s.AdvanceByte(b))
	p.ascii[b] = q
	return q
}

// stepRune is the transition of p by the code point r (completing p's
// partial one, if it has one); mu is held.
func (mk *Masker) stepRune(p *Point, r rune) *Point {
	stacks := p.s.stacks
	if len(stacks) > 64 { // too many to key: computed each time
		return mk.intern(p.s.AdvanceRune(r))
	}
	var sig uint64
	for i, f := range stacks {
		if f != nil && p.s.g.rules[f.rule][f.alt][f.idx].matches(r) {
			sig |= 1 << i
		}
	}
	if sig == 0 {
		return dead
	}
	if q, ok := p.bySig[sig]; ok {
		return q
	}
	q := mk.intern(p.s.AdvanceRune(r))
	if p.bySig == nil {
		p.bySig = map[uint64]*Point{}
	}
	p.bySig[sig] = q
	return q
}

// cursor is a point and the leading bytes of a code point read after it:
// either pend (checked against the stacks' classes), or, where every
// non-ASCII code point leads to one point (p.wide), only the count of
// continuation bytes still needed and the range the next must be in.
type cursor struct {
	p      *Point
	pend   [utf8.UTFMax]byte
	n      uint8
	need   uint8
	lo, hi byte
}

// utf8Lead reads a lead byte: how many continuation bytes follow and the
// range of the first (narrower after E0, ED, F0 and F4).
func utf8Lead(b byte) (need, lo, hi byte, ok bool) {
	switch {
	case b >= 0xC2 && b <= 0xDF:
		return 1, 0x80, 0xBF, true
	case b == 0xE0:
		return 2, 0xA0, 0xBF, true
	case b == 0xED:
		return 2, 0x80, 0x9F, true
	case b >= 0xE1 && b <= 0xEF:
		return 2, 0x80, 0xBF, true
	case b == 0xF0:
		return 3, 0x90, 0xBF, true
	case b == 0xF4:
		return 3, 0x80, 0x8F, true
	case b >= 0xF1 && b <= 0xF3:
		return 3, 0x80, 0xBF, true
	}
	return 0, 0, 0, false
}

func cursorAt(p *Point) cursor {
	c := cursor{p: p}
	c.n = uint8(copy(c.pend[:], p.s.partial))
	return c
}

// next is the cursor after byte b; ok is false where the grammar (or
// UTF-8) rejects it.
func (mk *Masker) next(c cursor, b byte) (cursor, bool) {
	if c.need > 0 { // a code point that only UTF-8 decides
		if b < c.lo || b > c.hi {
			return c, false
		}
		c.need--
		c.lo, c.hi = 0x80, 0xBF
		if c.need == 0 {
			return cursor{p: c.p.wide}, true
		}
		return c, true
	}
	if c.p == dead {
		return c, false
	}
	if c.n == 0 {
		if b < utf8.RuneSelf {
			q := mk.step(c.p, b)
			return cursor{p: q}, q != dead
		}
		if w := mk.uniformWide(c.p); w != nil {
			need, lo, hi, ok := utf8Lead(b)
			if w == dead || !ok {
				return c, false
			}
			return cursor{p: c.p, need: need, lo: lo, hi: hi}, true
		}
	}
	if c.n == utf8.UTFMax {
		return c, false
	}
	c.pend[c.n] = b
	c.n++
	pend := c.pend[:c.n]
	if !utf8.FullRune(pend) {
		lo, hi, valid := runeRange(pend)
		return c, valid && c.p.s.intersects(lo, hi)
	}
	r, size := utf8.DecodeRune(pend)
	if r == utf8.RuneError && size <= 1 {
		return c, false
	}
	q := mk.stepRune(c.p, r)
	return cursor{p: q}, q != dead
}

// pendingLen is the length of the incomplete code point that ends b.
func pendingLen(b []byte) int {
	for back := 1; back <= 3 && back <= len(b); back++ {
		if c := b[len(b)-back]; c >= 0xC0 {
			return back
		}
	}
	return 0
}

// Advance returns the point after the bytes b.
func (mk *Masker) Advance(p *Point, b []byte) *Point {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	c := cursorAt(p)
	for _, x := range b {
		var ok bool
		if c, ok = mk.next(c, x); !ok {
			return dead
		}
	}
	// Ending inside a code point is a state of its own, made from the
	// bytes since the last whole one.
	if c.need > 0 {
		return mk.intern(c.p.s.Advance(b[len(b)-pendingLen(b):]))
	}
	if k := int(c.n) - len(c.p.s.partial); k > 0 {
		return mk.intern(c.p.s.Advance(b[len(b)-k:]))
	}
	return c.p
}

// Mask returns the tokens allowed at p. The mask is shared: do not modify
// it.
func (mk *Masker) Mask(p *Point) Mask {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	if p.mask != nil {
		return p.mask
	}
	if len(mk.byKey) > maxPoints || mk.masks >= maxMasks {
		clear(mk.byKey)
		mk.masks = 0
	}
	m := make(Mask, (mk.v.size+63)/64)
	if p != dead {
		mk.walk(p, m)
	}
	p.mask = m
	mk.masks++
	return m
}

// walk marks the tokens that p can take, in one pass over the trie's
// entries: at[d] is the cursor after the first d bytes of the current
// entry's path, and a subtree whose prefix the grammar rejects is skipped.
func (mk *Masker) walk(p *Point, m Mask) {
	at := []cursor{cursorAt(p)}
	es := mk.v.entries
	for i := 0; i < len(es); {
		e := &es[i]
		c, ok := mk.next(at[e.depth-1], e.b)
		if !ok {
			i = int(e.end)
			continue
		}
		for _, id := range mk.v.tokens[e.tokLo:e.tokHi] {
			m.set(id)
		}
		if int(e.depth) == len(at) {
			at = append(at, c)
		} else {
			at[e.depth] = c
		}
		i++
	}
}
