package qwen35_test

import (
	"errors"
	"testing"

	"github.com/govllm/govllm/model/qwen35"
	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/backends"
	"github.com/govllm/govllm/runtime/cuda"
)

// device is a backend the oracle tests run on, with its bound on
// max |Δlogit| against transformers.
type device struct {
	name string
	be   *rt.Backend
	tol  float64
}

// cudaTolerance is the bound for bf16 compute: cuBLAS takes
// activations rounded to the weights' bf16.
const cudaTolerance = 1e-2

// devices is the CPU and, where a GPU is usable, CUDA. Without one the
// CUDA runs are skipped with the reason.
func devices(t *testing.T) []device {
	t.Helper()
	out := []device{{"cpu", rt.NewBackend(registry(t), rt.CPU), tolerance}}
	be, err := backends.New(rt.CUDA)
	switch {
	case err == nil:
		out = append(out, device{"cuda", be, cudaTolerance})
	case errors.Is(err, cuda.ErrUnavailable):
		t.Logf("cuda runs skipped: %v", err)
	default:
		t.Errorf("cuda: %v", err)
	}
	return out
}

func loadOn(t testing.TB, be *rt.Backend, dir string, opts qwen35.Options) *qwen35.Model {
	t.Helper()
	m, err := qwen35.Load(dir, be, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// hostF32 returns the elements of a tensor in either memory.
func hostF32(t testing.TB, be *rt.Backend, x *rt.Tensor) []float32 {
	t.Helper()
	h, err := be.Fetch(x)
	if err != nil {
		t.Fatal(err)
	}
	return h.F32()[:h.Len()]
}
