//go:build linux && amd64

package cuda

import (
	"fmt"
	"unsafe"

	rt "github.com/govllm/govllm/runtime"
)

// Memory is the GPU's memory as a runtime.Memory: what a cuda backend's
// tensors are allocated from.
func (c *Context) Memory() rt.Memory { return memory{c} }

type memory struct{ c *Context }

func (m memory) Alloc(dt rt.DType, shape ...int) (*rt.Tensor, error) { return m.c.Alloc(dt, shape...) }
func (m memory) Free(t *rt.Tensor) error                             { return m.c.Free(t) }
func (m memory) Sync() error                                         { return m.c.Sync() }

func (m memory) ReadBack(t *rt.Tensor) (*rt.Tensor, error) {
	if m.c.rec != nil { // Step or Record holds the thread, with the context current
		return m.c.readBack(t)
	}
	var out *rt.Tensor
	err := m.c.do(func() error {
		var err error
		out, err = m.c.readBack(t)
		return err
	})
	return out, err
}

// Staging allocates page-locked host memory: copies from it run at the
// link's rate rather than through the driver's bounce buffer.
func (m memory) Staging(dt rt.DType, shape ...int) (*rt.Tensor, error) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	bytes := uintptr(max(dt.ByteLen(n), 4))
	var ptr unsafe.Pointer
	if err := m.c.do(func() error { return check("cuMemHostAlloc", cuMemHostAlloc(&ptr, bytes, 0)) }); err != nil {
		return nil, fmt.Errorf("%w (%d bytes of page-locked host memory)", err, bytes)
	}
	return rt.FromBytes(dt, unsafe.Slice((*byte)(ptr), bytes)[:dt.ByteLen(n)], shape...)
}

func (m memory) FreeStaging(t *rt.Tensor) error {
	b := t.Bytes()
	if cap(b) == 0 {
		return nil
	}
	return m.c.do(func() error { return check("cuMemFreeHost", cuMemFreeHost(unsafe.Pointer(unsafe.SliceData(b[:1])))) })
}

func (m memory) Available() int64 {
	var free, total uintptr
	if err := m.c.do(func() error { return check("cuMemGetInfo", cuMemGetInfo(&free, &total)) }); err != nil {
		return 0
	}
	return int64(free)
}

// Copy moves bytes host→device, device→host or device→device. Copies on the
// legacy stream wait for the kernels queued before them; a copy to the host
// returns when the data is there.
func (m memory) Copy(dst, src *rt.Tensor) error {
	if err := rt.CheckCopy(dst, src); err != nil {
		return err
	}
	n := uintptr(dst.ByteLen())
	if n == 0 {
		return nil
	}
	host := func(t *rt.Tensor) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(t.Bytes())) }
	return m.c.do(func() error {
		if err := m.c.flush(); err != nil { // the copy follows the step's work so far
			return err
		}
		m.c.eager = true
		switch {
		case dst.OnDevice() && src.OnDevice():
			return check("cuMemcpyDtoD", cuMemcpyDtoD(dst.DevicePtr(), src.DevicePtr(), n))
		case dst.OnDevice():
			return check("cuMemcpyHtoD", cuMemcpyHtoD(dst.DevicePtr(), host(src), n))
		case src.OnDevice():
			return check("cuMemcpyDtoH", cuMemcpyDtoH(host(dst), src.DevicePtr(), n))
		}
		return fmt.Errorf("cuda: copy between two host tensors (%v %v)", dst.DType(), dst.Shape())
	})
}

func (m memory) Zero(t *rt.Tensor) error {
	if !t.OnDevice() || !t.IsContiguous() {
		return fmt.Errorf("cuda: zero of %v %v: contiguous device tensors only", t.DType(), t.Shape())
	}
	n := uintptr(t.ByteLen())
	if n == 0 {
		return nil
	}
	return m.c.do(func() error {
		if err := m.c.flush(); err != nil {
			return err
		}
		m.c.eager = true
		return check("cuMemsetD8", cuMemsetD8(t.DevicePtr(), 0, n))
	})
}

// DeviceMemory opens GPU 0 and returns its memory.
func DeviceMemory() (rt.Memory, error) {
	c, err := Open()
	if err != nil {
		return nil, err
	}
	return c.Memory(), nil
}
