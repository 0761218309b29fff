//go:build !race

// The race detector drops pooled objects on purpose, so allocations are
// only counted without it.

package qwen35_test

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/model/qwen35"
)

// TestDecodeStepAllocatesNothing holds the decode path (a step of one
// sequence on a shared cache, attention and DeltaNet layers) to zero heap
// allocations once its buffers exist on the CPU. On the GPU, where a step
// is recorded (the next one ahead), matched and launched as a graph, its
// ~33 kernels allocate nothing (their launch arguments are values): what
// allocates is a fixed few driver calls (purego.SyscallN puts its
// arguments on the heap) and the step's handles, gpuAllocsPerStep.
const gpuAllocsPerStep = 13

func TestDecodeStepAllocatesNothing(t *testing.T) {
	for _, dev := range devices(t) {
		for name, mode := range map[string]qwen35.LogitsMode{"logits": qwen35.LastLogits, "token": qwen35.LastToken} {
			t.Run(dev.name+"/"+name, func(t *testing.T) { decodeStepAllocs(t, dev, mode) })
		}
	}
}

func decodeStepAllocs(t *testing.T, dev device, mode qwen35.LogitsMode) {
	m := loadOn(t, dev.be, oracle.Dir(t)+"/qwen35-dense-h256-vlayout", qwen35.Options{})
	blocks := make([]int32, 8) // room for every step below
	for i := range blocks {
		blocks[i] = int32(i)
	}
	cache, err := m.NewCache(16, len(blocks), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	seq := []qwen35.Seq{{Tokens: []int32{1}, Blocks: blocks, Logits: mode}}
	step := func() {
		if _, err := m.ForwardBatch(cache, seq, qwen35.ForwardOptions{}); err != nil {
			t.Fatal(err)
		}
		seq[0].Start++
	}
	// A collection mid-measure empties the kernels' buffer pools
	// (sync.Pool) and would count their refill, not the step's own
	// allocations; waking the CPU workers allocates now and then
	// inside the Go runtime, so the count is an average over many
	// steps (whole allocations per step).
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// The GPU captures its graph at the second step of one encoding; with
	// the persistent path (a GPU's default) the first step uploads the programs,
	// which ends its recording, so the capture comes a step later.
	for range 4 {
		step()
	}
	limit, runs := 0.0, 100
	if dev.name == "cuda" {
		limit, runs = gpuAllocsPerStep, 20 // a fixed count: no average needed
	}
	if n := testing.AllocsPerRun(runs, step); n > limit {
		t.Errorf("a decode step on %s allocates %.1f times (at most %g)", dev.name, n, limit)
	}
}
