package qwen35_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/model/qwen35"
)

// TestLogitsIndependentOfBatch: on the CPU a sequence's logits have the
// same bits whether its step runs alone or batched with other sequences
// (decode steps and a prompt), for each weight type's kernels. A server's
// greedy answer then does not depend on what else it was serving.
func TestLogitsIndependentOfBatch(t *testing.T) {
	cpuOnly(t)
	fx := oracle.Load(t, "qwen35-dense-h256-vlayout")
	for _, typ := range []string{"f32", "bf16", "f16", "q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k", "iq4_xs"} {
		out := filepath.Join(t.TempDir(), typ+".gguf")
		if err := qwen35.Convert(fx.Dir, out, typ, nil); err != nil {
			t.Fatal(err)
		}
		m := load(t, out, qwen35.Options{})
		target := fx.Cases[0].IDs
		others := [][]int32{fx.Cases[1].IDs, fx.Cases[2].IDs[:7]}
		// alone: the target's prompt, then two decode steps, each alone;
		// batched: the same steps with the others' prompts and decode steps.
		alone := steps(t, m, target, nil)
		batched := steps(t, m, target, others)
		for i := range alone {
			for j := range alone[i] {
				if a, b := alone[i][j], batched[i][j]; math.Float32bits(a) != math.Float32bits(b) {
					t.Errorf("%s: step %d logit %d is %v alone and %v in a batch", typ, i, j, a, b)
					break
				}
			}
		}
	}
}

// steps runs target's prompt and two decode steps (tokens 5 and 9), with
// each of others in the same steps, and returns the target's last-row
// logits of each step.
func steps(t *testing.T, m *qwen35.Model, target []int32, others [][]int32) [][]float32 {
	t.Helper()
	const bs = 16
	cache, err := m.NewCache(bs, 64, 1+len(others))
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	seqs := make([][]int32, 1+len(others))
	seqs[0] = target
	copy(seqs[1:], others)
	blocks := make([][]int32, len(seqs))
	next := int32(0)
	pos := make([]int, len(seqs))
	v := m.Config.VocabSize
	var got [][]float32
	for step := range 3 {
		var batch []qwen35.Seq
		for i, s := range seqs {
			toks := s
			if step > 0 {
				toks = []int32{int32(5 + 4*(step-1) + i)}
			}
			for len(blocks[i])*bs < pos[i]+len(toks) {
				blocks[i] = append(blocks[i], next)
				next++
			}
			batch = append(batch, qwen35.Seq{Tokens: toks, Start: pos[i], Blocks: blocks[i], Slot: i, Logits: qwen35.LastLogits})
			pos[i] += len(toks)
		}
		lg, err := m.ForwardBatch(cache, batch, qwen35.ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, append([]float32(nil), lg.F32()[:v]...))
	}
	return got
}
