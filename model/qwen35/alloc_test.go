package qwen35_test

import (
	"testing"

	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/model/qwen35"
)

func BenchmarkDecodeStep(b *testing.B) {
	m := load(b, oracle.Dir(b)+"/qwen35-dense-h256-vlayout", qwen35.Options{})
	st := m.NewState()
	ids := []int32{1}
	if _, err := m.Forward(st, ids, qwen35.ForwardOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if st.Pos > 200 {
			st = m.NewState()
		}
		if _, err := m.Forward(st, ids, qwen35.ForwardOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
