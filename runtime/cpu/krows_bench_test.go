package cpu

import (
	"math/rand/v2"
	"testing"

	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/quant"
)

// BenchmarkKRows4AVX2 times the AVX2 k-quant prefill kernel alone: 32
// weight rows of 1,024 (in L1) against four activation rows.
func BenchmarkKRows4AVX2(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(1, 1))
	const k, n = 1024, 32
	for _, dt := range []rt.DType{rt.Q4_K, rt.Q6_K} {
		wq, _ := quant.Quantize(dt, randF32(rng, n*k, 0.05))
		x, _ := rt.FromF32(randF32(rng, 4*k, 1), 4, k)
		act := make([]byte, 4*4*kActBytes)
		bs := make([]int16, 4*4*16)
		for r := range 4 {
			quantizeQ8KSigned(x.F32()[r*k:(r+1)*k], act[r*4*kActBytes:(r+1)*4*kActBytes], bs[r*64:(r+1)*64])
		}
		out := make([]float32, 4*n)
		rb := dt.ByteLen(k)
		b.Run(dt.String(), func(b *testing.B) {
			for b.Loop() {
				kRows4AVX2(dt, wq, rb, act, 4*kActBytes, bs, 64, out, n)
			}
			b.ReportMetric(float64(4*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}
