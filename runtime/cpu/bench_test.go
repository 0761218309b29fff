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

// BenchmarkDeltaRuleChunked runs the chunked gated delta rule over a
// 512-token prompt at Qwen3.5-0.8B's DeltaNet shape (16 heads of 128).
func BenchmarkDeltaRuleChunked(b *testing.B) {
	be := backend(b)
	rng := rand.New(rand.NewPCG(3, 4))
	T, h, d := 512, 16, 128
	q, k, v := random(rng, 1, T, h, d), random(rng, 1, T, h, d), random(rng, 1, T, h, d)
	g, beta := rt.New(rt.F32, T, h), rt.New(rt.F32, T, h)
	for i := range g.F32() {
		g.F32()[i] = -float32(rng.Float64()) * 0.1
		beta.F32()[i] = float32(rng.Float64())
	}
	out, state := rt.New(rt.F32, T, h, d), rt.New(rt.F32, h, d, d)
	p := rt.DeltaRuleParams{Chunk: 64, QKNormEps: 1e-6}
	b.ReportAllocs()
	for b.Loop() {
		if err := be.DeltaRuleChunked(out, q, k, v, g, beta, state, p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(T)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}
