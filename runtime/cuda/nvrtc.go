//go:build linux && amd64

package cuda

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"unsafe"
)

//go:embed kernels.cu
var kernelSource string

var (
	nvrtcVersion           func(major, minor *int32) int32
	nvrtcCreateProgram     func(prog *uintptr, src, name string, nh int32, headers, includes unsafe.Pointer) int32
	nvrtcCompileProgram    func(prog uintptr, n int32, opts unsafe.Pointer) int32
	nvrtcGetProgramLogSize func(prog uintptr, n *uintptr) int32
	nvrtcGetProgramLog     func(prog uintptr, log *byte) int32
	nvrtcGetCUBINSize      func(prog uintptr, n *uintptr) int32
	nvrtcGetCUBIN          func(prog uintptr, out *byte) int32
	nvrtcDestroyProgram    func(prog *uintptr) int32
	nvrtcGetErrorString    func(code int32) string
)

func nvrtcCheck(call string, code int32) error {
	if code == 0 {
		return nil
	}
	return fmt.Errorf("cuda: %s failed: %s (%d)", call, nvrtcGetErrorString(code), code)
}

// compileKernels returns kernels.cu compiled for sm_<major><minor>, from the
// on-disk cache when it holds this source for this architecture and NVRTC.
func compileKernels(major, minor int) ([]byte, error) {
	return compile(kernelSource, "kernels.cu", major, minor)
}

// compile compiles CUDA C src (named name in NVRTC's messages) for
// sm_<major><minor>, through the on-disk cache.
func compile(src, name string, major, minor int) ([]byte, error) {
	lib, err := openLibrary("NVRTC (libnvrtc)", []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}, toolkitDirs())
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	err = lib.bind(map[string]any{
		"nvrtcVersion": &nvrtcVersion, "nvrtcCreateProgram": &nvrtcCreateProgram,
		"nvrtcCompileProgram": &nvrtcCompileProgram, "nvrtcGetProgramLogSize": &nvrtcGetProgramLogSize,
		"nvrtcGetProgramLog": &nvrtcGetProgramLog, "nvrtcGetCUBINSize": &nvrtcGetCUBINSize,
		"nvrtcGetCUBIN": &nvrtcGetCUBIN, "nvrtcDestroyProgram": &nvrtcDestroyProgram,
		"nvrtcGetErrorString": &nvrtcGetErrorString,
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	var vmaj, vmin int32
	nvrtcVersion(&vmaj, &vmin)
	arch := fmt.Sprintf("sm_%d%d", major, minor)
	opts := []string{"--gpu-architecture=" + arch, "-default-device", "--std=c++17"}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00nvrtc %d.%d", src, strings.Join(opts, " "), vmaj, vmin)))
	cache := ""
	if dir, err := os.UserCacheDir(); err == nil {
		cache = filepath.Join(dir, "govllm", "cuda", arch+"-"+hex.EncodeToString(sum[:8])+".cubin")
		if b, err := os.ReadFile(cache); err == nil && len(b) > 0 {
			return b, nil
		}
	}
	slog.Info("compiling CUDA kernels", "source", name, "arch", arch, "nvrtc", fmt.Sprintf("%d.%d", vmaj, vmin), "lib", lib.path)
	var prog uintptr
	if err := nvrtcCheck("nvrtcCreateProgram", nvrtcCreateProgram(&prog, src, name, 0, nil, nil)); err != nil {
		return nil, err
	}
	defer nvrtcDestroyProgram(&prog)
	cOpts := make([]*byte, len(opts))
	keep := make([][]byte, len(opts))
	for i, o := range opts {
		keep[i] = append([]byte(o), 0)
		cOpts[i] = &keep[i][0]
	}
	if code := nvrtcCompileProgram(prog, int32(len(opts)), unsafe.Pointer(&cOpts[0])); code != 0 {
		var n uintptr
		nvrtcGetProgramLogSize(prog, &n)
		log := make([]byte, n+1)
		nvrtcGetProgramLog(prog, &log[0])
		return nil, fmt.Errorf("%w\n%s", nvrtcCheck("nvrtcCompileProgram", code), strings.TrimRight(string(log), "\x00\n"))
	}
	var n uintptr
	if err := nvrtcCheck("nvrtcGetCUBINSize", nvrtcGetCUBINSize(prog, &n)); err != nil {
		return nil, err
	}
	image := make([]byte, n)
	if err := nvrtcCheck("nvrtcGetCUBIN", nvrtcGetCUBIN(prog, &image[0])); err != nil {
		return nil, err
	}
	if cache != "" {
		// Written to a temporary file and renamed, so that a reader never
		// sees half an image.
		if err := os.MkdirAll(filepath.Dir(cache), 0o755); err == nil {
			tmp := cache + fmt.Sprintf(".%d.tmp", os.Getpid())
			if os.WriteFile(tmp, image, 0o644) == nil {
				os.Rename(tmp, cache)
			}
		}
	}
	return image, nil
}

// KernelSource is kernels.cu as built in (tools/cudaemu compiles it for the
// CPU and checks that the binary asks for the same source).
func KernelSource() string { return kernelSource }
