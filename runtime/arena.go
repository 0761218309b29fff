package runtime

// Arena hands out the tensors of one forward step (activations and views
// of them) and takes them all back at Reset. A step that repeats the
// shapes of an earlier one, as decode steps do, allocates nothing: the
// i-th request of a step reuses the i-th tensor and its buffer.
//
// An arena given a device's memory (SetMemory) hands out device tensors,
// not cleared (a clear is a launch, and every op writes its whole output;
// a caller that accumulates clears with Memory.Zero); an allocation that
// fails is recorded (Err) and yields a tensor in no memory, which every op
// refuses.
type Arena struct {
	views []*Tensor // structs of views and of New's tensors
	nv    int
	bufs  [][]byte  // data of New's tensors, by request
	dev   []*Tensor // or their device buffers
	nb    int
	mem   Memory // nil: the Go heap
	err   error
}

// SetMemory makes the arena allocate from mem (a device's memory), freeing
// what it held.
func (a *Arena) SetMemory(mem Memory) {
	a.Free()
	if _, host := mem.(HostMemory); host {
		mem = nil
	}
	a.mem = mem
}

// Free releases every buffer; the arena stays usable.
func (a *Arena) Free() {
	for _, t := range a.dev {
		if t != nil {
			a.mem.Free(t)
		}
	}
	a.dev, a.bufs, a.nv, a.nb = nil, nil, 0, 0
}

// Err is the first allocation failure since the last Reset.
func (a *Arena) Err() error { return a.err }

// Reset takes back everything handed out since the last Reset.
func (a *Arena) Reset() { a.nv, a.nb, a.err = 0, 0, nil }

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
	if a.mem != nil {
		return a.newDevice(dt, shape)
	}
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

func (a *Arena) newDevice(dt DType, shape []int) *Tensor {
	n := dt.ByteLen(numel(shape))
	if a.nb == len(a.dev) {
		a.dev = append(a.dev, nil)
	}
	buf := a.dev[a.nb]
	if buf == nil || buf.ByteLen() < n {
		if buf != nil {
			a.mem.Free(buf)
		}
		var err error
		// Grown by a quarter, so that slowly growing prefills do not
		// reallocate every step.
		if buf, err = a.mem.Alloc(F32, (n+n/4+3)/4); err != nil {
			buf = nil
			a.fail(err)
		}
		a.dev[a.nb] = buf
	}
	a.nb++
	t := a.tensor()
	t.init(dt, nil, 0, shape, nil)
	t.device = 0
	if buf != nil {
		t.device = buf.device
	}
	return t
}

func (a *Arena) fail(err error) {
	if a.err == nil {
		a.err = err
	}
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
	for _, t := range a.dev {
		if t != nil {
			n += t.ByteLen()
		}
	}
	return n
}
