//go:build linux && amd64

package cuda

import (
	"fmt"
	"unsafe"
)

var (
	cublasCreate    func(h *uintptr) int32
	cublasSetStream func(h uintptr, s uintptr) int32
	cublasGemmEx    func(h uintptr, ta, tb int32, m, n, k int32, alpha unsafe.Pointer, a uintptr, atype int32, lda int32,
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
	if err := lib.bind(map[string]any{"cublasCreate_v2": &cublasCreate, "cublasGemmEx": &cublasGemmEx, "cublasSetStream_v2": &cublasSetStream}); err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	b := &blas{}
	if code := cublasCreate(&b.handle); code != 0 {
		return nil, fmt.Errorf("cuda: cublasCreate failed: status %d", code)
	}
	return b, nil
}

// gemmArgs are gemm's arguments as a step encodes them: dst, ldd, x, xtype,
// ldx, w, wtype, m, n, k.
type gemmArgs [10]int64

// gemm computes dst[M, N] = x[M, K] · w[N, K]ᵀ in f32 accumulation, or
// records it while a step is recorded.
func (c *Context) gemm(dst uintptr, ldd int, x uintptr, xtype int32, ldx int, w uintptr, wtype int32, m, n, k int) error {
	a := gemmArgs{int64(dst), int64(ldd), int64(x), int64(xtype), int64(ldx), int64(w), int64(wtype), int64(m), int64(n), int64(k)}
	if c.rec != nil {
		c.rec.recordGemm(a)
		return nil
	}
	c.eager = true
	if profiling {
		defer profileSince("cublasGemmEx", 0, c.profileStart(0))
	}
	return c.blas.gemmOn(0, a)
}

// gemmOn runs a gemm on stream: in cuBLAS's column-major terms
// dstᵀ = w · xᵀ, so w is A transposed.
func (b *blas) gemmOn(stream uintptr, a gemmArgs) error {
	if stream != 0 {
		if code := cublasSetStream(b.handle, stream); code != 0 {
			return fmt.Errorf("cuda: cublasSetStream failed: status %d", code)
		}
		defer cublasSetStream(b.handle, 0)
	}
	alpha, beta := float32(1), float32(0)
	m, n, k := int32(a[7]), int32(a[8]), int32(a[9])
	code := cublasGemmEx(b.handle, cublasOpT, cublasOpN, n, m, k, unsafe.Pointer(&alpha),
		uintptr(a[5]), int32(a[6]), k, uintptr(a[2]), int32(a[3]), int32(a[4]), unsafe.Pointer(&beta), uintptr(a[0]), cudaR32F, int32(a[1]), cublasCompute32F, cublasGemmDflt)
	if code != 0 {
		return fmt.Errorf("cuda: cublasGemmEx [%d×%d]·[%d×%d]ᵀ failed: status %d", m, k, n, k, code)
	}
	return nil
}
