package cpu

import (
	"math"

	rt "github.com/govllm/govllm/runtime"
)

// forRows runs fn over the rows of t in parallel.
func forRows(t *rt.Tensor, fn func(r int)) {
	rows, width := t.Rows(), t.Dim(-1)
	parallelFor(rows, max(1, 8192/max(1, width)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			fn(r)
		}
	})
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

func siluF(x float32) float32 { return x * sigmoid(x) }

func add(dst, a, b *rt.Tensor) {
	forRows(dst, func(r int) {
		addVec(row(dst, r), row(a, r), row(b, r))
	})
}

func silu(dst, x *rt.Tensor) {
	forRows(dst, func(r int) {
		swigluVec(row(dst, r), row(x, r), nil)
	})
}

func swiGLU(dst, gate, up *rt.Tensor) {
	forRows(dst, func(r int) {
		swigluVec(row(dst, r), row(gate, r), row(up, r))
	})
}

func sigmoidMul(dst, x, gate *rt.Tensor) {
	forRows(dst, func(r int) {
		d, s, g := row(dst, r), row(x, r), row(gate, r)
		if len(g) == 1 {
			f := sigmoid(g[0])
			for i := range d {
				d[i] = s[i] * f
			}
			return
		}
		sigmoidMulVec(d, s, g)
	})
}

// invRMS is 1/sqrt(mean(x²) + eps), summed in float64 for accuracy.
func invRMS(x []float32, eps float32) float32 {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	return float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
}

func rmsNormRow(d, s, w []float32, eps float32, offset bool) {
	inv := invRMS(s, eps)
	if offset {
		for i := range d {
			d[i] = s[i] * inv * (1 + w[i])
		}
		return
	}
	for i := range d {
		d[i] = s[i] * inv * w[i]
	}
}

func rmsNorm(dst, x, w *rt.Tensor, eps float32) {
	ws := w.F32()[:w.Len()]
	forRows(dst, func(r int) { rmsNormRow(row(dst, r), row(x, r), ws, eps, false) })
}

func rmsNormOffset(dst, x, w *rt.Tensor, eps float32) {
	ws := w.F32()[:w.Len()]
	forRows(dst, func(r int) { rmsNormRow(row(dst, r), row(x, r), ws, eps, true) })
}

func gatedRMSNorm(dst, x, z, w *rt.Tensor, eps float32) {
	ws := w.F32()[:w.Len()]
	forRows(dst, func(r int) {
		d, s, g := row(dst, r), row(x, r), row(z, r)
		inv := invRMS(s, eps)
		gs := getF32(len(d)) // dst may alias x or z
		swigluVec(gs.f, g, nil)
		for i := range d {
			d[i] = ws[i] * (s[i] * inv) * gs.f[i]
		}
		putF32(gs)
	})
}

func l2Norm(dst, x *rt.Tensor, eps float32) {
	forRows(dst, func(r int) {
		d, s := row(dst, r), row(x, r)
		var ss float64
		for _, v := range s {
			ss += float64(v) * float64(v)
		}
		inv := float32(1 / math.Sqrt(ss+float64(eps)))
		for i := range d {
			d[i] = s[i] * inv
		}
	})
}

func softplus(x float32) float32 {
	if x > 20 { // torch's threshold: linear above it
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}

func gdnGating(g, beta, a, b, aLog, dtBias *rt.Tensor) {
	al, db := aLog.F32()[:aLog.Len()], dtBias.F32()[:dtBias.Len()]
	forRows(g, func(r int) {
		gr, br, ar, bi := row(g, r), row(beta, r), row(a, r), row(b, r)
		for h := range gr {
			gr[h] = -float32(math.Exp(float64(al[h]))) * softplus(ar[h]+db[h])
			br[h] = sigmoid(bi[h])
		}
	})
}
