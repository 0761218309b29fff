//go:build linux && amd64

package cuda

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	rt "github.com/govllm/govllm/runtime"
)

// The driver API entry points (libcuda), bound by load.
var (
	cuInit                      func(flags uint32) int32
	cuDeviceGetCount            func(n *int32) int32
	cuDeviceGet                 func(dev *int32, ordinal int32) int32
	cuDeviceGetName             func(name *byte, n int32, dev int32) int32
	cuDeviceGetAttribute        func(v *int32, attr int32, dev int32) int32
	cuDevicePrimaryCtxRetain    func(ctx *uintptr, dev int32) int32
	cuMemAlloc                  func(p *uintptr, n uintptr) int32
	cuMemFree                   func(p uintptr) int32
	cuMemcpyHtoD                func(dst uintptr, src unsafe.Pointer, n uintptr) int32
	cuMemsetD8                  func(dst uintptr, v uint8, n uintptr) int32
	cuMemcpyDtoD                func(dst, src uintptr, n uintptr) int32
	cuMemGetInfo                func(free, total *uintptr) int32
	cuMemHostAlloc              func(p *unsafe.Pointer, n uintptr, flags uint32) int32
	cuStreamCreate              func(s *uintptr, flags uint32) int32
	cuStreamBeginCapture        func(s uintptr, mode int32) int32
	cuStreamEndCapture          func(s uintptr, g *uintptr) int32
	cuGraphInstantiateWithFlags func(exec *uintptr, g uintptr, flags uint64) int32
	cuGraphDestroy              func(g uintptr) int32
	cuGraphExecDestroy          func(exec uintptr) int32
	cuMemFreeHost               func(p unsafe.Pointer) int32
	cuModuleLoadData            func(mod *uintptr, image unsafe.Pointer) int32
	cuModuleGetFunction         func(fn *uintptr, mod uintptr, name string) int32
	cuFuncSetAttribute          func(fn uintptr, attr int32, v int32) int32
	cuFuncGetAttribute          func(v *int32, attr int32, fn uintptr) int32
	cuOccupancyMaxActiveBlocks  func(n *int32, fn uintptr, block int32, shared uintptr) int32
	cuGetErrorName              func(code int32, s **byte) int32
	cuDriverGetVersion          func(v *int32) int32
	cuDeviceTotalMem            func(n *uintptr, dev int32) int32
)

// The driver calls made every step or every launch go through
// purego.SyscallN: a function bound by purego.RegisterFunc allocates (it
// calls through reflect) every time.
var hot struct {
	ctxSetCurrent, ctxSynchronize, streamSynchronize, graphLaunch uintptr
	memcpyDtoH, memcpyHtoDAsync, launchKernel, launchKernelEx     uintptr // launchKernelEx: CUDA 12; 0 before
	memcpyDtoHAsync, eventRecord, eventSynchronize                uintptr
}

func call(fn uintptr, args ...uintptr) int32 {
	r, _, _ := purego.SyscallN(fn, args...)
	return int32(r)
}

func cuCtxSetCurrent(ctx uintptr) int32   { return call(hot.ctxSetCurrent, ctx) }
func cuCtxSynchronize() int32             { return call(hot.ctxSynchronize) }
func cuStreamSynchronize(s uintptr) int32 { return call(hot.streamSynchronize, s) }
func cuGraphLaunch(exec, s uintptr) int32 { return call(hot.graphLaunch, exec, s) }

// The host pointers passed here are page-locked or Go memory that the
// caller holds: the collector does not move it.
func cuMemcpyDtoH(dst unsafe.Pointer, src, n uintptr) int32 {
	return call(hot.memcpyDtoH, uintptr(dst), src, n)
}

func cuMemcpyHtoDAsync(dst uintptr, src unsafe.Pointer, n, stream uintptr) int32 {
	return call(hot.memcpyHtoDAsync, dst, uintptr(src), n, stream)
}

func cuMemcpyDtoHAsync(dst unsafe.Pointer, src, n, stream uintptr) int32 {
	return call(hot.memcpyDtoHAsync, uintptr(dst), src, n, stream)
}

func cuEventRecordHot(ev, stream uintptr) int32 { return call(hot.eventRecord, ev, stream) }
func cuEventSynchronize(ev uintptr) int32       { return call(hot.eventSynchronize, ev) }

func cuLaunchKernel(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params, extra unsafe.Pointer) int32 {
	return call(hot.launchKernel, fn, uintptr(gx), uintptr(gy), uintptr(gz), uintptr(bx), uintptr(by), uintptr(bz),
		uintptr(shared), stream, uintptr(params), uintptr(extra))
}

func cuLaunchKernelEx(config *launchConfig, fn uintptr, params, extra unsafe.Pointer) int32 {
	return call(hot.launchKernelEx, uintptr(unsafe.Pointer(config)), fn, uintptr(params), uintptr(extra))
}

const (
	eventDisableTiming   = 2
	streamNonBlocking    = 1
	captureModeRelaxed   = 2
	cudaErrorNoDevice    = 100
	attrComputeMajor     = 75
	attrComputeMinor     = 76
	attrMultiprocessors  = 16
	funcAttrMaxDynShared = 8
	funcAttrNumRegs      = 4
)

// Context is the CUDA state of one GPU: its primary context, the compiled
// kernels, cuBLAS and a sticky error. Kernels report failures to the
// context (their signatures return nothing, like CUDA's own launches); Sync
// returns the first one.
type Context struct {
	ctx      uintptr
	Name     string
	Major    int
	Minor    int
	SMs      int
	TotalMem uintptr
	Driver   int

	mod       uintptr
	fns       map[string]uintptr
	resident  map[uintptr]int              // blocks of a kernel (of 256 threads) resident at once on the GPU
	bigShared map[uintptr]int              // kernels allowed more than 48 KiB of shared memory: how much
	experts   map[*rt.Experts]*expertTable // moe_experts weight tables, uploaded at first use
	persist   persistent                   // decode_layers (persistent.go)
	blas      *blas
	// An eager launch's argument values and the pointers to them that the
	// driver reads (here, not on the stack: they escape through purego).
	argVals [48]uint64
	argPtrs [48]unsafe.Pointer
	// Host arrays that ops build each call before staging them.
	hostRows [3][]int32

	mu      sync.Mutex
	err     error
	scratch []devBuf // device scratch by slot (conversions, outputs read back)

	// Step recording and its captured graphs (graph.go).
	rec          *recorder
	recBuf       []byte
	lastEnc      [2][]byte // the last two steps' encodings: a step that repeats one is captured
	graphs       []graph
	stream       uintptr // the capture stream
	noGraphs     bool
	pdl          bool      // graphs' kernels launched with programmatic dependencies (Hopper on)
	lastGraphEnd time.Time // GOVLLM_CUDA_PROFILE=graphs
	graphStats   GraphStats
	ahead        aheadStep // the step recorded ahead (Record)
	epoch        uint64    // counts frees and moves of device buffers, which stale a step recorded ahead
	eager        bool      // work queued on the legacy stream since the GPU was last waited for
	// Steps alternate between the two halves of the staging ring, so that
	// one can be issued while the one before still reads its half; each
	// half's event marks the end of the last step issued on it.
	half      int
	halfEvent [2]uintptr
	halfStep  [2]uint64 // which step (counting c.issued) recorded it
	halfWait  [2]stepWait
	issued    uint64

	stageMu            sync.Mutex
	stageHost          unsafe.Pointer // page-locked ring of host arrays, two halves of stageBytes
	stageDev, stageOff uintptr        // its device mirror, next free byte of the current half
}

type devBuf struct {
	ptr uintptr
	n   uintptr
}

var (
	openOnce sync.Once
	global   *Context
	openErr  error
)

// Open returns the context of GPU 0, loading the libraries and compiling
// the kernels on first use; the error says why CUDA is unavailable.
func Open() (*Context, error) {
	openOnce.Do(func() { global, openErr = open() })
	return global, openErr
}

// Available reports why CUDA cannot be used, or nil.
func Available() error {
	_, err := Open()
	return err
}

func open() (*Context, error) {
	lib, err := openLibrary("the CUDA driver (libcuda)", []string{"libcuda.so.1", "libcuda.so"},
		[]string{"/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib/wsl/lib", "/usr/lib64"})
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	err = lib.bind(map[string]any{
		"cuInit": &cuInit, "cuDeviceGetCount": &cuDeviceGetCount, "cuDeviceGet": &cuDeviceGet,
		"cuDeviceGetName": &cuDeviceGetName, "cuDeviceGetAttribute": &cuDeviceGetAttribute,
		"cuDevicePrimaryCtxRetain": &cuDevicePrimaryCtxRetain, "cuCtxSetCurrent": &hot.ctxSetCurrent,
		"cuCtxSynchronize": &hot.ctxSynchronize, "cuMemAlloc_v2": &cuMemAlloc, "cuMemFree_v2": &cuMemFree,
		"cuMemcpyHtoD_v2": &cuMemcpyHtoD, "cuMemcpyDtoH_v2": &hot.memcpyDtoH, "cuMemsetD8_v2": &cuMemsetD8,
		"cuMemcpyDtoD_v2": &cuMemcpyDtoD, "cuMemGetInfo_v2": &cuMemGetInfo,
		"cuMemHostAlloc": &cuMemHostAlloc, "cuMemcpyHtoDAsync_v2": &hot.memcpyHtoDAsync,
		"cuStreamCreate": &cuStreamCreate, "cuStreamSynchronize": &hot.streamSynchronize,
		"cuStreamBeginCapture_v2": &cuStreamBeginCapture, "cuStreamEndCapture": &cuStreamEndCapture,
		"cuGraphInstantiateWithFlags": &cuGraphInstantiateWithFlags, "cuGraphLaunch": &hot.graphLaunch,
		"cuGraphDestroy": &cuGraphDestroy, "cuGraphExecDestroy": &cuGraphExecDestroy, "cuMemFreeHost": &cuMemFreeHost,
		"cuModuleLoadData": &cuModuleLoadData, "cuModuleGetFunction": &cuModuleGetFunction,
		"cuFuncSetAttribute": &cuFuncSetAttribute, "cuLaunchKernel": &hot.launchKernel,
		"cuFuncGetAttribute": &cuFuncGetAttribute, "cuOccupancyMaxActiveBlocksPerMultiprocessor": &cuOccupancyMaxActiveBlocks,
		"cuGetErrorName": &cuGetErrorName, "cuDriverGetVersion": &cuDriverGetVersion,
		"cuDeviceTotalMem_v2":  &cuDeviceTotalMem,
		"cuMemcpyDtoHAsync_v2": &hot.memcpyDtoHAsync, "cuEventCreate": &cuEventCreate,
		"cuEventRecord": &hot.eventRecord, "cuEventSynchronize": &hot.eventSynchronize,
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	if lib.bind(map[string]any{"cuLaunchKernelEx": &hot.launchKernelEx}) != nil {
		hot.launchKernelEx = 0
	}
	if (profiling || profilingGraph) && bindEvents(lib) != nil {
		profiling, profilingGraph = false, false
	}
	if code := cuInit(0); code == cudaErrorNoDevice {
		return nil, fmt.Errorf("cuda: %w: cuInit finds no device", ErrUnavailable)
	} else if err := check("cuInit", code); err != nil {
		return nil, err
	}
	var n int32
	if err := check("cuDeviceGetCount", cuDeviceGetCount(&n)); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("cuda: %w: the driver loaded but reports no device", ErrUnavailable)
	}
	var dev int32
	if err := check("cuDeviceGet", cuDeviceGet(&dev, 0)); err != nil {
		return nil, err
	}
	c := &Context{fns: map[string]uintptr{}, bigShared: map[uintptr]int{}, resident: map[uintptr]int{}}
	var name [256]byte
	cuDeviceGetName(&name[0], int32(len(name)), dev)
	for i, b := range name {
		if b == 0 {
			c.Name = string(name[:i])
			break
		}
	}
	var v int32
	cuDeviceGetAttribute(&v, attrComputeMajor, dev)
	c.Major = int(v)
	cuDeviceGetAttribute(&v, attrComputeMinor, dev)
	c.Minor = int(v)
	cuDeviceGetAttribute(&v, attrMultiprocessors, dev)
	c.SMs = int(v)
	cuDriverGetVersion(&v)
	c.Driver = int(v)
	cuDeviceTotalMem(&c.TotalMem, dev)
	c.pdl = c.Major >= 9 && hot.launchKernelEx != 0 && os.Getenv("GOVLLM_CUDA_PDL") != "0"
	if dropKernels != nil {
		slog.Warn("GOVLLM_CUDA_DROP is set: kernels are left out and outputs are wrong", "drop", os.Getenv("GOVLLM_CUDA_DROP"))
	}
	if err := check("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&c.ctx, dev)); err != nil {
		return nil, err
	}
	err = c.do(func() error {
		image, err := compileKernels(c.Major, c.Minor)
		if err != nil {
			return err
		}
		if err := check("cuModuleLoadData", cuModuleLoadData(&c.mod, unsafe.Pointer(unsafe.SliceData(image)))); err != nil {
			return err
		}
		c.blas, err = openBLAS()
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// check turns a CUresult into an error naming the call.
func check(call string, code int32) error {
	if code == 0 {
		return nil
	}
	name := "unknown"
	var s *byte
	if cuGetErrorName != nil && cuGetErrorName(code, &s) == 0 && s != nil {
		name = cString(s)
	}
	return fmt.Errorf("cuda: %s failed: %s (%d)", call, name, code)
}

func cString(p *byte) string {
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}

// do runs f on a locked OS thread with the context current (driver
// contexts are per thread; goroutines are not).
func (c *Context) do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := check("cuCtxSetCurrent", cuCtxSetCurrent(c.ctx)); err != nil {
		return err
	}
	return f()
}

// fail records the first error of a kernel call.
func (c *Context) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

// Sync waits for the GPU and returns (and clears) the first error recorded
// since the last Sync.
func (c *Context) Sync() error {
	err := c.do(c.syncAll)
	return firstErr(c.takeErr(), err)
}

// takeErr returns and clears the first error recorded since the last.
func (c *Context) takeErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.err
	c.err = nil
	return err
}

// Alloc allocates a zeroed device tensor. Free releases it.
func (c *Context) Alloc(dt rt.DType, shape ...int) (*rt.Tensor, error) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	bytes := uintptr(dt.ByteLen(n))
	var p uintptr
	err := c.do(func() error {
		if err := check("cuMemAlloc", cuMemAlloc(&p, max(bytes, 256))); err != nil {
			return fmt.Errorf("%w (%d bytes for %v %v)", err, bytes, dt, shape)
		}
		return check("cuMemsetD8", cuMemsetD8(p, 0, max(bytes, 256)))
	})
	if err != nil {
		return nil, err
	}
	return rt.FromDevice(dt, p, shape...)
}

// Free releases a tensor made by Alloc or Upload (not a view of one).
func (c *Context) Free(t *rt.Tensor) error {
	return c.do(func() error {
		if err := c.flush(); err != nil { // recorded work may read it
			return err
		}
		c.epoch++
		return check("cuMemFree", cuMemFree(t.DevicePtr()))
	})
}

// Upload copies a contiguous host tensor into new device memory.
func (c *Context) Upload(t *rt.Tensor) (*rt.Tensor, error) {
	if !t.IsContiguous() {
		return nil, fmt.Errorf("cuda: upload of a non-contiguous %v %v", t.DType(), t.Shape())
	}
	d, err := c.Alloc(t.DType(), t.Shape()...)
	if err != nil {
		return nil, err
	}
	b := t.Bytes()[:t.DType().ByteLen(t.Len())]
	if len(b) == 0 {
		return d, nil
	}
	err = c.do(func() error {
		return check("cuMemcpyHtoD", cuMemcpyHtoD(d.DevicePtr(), unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b))))
	})
	return d, err
}

// Download copies device tensor src into the contiguous host tensor dst of
// the same dtype and size; it waits for the GPU first.
func (c *Context) Download(dst, src *rt.Tensor) error {
	if dst.DType() != src.DType() || dst.Len() != src.Len() || !dst.IsContiguous() || !src.IsContiguous() {
		return fmt.Errorf("cuda: download of %v %v into %v %v", src.DType(), src.Shape(), dst.DType(), dst.Shape())
	}
	b := dst.Bytes()[:dst.DType().ByteLen(dst.Len())]
	if len(b) == 0 {
		return nil
	}
	return c.do(func() error {
		return check("cuMemcpyDtoH", cuMemcpyDtoH(unsafe.Pointer(unsafe.SliceData(b)), src.DevicePtr(), uintptr(len(b))))
	})
}

// scratch returns device scratch slot i with room for n bytes, grown as
// needed. Copies on the legacy stream wait for the kernels before them, so
// a slot is refilled only after its last reader.
func (c *Context) scratchBytes(slot int, n uintptr) (uintptr, error) {
	for len(c.scratch) <= slot {
		c.scratch = append(c.scratch, devBuf{})
	}
	b := &c.scratch[slot]
	if b.n < n {
		if err := c.flush(); err != nil { // recorded work may read the old buffer
			return 0, err
		}
		if b.ptr != 0 {
			// Freeing waits for the kernels that still read it.
			if err := c.syncAll(); err != nil {
				return 0, err
			}
			cuMemFree(b.ptr)
			c.epoch++
			b.ptr, b.n = 0, 0
		}
		size := max(n, 4096)
		if err := check("cuMemAlloc", cuMemAlloc(&b.ptr, size)); err != nil {
			return 0, fmt.Errorf("%w (%d bytes of scratch)", err, size)
		}
		b.n = size
	}
	return b.ptr, nil
}

// stageBytes is the size of each half of the ring that host arrays go
// through.
const stageBytes = 8 << 20

// hostInts copies v (positions, ids, tables) to the device and returns its
// address there, without waiting for the GPU: v goes into a page-locked
// ring and from there by an asynchronous copy queued before the kernel
// that reads it. A wrap of the ring waits for the GPU, so that no queued
// copy still reads what is overwritten.
func (c *Context) hostInts(v []int32) (uintptr, error) {
	if c.rec != nil && c.rec.ahead {
		off, err := c.rec.reserve(c, 4*len(v))
		if err != nil {
			return 0, err
		}
		r := c.rec
		dev := c.stageDev + r.base() + uintptr(off)
		if len(v) > 0 {
			copy(unsafe.Slice((*int32)(unsafe.Pointer(&r.shadow[off])), len(v)), v)
			r.staged = append(r.staged, staged{host: &v[0], n: len(v), off: off, at: len(r.enc)})
			r.recordCopy(dev, r.base()+uintptr(off), uintptr(4*len(v)))
		}
		return dev, nil
	}
	c.stageMu.Lock()
	defer c.stageMu.Unlock()
	off, err := c.reserve(4 * len(v))
	if err != nil {
		return 0, err
	}
	host, dev := unsafe.Add(c.stageHost, off), c.stageDev+off
	if len(v) == 0 {
		return dev, nil
	}
	copy(unsafe.Slice((*int32)(host), len(v)), v)
	if c.rec != nil {
		c.rec.recordCopy(dev, off, uintptr(4*len(v)))
		return dev, nil
	}
	c.eager = true
	return dev, check("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync(dev, host, uintptr(4*len(v)), 0))
}

// reserve takes n bytes (256-aligned) of the ring's current half and
// returns their offset in the ring; c.stageMu is held.
func (c *Context) reserve(bytes int) (uintptr, error) {
	n := (uintptr(max(bytes, 4)) + 255) &^ 255
	if n > stageBytes {
		return 0, fmt.Errorf("%d bytes of host arrays in one call, over the %d of the staging ring", n, stageBytes)
	}
	if err := c.allocRing(); err != nil {
		return 0, err
	}
	if c.stageOff+n > stageBytes {
		if err := c.flush(); err != nil {
			return 0, err
		}
		if err := c.syncAll(); err != nil {
			return 0, err
		}
		c.stageOff = 0
	}
	off := uintptr(c.half)*stageBytes + c.stageOff
	c.stageOff += n
	return off, nil
}

// allocRing allocates the staging ring on first use.
func (c *Context) allocRing() error {
	if c.stageDev != 0 {
		return nil
	}
	if err := check("cuMemAlloc", cuMemAlloc(&c.stageDev, 2*stageBytes)); err != nil {
		return err
	}
	if err := check("cuMemHostAlloc", cuMemHostAlloc(&c.stageHost, 2*stageBytes, 0)); err != nil {
		cuMemFree(c.stageDev)
		c.stageDev = 0
		return err
	}
	return nil
}

// reserve takes n bytes (256-aligned) of the shadow of a step recorded
// ahead, cleared, and returns their offset in it.
func (r *recorder) reserve(c *Context, bytes int) (int, error) {
	n := (max(bytes, 4) + 255) &^ 255
	off := len(r.shadow)
	if off+n > stageBytes {
		r.fail(errAhead)
		return 0, errAhead
	}
	c.stageMu.Lock()
	err := c.allocRing()
	c.stageMu.Unlock()
	if err != nil {
		r.fail(err)
		return 0, err
	}
	r.shadow = slices.Grow(r.shadow, n)[:off+n]
	clear(r.shadow[off:])
	return off, nil
}

// readBack copies t to the ring (see rt.Stepper.ReadBack).
func (c *Context) readBack(t *rt.Tensor) (*rt.Tensor, error) {
	if !t.OnDevice() || !t.IsContiguous() {
		return nil, fmt.Errorf("cuda: read back of %v %v: contiguous device tensors only", t.DType(), t.Shape())
	}
	n := t.ByteLen()
	var off uintptr
	r := c.rec
	if r != nil && r.ahead {
		o, err := r.reserve(c, n)
		if err != nil {
			return nil, err
		}
		off = r.base() + uintptr(o)
	} else {
		c.stageMu.Lock()
		o, err := c.reserve(n)
		c.stageMu.Unlock()
		if err != nil {
			return nil, err
		}
		off = o
	}
	if r != nil {
		r.recordReadBack(off, t.DevicePtr(), uintptr(n))
	} else {
		c.eager = true
		if err := check("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync(unsafe.Add(c.stageHost, off), t.DevicePtr(), uintptr(n), 0)); err != nil {
			return nil, err
		}
	}
	return rt.FromBytes(t.DType(), unsafe.Slice((*byte)(unsafe.Add(c.stageHost, off)), n), t.Shape()...)
}

// function returns kernel name of the module.
func (c *Context) function(name string) (uintptr, error) {
	if fn, ok := c.fns[name]; ok {
		return fn, nil
	}
	var fn uintptr // escapes to the driver: only on a miss
	if err := check("cuModuleGetFunction "+name, cuModuleGetFunction(&fn, c.mod, name)); err != nil {
		return 0, err
	}
	c.fns[name] = fn
	return fn, nil
}

// residentBlocks is how many blocks of 256 threads of kernel name the
// GPU holds at once (0 if the driver cannot say).
func (c *Context) residentBlocks(name string) int {
	fn, err := c.function(name)
	if err != nil {
		return 0
	}
	n, ok := c.resident[fn]
	if !ok {
		var per int32
		if cuOccupancyMaxActiveBlocks(&per, fn, 256, 0) == 0 {
			n = int(per) * c.SMs
		}
		c.resident[fn] = n
	}
	return n
}

// launch runs kernel name on a 1-D grid with the given arguments (each a
// pointer to its value).
func (c *Context) launch(name string, grid, block, shared int, args ...karg) error {
	return c.launch2(name, grid, 1, block, shared, args...)
}

// launch2 runs kernel name on a gridX × gridY grid.
func (c *Context) launch2(name string, grid, gridY, block, shared int, args ...karg) error {
	fn, err := c.function(name)
	if err != nil {
		return err
	}
	return c.launchFn(fn, name, grid, gridY, block, shared, args...)
}

// launchFn runs function fn (named name), of any module loaded.
func (c *Context) launchFn(fn uintptr, name string, grid, gridY, block, shared int, args ...karg) error {
	if shared > 48<<10 && shared > c.bigShared[fn] {
		cuFuncSetAttribute(fn, funcAttrMaxDynShared, int32(shared))
		c.bigShared[fn] = shared
	}
	if grid == 0 || gridY == 0 || dropped(name) {
		return nil
	}
	if c.rec != nil {
		c.rec.recordLaunch(fn, grid, gridY, block, shared, args)
		return nil
	}
	c.eager = true
	if profiling {
		defer profileSince(name, 0, c.profileStart(0))
	}
	vals, ptrs := &c.argVals, &c.argPtrs
	if len(args) > len(ptrs) {
		return fmt.Errorf("cuda: %s: %d kernel arguments", name, len(args))
	}
	for i, a := range args {
		vals[i] = a.v
		ptrs[i] = unsafe.Pointer(&vals[i])
	}
	code := cuLaunchKernel(fn, uint32(grid), uint32(gridY), 1, uint32(block), 1, 1, uint32(shared), 0, unsafe.Pointer(&ptrs[0]), nil)
	if code != 0 {
		return check("cuLaunchKernel "+name, code) // the name is built only on failure
	}
	return nil
}
