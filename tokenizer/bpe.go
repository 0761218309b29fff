package tokenizer

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

type merge struct {
	rank int32
	id   int32 // the merged token
}

// bpe is a byte-level BPE model: vocabulary, merges by rank, and a cache
// of encoded words.
type bpe struct {
	vocab        map[string]int32
	merges       map[uint64]merge
	byteIDs      [256]int32 // the token of each single byte
	ignoreMerges bool       // look a whole word up in the vocabulary first

	mu    sync.RWMutex
	cache map[string][]int32
}

const maxCachedWords = 1 << 17

type bpeSpec struct {
	Type         string           `json:"type"`
	Vocab        map[string]int32 `json:"vocab"`
	Merges       json.RawMessage  `json:"merges"`
	IgnoreMerges bool             `json:"ignore_merges"`
	ByteFallback bool             `json:"byte_fallback"`
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func newBPE(raw json.RawMessage) (*bpe, error) {
	var spec bpeSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if spec.Type != "BPE" {
		return nil, fmt.Errorf("model type %q is not supported (want BPE)", spec.Type)
	}
	// Merges come as ["a b", ...] (older files) or [["a", "b"], ...].
	var pairs [][2]string
	var asStrings []string
	if err := json.Unmarshal(spec.Merges, &asStrings); err == nil {
		for i, m := range asStrings {
			a, b, ok := strings.Cut(m, " ")
			if !ok {
				return nil, fmt.Errorf("merge %d %q is not two tokens", i, m)
			}
			pairs = append(pairs, [2]string{a, b})
		}
	} else if err := json.Unmarshal(spec.Merges, &pairs); err != nil {
		return nil, fmt.Errorf("merges: %w", err)
	}
	m := &bpe{vocab: spec.Vocab, merges: make(map[uint64]merge, len(pairs)), ignoreMerges: spec.IgnoreMerges, cache: map[string][]int32{}}
	for rank, p := range pairs {
		a, okA := m.vocab[p[0]]
		b, okB := m.vocab[p[1]]
		id, okM := m.vocab[p[0]+p[1]]
		if !okA || !okB || !okM {
			return nil, fmt.Errorf("merge %d (%q %q) uses a token missing from the vocabulary", rank, p[0], p[1])
		}
		if _, dup := m.merges[pairKey(a, b)]; !dup {
			m.merges[pairKey(a, b)] = merge{rank: int32(rank), id: id}
		}
	}
	for b := range 256 {
		id, ok := m.vocab[string(byteToRune[b])]
		if !ok {
			return nil, fmt.Errorf("the vocabulary lacks byte %#02x (%q): not a byte-level BPE", b, byteToRune[b])
		}
		m.byteIDs[b] = id
	}
	return m, nil
}

// encode appends the tokens of one pre-tokenized word (raw bytes).
func (m *bpe) encode(word string, out []int32) []int32 {
	m.mu.RLock()
	ids, ok := m.cache[word]
	m.mu.RUnlock()
	if ok {
		return append(out, ids...)
	}
	ids = m.merge(word)
	m.mu.Lock()
	if len(m.cache) >= maxCachedWords {
		clear(m.cache)
	}
	m.cache[word] = ids
	m.mu.Unlock()
	return append(out, ids...)
}

// merge runs the BPE merges over word: repeatedly the lowest-ranked
// adjacent pair, leftmost first, as the reference implementation does.
func (m *bpe) merge(word string) []int32 {
	if m.ignoreMerges {
		if id, ok := m.vocab[byteLevelString(word)]; ok {
			return []int32{id}
		}
	}
	n := len(word)
	ids := make([]int32, n)
	for i := 0; i < n; i++ {
		ids[i] = m.byteIDs[word[i]]
	}
	if n == 1 {
		return ids
	}
	// Symbols form a linked list; candidate merges wait in a heap and are
	// checked for staleness when popped.
	next, prev := make([]int, n), make([]int, n)
	for i := range n {
		next[i], prev[i] = i+1, i-1
	}
	next[n-1] = -1
	h := &mergeHeap{}
	push := func(i int) {
		if j := next[i]; j >= 0 {
			if mg, ok := m.merges[pairKey(ids[i], ids[j])]; ok {
				heap.Push(h, candidate{rank: mg.rank, pos: i, left: ids[i], right: ids[j], id: mg.id})
			}
		}
	}
	for i := 0; i < n-1; i++ {
		push(i)
	}
	alive := make([]bool, n)
	for i := range alive {
		alive[i] = true
	}
	for h.Len() > 0 {
		c := heap.Pop(h).(candidate)
		j := next[c.pos]
		if !alive[c.pos] || j < 0 || ids[c.pos] != c.left || ids[j] != c.right {
			continue // stale
		}
		ids[c.pos] = c.id
		alive[j] = false
		next[c.pos] = next[j]
		if next[j] >= 0 {
			prev[next[j]] = c.pos
		}
		if p := prev[c.pos]; p >= 0 {
			push(p)
		}
		push(c.pos)
	}
	out := ids[:0]
	for i := 0; i >= 0; i = next[i] {
		out = append(out, ids[i])
	}
	return append([]int32(nil), out...)
}

type candidate struct {
	rank, left, right, id int32
	pos                   int
}

type mergeHeap []candidate

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].pos < h[j].pos
}
func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(candidate)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
