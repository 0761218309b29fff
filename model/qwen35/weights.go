package qwen35

import (
	"errors"
	"fmt"
	"slices"

	"github.com/govllm/govllm/model"
	rt "github.com/govllm/govllm/runtime"
)

// binder looks tensors up by their Hugging Face names. In the planning pass
// (bind false) it only checks names, dtypes and shapes from the headers and
// records the matmul dtypes of each path; in the binding pass it returns
// tensors.
type binder struct {
	src      model.Source
	prefix   string // "model." or "model.language_model."
	bind     bool
	paths    []string                     // the paths being bound, for requirements
	dtypes   map[string]map[rt.DType]bool // path → weight dtypes it reads
	used     map[string]bool              // tensors bound
	bytes    int64                        // their stored size
	params   map[rt.DType]int64           // their elements, by dtype
	progress func(done, total int)
	be       *rt.Backend  // where bound tensors go
	concat   bool         // store projections of one input as one weight
	placed   []*rt.Tensor // the device copies made
	errs     []error
}

// place puts a bound tensor in the backend's memory.
func (b *binder) place(name string, t *rt.Tensor) *rt.Tensor {
	if t == nil || b.be == nil {
		return t
	}
	d, err := b.be.Place(t)
	if err != nil {
		b.fail(fmt.Errorf("qwen35: tensor %q to %s: %w", name, b.be.Device(), err))
		return nil
	}
	if d != t {
		b.placed = append(b.placed, d)
	}
	return d
}

const maxBindErrors = 8

func (b *binder) fail(err error) {
	if len(b.errs) < maxBindErrors {
		b.errs = append(b.errs, err)
	}
}

func (b *binder) err() error { return errors.Join(b.errs...) }

func (b *binder) info(name string, shape []int) (model.TensorInfo, bool) {
	info, ok := b.src.Info(name)
	if !ok {
		b.fail(fmt.Errorf("qwen35: %s: %w: tensor %q is missing from the checkpoint", b.src.Where(), model.ErrTensor, name))
		return info, false
	}
	if info.DType == rt.DTypeInvalid {
		b.fail(fmt.Errorf("qwen35: %s: tensor %q: %w: dtype %s is not supported (want F32, BF16 or F16)", info.File, name, model.ErrTensor, info.Raw))
		return info, false
	}
	if !sameDims(info.Shape, shape) {
		b.fail(fmt.Errorf("qwen35: %s: tensor %q: %w: shape %v, want %v from config.json", info.File, name, model.ErrTensor, info.Shape, shape))
		return info, false
	}
	if !b.used[name] {
		b.used[name] = true
		n := int64(1)
		for _, d := range info.Shape {
			n *= int64(d)
		}
		b.bytes += int64(info.DType.ByteLen(int(n)))
		b.params[info.DType] += n
	}
	return info, true
}

// sameDims compares shapes ignoring dimensions of size 1 (conv1d weights
// are stored [C, 1, K]).
func sameDims(a, b []int) bool {
	strip := func(s []int) []int { return slices.DeleteFunc(slices.Clone(s), func(d int) bool { return d == 1 }) }
	return slices.Equal(strip(a), strip(b))
}

// enter marks the paths that the following tensors belong to.
func (b *binder) enter(paths ...string) {
	b.paths = paths
	for _, p := range paths {
		if b.dtypes[p] == nil {
			b.dtypes[p] = map[rt.DType]bool{}
		}
	}
}

func (b *binder) record(dt rt.DType) {
	for _, p := range b.paths {
		b.dtypes[p][dt] = true
	}
}

// matrix binds a weight used by matmul, kept in its stored dtype.
func (b *binder) matrix(name string, shape ...int) *rt.Tensor {
	info, ok := b.info(name, shape)
	if !ok {
		return nil
	}
	b.record(info.DType)
	return b.place(name, b.tensor(name, shape))
}

// tensor returns a checkpoint tensor in host memory (nil when planning).
func (b *binder) tensor(name string, shape []int) *rt.Tensor {
	if !b.bind {
		return nil
	}
	t, err := b.src.Tensor(name)
	if err != nil {
		b.fail(err)
		return nil
	}
	if t, err = t.Reshape(shape...); err != nil {
		b.fail(fmt.Errorf("qwen35: tensor %q: %w", name, err))
		return nil
	}
	return t
}

// stored binds a tensor in its stored dtype without recording a matmul.
func (b *binder) stored(name string, shape ...int) (*rt.Tensor, rt.DType) {
	info, ok := b.info(name, shape)
	if !ok {
		return nil, rt.DTypeInvalid
	}
	return b.place(name, b.tensor(name, shape)), info.DType
}

// f32 binds a small parameter (norm weight, gate constants, conv taps) as a
// float32 copy.
func (b *binder) f32(name string, shape ...int) *rt.Tensor {
	if _, ok := b.info(name, shape); !ok {
		return nil
	}
	t := b.tensor(name, shape)
	if t == nil {
		return nil
	}
	return b.place(name, toF32(t))
}

func toF32(t *rt.Tensor) *rt.Tensor {
	out := rt.New(rt.F32, t.Shape()...)
	d := out.F32()
	switch t.DType() {
	case rt.F32:
		copy(d, t.F32()[:len(d)])
	case rt.BF16:
		for i, h := range t.U16()[:len(d)] {
			d[i] = rt.BF16ToF32(h)
		}
	case rt.F16:
		for i, h := range t.U16()[:len(d)] {
			d[i] = rt.F16ToF32(h)
		}
	}
	return out
}

// has reports whether the checkpoint holds a tensor, without failing.
func (b *binder) has(name string) bool {
	_, ok := b.src.Info(name)
	return ok
}
