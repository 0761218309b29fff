package cpu

import (
	"math"

	rt "github.com/govllm/govllm/runtime"
)

func splitQueryGate(q, gate, qg *rt.Tensor) {
	d := q.Dim(2)
	forRows(q, func(r int) {
		src := row(qg, r)
		copy(row(q, r), src[:d])
		copy(row(gate, r), src[d:])
	})
}

// ropeTable returns cos and sin [T][rotaryDim/2] computed as transformers
// does: inverse frequencies and angles in float32.
func ropeTable(positions []int32, rotaryDim int, theta float32) (cos, sin [][]float32) {
	half := rotaryDim / 2
	inv := make([]float32, half)
	for i := range inv {
		e := float32(2*i) / float32(rotaryDim)
		inv[i] = 1 / float32(math.Pow(float64(theta), float64(e)))
	}
	cos, sin = make([][]float32, len(positions)), make([][]float32, len(positions))
	for t, p := range positions {
		cos[t], sin[t] = make([]float32, half), make([]float32, half)
		for i, f := range inv {
			a := float64(float32(p) * f)
			cos[t][i], sin[t][i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	return cos, sin
}

// rotateHalf applies NeoX rotation to x[:2·len(cos)].
func rotateHalf(x, cos, sin []float32) {
	half := len(cos)
	for i := range half {
		a, b := x[i], x[i+half]
		x[i] = a*cos[i] - b*sin[i]
		x[i+half] = b*cos[i] + a*sin[i]
	}
}

func ropeNeoX(x *rt.Tensor, positions []int32, rotaryDim int, theta float32) {
	if rotaryDim == 0 {
		return
	}
	cos, sin := ropeTable(positions, rotaryDim, theta)
	heads := x.Dim(1)
	forRows(x, func(r int) {
		t := r / heads
		rotateHalf(row(x, r), cos[t], sin[t])
	})
}

func attnPreamble(q, gate, qg, k, qNorm, kNorm *rt.Tensor, positions []int32, p rt.PreambleParams) {
	var cos, sin [][]float32
	if p.RotaryDim > 0 {
		cos, sin = ropeTable(positions, p.RotaryDim, p.Theta)
	}
	d, hq, hkv := q.Dim(2), q.Dim(1), k.Dim(1)
	qw, kw := qNorm.F32()[:d], kNorm.F32()[:d]
	perToken := hq + hkv
	parallelFor(q.Dim(0)*perToken, max(1, 4096/d), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			t, h := i/perToken, i%perToken
			var x []float32
			if h < hq {
				r := t*hq + h
				src := row(qg, r)
				x = row(q, r)
				rmsNormRow(x, src[:d], qw, p.Eps, true)
				copy(row(gate, r), src[d:])
			} else {
				x = row(k, t*hkv+h-hq)
				rmsNormRow(x, x, kw, p.Eps, true)
			}
			if p.RotaryDim > 0 {
				rotateHalf(x, cos[t], sin[t])
			}
		}
	})
}

func kvWrite(cache, x *rt.Tensor, start int) {
	n := x.Len()
	copy(cache.F32()[start*cache.Dim(1)*cache.Dim(2):][:n], x.F32()[:n])
}

// attention computes one (token, head) row per task: scores against the
// visible keys, an f32 softmax, then the weighted sum of values.
func attention(dst, q, k, v *rt.Tensor, start int, scale float32) {
	tq, hq, d := q.Dim(0), q.Dim(1), q.Dim(2)
	hkv := k.Dim(1)
	group := hq / hkv
	parallelFor(tq*hq, 1, func(lo, hi int) {
		scores := make([]float32, start+tq)
		for i := lo; i < hi; i++ {
			t, h := i/hq, i%hq
			kh := h / group
			qr := row(q, t*hq+h)
			n := start + t + 1
			s := scores[:n]
			mx := float32(math.Inf(-1))
			for j := range n {
				s[j] = dot(qr, row(k, j*hkv+kh)) * scale
				mx = max(mx, s[j])
			}
			var sum float64
			for j := range s {
				e := float32(math.Exp(float64(s[j] - mx)))
				s[j] = e
				sum += float64(e)
			}
			inv := float32(1 / sum)
			out := row(dst, t*hq+h)
			clear(out[:d])
			for j, p := range s {
				p *= inv
				vr := row(v, j*hkv+kh)
				for c := range out {
					out[c] += p * vr[c]
				}
			}
		}
	})
}
