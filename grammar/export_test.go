package grammar

// ResetMask forgets p's mask, so that a benchmark can time its walk again.
func ResetMask(p *Point) { p.mask = nil }

// Nodes is the size of v's trie.
func (v *Vocab) Nodes() int { return len(v.entries) }

// Points is the number of interned points.
func (mk *Masker) Points() int { return len(mk.byKey) }
