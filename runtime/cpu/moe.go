package cpu

import (
	"math"
	"sync"

	rt "github.com/govllm/govllm/runtime"
)

// routerTopK: softmax over the experts, the k largest (ties to the lower
// index), renormalised to sum to one.
func routerTopK(ids []int32, weights []float32, logits *rt.Tensor, k int) {
	eachRow(logits, rowArgs{a: logits, ids: ids, w: weights, k: k}, func(o *rowArgs, r int) {
		ids, weights, k := o.ids, o.w, o.k
		lg := row(o.a, r)
		mx := float32(math.Inf(-1))
		for _, v := range lg {
			mx = max(mx, v)
		}
		pb := getF32(len(lg))
		defer putF32(pb)
		p := pb.f
		var sum float64
		for i, v := range lg {
			p[i] = float32(math.Exp(float64(v - mx)))
			sum += float64(p[i])
		}
		for i := range p {
			p[i] = float32(float64(p[i]) / sum)
		}
		oi, ow := ids[r*k:(r+1)*k], weights[r*k:(r+1)*k]
		var tot float32
		for j := range k {
			best := -1
			for i, v := range p {
				if v >= 0 && (best < 0 || v > p[best]) {
					best = i
				}
			}
			oi[j], ow[j] = int32(best), p[best]
			tot += p[best]
			p[best] = -1
		}
		for j := range ow {
			ow[j] /= tot
		}
	})
}

func gatherRows(dst, x *rt.Tensor, rows []int32) {
	for i, r := range rows {
		copy(row(dst, i), row(x, int(r)))
	}
}

func argmax(dst, x *rt.Tensor) {
	ids := dst.I32()
	for r := range ids[:dst.Len()] {
		ids[r] = rt.ArgmaxRow(row(x, r))
	}
}

// moeScratch is moeExperts' working memory, pooled so that a step of
// the same shape as an earlier one allocates nothing.
type moeScratch struct {
	ar          rt.Arena
	ids, rows   []int32
	weights, ws []float32
}

var moeScratches = sync.Pool{New: func() any { return new(moeScratch) }}

func grown[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// moeExperts routes each row of x, then takes the experts in order: an
// expert's rows are gathered, run through its SwiGLU MLP as one batch (its
// weights read once a call) and added, weighted, into out.
func moeExperts(out, x, logits *rt.Tensor, ex *rt.Experts) {
	t, k, h, inter := x.Dim(0), ex.TopK, ex.Hidden(), ex.Inter()
	sc := moeScratches.Get().(*moeScratch)
	defer moeScratches.Put(sc)
	sc.ar.Reset()
	sc.ids, sc.weights = grown(sc.ids, t*k), grown(sc.weights, t*k)
	ids, weights := sc.ids, sc.weights
	routerTopK(ids, weights, logits, k)
	for r := range t {
		clear(row(out, r))
	}
	for e := range ex.Gate {
		rows, ws := sc.rows[:0], sc.ws[:0]
		for i, id := range ids {
			if int(id) == e {
				rows, ws = append(rows, int32(i/k)), append(ws, weights[i])
			}
		}
		sc.rows, sc.ws = rows, ws
		n := len(rows)
		if n == 0 {
			continue
		}
		mark := sc.ar.Mark()
		xe, gate, up, ye := sc.ar.New(rt.F32, n, h), sc.ar.New(rt.F32, n, inter), sc.ar.New(rt.F32, n, inter), sc.ar.New(rt.F32, n, h)
		gatherRows(xe, x, rows)
		matMul(gate, xe, ex.Gate[e])
		matMul(up, xe, ex.Up[e])
		swiGLU(gate, gate, up)
		matMul(ye, gate, ex.Down[e])
		for i, r := range rows {
			d, s, w := row(out, int(r)), row(ye, i), ws[i]
			for c := range d {
				d[c] += w * s[c]
			}
		}
		sc.ar.Release(mark)
	}
}
