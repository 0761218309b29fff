//go:build linux && amd64

package cuda

import "testing"

func TestDropKernels(t *testing.T) {
	defer func(n map[string]bool, a bool) { dropKernels, dropAllBut = n, a }(dropKernels, dropAllBut)
	for _, c := range []struct {
		env, name string
		drop      bool
	}{
		{"", "gemv_16", false},
		{"gemv_16,rms_norm_f32", "gemv_16", true},
		{"gemv_16,rms_norm_f32", "gemv_16_glu", false},
		{"gemv_16", "argmax_final", false},
		{"only:gemv_16", "gemv_16", false},
		{"only:gemv_16", "deltanet_step_f32", true},
		{"only:gemv_16", "embed_bf16", false},
	} {
		dropKernels, dropAllBut = parseDrop(c.env)
		if got := dropped(c.name); got != c.drop {
			t.Errorf("GOVLLM_CUDA_DROP=%q: %s dropped %v, want %v", c.env, c.name, got, c.drop)
		}
	}
}
