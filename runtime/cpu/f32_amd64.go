package cpu

//go:noescape
func dotAVX512(x, y *float32, n int) float32

//go:noescape
func axpyAVX512(alpha float32, x, y *float32, n int)

//go:noescape
func scalAVX512(alpha float32, x *float32, n int)

//go:noescape
func mvAccAVX512(out *float32, n int, coef *float32, m int, mat *float32, stride int)

//go:noescape
func gerAVX512(mat *float32, stride int, m, n int, u, v *float32)

//go:noescape
func mvAcc2AVX512(out1, out2 *float32, n int, c1, c2 *float32, m int, mat *float32, stride int)

//go:noescape
func gerScaleAVX512(mat *float32, stride int, m, n int, alpha float32, u, v *float32)

//go:noescape
func gemmAccAVX512(m, n, k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotAVX2(x, y *float32, n int) float32

//go:noescape
func axpyAVX2(alpha float32, x, y *float32, n int)

//go:noescape
func scalAVX2(alpha float32, x *float32, n int)

//go:noescape
func mvAccAVX2(out *float32, n int, coef *float32, m int, mat *float32, stride int)

//go:noescape
func gerAVX2(mat *float32, stride int, m, n int, u, v *float32)

//go:noescape
func mvAcc2AVX2(out1, out2 *float32, n int, c1, c2 *float32, m int, mat *float32, stride int)

//go:noescape
func gerScaleAVX2(mat *float32, stride int, m, n int, alpha float32, u, v *float32)

//go:noescape
func gemmAccAVX2(m, n, k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

// gemmAcc computes C += A·B for A [m×k], B [k×n], C [m×n], row-major with
// row strides lda, ldb and ldc (in elements).
func gemmAcc(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m == 0 || n == 0 || k == 0 {
		return
	}
	_ = a[(m-1)*lda+k-1]
	_ = b[(k-1)*ldb+n-1]
	_ = c[(m-1)*ldc+n-1]
	switch {
	case hasAVX512 && n%64 == 0:
		gemmAccAVX512(m, n, k, &a[0], 4*lda, &b[0], 4*ldb, &c[0], 4*ldc)
	case !hasAVX512 && hasAVX2 && n%16 == 0:
		gemmAccAVX2(m, n, k, &a[0], 4*lda, &b[0], 4*ldb, &c[0], 4*ldc)
	default:
		for i := range m {
			mvAcc(c[i*ldc:i*ldc+n], a[i*lda:i*lda+k], b, ldb)
		}
	}
}

// dot is the f32 inner product of a and b[:len(a)].
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	n := vecPart(len(a))
	if n == 0 {
		return dotGo(a, b)
	}
	var s float32
	if hasAVX512 {
		s = dotAVX512(&a[0], &b[0], n)
	} else {
		s = dotAVX2(&a[0], &b[0], n)
	}
	if n < len(a) {
		s += dotGo(a[n:], b[n:])
	}
	return s
}

// axpy computes y += alpha·x over len(y).
func axpy(alpha float32, x, y []float32) {
	x = x[:len(y)]
	n := vecPart(len(y))
	if n == 0 {
		axpyGo(alpha, x, y)
		return
	}
	if hasAVX512 {
		axpyAVX512(alpha, &x[0], &y[0], n)
	} else {
		axpyAVX2(alpha, &x[0], &y[0], n)
	}
	axpyGo(alpha, x[n:], y[n:])
}

// scal computes x *= alpha.
func scal(alpha float32, x []float32) {
	n := vecPart(len(x))
	if n == 0 {
		scalGo(alpha, x)
		return
	}
	if hasAVX512 {
		scalAVX512(alpha, &x[0], n)
	} else {
		scalAVX2(alpha, &x[0], n)
	}
	scalGo(alpha, x[n:])
}

// mvAcc computes out += Σ_a coef[a]·mat[a·stride:][:len(out)].
func mvAcc(out, coef, mat []float32, stride int) {
	n, m := len(out), len(coef)
	if m == 0 || n == 0 {
		return
	}
	_ = mat[(m-1)*stride+n-1]
	v := vecPart(n)
	if v == 0 {
		mvAccGo(out, coef, mat, stride)
		return
	}
	if hasAVX512 {
		mvAccAVX512(&out[0], v, &coef[0], m, &mat[0], stride*4)
	} else {
		mvAccAVX2(&out[0], v, &coef[0], m, &mat[0], stride*4)
	}
	if v < n {
		mvAccGo(out[v:], coef, mat[v:], stride)
	}
}

// ger computes mat[a·stride:][:len(v)] += u[a]·v for every a.
func ger(mat []float32, stride int, u, v []float32) {
	n, m := len(v), len(u)
	if m == 0 || n == 0 {
		return
	}
	_ = mat[(m-1)*stride+n-1]
	w := vecPart(n)
	if w == 0 {
		gerGo(mat, stride, u, v)
		return
	}
	if hasAVX512 {
		gerAVX512(&mat[0], stride*4, m, w, &u[0], &v[0])
	} else {
		gerAVX2(&mat[0], stride*4, m, w, &u[0], &v[0])
	}
	if w < n {
		gerGo(mat[w:], stride, u, v[w:])
	}
}

// mvAcc2 is mvAcc for two coefficient vectors over one read of mat:
// out1 += Σ_a c1[a]·mat[a], out2 += Σ_a c2[a]·mat[a] (len(c2) = len(c1)).
func mvAcc2(out1, out2, c1, c2, mat []float32, stride int) {
	n, m := len(out1), len(c1)
	if m == 0 || n == 0 {
		return
	}
	out2, c2 = out2[:n], c2[:m]
	_ = mat[(m-1)*stride+n-1]
	v := vecPart(n)
	if v == 0 {
		mvAcc2Go(out1, out2, c1, c2, mat, stride)
		return
	}
	if hasAVX512 {
		mvAcc2AVX512(&out1[0], &out2[0], v, &c1[0], &c2[0], m, &mat[0], stride*4)
	} else {
		mvAcc2AVX2(&out1[0], &out2[0], v, &c1[0], &c2[0], m, &mat[0], stride*4)
	}
	if v < n {
		mvAcc2Go(out1[v:], out2[v:], c1, c2, mat[v:], stride)
	}
}

// gerScale computes mat[a] = alpha·mat[a] + u[a]·v (rows stride apart) in
// one pass over mat.
func gerScale(mat []float32, stride int, alpha float32, u, v []float32) {
	n, m := len(v), len(u)
	if m == 0 || n == 0 {
		return
	}
	_ = mat[(m-1)*stride+n-1]
	w := vecPart(n)
	if w == 0 {
		gerScaleGo(mat, stride, alpha, u, v)
		return
	}
	if hasAVX512 {
		gerScaleAVX512(&mat[0], stride*4, m, w, alpha, &u[0], &v[0])
	} else {
		gerScaleAVX2(&mat[0], stride*4, m, w, alpha, &u[0], &v[0])
	}
	if w < n {
		gerScaleGo(mat[w:], stride, alpha, u, v[w:])
	}
}
