package qwen35

import (
	"errors"
	"fmt"

	rt "github.com/govllm/govllm/runtime"
)

// Cache holds the sequence state of many sequences: the attention layers'
// keys and values in blocks of BlockSize positions, and the DeltaNet layers'
// conv and recurrent state in slots, one slot per running sequence.
type Cache struct {
	BlockSize, NumBlocks, NumSlots int

	k, v      []*rt.Tensor // per attention layer: [NumBlocks·BlockSize, Hkv, D]
	conv, rec []*rt.Tensor // per DeltaNet layer: [NumSlots, K-1, C], [NumSlots, Hv, Dk, Dv]

	mem rt.Memory // where the tensors above live

	// A forward step's batch and tensors, reused by the next step, and the
	// host copy of its logits when the backend's memory is a device's.
	step   batch
	arena  rt.Arena
	logits *rt.Tensor

	// The last two steps launched (ahead.go), counted by launches.
	launched [2]Launched
	launches int

	// The step after the last, recorded ahead (ahead.go): ahead is &next
	// or nil.
	ahead       *ahead
	next        ahead
	nextSeqs    []Seq
	placeholder []int32

	// Batch-1 decode through DecodeLayers (persistent.go): the layers as
	// blocks over this cache's states, and the op's operands.
	blocks []rt.DecodeBlock
	decode rt.DecodeLayersArgs
}

// CacheSizes are the bytes one KV block and one state slot take.
type CacheSizes struct {
	BlockBytes int64 // all attention layers, one block
	SlotBytes  int64 // all DeltaNet layers, one sequence
}

// CacheSizes reports the memory of one block and one slot for blockSize.
func (m *Model) CacheSizes(blockSize int) CacheSizes {
	c := m.Config
	var s CacheSizes
	for _, l := range m.Layers {
		if l.Kind == FullAttention {
			s.BlockBytes += int64(2 * blockSize * c.NumKVHeads * c.HeadDim * 4)
		} else {
			s.SlotBytes += int64(4 * ((c.ConvKernel-1)*convChannels(c) + c.LinValueHeads*c.LinKeyDim*c.LinValueDim))
		}
	}
	return s
}

func convChannels(c *Config) int { return 2*c.LinKeyHeads*c.LinKeyDim + c.LinValueHeads*c.LinValueDim }

// NewCache allocates a cache of numBlocks blocks and numSlots state slots
// in the backend's memory. Close frees it.
func (m *Model) NewCache(blockSize, numBlocks, numSlots int) (*Cache, error) {
	c, mem := m.Config, m.be.Memory()
	cache := &Cache{BlockSize: blockSize, NumBlocks: numBlocks, NumSlots: numSlots, mem: mem,
		k: make([]*rt.Tensor, len(m.Layers)), v: make([]*rt.Tensor, len(m.Layers)),
		conv: make([]*rt.Tensor, len(m.Layers)), rec: make([]*rt.Tensor, len(m.Layers))}
	cache.arena.SetMemory(mem)
	var allocErr error
	alloc := func(shape ...int) *rt.Tensor {
		t, err := mem.Alloc(rt.F32, shape...)
		if err != nil && allocErr == nil {
			allocErr = fmt.Errorf("qwen35: cache of %d blocks and %d slots: %w", numBlocks, numSlots, err)
		}
		return t
	}
	for i, l := range m.Layers {
		if l.Kind == FullAttention {
			cache.k[i] = alloc(numBlocks*blockSize, c.NumKVHeads, c.HeadDim)
			cache.v[i] = alloc(numBlocks*blockSize, c.NumKVHeads, c.HeadDim)
		} else {
			cache.conv[i] = alloc(numSlots, c.ConvKernel-1, convChannels(c))
			cache.rec[i] = alloc(numSlots, c.LinValueHeads, c.LinKeyDim, c.LinValueDim)
		}
	}
	if allocErr != nil {
		cache.Close()
		return nil, allocErr
	}
	return cache, nil
}

// Close frees the cache's memory.
func (c *Cache) Close() {
	c.drain()
	c.ahead = nil
	freeTensors(c.mem, c.k, c.v, c.conv, c.rec)
	c.arena.Free()
	if c.logits != nil {
		c.mem.FreeStaging(c.logits)
		c.logits = nil
	}
}

// freeTensors frees the non-nil tensors of lists in mem.
func freeTensors(mem rt.Memory, lists ...[]*rt.Tensor) {
	for _, ts := range lists {
		for _, t := range ts {
			if t != nil {
				mem.Free(t)
			}
		}
	}
}

// slot returns the state views of one slot of DeltaNet layer i.
func (c *Cache) slot(i, slot int) (conv, rec *rt.Tensor) {
	conv, _ = c.conv[i].Index(slot)
	rec, _ = c.rec[i].Index(slot)
	return conv, rec
}

// kvRows returns the views of rows [r0, r1) of attention layer i's keys and
// values.
func (c *Cache) kvRows(i, r0, r1 int) (k, v *rt.Tensor) {
	k, _ = c.k[i].Slice(0, r0, r1)
	v, _ = c.v[i].Slice(0, r0, r1)
	return k, v
}

// ResetSlot zeroes a slot for a new sequence.
func (c *Cache) ResetSlot(slot int) error {
	c.drain()
	for i := range c.conv {
		if c.conv[i] != nil {
			conv, rec := c.slot(i, slot)
			if err := errors.Join(c.mem.Zero(conv), c.mem.Zero(rec)); err != nil {
				return fmt.Errorf("qwen35: reset of state slot %d: %w", slot, err)
			}
		}
	}
	return nil
}

// Snapshot is a copy, in host memory, of one slot's DeltaNet state and of
// the keys and values of a partial last block: what resuming a sequence at
// a position needs beyond its full, shared blocks.
type Snapshot struct {
	state [][]float32 // per DeltaNet layer: conv then recurrent state
	tail  [][]float32 // per attention layer: k then v rows of the partial block
	Rows  int         // positions in the partial block
}

// Bytes is the memory the snapshot holds.
func (s *Snapshot) Bytes() int64 {
	var n int64
	for _, x := range s.state {
		n += int64(4 * len(x))
	}
	for _, x := range s.tail {
		n += int64(4 * len(x))
	}
	return n
}

// host wraps part of a snapshot buffer as a tensor of t's shape.
func host(buf []float32, t *rt.Tensor) *rt.Tensor {
	h, _ := rt.FromF32(buf[:t.Len()], t.Shape()...)
	return h
}

// Save copies slot's state and the first rows positions of block tailBlock
// (ignored when rows is 0).
func (c *Cache) Save(slot, tailBlock, rows int) (*Snapshot, error) {
	c.drain()
	s := &Snapshot{Rows: rows}
	var errs []error
	for i := range c.conv {
		if c.conv[i] != nil {
			conv, rec := c.slot(i, slot)
			buf := make([]float32, conv.Len()+rec.Len())
			errs = append(errs, c.mem.Copy(host(buf, conv), conv), c.mem.Copy(host(buf[conv.Len():], rec), rec))
			s.state = append(s.state, buf)
		}
		if c.k[i] != nil && rows > 0 {
			k, v := c.kvRows(i, tailBlock*c.BlockSize, tailBlock*c.BlockSize+rows)
			buf := make([]float32, 2*k.Len())
			errs = append(errs, c.mem.Copy(host(buf, k), k), c.mem.Copy(host(buf[k.Len():], v), v))
			s.tail = append(s.tail, buf)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("qwen35: snapshot of state slot %d: %w", slot, err)
	}
	return s, nil
}

// Restore writes a snapshot into slot and, if it holds a partial block,
// into block tailBlock.
func (c *Cache) Restore(s *Snapshot, slot, tailBlock int) error {
	c.drain()
	si, ti := 0, 0
	var errs []error
	for i := range c.conv {
		if c.conv[i] != nil {
			conv, rec := c.slot(i, slot)
			if si >= len(s.state) || len(s.state[si]) != conv.Len()+rec.Len() {
				return fmt.Errorf("qwen35: snapshot does not fit this model")
			}
			errs = append(errs, c.mem.Copy(conv, host(s.state[si], conv)), c.mem.Copy(rec, host(s.state[si][conv.Len():], rec)))
			si++
		}
		if c.k[i] != nil && s.Rows > 0 {
			k, v := c.kvRows(i, tailBlock*c.BlockSize, tailBlock*c.BlockSize+s.Rows)
			if ti >= len(s.tail) || len(s.tail[ti]) != 2*k.Len() {
				return fmt.Errorf("qwen35: snapshot does not fit this model")
			}
			errs = append(errs, c.mem.Copy(k, host(s.tail[ti], k)), c.mem.Copy(v, host(s.tail[ti][k.Len():], v)))
			ti++
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("qwen35: restore into state slot %d: %w", slot, err)
	}
	return nil
}

// grow makes room for numBlocks blocks, keeping the keys and values.
func (c *Cache) grow(numBlocks int) error {
	c.drain()
	k, v := make([]*rt.Tensor, len(c.k)), make([]*rt.Tensor, len(c.v))
	var errs []error
	for i := range c.k {
		if c.k[i] == nil {
			continue
		}
		for _, p := range [...]struct {
			dst **rt.Tensor
			src *rt.Tensor
		}{{&k[i], c.k[i]}, {&v[i], c.v[i]}} {
			t, err := c.mem.Alloc(rt.F32, numBlocks*c.BlockSize, p.src.Dim(1), p.src.Dim(2))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			*p.dst = t
			part, _ := t.Slice(0, 0, p.src.Dim(0))
			errs = append(errs, c.mem.Copy(part, p.src))
		}
	}
	if err := errors.Join(errs...); err != nil {
		freeTensors(c.mem, k, v)
		return fmt.Errorf("qwen35: growing the cache to %d blocks: %w", numBlocks, err)
	}
	freeTensors(c.mem, c.k, c.v)
	c.k, c.v, c.NumBlocks = k, v, numBlocks
	return nil
}
