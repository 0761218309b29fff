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

// vec16 is the part of n the 16-lane kernels take, or 0 without them.
func vec16(n int) int {
	if !hasAVX512 {
		return 0
	}
	return n &^ 15
}

// sigmoidVec computes dst = σ(x).
func sigmoidVec(dst, x []float32) {
	x = x[:len(dst)]
	v := vec16(len(dst))
	if v > 0 {
		sigmoidAVX512(&dst[0], &x[0], v)
	}
	sigmoidVecGo(dst[v:], x[v:])
}

// swigluVec computes dst = silu(gate)·up, or silu(gate) where up is nil.
func swigluVec(dst, gate, up []float32) {
	gate = gate[:len(dst)]
	v := vec16(len(dst))
	if v > 0 {
		var u *float32
		if up != nil {
			up = up[:len(dst)]
			u = &up[0]
		}
		swigluAVX512(&dst[0], &gate[0], u, v)
	}
	if up != nil {
		up = up[v:]
	}
	swigluVecGo(dst[v:], gate[v:], up)
}

// sigmoidMulVec computes dst = x·σ(gate).
func sigmoidMulVec(dst, x, gate []float32) {
	x, gate = x[:len(dst)], gate[:len(dst)]
	v := vec16(len(dst))
	if v > 0 {
		sigmoidMulAVX512(&dst[0], &x[0], &gate[0], v)
	}
	sigmoidMulVecGo(dst[v:], x[v:], gate[v:])
}

// fmaVec computes dst += a·b elementwise.
func fmaVec(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	v := vec16(len(dst))
	if v > 0 {
		fmaVecAVX512(&dst[0], &a[0], &b[0], v)
	}
	fmaVecGo(dst[v:], a[v:], b[v:])
}

// addVec computes dst = a + b.
func addVec(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	v := vec16(len(dst))
	if v > 0 {
		addVecAVX512(&dst[0], &a[0], &b[0], v)
	}
	addVecGo(dst[v:], a[v:], b[v:])
}
