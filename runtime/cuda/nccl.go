//go:build linux && amd64

package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"
)

// NCCL is NVIDIA's collective library, opened at run time (purego, like
// the CUDA libraries) for tensor parallelism across the GPUs of one host.
type NCCL struct {
	Path    string // the library file opened
	Version int    // as ncclGetVersion reports it, e.g. 22703 for 2.27.3
}

var (
	ncclOnce sync.Once
	ncclLib  *NCCL
	ncclErr  error

	ncclGetVersion func(v *int32) int32
	// One process drives every GPU (one scheduler), so the communicators
	// come from ncclCommInitAll; ncclCommInitRank's unique id is a
	// 128-byte struct passed by value, which purego cannot pass.
	ncclCommInitAll    func(comms *uintptr, n int32, devices *int32) int32
	ncclAllReduce      func(send, recv uintptr, count uintptr, dtype, op int32, comm, stream uintptr) int32
	ncclCommDestroy    func(comm uintptr) int32
	ncclGroupStart     func() int32
	ncclGroupEnd       func() int32
	ncclGetErrorString func(res int32) string
)

// OpenNCCL loads libnccl from the dynamic linker's path, NCCL_HOME,
// CUDA_HOME or pip's nvidia-nccl package, and checks it answers. NVLink
// multicast (NVLS) is turned off unless NCCL_NVLS_ENABLE says otherwise.
func OpenNCCL() (*NCCL, error) {
	ncclOnce.Do(func() {
		if os.Getenv("NCCL_NVLS_ENABLE") == "" {
			os.Setenv("NCCL_NVLS_ENABLE", "0")
		}
		var dirs []string
		if h := os.Getenv("NCCL_HOME"); h != "" {
			dirs = append(dirs, filepath.Join(h, "lib"), filepath.Join(h, "lib64"))
		}
		lib, err := openLibrary("NCCL (libnccl)", []string{"libnccl.so.2", "libnccl.so"}, append(dirs, toolkitDirs()...))
		if err != nil {
			ncclErr = fmt.Errorf("cuda: %w; tensor parallelism needs NCCL (pip install nvidia-nccl-cu12, or set NCCL_HOME)", err)
			return
		}
		if err := lib.bind(map[string]any{"ncclGetVersion": &ncclGetVersion,
			"ncclCommInitAll": &ncclCommInitAll, "ncclAllReduce": &ncclAllReduce, "ncclCommDestroy": &ncclCommDestroy,
			"ncclGroupStart": &ncclGroupStart, "ncclGroupEnd": &ncclGroupEnd, "ncclGetErrorString": &ncclGetErrorString}); err != nil {
			ncclErr = fmt.Errorf("cuda: %w: %v", ErrUnavailable, err)
			return
		}
		var v int32
		if res := ncclGetVersion(&v); res != 0 {
			ncclErr = fmt.Errorf("cuda: %w: ncclGetVersion (%s) failed: %s", ErrUnavailable, lib.path, ncclGetErrorString(res))
			return
		}
		ncclLib = &NCCL{Path: lib.path, Version: int(v)}
	})
	return ncclLib, ncclErr
}

// Check runs NCCL on GPU 0 alone: a communicator of one rank and an
// all-reduce (a sum over one rank: the data unchanged), which proves the
// bindings against the library without a second GPU.
func (n *NCCL) Check() error {
	c, err := Open()
	if err != nil {
		return err
	}
	return c.do(func() error {
		var comm uintptr
		dev := int32(0)
		if res := ncclCommInitAll(&comm, 1, &dev); res != 0 {
			return fmt.Errorf("cuda: ncclCommInitAll: %s", ncclGetErrorString(res))
		}
		defer ncclCommDestroy(comm)
		const count = 1024
		host := make([]float32, count)
		for i := range host {
			host[i] = float32(i)
		}
		var buf uintptr
		if err := check("cuMemAlloc", cuMemAlloc(&buf, count*4)); err != nil {
			return err
		}
		defer cuMemFree(buf)
		if err := check("cuMemcpyHtoD", cuMemcpyHtoD(buf, unsafe.Pointer(&host[0]), count*4)); err != nil {
			return err
		}
		const ncclFloat32, ncclSum = 7, 0
		if res := ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, 0); res != 0 {
			return fmt.Errorf("cuda: ncclAllReduce: %s", ncclGetErrorString(res))
		}
		if err := check("cuCtxSynchronize", cuCtxSynchronize()); err != nil {
			return err
		}
		out := make([]float32, count)
		if err := check("cuMemcpyDtoH", cuMemcpyDtoH(unsafe.Pointer(&out[0]), buf, count*4)); err != nil {
			return err
		}
		for i, v := range out {
			if v != host[i] {
				return fmt.Errorf("cuda: NCCL all-reduce over one rank changed element %d: %v to %v", i, host[i], v)
			}
		}
		return nil
	})
}
