//go:build !race

// The race detector drops pooled objects on purpose, so allocations are
// only counted without it.

package qwen35_test

import (
	"testing"

	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/model/qwen35"
)

// TestDecodeStepAllocatesNothing holds the decode path (a step of one
// sequence on a shared cache, attention and DeltaNet layers) to zero heap
// allocations once its buffers exist.
func TestDecodeStepAllocatesNothing(t *testing.T) {
	m := load(t, oracle.Dir(t)+"/qwen35-dense-h256-vlayout", qwen35.Options{})
	blocks := []int32{0, 1, 2, 3}
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
	step()
	step()
	if n := testing.AllocsPerRun(20, step); n > 0 {
		t.Errorf("a decode step allocates %.1f times", n)
	}
}
