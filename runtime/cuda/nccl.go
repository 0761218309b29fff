//go:build linux && amd64

package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
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

	ncclGetVersion     func(v *int32) int32
	ncclGetUniqueId    func(id *[128]byte) int32
	ncclCommInitRank   func(comm *uintptr, n int32, id [128]byte, rank int32) int32
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
		if err := lib.bind(map[string]any{"ncclGetVersion": &ncclGetVersion, "ncclGetUniqueId": &ncclGetUniqueId,
			"ncclCommInitRank": &ncclCommInitRank, "ncclAllReduce": &ncclAllReduce, "ncclCommDestroy": &ncclCommDestroy,
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
