package runtime

// Arena hands out the tensors of one forward step (activations and views
// of them) and takes them all back at Reset. A step that repeats the
// shapes of an earlier one, as decode steps do, allocates nothing: the
// i-th request of a step reuses the i-th tensor and its buffer.
type Arena struct {
	views []*Tensor // structs of views and of New's tensors
	nv    int
	bufs  [][]byte // data of New's tensors, by request
	nb    int
}

// Reset takes back everything handed out since the last Reset.
func (a *Arena) Reset() { a.nv, a.nb = 0, 0 }

// ArenaMark is a point in an arena's requests to Release back to.
type ArenaMark struct{ nv, nb int }

// Mark returns the current point.
func (a *Arena) Mark() ArenaMark { return ArenaMark{a.nv, a.nb} }

// Release takes back what was handed out since m: a layer's intermediate
// tensors, so that the next layer reuses their buffers.
func (a *Arena) Release(m ArenaMark) { a.nv, a.nb = m.nv, m.nb }

func (a *Arena) tensor() *Tensor {
	if a.nv == len(a.views) {
		a.views = append(a.views, &Tensor{})
	}
	t := a.views[a.nv]
	a.nv++
	return t
}

// New is New from the arena: a zeroed, contiguous tensor valid until Reset.
func (a *Arena) New(dt DType, shape ...int) *Tensor {
	n := dt.ByteLen(numel(shape))
	if a.nb == len(a.bufs) {
		a.bufs = append(a.bufs, nil)
	}
	buf := a.bufs[a.nb]
	if cap(buf) < n {
		buf = wordBytes(n)
		a.bufs[a.nb] = buf
	}
	a.nb++
	buf = buf[:n]
	clear(buf)
	t := a.tensor()
	t.init(dt, buf, 0, shape, nil)
	return t
}

// Reshape is Tensor.MustReshape into a view from the arena.
func (a *Arena) Reshape(t *Tensor, shape ...int) *Tensor {
	v := a.tensor()
	if err := t.reshapeInto(v, shape); err != nil {
		panic(err)
	}
	return v
}

// Slice is Tensor.Slice into a view from the arena, for bounds the caller
// has validated.
func (a *Arena) Slice(t *Tensor, dim, start, end int) *Tensor {
	v := a.tensor()
	if err := t.sliceInto(v, dim, start, end); err != nil {
		panic(err)
	}
	return v
}

// Index is Tensor.Index into a view from the arena.
func (a *Arena) Index(t *Tensor, i int) *Tensor {
	if len(t.shape) == 0 || i < 0 || i >= t.shape[0] {
		panic("runtime: arena index out of range")
	}
	v := a.tensor()
	v.viewOf(t, t.offset+i*t.strides[0], t.shape[1:], t.strides[1:])
	return v
}

// Bytes is the size of the buffers the arena holds.
func (a *Arena) Bytes() int {
	n := 0
	for _, b := range a.bufs {
		n += cap(b)
	}
	return n
}
