package qwen35

import (
	"errors"
	"fmt"
	"strings"

	"github.com/govllm/govllm/model"
	rt "github.com/govllm/govllm/runtime"
)

// Tensor parallelism splits each block across n ranks, as vLLM does:
// attention query heads, DeltaNet key and value heads and MLP (and
// expert) columns go to the ranks in equal shares; the projections that
// gather a block's output (o_proj, out_proj, down_proj) are split by their
// input columns, so each rank holds a partial sum of the block's output,
// and an all-reduce (Options.AllReduce) adds them before the residual.
// KV heads fewer than the ranks are replicated. Embeddings, norms, the
// router and the lm_head are replicated.

// ErrShard is wrapped by errors about splitting a model across ranks.
var ErrShard = errors.New("tensor parallel")

// Shard returns the configuration of one of n ranks.
func (c *Config) Shard(n int) (*Config, error) {
	if n < 1 {
		return nil, fmt.Errorf("qwen35: %w: %d ranks", ErrShard, n)
	}
	s := *c
	s.Layers = append([]LayerKind(nil), c.Layers...)
	var errs []error
	div := func(name string, v int) int {
		if v%n != 0 {
			errs = append(errs, fmt.Errorf("qwen35: %w: %s %d is not divisible by %d ranks", ErrShard, name, v, n))
			return v
		}
		return v / n
	}
	s.NumHeads = div("num_attention_heads", c.NumHeads)
	switch {
	case c.NumKVHeads >= n:
		s.NumKVHeads = div("num_key_value_heads", c.NumKVHeads)
	case n%c.NumKVHeads != 0:
		errs = append(errs, fmt.Errorf("qwen35: %w: %d ranks cannot share %d KV heads", ErrShard, n, c.NumKVHeads))
	default:
		s.NumKVHeads = 1 // replicated: each rank keeps the KV head its query heads use
	}
	s.LinKeyHeads = div("linear_num_key_heads", c.LinKeyHeads)
	s.LinValueHeads = div("linear_num_value_heads", c.LinValueHeads)
	if c.IntermediateSize > 0 {
		s.IntermediateSize = div("intermediate_size", c.IntermediateSize)
	}
	if c.MoE {
		s.ExpertInterSize = div("moe_intermediate_size", c.ExpertInterSize)
		if c.SharedInterSize > 0 {
			s.SharedInterSize = div("shared_expert_intermediate_size", c.SharedInterSize)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if c.TiledVHeads && c.LinValueHeads != c.LinKeyHeads && n > 1 {
		return nil, fmt.Errorf("qwen35: %w: value heads in llama.cpp's tiled order do not split by key head", ErrShard)
	}
	return &s, nil
}

// shardSource serves one rank's share of a safetensors checkpoint.
type shardSource struct {
	model.Source
	c       *Config // the whole model's
	rank, n int
}

// ShardSource serves rank's share (of n) of each tensor of src, a
// checkpoint with Hugging Face names, for LoadFrom with c.Shard(n).
func ShardSource(src model.Source, c *Config, rank, n int) (model.Source, error) {
	if rank < 0 || rank >= n {
		return nil, fmt.Errorf("qwen35: %w: rank %d of %d", ErrShard, rank, n)
	}
	for _, name := range src.Names() {
		if strings.HasPrefix(name, "blk.") {
			return nil, fmt.Errorf("qwen35: %w: %s has llama.cpp's tensor names; only Hugging Face checkpoints are split", ErrShard, src.Where())
		}
	}
	return &shardSource{Source: src, c: c, rank: rank, n: n}, nil
}

// split says how a tensor divides: along dim, in
// segments (lengths along that dim, each divided among the ranks), or
// not at all (nil).
type split struct {
	dim      int
	segments []int
	// kvHead: a K or V projection with fewer KV heads than ranks: the rank
	// takes the one KV head its query heads use.
	kvHead bool
}

// splitOf is the rule for a tensor of the given shape.
func (s *shardSource) splitOf(name string, shape []int) *split {
	c := s.c
	kd, vd := c.LinKeyHeads*c.LinKeyDim, c.LinValueHeads*c.LinValueDim
	last := len(shape) - 1
	switch {
	case strings.HasSuffix(name, "self_attn.q_proj.weight"):
		return &split{dim: 0, segments: []int{shape[0]}}
	case strings.HasSuffix(name, "self_attn.k_proj.weight"), strings.HasSuffix(name, "self_attn.v_proj.weight"):
		return &split{dim: 0, segments: []int{shape[0]}, kvHead: c.NumKVHeads < s.n}
	case strings.HasSuffix(name, "self_attn.o_proj.weight"):
		return &split{dim: last, segments: []int{shape[last]}}
	case strings.HasSuffix(name, "linear_attn.in_proj_qkv.weight"), strings.HasSuffix(name, "linear_attn.conv1d.weight"):
		return &split{dim: 0, segments: []int{kd, kd, vd}}
	case strings.HasSuffix(name, "linear_attn.in_proj_z.weight"), strings.HasSuffix(name, "linear_attn.in_proj_b.weight"),
		strings.HasSuffix(name, "linear_attn.in_proj_a.weight"), strings.HasSuffix(name, "linear_attn.A_log"),
		strings.HasSuffix(name, "linear_attn.dt_bias"):
		return &split{dim: 0, segments: []int{shape[0]}}
	case strings.HasSuffix(name, "linear_attn.out_proj.weight"):
		return &split{dim: last, segments: []int{shape[last]}}
	case strings.HasSuffix(name, "experts.gate_up_proj"): // [E, 2I, H]: gate and up halves
		return &split{dim: 1, segments: []int{shape[1] / 2, shape[1] / 2}}
	case strings.HasSuffix(name, "experts.down_proj"): // [E, H, I]
		return &split{dim: last, segments: []int{shape[last]}}
	case strings.HasSuffix(name, "gate_proj.weight"), strings.HasSuffix(name, "up_proj.weight"):
		return &split{dim: 0, segments: []int{shape[0]}}
	case strings.HasSuffix(name, "down_proj.weight"):
		return &split{dim: last, segments: []int{shape[last]}}
	}
	return nil
}

// ranges are the [lo, hi) ranges along the split dim that the rank takes.
func (s *shardSource) ranges(sp *split) [][2]int {
	var out [][2]int
	off := 0
	for _, seg := range sp.segments {
		if sp.kvHead {
			// seg is NumKVHeads heads; the rank's query heads use head
			// rank·Hkv/n.
			head := seg / s.c.NumKVHeads
			h := s.rank * s.c.NumKVHeads / s.n
			out = append(out, [2]int{off + h*head, off + (h+1)*head})
		} else {
			part := seg / s.n
			out = append(out, [2]int{off + s.rank*part, off + (s.rank+1)*part})
		}
		off += seg
	}
	return out
}

func (s *shardSource) Info(name string) (model.TensorInfo, bool) {
	info, ok := s.Source.Info(name)
	if !ok {
		return info, ok
	}
	if sp := s.splitOf(name, info.Shape); sp != nil {
		info.Shape = append([]int(nil), info.Shape...)
		n := 0
		for _, r := range s.ranges(sp) {
			n += r[1] - r[0]
		}
		info.Shape[sp.dim] = n
	}
	return info, true
}

func (s *shardSource) Tensor(name string) (*rt.Tensor, error) {
	t, err := s.Source.Tensor(name)
	if err != nil {
		return nil, err
	}
	sp := s.splitOf(name, t.Shape())
	if sp == nil {
		return t, nil
	}
	shape := t.Shape()
	for _, seg := range sp.segments {
		if unit := seg / s.n; !sp.kvHead && unit*s.n != seg {
			return nil, fmt.Errorf("qwen35: %w: tensor %q: %d along dim %d does not divide among %d ranks", ErrShard, name, seg, sp.dim, s.n)
		}
	}
	if t.DType().Quantized() {
		return nil, fmt.Errorf("qwen35: %w: tensor %q is %v; only unquantized weights are split", ErrShard, name, t.DType())
	}
	dim := sp.dim
	// The tensor as [outer, dim, inner] in elements; take the ranges of dim.
	outer, inner := 1, 1
	for _, d := range shape[:dim] {
		outer *= d
	}
	for _, d := range shape[dim+1:] {
		inner *= d
	}
	es := t.DType().ByteLen(1)
	src := t.Bytes()[:t.DType().ByteLen(t.Len())]
	ranges := s.ranges(sp)
	kept := 0
	for _, r := range ranges {
		kept += r[1] - r[0]
	}
	data := make([]byte, 0, outer*kept*inner*es)
	for o := range outer {
		base := o * shape[dim] * inner * es
		for _, r := range ranges {
			data = append(data, src[base+r[0]*inner*es:base+r[1]*inner*es]...)
		}
	}
	out := append([]int(nil), shape...)
	out[dim] = kept
	return rt.FromBytes(t.DType(), data, out...)
}
