package qwen35

import "github.com/govllm/govllm/model"

// Concatenated returns opts with projections concatenated even in host
// memory, where loading otherwise keeps them apart.
func Concatenated(opts Options) Options {
	opts.concat = true
	return opts
}

// ShardRanges is where rank's share of tensor name lies in the whole
// tensor: the split dim and its [lo, hi) ranges, or dim -2 if replicated.
func ShardRanges(src Source, rank int, name string) (dim int, ranges [][2]int) {
	s := src.(*shardSource)
	info, _ := s.Source.Info(name)
	sp := s.splitOf(name, info.Shape)
	if sp == nil {
		return -2, nil
	}
	return sp.dim, s.ranges(sp)
}

// Source is model.Source, for ShardRanges.
type Source = model.Source

// SetRecordAhead turns recording the next step ahead on or off.
func SetRecordAhead(on bool) { recordAhead = on }

// Persistent reports whether m's batch-1 decode steps run as DecodeLayers.
func Persistent(m *Model) bool { return m.persistent }
