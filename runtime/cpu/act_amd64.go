package cpu

//go:noescape
func sigmoidAVX512(dst, x *float32, n int)

//go:noescape
func swigluAVX512(dst, gate, up *float32, n int)

//go:noescape
func sigmoidMulAVX512(dst, x, gate *float32, n int)

//go:noescape
func fmaVecAVX512(dst, a, b *float32, n int)

//go:noescape
func addVecAVX512(dst, a, b *float32, n int)

//go:noescape
func sigmoidAVX2(dst, x *float32, n int)

//go:noescape
func swigluAVX2(dst, gate, up *float32, n int)

//go:noescape
func sigmoidMulAVX2(dst, x, gate *float32, n int)

//go:noescape
func fmaVecAVX2(dst, a, b *float32, n int)

//go:noescape
func addVecAVX2(dst, a, b *float32, n int)

// vecPart is the part of n the vector kernels take (a multiple of
// vecWidth), or 0 without them.
func vecPart(n int) int {
	if vecWidth == 0 {
		return 0
	}
	return n &^ (vecWidth - 1)
}

// sigmoidVec computes dst = σ(x).
func sigmoidVec(dst, x []float32) {
	x = x[:len(dst)]
	v := vecPart(len(dst))
	if v > 0 {
		if hasAVX512 {
			sigmoidAVX512(&dst[0], &x[0], v)
		} else {
			sigmoidAVX2(&dst[0], &x[0], v)
		}
	}
	sigmoidVecGo(dst[v:], x[v:])
}

// swigluVec computes dst = silu(gate)·up, or silu(gate) where up is nil.
func swigluVec(dst, gate, up []float32) {
	gate = gate[:len(dst)]
	v := vecPart(len(dst))
	if v > 0 {
		var u *float32
		if up != nil {
			up = up[:len(dst)]
			u = &up[0]
		}
		if hasAVX512 {
			swigluAVX512(&dst[0], &gate[0], u, v)
		} else {
			swigluAVX2(&dst[0], &gate[0], u, v)
		}
	}
	if up != nil {
		up = up[v:]
	}
	swigluVecGo(dst[v:], gate[v:], up)
}

// sigmoidMulVec computes dst = x·σ(gate).
func sigmoidMulVec(dst, x, gate []float32) {
	x, gate = x[:len(dst)], gate[:len(dst)]
	v := vecPart(len(dst))
	if v > 0 {
		if hasAVX512 {
			sigmoidMulAVX512(&dst[0], &x[0], &gate[0], v)
		} else {
			sigmoidMulAVX2(&dst[0], &x[0], &gate[0], v)
		}
	}
	sigmoidMulVecGo(dst[v:], x[v:], gate[v:])
}

// fmaVec computes dst += a·b elementwise.
func fmaVec(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	v := vecPart(len(dst))
	if v > 0 {
		if hasAVX512 {
			fmaVecAVX512(&dst[0], &a[0], &b[0], v)
		} else {
			fmaVecAVX2(&dst[0], &a[0], &b[0], v)
		}
	}
	fmaVecGo(dst[v:], a[v:], b[v:])
}

// addVec computes dst = a + b.
func addVec(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	v := vecPart(len(dst))
	if v > 0 {
		if hasAVX512 {
			addVecAVX512(&dst[0], &a[0], &b[0], v)
		} else {
			addVecAVX2(&dst[0], &a[0], &b[0], v)
		}
	}
	addVecGo(dst[v:], a[v:], b[v:])
}
