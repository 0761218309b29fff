package qwen35_test

import (
	"testing"

	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/model/qwen35"
)

// BenchmarkDecodeStep is one decode step as the engine runs it (a batch
// of one sequence on a shared cache); its allocs/op should be 0.
func BenchmarkDecodeStep(b *testing.B) {
	m := load(b, oracle.Dir(b)+"/qwen35-dense-h256-vlayout", qwen35.Options{})
	const bs, maxLen = 16, 256
	blocks := make([]int32, maxLen/bs)
	for i := range blocks {
		blocks[i] = int32(i)
	}
	cache, err := m.NewCache(bs, len(blocks), 1)
	if err != nil {
		b.Fatal(err)
	}
	seq := []qwen35.Seq{{Tokens: []int32{1}, Blocks: blocks, Logits: qwen35.LastLogits}}
	step := func() {
		if seq[0].Start == maxLen-1 {
			seq[0].Start = 0
			if err := cache.ResetSlot(0); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := m.ForwardBatch(cache, seq, qwen35.ForwardOptions{}); err != nil {
			b.Fatal(err)
		}
		seq[0].Start++
	}
	step()
	b.ReportAllocs()
	for b.Loop() {
		step()
	}
}

// BenchmarkDecodeStep8 is a decode step of 8 sequences together.
func BenchmarkDecodeStep8(b *testing.B) {
	m := load(b, oracle.Dir(b)+"/qwen35-dense-h256-vlayout", qwen35.Options{})
	const n, bs, perSeq = 8, 16, 16
	cache, err := m.NewCache(bs, n*perSeq, n)
	if err != nil {
		b.Fatal(err)
	}
	seqs := make([]qwen35.Seq, n)
	for i := range seqs {
		for j := range perSeq {
			seqs[i].Blocks = append(seqs[i].Blocks, int32(i*perSeq+j))
		}
		seqs[i].Tokens, seqs[i].Slot, seqs[i].Logits = []int32{int32(i + 1)}, i, qwen35.LastLogits
	}
	step := func() {
		for i := range seqs {
			if seqs[i].Start == bs*perSeq-1 {
				seqs[i].Start = 0
				if err := cache.ResetSlot(i); err != nil {
					b.Fatal(err)
				}
			}
		}
		if _, err := m.ForwardBatch(cache, seqs, qwen35.ForwardOptions{}); err != nil {
			b.Fatal(err)
		}
		for i := range seqs {
			seqs[i].Start++
		}
	}
	step()
	b.ReportAllocs()
	for b.Loop() {
		step()
	}
}
