package cpu_test

import (
	"math/rand/v2"
	"testing"

	rt "github.com/govllm/govllm/runtime"
)

// BenchmarkMatMul measures the plain-Go matmul at a Qwen3.5-0.8B-like
// projection (K=1024, N=1024) for decode (M=1) and a prefill chunk (M=64).
func BenchmarkMatMul(b *testing.B) {
	be := backend(b)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, dt := range rt.DTypes {
		for _, m := range []int{1, 64} {
			k, n := 1024, 1024
			x := random(rng, 1, m, k)
			w := rt.New(dt, n, k)
			dst := rt.New(rt.F32, m, n)
			b.Run(dt.String()+"/M="+map[int]string{1: "1", 64: "64"}[m], func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(n * k * dt.Size()))
				for b.Loop() {
					if err := be.MatMul(dst, x, w); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
