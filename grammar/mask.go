package grammar

import (
	"sort"
	"sync"
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
// its transitions by byte found as they are needed and its mask once
// asked for. Points are shared by every sequence that uses the masker.
type Point struct {
	s    *State
	next *[256]*Point // nil entries not yet computed
	mask Mask
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

// Bounds on a masker's memory (a point's transitions take 2 KiB, a mask
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

// step is the transition of p by byte b; mu is held.
func (mk *Masker) step(p *Point, b byte) *Point {
	if p == dead {
		return dead
	}
	if p.next == nil {
		p.next = new([256]*Point)
	}
	if q := p.next[b]; q != nil {
		return q
	}
	q := mk.intern(p.s.AdvanceByte(b))
	p.next[b] = q
	return q
}

// Advance returns the point after the bytes b.
func (mk *Masker) Advance(p *Point, b []byte) *Point {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	for _, c := range b {
		if p = mk.step(p, c); p == dead {
			break
		}
	}
	return p
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
// entries: at[d] is the point after the first d bytes of the current
// entry's path, and a subtree whose prefix the grammar rejects is skipped.
func (mk *Masker) walk(p *Point, m Mask) {
	at := []*Point{p}
	es := mk.v.entries
	for i := 0; i < len(es); {
		e := &es[i]
		q := mk.step(at[e.depth-1], e.b)
		if q == dead {
			i = int(e.end)
			continue
		}
		for _, id := range mk.v.tokens[e.tokLo:e.tokHi] {
			m.set(id)
		}
		if int(e.depth) == len(at) {
			at = append(at, q)
		} else {
			at[e.depth] = q
		}
		i++
	}
}
