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
// allocations once its buffers exist.
func TestDecodeStepAllocatesNothing(t *testing.T) {
	m := load(t, oracle.Dir(t)+"/qwen35-dense-h256-vlayout", qwen35.Options{})
	blocks := []int32{0, 1, 2, 3, 4, 5, 6, 7} // room for every step below
	cache, err := m.NewCache(16, len(blocks), 1)
	if err != nil {
		t.Fatal(err)
	}
	seq := []qwen35.Seq{{Tokens: []int32{1}, Blocks: blocks, Logits: qwen35.LastLogits}}
	step := func() {
		if _, err := m.ForwardBatch(cache, seq, qwen35.ForwardOptions{}); err != nil {
			t.Fatal(err)
		}
		seq[0].Start++
	}
	// A collection mid-measure empties the kernels' buffer pools (sync.Pool)
	// and would count their refill, not the step's own allocations; waking
	// the CPU workers allocates now and then inside the Go runtime, so the
	// count is an average over many steps (whole allocations per step).
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	step()
	step()
	if n := testing.AllocsPerRun(100, step); n > 0 {
		t.Errorf("a decode step allocates %.1f times", n)
	}
}
