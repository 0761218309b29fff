package engine

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkThroughput reports aggregate generated tokens/s at 1, 4 and 16
// concurrent requests (32-token prompts, 32 tokens out) on the h256 fixture.
func BenchmarkThroughput(b *testing.B) {
	m, tok, fx := loadModel(b, "qwen35-dense-h256-vlayout")
	ids := fx.Cases[2].IDs
	var prompts [][]int32
	for i := range 16 {
		prompts = append(prompts, append([]int32{int32(i)}, ids[:31]...)) // distinct prompts
	}
	for _, c := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("concurrency=%d", c), func(b *testing.B) {
			e := newEngine(b, m, tok, Config{NoPrefixCaching: true})
			var tokens int
			for b.Loop() {
				r, err := e.Bench(context.Background(), prompts, c, c, 32)
				if err != nil {
					b.Fatal(err)
				}
				tokens += r.GeneratedTokens
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
