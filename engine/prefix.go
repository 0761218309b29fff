package engine

import (
	"container/list"
	"log/slog"
	"slices"

	"github.com/govllm/govllm/model/qwen35"
)

// Token hashes: FNV-1a over the token ids, chained, so that the hash of a
// prefix identifies all of it. 0 is reserved for "no hash".
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func hashToken(h uint64, id int32) uint64 {
	for range 4 {
		h ^= uint64(byte(id))
		h *= fnvPrime
		id >>= 8
	}
	if h == 0 {
		h = 1
	}
	return h
}

// prefixHashes returns h[i] = hash of tokens[:i], for i = 0..len(tokens).
func prefixHashes(tokens []int32) []uint64 {
	h := make([]uint64, len(tokens)+1)
	h[0] = fnvOffset
	for i, id := range tokens {
		h[i+1] = hashToken(h[i], id)
	}
	return h
}

// checkpoint is a snapshot of the DeltaNet state (and the partial last KV
// block) after a token prefix; with the prefix's full blocks still cached,
// a new sequence starting with the same tokens resumes from it.
type checkpoint struct {
	tokens []int32
	snap   *qwen35.Snapshot
	bytes  int64
	elem   *list.Element
}

// checkpointPool keeps checkpoints by prefix hash, capped in bytes, least
// recently used evicted first.
type checkpointPool struct {
	capBytes, bytes int64
	byHash          map[uint64]*checkpoint
	lru             *list.List // front: most recently used
}

func newCheckpointPool(capBytes int64) *checkpointPool {
	return &checkpointPool{capBytes: capBytes, byHash: map[uint64]*checkpoint{}, lru: list.New()}
}

func (p *checkpointPool) add(h uint64, tokens []int32, snap *qwen35.Snapshot) {
	if old, ok := p.byHash[h]; ok {
		p.lru.MoveToFront(old.elem)
		return
	}
	ck := &checkpoint{tokens: slices.Clone(tokens), snap: snap, bytes: snap.Bytes() + int64(4*len(tokens))}
	if ck.bytes > p.capBytes {
		slog.Warn("engine: prefix-cache checkpoint larger than the checkpoint pool, not kept; raise the checkpoint memory", "tokens", len(tokens), "bytes", ck.bytes, "cap", p.capBytes)
		return
	}
	for p.bytes+ck.bytes > p.capBytes {
		p.evict()
	}
	ck.elem = p.lru.PushFront(h)
	p.byHash[h] = ck
	p.bytes += ck.bytes
	slog.Debug("engine: checkpoint", "tokens", len(tokens), "bytes", ck.bytes, "pool_bytes", p.bytes)
}

func (p *checkpointPool) evict() {
	e := p.lru.Back()
	h := e.Value.(uint64)
	p.bytes -= p.byHash[h].bytes
	delete(p.byHash, h)
	p.lru.Remove(e)
}

// find returns the checkpoint whose prefix is tokens[:n], if kept.
func (p *checkpointPool) find(h uint64, tokens []int32) *checkpoint {
	ck, ok := p.byHash[h]
	if !ok || !slices.Equal(ck.tokens, tokens) {
		return nil
	}
	p.lru.MoveToFront(ck.elem)
	return ck
}
