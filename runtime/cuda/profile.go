//go:build linux && amd64

package cuda

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// GOVLLM_CUDA_PROFILE=1 times every kernel and GEMM on the GPU with a pair
// of events around it, for finding where GPU time goes where no profiler
// is installed. Steps run eagerly, without graphs; a spin kernel holds the
// GPU whenever it has caught up with the host, so that the kernels queue
// and a span measures the kernel, not the host's launch.
// GOVLLM_CUDA_PROFILE=graphs keeps graphs and times each graph on the GPU.
var (
	profiling      = os.Getenv("GOVLLM_CUDA_PROFILE") == "1"
	profilingGraph = os.Getenv("GOVLLM_CUDA_PROFILE") == "graphs"
)

// GOVLLM_CUDA_DROP=kernel,kernel (or =only:kernel,kernel, dropping every
// other) leaves those kernels out of every step, so that `govllm bench`
// shows what they cost inside graphs, where the profile above cannot see
// (each kernel alone is not each kernel behind the one before). Outputs
// are wrong while it is set, and the backend says so when it opens.
// Argmax and embedding always run: they make the next step's token ids.
var dropKernels, dropAllBut = parseDrop(os.Getenv("GOVLLM_CUDA_DROP"))

func parseDrop(v string) (names map[string]bool, allBut bool) {
	if v == "" {
		return nil, false
	}
	v, allBut = strings.CutPrefix(v, "only:")
	names = map[string]bool{}
	for _, n := range strings.Split(v, ",") {
		names[n] = true
	}
	return names, allBut
}

func dropped(name string) bool {
	if dropKernels == nil || strings.HasPrefix(name, "argmax") || strings.HasPrefix(name, "embed") {
		return false
	}
	return dropKernels[name] != dropAllBut
}

// profHoldNs is how long the spin kernel holds the GPU: enough for the
// host to queue a few hundred launches.
const profHoldNs = 3_000_000

var (
	cuEventCreate      func(ev *uintptr, flags uint32) int32
	cuEventRecord      func(ev uintptr, stream uintptr) int32
	cuEventElapsedTime func(ms *float32, start, end uintptr) int32
	cuEventQuery       func(ev uintptr) int32
)

func bindEvents(lib *library) error {
	err := lib.bind(map[string]any{"cuEventCreate": &cuEventCreate, "cuEventRecord": &cuEventRecord, "cuEventQuery": &cuEventQuery})
	if err == nil {
		if err = lib.bind(map[string]any{"cuEventElapsedTime_v2": &cuEventElapsedTime}); err != nil {
			err = lib.bind(map[string]any{"cuEventElapsedTime": &cuEventElapsedTime})
		}
	}
	if err != nil {
		slog.Warn("GOVLLM_CUDA_PROFILE: not profiling", "err", err)
	}
	return err
}

type profSpan struct {
	name       string
	start, end uintptr
}

var (
	profMu      sync.Mutex
	profTimes   = map[string]time.Duration{}
	profCalls   = map[string]int{}
	profPending []profSpan
	profFree    []uintptr // events whose spans were read
)

func profileEvent() uintptr {
	if n := len(profFree); n > 0 {
		ev := profFree[n-1]
		profFree = profFree[:n-1]
		return ev
	}
	var ev uintptr
	cuEventCreate(&ev, 0)
	return ev
}

// profileStart records the event that opens a span on stream, after
// holding the GPU when it has run out of queued work.
func (c *Context) profileStart(stream uintptr) uintptr {
	profMu.Lock()
	defer profMu.Unlock()
	if profiling && (len(profPending) == 0 || cuEventQuery(profPending[len(profPending)-1].end) == 0) {
		ns := int64(profHoldNs)
		if fn, err := c.function("spin"); err == nil {
			var ptrs [1]unsafe.Pointer
			ptrs[0] = unsafe.Pointer(&ns)
			cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, stream, unsafe.Pointer(&ptrs[0]), nil)
		}
	}
	ev := profileEvent()
	cuEventRecord(ev, stream)
	return ev
}

// profileSince closes the span opened by start.
func profileSince(name string, stream, start uintptr) {
	profMu.Lock()
	ev := profileEvent()
	cuEventRecord(ev, stream)
	profPending = append(profPending, profSpan{name, start, ev})
	flush := len(profPending) >= 4096
	profMu.Unlock()
	if flush {
		profileRead()
	}
}

// profileWall adds a host-side duration.
func profileWall(name string, d time.Duration) {
	profMu.Lock()
	profTimes[name] += d
	profCalls[name]++
	profMu.Unlock()
}

// profileRead waits for the GPU and adds up the pending spans.
func profileRead() {
	if !profiling && !profilingGraph || cuEventElapsedTime == nil { // not profiling, or no GPU opened
		return
	}
	cuCtxSynchronize()
	profMu.Lock()
	defer profMu.Unlock()
	for _, s := range profPending {
		var ms float32
		if cuEventElapsedTime(&ms, s.start, s.end) == 0 {
			profTimes[s.name] += time.Duration(float64(ms) * 1e6)
			profCalls[s.name]++
		}
		profFree = append(profFree, s.start, s.end)
	}
	profPending = profPending[:0]
}

// WriteProfile writes the kernel times gathered under GOVLLM_CUDA_PROFILE.
func WriteProfile(w io.Writer) {
	if profilingPhases {
		writePhaseTimes(w)
	}
	profileRead()
	profMu.Lock()
	defer profMu.Unlock()
	if len(profTimes) == 0 {
		return
	}
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
	fmt.Fprintf(w, "%-24s %8s       %10.3f ms (GPU time inside the spans)\n", "total", "", total.Seconds()*1e3)
}
