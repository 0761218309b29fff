//go:build linux && amd64 && cudadev

package cuda

import (
	"log/slog"
	"os"
)

// A build with -tags cudadev takes persistent.cu from the file that
// GOVLLM_CUDA_PERSISTENT_SOURCE names, so that variants of the kernel can
// be timed on a GPU with one binary. Release builds have no such knob.
func init() {
	path := os.Getenv("GOVLLM_CUDA_PERSISTENT_SOURCE")
	if path == "" {
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	persistentSource = string(b)
	decodeWarps = sourceDefine(persistentSource, "CW")
	slog.Warn("cuda: persistent.cu from a file (cudadev build)", "path", path, "consumer_warps", decodeWarps)
}
