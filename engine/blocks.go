package engine

// blockPool owns the KV blocks: reference counts, the hash of each full
// block whose contents are known (for prefix caching), and an LRU list of
// free blocks. A freed block keeps its hash, and so stays findable, until
// it is reused for something else.
type blockPool struct {
	refs       []int32
	hash       []uint64 // 0: not a cached full block
	cached     map[uint64]int32
	prev, next []int32 // free list links; -1 ends
	head, tail int32
	free       int
	inList     []bool
}

func newBlockPool(n int) *blockPool {
	p := &blockPool{refs: make([]int32, n), hash: make([]uint64, n), cached: map[uint64]int32{},
		prev: make([]int32, n), next: make([]int32, n), inList: make([]bool, n), head: -1, tail: -1}
	for b := range n {
		p.pushBack(int32(b))
	}
	return p
}

func (p *blockPool) pushBack(b int32) {
	p.prev[b], p.next[b] = p.tail, -1
	if p.tail >= 0 {
		p.next[p.tail] = b
	} else {
		p.head = b
	}
	p.tail = b
	p.inList[b] = true
	p.free++
}

func (p *blockPool) unlink(b int32) {
	if p.prev[b] >= 0 {
		p.next[p.prev[b]] = p.next[b]
	} else {
		p.head = p.next[b]
	}
	if p.next[b] >= 0 {
		p.prev[p.next[b]] = p.prev[b]
	} else {
		p.tail = p.prev[b]
	}
	p.inList[b] = false
	p.free--
}

// alloc takes the least recently freed block, evicting its cached hash.
func (p *blockPool) alloc() (int32, bool) {
	if p.head < 0 {
		return -1, false
	}
	b := p.head
	p.unlink(b)
	if h := p.hash[b]; h != 0 {
		if p.cached[h] == b {
			delete(p.cached, h)
		}
		p.hash[b] = 0
	}
	p.refs[b] = 1
	return b, true
}

// lookup takes a reference to the cached block with hash h, if any.
func (p *blockPool) lookup(h uint64) (int32, bool) {
	b, ok := p.cached[h]
	if !ok {
		return -1, false
	}
	if p.inList[b] {
		p.unlink(b)
	}
	p.refs[b]++
	return b, true
}

// has reports whether a block with hash h is cached, without taking it.
func (p *blockPool) has(h uint64) bool {
	_, ok := p.cached[h]
	return ok
}

// register records that block b holds the full block with hash h.
func (p *blockPool) register(b int32, h uint64) {
	if p.hash[b] != 0 {
		return
	}
	if _, dup := p.cached[h]; dup {
		return // another block already holds the same contents
	}
	p.hash[b] = h
	p.cached[h] = b
}

// release drops one reference; at zero the block joins the free list.
func (p *blockPool) release(b int32) {
	p.refs[b]--
	if p.refs[b] == 0 {
		p.pushBack(b)
	}
}

// used is the number of blocks referenced by some sequence.
func (p *blockPool) used() int { return len(p.refs) - p.free }
