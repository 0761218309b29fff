package qwen35

import (
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

	// A forward step's batch and tensors, reused by the next step.
	step  batch
	arena rt.Arena
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

// NewCache allocates a cache of numBlocks blocks and numSlots state slots.
func (m *Model) NewCache(blockSize, numBlocks, numSlots int) *Cache {
	c := m.Config
	cache := &Cache{BlockSize: blockSize, NumBlocks: numBlocks, NumSlots: numSlots,
		k: make([]*rt.Tensor, len(m.Layers)), v: make([]*rt.Tensor, len(m.Layers)),
		conv: make([]*rt.Tensor, len(m.Layers)), rec: make([]*rt.Tensor, len(m.Layers))}
	for i, l := range m.Layers {
		if l.Kind == FullAttention {
			cache.k[i] = rt.New(rt.F32, numBlocks*blockSize, c.NumKVHeads, c.HeadDim)
			cache.v[i] = rt.New(rt.F32, numBlocks*blockSize, c.NumKVHeads, c.HeadDim)
		} else {
			cache.conv[i] = rt.New(rt.F32, numSlots, c.ConvKernel-1, convChannels(c))
			cache.rec[i] = rt.New(rt.F32, numSlots, c.LinValueHeads, c.LinKeyDim, c.LinValueDim)
		}
	}
	return cache
}

// slot returns the state views of one slot of DeltaNet layer i.
func (c *Cache) slot(i, slot int) (conv, rec *rt.Tensor) {
	conv, _ = c.conv[i].Index(slot)
	rec, _ = c.rec[i].Index(slot)
	return conv, rec
}

// ResetSlot zeroes a slot for a new sequence.
func (c *Cache) ResetSlot(slot int) {
	for i := range c.conv {
		if c.conv[i] != nil {
			conv, rec := c.slot(i, slot)
			clear(conv.F32()[:conv.Len()])
			clear(rec.F32()[:rec.Len()])
		}
	}
}

// Snapshot is a copy of one slot's DeltaNet state and of the keys and
// values of a partial last block: what resuming a sequence at a position
// needs beyond its full, shared blocks.
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

// Save copies slot's state and the first rows positions of block tailBlock
// (ignored when rows is 0).
func (c *Cache) Save(slot, tailBlock, rows int) *Snapshot {
	s := &Snapshot{Rows: rows}
	for i := range c.conv {
		if c.conv[i] != nil {
			conv, rec := c.slot(i, slot)
			buf := make([]float32, conv.Len()+rec.Len())
			copy(buf, conv.F32()[:conv.Len()])
			copy(buf[conv.Len():], rec.F32()[:rec.Len()])
			s.state = append(s.state, buf)
		}
		if c.k[i] != nil && rows > 0 {
			width := c.k[i].Dim(1) * c.k[i].Dim(2)
			off := tailBlock * c.BlockSize * width
			buf := make([]float32, 2*rows*width)
			copy(buf, c.k[i].F32()[off:off+rows*width])
			copy(buf[rows*width:], c.v[i].F32()[off:off+rows*width])
			s.tail = append(s.tail, buf)
		}
	}
	return s
}

// Restore writes a snapshot into slot and, if it holds a partial block,
// into block tailBlock.
func (c *Cache) Restore(s *Snapshot, slot, tailBlock int) error {
	si, ti := 0, 0
	for i := range c.conv {
		if c.conv[i] != nil {
			if si >= len(s.state) {
				return fmt.Errorf("qwen35: snapshot does not fit this model")
			}
			conv, rec := c.slot(i, slot)
			copy(conv.F32()[:conv.Len()], s.state[si])
			copy(rec.F32()[:rec.Len()], s.state[si][conv.Len():])
			si++
		}
		if c.k[i] != nil && s.Rows > 0 {
			width := c.k[i].Dim(1) * c.k[i].Dim(2)
			off := tailBlock * c.BlockSize * width
			n := s.Rows * width
			copy(c.k[i].F32()[off:off+n], s.tail[ti][:n])
			copy(c.v[i].F32()[off:off+n], s.tail[ti][n:])
			ti++
		}
	}
	return nil
}

// CopyBlock copies the keys and values of block src into block dst.
func (c *Cache) CopyBlock(dst, src int) {
	for i := range c.k {
		if c.k[i] == nil {
			continue
		}
		width := c.k[i].Dim(1) * c.k[i].Dim(2) * c.BlockSize
		copy(c.k[i].F32()[dst*width:(dst+1)*width], c.k[i].F32()[src*width:(src+1)*width])
		copy(c.v[i].F32()[dst*width:(dst+1)*width], c.v[i].F32()[src*width:(src+1)*width])
	}
}

// grow returns a cache with numBlocks blocks holding c's keys, values and
// slots (the state tensors are shared, not copied).
func (c *Cache) grow(numBlocks int) *Cache {
	g := &Cache{BlockSize: c.BlockSize, NumBlocks: numBlocks, NumSlots: c.NumSlots,
		k: make([]*rt.Tensor, len(c.k)), v: make([]*rt.Tensor, len(c.v)), conv: c.conv, rec: c.rec}
	for i := range c.k {
		if c.k[i] != nil {
			g.k[i] = rt.New(rt.F32, numBlocks*c.BlockSize, c.k[i].Dim(1), c.k[i].Dim(2))
			g.v[i] = rt.New(rt.F32, numBlocks*c.BlockSize, c.v[i].Dim(1), c.v[i].Dim(2))
			copy(g.k[i].F32(), c.k[i].F32())
			copy(g.v[i].F32(), c.v[i].F32())
		}
	}
	return g
}
