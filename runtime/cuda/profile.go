//go:build linux && amd64

package cuda

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"
)

// GOVLLM_CUDA_PROFILE=1 times every kernel and GEMM by waiting for the GPU
// around it (steps run eagerly, without graphs): slow, for finding where
// GPU time goes where no profiler is installed.
var profiling = os.Getenv("GOVLLM_CUDA_PROFILE") == "1"

var (
	profMu    sync.Mutex
	profTimes = map[string]time.Duration{}
	profCalls = map[string]int{}
)

func profileStart() time.Time {
	cuCtxSynchronize()
	return time.Now()
}

func profileSince(name string, start time.Time) {
	cuCtxSynchronize()
	d := time.Since(start)
	profMu.Lock()
	profTimes[name] += d
	profCalls[name]++
	profMu.Unlock()
}

// WriteProfile writes the kernel times gathered under GOVLLM_CUDA_PROFILE.
func WriteProfile(w io.Writer) {
	profMu.Lock()
	defer profMu.Unlock()
	var names []string
	var total time.Duration
	for n, d := range profTimes {
		names = append(names, n)
		total += d
	}
	slices.SortFunc(names, func(a, b string) int { return int(profTimes[b] - profTimes[a]) })
	for _, n := range names {
		fmt.Fprintf(w, "%-24s %8d calls %10.3f ms %5.1f%%  %8.2f µs/call\n", n, profCalls[n], profTimes[n].Seconds()*1e3,
			100*profTimes[n].Seconds()/total.Seconds(), profTimes[n].Seconds()*1e6/float64(profCalls[n]))
	}
}
