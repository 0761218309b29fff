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
	size  int
	nodes []trieNode
}

type trieNode struct {
	edges  []trieEdge // by byte
	tokens []int32    // tokens whose bytes end here
}

type trieEdge struct {
	b    byte
	node int32
}

// NewVocab builds the trie of tokens; bytes(id) is nil for a special or
// unused id.
func NewVocab(size int, bytes func(id int32) []byte) *Vocab {
	v := &Vocab{size: size, nodes: []trieNode{{}}}
	for id := range int32(size) {
		b := bytes(id)
		if len(b) == 0 {
			continue
		}
		n := int32(0)
		for _, c := range b {
			n = v.child(n, c)
		}
		v.nodes[n].tokens = append(v.nodes[n].tokens, id)
	}
	for i := range v.nodes {
		es := v.nodes[i].edges
		sort.Slice(es, func(a, b int) bool { return es[a].b < es[b].b })
	}
	return v
}

func (v *Vocab) child(n int32, c byte) int32 {
	for _, e := range v.nodes[n].edges {
		if e.b == c {
			return e.node
		}
	}
	id := int32(len(v.nodes))
	v.nodes = append(v.nodes, trieNode{})
	v.nodes[n].edges = append(v.nodes[n].edges, trieEdge{c, id})
	return id
}

// Size is the number of token ids.
func (v *Vocab) Size() int { return v.size }

// Mask is a set of token ids.
type Mask []uint64

// Has reports whether id is in the set.
func (m Mask) Has(id int32) bool { return m[id>>6]&(1<<(id&63)) != 0 }

func (m Mask) set(id int32) { m[id>>6] |= 1 << (id & 63) }

// Masker computes and caches the masks of one grammar over one vocabulary:
// the tokens whose bytes, appended in a state, leave it alive. A state's
// mask is computed by walking the trie with the state, a subtree skipped
// where the grammar rejects its prefix, and cached by the state's key,
// since the same states recur (inside a JSON string, every character
// leads back to one state).
type Masker struct {
	v     *Vocab
	mu    sync.Mutex
	cache map[string]Mask
}

// maxCachedMasks bounds the cache (~19 KiB a mask at 151k tokens).
const maxCachedMasks = 4096

// NewMasker returns a masker over v.
func NewMasker(v *Vocab) *Masker { return &Masker{v: v, cache: map[string]Mask{}} }

// Mask returns the tokens allowed in s. The mask is shared: do not modify
// it.
func (mk *Masker) Mask(s *State) Mask {
	mk.mu.Lock()
	m, ok := mk.cache[s.key]
	mk.mu.Unlock()
	if ok {
		return m
	}
	m = make(Mask, (mk.v.size+63)/64)
	if !s.Dead() {
		w := &walker{mk: mk, m: m, g: s.g}
		w.walk(0, 0, s.stacks, s.partial)
	}
	mk.mu.Lock()
	if len(mk.cache) >= maxCachedMasks {
		clear(mk.cache)
	}
	mk.cache[s.key] = m
	mk.mu.Unlock()
	return m
}

// walker is one mask computation: its frames and, per trie depth, the
// buffer of stacks reached there.
type walker struct {
	mk    *Masker
	m     Mask
	g     *Grammar
	a     frames
	depth [][]*frame
}

// walk marks the tokens under trie node n that stacks (after the bytes
// partial of a code point) can take. It steps the stacks byte by byte
// without the states' deduplication and keys, which only the cache needs.
func (w *walker) walk(n int32, depth int, stacks []*frame, partial []byte) {
	if depth == len(w.depth) {
		w.depth = append(w.depth, nil)
	}
	for _, e := range w.mk.v.nodes[n].edges {
		var buf [4]byte
		next, rest, ok := w.g.stepByte(&w.a, w.depth[depth][:0], stacks, append(buf[:0], partial...), e.b)
		w.depth[depth] = next[:0]
		if !ok {
			continue
		}
		child := &w.mk.v.nodes[e.node]
		for _, id := range child.tokens {
			w.m.set(id)
		}
		if len(child.edges) > 0 {
			w.walk(e.node, depth+1, next, rest)
		}
	}
}
