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

func kvWrite(cache, x *rt.Tensor, slots []int32) {
	width := cache.Dim(1) * cache.Dim(2)
	cs := cache.F32()
	for i, slot := range slots {
		for h := range x.Dim(1) {
			copy(cs[int(slot)*width+h*cache.Dim(2):][:cache.Dim(2)], row(x, i*x.Dim(1)+h))
		}
	}
}

// attention computes one (token, head) row per task: scores against the
// visible keys, an f32 softmax, then the weighted sum of values.
func attention(dst, q, k, v *rt.Tensor, seqs []rt.AttnSeq, blockSize int, scale float32) {
	hq, d := q.Dim(1), q.Dim(2)
	hkv := k.Dim(1)
	group := hq / hkv
	type task struct {
		seq *rt.AttnSeq
		t   int // row within the sequence
	}
	var tasks []task
	longest := 0
	for i := range seqs {
		s := &seqs[i]
		for t := range s.Len {
			tasks = append(tasks, task{s, t})
		}
		longest = max(longest, s.Start+s.Len)
	}
	ks, vs := k.F32(), v.F32()
	kvWidth := hkv * d
	parallelFor(len(tasks)*hq, 1, func(lo, hi int) {
		scores := make([]float32, longest)
		cacheRows := make([]int, longest)
		for i := lo; i < hi; i++ {
			tk, h := tasks[i/hq], i%hq
			s := tk.seq
			kh := h / group
			r := s.Row + tk.t
			qr := row(q, r*hq+h)
			n := s.Start + tk.t + 1
			sc := scores[:n]
			mx := float32(math.Inf(-1))
			for p := range n {
				cr := int(s.Blocks[p/blockSize])*blockSize + p%blockSize
				cacheRows[p] = cr
				sc[p] = dot(qr, ks[cr*kvWidth+kh*d:][:d]) * scale
				mx = max(mx, sc[p])
			}
			var sum float64
			for p := range sc {
				e := float32(math.Exp(float64(sc[p] - mx)))
				sc[p] = e
				sum += float64(e)
			}
			inv := float32(1 / sum)
			out := row(dst, r*hq+h)
			clear(out[:d])
			for p, w := range sc {
				axpy(w*inv, vs[cacheRows[p]*kvWidth+kh*d:][:d], out[:d])
			}
		}
	})
}
