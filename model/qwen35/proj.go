package qwen35

import (
	"slices"
	"strings"

	rt "github.com/govllm/govllm/runtime"
)

// Projections are weights that multiply one input (DeltaNet's four input
// projections, an MLP's gate and up). Where weights are copied to a device
// and their dtypes agree they are stored side by side as one weight
// [ΣN, K], so a step reads x once and runs one matmul: at batch 1 a decode
// step is a chain of small GEMVs, and each launch costs more than its
// matrix takes to stream. In host memory they stay apart, read from the
// file's mapping (a copy would double what loading reads and keeps); so do
// parts a GGUF file quantizes differently (llama.cpp gives some layers'
// matrices more bits).
type Projections struct {
	Fused *rt.Tensor   // [ΣN, K], nil when the parts differ in dtype
	Parts []*rt.Tensor // the weights apart, when not fused
	Rows  []int        // N of each
}

// projections binds the weights names, of rows[i] × k each.
func (b *binder) projections(names []string, rows []int, k int) *Projections {
	if len(names) > maxProjections {
		panic("qwen35: more projections than maxProjections")
	}
	p := &Projections{Rows: rows}
	var dts []rt.DType
	for i, name := range names {
		info, ok := b.info(name, []int{rows[i], k})
		if !ok {
			return p
		}
		b.record(info.DType)
		dts = append(dts, info.DType)
	}
	if !b.bind {
		return p
	}
	if !b.concat || slices.ContainsFunc(dts, func(dt rt.DType) bool { return dt != dts[0] }) {
		for i, name := range names {
			p.Parts = append(p.Parts, b.place(name, b.tensor(name, []int{rows[i], k})))
		}
		return p
	}
	total := 0
	for _, r := range rows {
		total += r
	}
	cat := rt.New(dts[0], total, k)
	dst := cat.Bytes()
	for i, name := range names {
		t := b.tensor(name, []int{rows[i], k})
		if t == nil {
			return p
		}
		dst = dst[copy(dst, t.Bytes()[:dts[0].ByteLen(rows[i]*k)]):]
	}
	p.Fused = b.place(strings.Join(names, " + "), cat)
	return p
}

// maxProjections bounds the parts, so that forward returns them in an
// array (a decode step allocates nothing).
const maxProjections = 4

// forward returns x times each weight, [T, N_i]: column ranges of one
// product when fused.
func (p *Projections) forward(be *rt.Backend, ar *rt.Arena, x *rt.Tensor) (outs [maxProjections]*rt.Tensor, err error) {
	t := x.Dim(0)
	if p.Fused != nil {
		all := ar.New(rt.F32, t, p.Fused.Dim(0))
		if err := be.MatMul(all, x, p.Fused); err != nil {
			return outs, err
		}
		off := 0
		for i, r := range p.Rows {
			outs[i] = ar.Slice(all, 1, off, off+r)
			off += r
		}
		return outs, nil
	}
	for i, r := range p.Rows {
		outs[i] = ar.New(rt.F32, t, r)
		if err := be.MatMul(outs[i], x, p.Parts[i]); err != nil {
			return outs, err
		}
	}
	return outs, nil
}
