package cpu

// Pure-Go forms of the f32 vector kernels (dot, axpy, scal, mvAcc, mvAcc2,
// ger, gerScale, gemmAcc):
// the fallbacks, and the reference the assembly is tested against.

func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func axpyGo(alpha float32, x, y []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += alpha * x[i]
	}
}

func scalGo(alpha float32, x []float32) {
	for i := range x {
		x[i] *= alpha
	}
}

func mvAccGo(out, coef, mat []float32, stride int) {
	for a, c := range coef {
		axpyGo(c, mat[a*stride:][:len(out)], out)
	}
}

func gerGo(mat []float32, stride int, u, v []float32) {
	for a, c := range u {
		axpyGo(c, v, mat[a*stride:][:len(v)])
	}
}

func mvAcc2Go(out1, out2, c1, c2, mat []float32, stride int) {
	mvAccGo(out1, c1, mat, stride)
	mvAccGo(out2, c2, mat, stride)
}

func gerScaleGo(mat []float32, stride int, alpha float32, u, v []float32) {
	for a, c := range u {
		r := mat[a*stride:][:len(v)]
		for i := range r {
			r[i] = alpha*r[i] + c*v[i]
		}
	}
}

func gemmAccGo(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	for i := range m {
		mvAccGo(c[i*ldc:i*ldc+n], a[i*lda:i*lda+k], b, ldb)
	}
}
