//go:build linux && amd64

package cuda

import (
	"unsafe"
)

// KernelOccupancy reports kernel name's registers a thread and the blocks
// of 256 threads the GPU holds at once.
func KernelOccupancy(name string) (regs, resident int) {
	c, err := Open()
	if err != nil {
		return 0, 0
	}
	var v int32
	err = c.do(func() error {
		fn, err := c.function(name)
		if err == nil {
			cuFuncGetAttribute(&v, funcAttrNumRegs, fn)
			resident = c.residentBlocks(name)
		}
		return err
	})
	return int(v), resident
}

// GEMVSplit is gemv_16's split of K over warps for an N×K weight.
func GEMVSplit(N, K int) int { return int(gemvSplit(N, K)) }

// Extra is a module compiled from CUDA C that is not kernels.cu, for
// benchmarks of kernels the backend does not have (yet).
type Extra struct {
	c   *Context
	mod uintptr
}

// LoadExtra compiles src with NVRTC for this GPU and loads it.
func LoadExtra(src string) (*Extra, error) {
	c, err := Open()
	if err != nil {
		return nil, err
	}
	e := &Extra{c: c}
	err = c.do(func() error {
		image, err := compile(src, "extra.cu", c.Major, c.Minor)
		if err != nil {
			return err
		}
		return check("cuModuleLoadData", cuModuleLoadData(&e.mod, unsafe.Pointer(unsafe.SliceData(image))))
	})
	return e, err
}

// Launch launches kernel name of the module on the legacy stream, its
// arguments 8 bytes each.
func (e *Extra) Launch(name string, grid, block, shared int, args ...uint64) error {
	return e.c.do(func() error {
		fn, err := e.function(name)
		if err != nil {
			return err
		}
		if shared > 48<<10 {
			cuFuncSetAttribute(fn, funcAttrMaxDynShared, int32(shared))
		}
		ptrs := make([]unsafe.Pointer, len(args)+1)
		for i := range args {
			ptrs[i] = unsafe.Pointer(&args[i])
		}
		return check("cuLaunchKernel "+name, cuLaunchKernel(fn, uint32(grid), 1, 1, uint32(block), 1, 1, uint32(shared), 0, unsafe.Pointer(&ptrs[0]), nil))
	})
}

// SMs is the GPU's multiprocessor count.
func (e *Extra) SMs() int { return e.c.SMs }

// Resident is how many blocks of kernel name of the module, block threads
// each, an SM holds at once.
func (e *Extra) Resident(name string, block int) int {
	var n int32
	e.c.do(func() error {
		fn, err := e.function(name)
		if err != nil {
			return err
		}
		return check("cuOccupancyMaxActiveBlocksPerMultiprocessor", cuOccupancyMaxActiveBlocks(&n, fn, int32(block), 0))
	})
	return int(n)
}

// function looks kernel name up in the module (on the context's thread).
func (e *Extra) function(name string) (uintptr, error) {
	var fn uintptr
	return fn, check("cuModuleGetFunction "+name, cuModuleGetFunction(&fn, e.mod, name))
}

// CompileSource compiles CUDA C src with NVRTC for sm_<major><minor>,
// without a GPU.
func CompileSource(src string, major, minor int) ([]byte, error) {
	return compile(src, "extra.cu", major, minor)
}
