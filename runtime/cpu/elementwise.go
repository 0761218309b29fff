package cpu

import (
	"math"

	rt "github.com/govllm/govllm/runtime"
)

// eachRow runs fn over the rows of t, in parallel where there are enough.
// fn takes its operands from args rather than capturing them (it is a
// function literal that captures nothing), so that a call allocates
// nothing.
func eachRow(t *rt.Tensor, args rowArgs, fn func(a *rowArgs, r int)) {
	rows, width := t.Rows(), t.Dim(-1)
	job := rowTasks.get()
	*job = rowTask{args: args, fn: fn}
	parallelTask(rows, max(1, 8192/max(1, width)), job)
	rowTasks.put(job)
}

// rowArgs are the operands of a row kernel.
type rowArgs struct {
	dst, a, b, c *rt.Tensor
	w, w2        []float32
	eps          float32
	ids          []int32   // routerTopK
	k            int       // routerTopK
	rope         ropeTable // ropeNeoX
}

type rowTask struct {
	args rowArgs
	fn   func(a *rowArgs, r int)
}

var rowTasks taskPool[rowTask]

func (t *rowTask) run(lo, hi int) {
	for r := lo; r < hi; r++ {
		t.fn(&t.args, r)
	}
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

func siluF(x float32) float32 { return x * sigmoid(x) }

func add(dst, a, b *rt.Tensor) {
	eachRow(dst, rowArgs{dst: dst, a: a, b: b}, func(o *rowArgs, r int) {
		addVec(row(o.dst, r), row(o.a, r), row(o.b, r))
	})
}

func silu(dst, x *rt.Tensor) {
	eachRow(dst, rowArgs{dst: dst, a: x}, func(o *rowArgs, r int) {
		swigluVec(row(o.dst, r), row(o.a, r), nil)
	})
}

func swiGLU(dst, gate, up *rt.Tensor) {
	eachRow(dst, rowArgs{dst: dst, a: gate, b: up}, func(o *rowArgs, r int) {
		swigluVec(row(o.dst, r), row(o.a, r), row(o.b, r))
	})
}

func sigmoidMul(dst, x, gate *rt.Tensor) {
	eachRow(dst, rowArgs{dst: dst, a: x, b: gate}, func(o *rowArgs, r int) {
		d, s, g := row(o.dst, r), row(o.a, r), row(o.b, r)
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
	eachRow(dst, rowArgs{dst: dst, a: x, w: w.F32()[:w.Len()], eps: eps}, func(o *rowArgs, r int) {
		rmsNormRow(row(o.dst, r), row(o.a, r), o.w, o.eps, false)
	})
}

func rmsNormOffset(dst, x, w *rt.Tensor, eps float32) {
	eachRow(dst, rowArgs{dst: dst, a: x, w: w.F32()[:w.Len()], eps: eps}, func(o *rowArgs, r int) {
		rmsNormRow(row(o.dst, r), row(o.a, r), o.w, o.eps, true)
	})
}

func addRMSNormOffset(dst, x, y, w *rt.Tensor, eps float32) {
	eachRow(dst, rowArgs{dst: dst, a: x, b: y, w: w.F32()[:w.Len()], eps: eps}, func(o *rowArgs, r int) {
		s := row(o.a, r)
		addVec(s, s, row(o.b, r))
		rmsNormRow(row(o.dst, r), s, o.w, o.eps, true)
	})
}

func gatedRMSNorm(dst, x, z, w *rt.Tensor, eps float32) {
	eachRow(dst, rowArgs{dst: dst, a: x, b: z, w: w.F32()[:w.Len()], eps: eps}, func(o *rowArgs, r int) {
		d, s, g := row(o.dst, r), row(o.a, r), row(o.b, r)
		inv := invRMS(s, o.eps)
		gs := getF32(len(d)) // dst may alias x or z
		swigluVec(gs.f, g, nil)
		for i := range d {
			d[i] = o.w[i] * (s[i] * inv) * gs.f[i]
		}
		putF32(gs)
	})
}

func l2Norm(dst, x *rt.Tensor, eps float32) {
	eachRow(dst, rowArgs{dst: dst, a: x, eps: eps}, func(o *rowArgs, r int) {
		l2NormRow(row(o.dst, r), row(o.a, r), o.eps)
	})
}

// l2NormRow writes s / sqrt(Σ s² + eps) to d.
func l2NormRow(d, s []float32, eps float32) {
	var ss float64
	for _, v := range s {
		ss += float64(v) * float64(v)
	}
	inv := float32(1 / math.Sqrt(ss+float64(eps)))
	for i := range d {
		d[i] = s[i] * inv
	}
}

func softplus(x float32) float32 {
	if x > 20 { // torch's threshold: linear above it
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}

// gdnDecay is the DeltaNet's log-decay of a head from its projection a:
// -exp(A_log) · softplus(a + dt_bias).
func gdnDecay(a, aLog, dtBias float32) float32 {
	return -float32(math.Exp(float64(aLog))) * softplus(a+dtBias)
}

func gdnGating(g, beta, a, b, aLog, dtBias *rt.Tensor) {
	args := rowArgs{dst: g, a: beta, b: a, c: b, w: aLog.F32()[:aLog.Len()], w2: dtBias.F32()[:dtBias.Len()]}
	eachRow(g, args, func(o *rowArgs, r int) {
		gr, br, ar, bi := row(o.dst, r), row(o.a, r), row(o.b, r), row(o.c, r)
		for h := range gr {
			gr[h] = gdnDecay(ar[h], o.w[h], o.w2[h])
			br[h] = sigmoid(bi[h])
		}
	})
}
