//go:build linux && amd64

package cuda

import (
	"fmt"
	"unsafe"
)

var (
	cublasCreate func(h *uintptr) int32
	cublasGemmEx func(h uintptr, ta, tb int32, m, n, k int32, alpha unsafe.Pointer, a uintptr, atype int32, lda int32,
		b uintptr, btype int32, ldb int32, beta unsafe.Pointer, c uintptr, ctype int32, ldc int32, compute int32, algo int32) int32
)

const (
	cublasOpN        = 0
	cublasOpT        = 1
	cudaR32F         = 0
	cudaR16F         = 2
	cudaR16BF        = 14
	cublasCompute32F = 68
	cublasGemmDflt   = -1
)

type blas struct{ handle uintptr }

func openBLAS() (*blas, error) {
	lib, err := openLibrary("cuBLAS (libcublas)", []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, toolkitDirs())
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	if err := lib.bind(map[string]any{"cublasCreate_v2": &cublasCreate, "cublasGemmEx": &cublasGemmEx}); err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	b := &blas{}
	if code := cublasCreate(&b.handle); code != 0 {
		return nil, fmt.Errorf("cuda: cublasCreate failed: status %d", code)
	}
	return b, nil
}

// gemm computes dst[M, N] = x[M, K] · w[N, K]ᵀ in f32 accumulation: in
// cuBLAS's column-major terms dstᵀ = w · xᵀ, so w is A transposed.
func (b *blas) gemm(dst uintptr, ldd int, x uintptr, xtype int32, ldx int, w uintptr, wtype int32, m, n, k int) error {
	alpha, beta := float32(1), float32(0)
	code := cublasGemmEx(b.handle, cublasOpT, cublasOpN, int32(n), int32(m), int32(k), unsafe.Pointer(&alpha),
		w, wtype, int32(k), x, xtype, int32(ldx), unsafe.Pointer(&beta), dst, cudaR32F, int32(ldd), cublasCompute32F, cublasGemmDflt)
	if code != 0 {
		return fmt.Errorf("cuda: cublasGemmEx [%d×%d]·[%d×%d]ᵀ failed: status %d", m, k, n, k, code)
	}
	return nil
}
