//go:build !amd64

package cpu

func dot(a, b []float32) float32                    { return dotGo(a, b) }
func axpy(alpha float32, x, y []float32)            { axpyGo(alpha, x, y) }
func scal(alpha float32, x []float32)               { scalGo(alpha, x) }
func mvAcc(out, coef, mat []float32, stride int)    { mvAccGo(out, coef, mat, stride) }
func ger(mat []float32, stride int, u, v []float32) { gerGo(mat, stride, u, v) }

func mvAcc2(out1, out2, c1, c2, mat []float32, stride int) { mvAcc2Go(out1, out2, c1, c2, mat, stride) }
func gerScale(mat []float32, stride int, alpha float32, u, v []float32) {
	gerScaleGo(mat, stride, alpha, u, v)
}

func gemmAcc(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	gemmAccGo(m, n, k, a, lda, b, ldb, c, ldc)
}
