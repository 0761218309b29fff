package engine

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/govllm/govllm/model/qwen35"
	rt "github.com/govllm/govllm/runtime"
)

// Config sizes the engine. Zero values take the defaults.
type Config struct {
	MaxNumSeqs          int   // running sequences at most (default 64)
	MaxNumBatchedTokens int   // tokens per step (default 2048)
	BlockSize           int   // positions per KV block (default 16)
	KVCacheBytes        int64 // KV blocks and state slots (default: a quarter of available memory, at most 4 GiB; half the free GPU memory on a GPU)
	NumBlocks           int   // KV blocks, overriding what KVCacheBytes leaves (tests, tuning)
	CheckpointBytes     int64 // DeltaNet state checkpoints for prefix caching (default KVCacheBytes/8, at most 1 GiB; host memory)
	CheckpointInterval  int   // checkpoint every this many prompt tokens (default 256, a multiple of BlockSize)
	MaxWaiting          int   // queued requests beyond which Submit refuses (default 16 × MaxNumSeqs)
	NoPrefixCaching     bool
	MaxModelLen         int     // prompt + output tokens at most (default: the model's max positions)
	EOSTokenIDs         []int32 // end of sequence, unless a request ignores it
}

// ErrConfig is wrapped by invalid engine configurations.
var ErrConfig = errors.New("invalid engine config")

// Plan is the memory plan the engine starts with.
type Plan struct {
	WeightBytes     int64
	BlockBytes      int64 // one KV block, all attention layers
	NumBlocks       int
	SlotBytes       int64 // one sequence's DeltaNet state
	NumSlots        int
	CheckpointBytes int64
}

func (p Plan) String() string {
	return fmt.Sprintf("weights %s, KV %d blocks × %s = %s, state %d slots × %s = %s, checkpoints ≤ %s",
		mib(p.WeightBytes), p.NumBlocks, kib(p.BlockBytes), mib(int64(p.NumBlocks)*p.BlockBytes),
		p.NumSlots, kib(p.SlotBytes), mib(int64(p.NumSlots)*p.SlotBytes), mib(p.CheckpointBytes))
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
func kib(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10)) }

// resolve fills defaults, validates, and sizes the pools for m.
func (c Config) resolve(m *qwen35.Model) (Config, Plan, error) {
	if c.MaxNumSeqs == 0 {
		c.MaxNumSeqs = 64
	}
	if c.MaxNumBatchedTokens == 0 {
		c.MaxNumBatchedTokens = 2048
	}
	if c.BlockSize == 0 {
		c.BlockSize = 16
	}
	if c.MaxWaiting == 0 {
		c.MaxWaiting = 16 * c.MaxNumSeqs
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = 256
	}
	if c.MaxModelLen == 0 {
		c.MaxModelLen = m.Config.MaxPositions
	}
	if c.KVCacheBytes == 0 {
		c.KVCacheBytes = defaultKVBytes(m.Backend())
	}
	if c.CheckpointBytes == 0 {
		c.CheckpointBytes = min(c.KVCacheBytes/8, 1<<30) // in host memory on every device
	}
	switch {
	case c.MaxNumSeqs < 1 || c.MaxNumBatchedTokens < 1 || c.BlockSize < 1 || c.MaxModelLen < 1:
		return c, Plan{}, fmt.Errorf("%w: max-num-seqs, max-num-batched-tokens, block size and max model length must be positive", ErrConfig)
	case c.CheckpointInterval%c.BlockSize != 0:
		return c, Plan{}, fmt.Errorf("%w: checkpoint interval %d is not a multiple of the block size %d", ErrConfig, c.CheckpointInterval, c.BlockSize)
	case c.KVCacheBytes <= 0 || c.CheckpointBytes < 0:
		return c, Plan{}, fmt.Errorf("%w: kv cache memory %d", ErrConfig, c.KVCacheBytes)
	}
	sizes := m.CacheSizes(c.BlockSize)
	p := Plan{WeightBytes: m.WeightBytes(), BlockBytes: sizes.BlockBytes, SlotBytes: sizes.SlotBytes, CheckpointBytes: c.CheckpointBytes}
	// State slots take at most half the budget; the rest is KV blocks.
	if sizes.SlotBytes > 0 {
		fit := int(c.KVCacheBytes / 2 / sizes.SlotBytes)
		if fit < 1 {
			return c, Plan{}, fmt.Errorf("%w: kv cache memory %s cannot hold one sequence's state (%s)", ErrConfig, mib(c.KVCacheBytes), kib(sizes.SlotBytes))
		}
		if fit < c.MaxNumSeqs {
			slog.Warn("engine: max-num-seqs clamped to what fits in the kv cache memory", "asked", c.MaxNumSeqs, "fits", fit)
			c.MaxNumSeqs = fit
		}
	}
	p.NumSlots = c.MaxNumSeqs
	left := c.KVCacheBytes - int64(p.NumSlots)*sizes.SlotBytes
	if sizes.BlockBytes > 0 {
		p.NumBlocks = int(left / sizes.BlockBytes)
	} else {
		p.NumBlocks = (c.MaxModelLen+c.BlockSize-1)/c.BlockSize*c.MaxNumSeqs + 1 // no attention layers: blocks cost nothing
	}
	if c.NumBlocks > 0 {
		p.NumBlocks = c.NumBlocks
	}
	if p.NumBlocks < 1 {
		return c, Plan{}, fmt.Errorf("%w: kv cache memory %s leaves no room for a KV block (%s)", ErrConfig, mib(c.KVCacheBytes), kib(sizes.BlockBytes))
	}
	return c, p, nil
}

// defaultKVBytes is the cache budget when none is given: a quarter of the
// free host memory up to 4 GiB on the CPU, where the weights and the
// system share it; on a GPU, half of what is free after the weights, as
// vLLM takes most of the card.
func defaultKVBytes(be *rt.Backend) int64 {
	free := be.Memory().Available()
	if be.Device() == rt.CPU {
		return min(free/4, 4<<30)
	}
	return free / 2
}
