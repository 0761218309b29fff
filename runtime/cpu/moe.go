package cpu

import (
	"math"

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

func moeScatterAdd(dst, src *rt.Tensor, rows []int32, weights []float32) {
	for i, r := range rows {
		d, s, w := row(dst, int(r)), row(src, i), weights[i]
		for c := range d {
			d[c] += w * s[c]
		}
	}
}
