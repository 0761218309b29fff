package cpu

import (
	"math"

	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/quant"
)

// K-quant weights (Q4_K, Q5_K, Q6_K) against activations quantized as
// llama.cpp's Q8_K: one scale per 256-element super-block, so that a
// super-block's products sum in integers, each sub-block's weighted by its
// integer scale (VPDPWSSD), and turn into floats once per super-block.
//
//	activation row, per super-block (kActBytes):
//	  q     256 offset bytes (q+128; q = round(x/d), d = max|x|/127)
//	  xsb   16 floats: d·Σq of each 32-element sub-block in lanes 0..7, then 0
//	  d     16 copies of d
//	prepared weight row, per super-block (kSBBytes):
//	  w     256 signed bytes (Q4_K 0..15, Q5_K 0..31, Q6_K -32..31)
//	  sc    4 pairs × 16 int32: the scale of each lane's sub-block (as an int16
//	        with the high half 0, for VPDPWSSD)
//	  negc  16 int32: Σ over the pairs of sc·(-128·Σ of the lane's 4 weights),
//	        which takes the activations' +128 back
//	  bias  16 floats: -dmin·min of sub-blocks 0..7 in lanes 0..7 (Q6_K: 0),
//	        and the super-block scale d in lane 8
//
// A lane is 4 consecutive elements of a 64-element pair; the integer sum of
// a lane is at most 4·255·32, within an int16.
const (
	kActBytes = 384
	kSBBytes  = 640
)

func kQuantSupported(dt rt.DType) bool { return dt == rt.Q4_K || dt == rt.Q5_K || dt == rt.Q6_K }

// quantizeQ8KGo quantizes x (a multiple of 256 long) into act, leaving xsb
// to kSums.
func quantizeQ8KGo(x []float32, act []byte) {
	for sb := range len(x) / 256 {
		blk, out := x[sb*256:(sb+1)*256], act[sb*kActBytes:(sb+1)*kActBytes]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d, id := amax/127, float32(0)
		if amax != 0 {
			id = 127 / amax
		}
		for i, v := range blk {
			out[i] = byte(int8(min(127, max(-127, roundEven(v*id))))) ^ 0x80
		}
		ds := asF32(out[320:384])
		for i := range ds {
			ds[i] = d
		}
	}
}

// kSums fills the xsb of nsb quantized super-blocks.
func kSums(act []byte, nsb int) {
	for sb := range nsb {
		a := act[sb*kActBytes:]
		d, xsb := asF32(a[320:324])[0], asF32(a[256:320])
		for j := range 8 {
			var sum int32
			for _, v := range a[32*j : 32*j+32] {
				sum += int32(v) - 128
			}
			xsb[j] = d * float32(sum)
		}
		clear(xsb[8:])
	}
}

// kLaneGroup is the sub-block of lane l of pair p: the scale index.
func kLaneGroup(dt rt.DType, p, l int) int {
	if dt == rt.Q6_K {
		return 4*p + l/4 // 16-element sub-blocks
	}
	return 2*p + l/8
}

// kPrepIGo prepares a k-quant row of whole super-blocks as laid out above.
func kPrepIGo(dt rt.DType, w []byte, dst []byte) {
	_, bb := dt.Block()
	var q [256]int8
	var fscale [16]float32
	var fbias [8]float32
	for b := range len(w) / bb {
		blk, out := w[b*bb:(b+1)*bb], dst[b*kSBBytes:(b+1)*kSBBytes]
		kDecode(dt, blk, &q, &fscale, &fbias)
		var sc [16]int32
		var d float32
		bias := asF32(out[576:640])
		clear(bias)
		if dt == rt.Q6_K {
			d = f16At(blk, 208)
			for i := range 16 {
				sc[i] = int32(int8(blk[192+i]))
			}
		} else {
			d = f16At(blk, 0)
			dmin := f16At(blk, 2)
			for j := range 8 {
				s, m := quant.ScaleMin(j, blk[4:16])
				sc[j] = int32(s)
				bias[j] = -dmin * float32(m)
			}
		}
		bias[8] = d
		scl, negc := asI32(out[256:512]), asI32(out[512:576])
		clear(negc)
		for p := range 4 {
			for l := range 16 {
				s := sc[kLaneGroup(dt, p, l)]
				var sum int32
				for i := range 4 {
					v := q[64*p+4*l+i]
					out[64*p+4*l+i] = byte(v)
					sum += int32(v)
				}
				scl[16*p+l] = s & 0xffff
				negc[l] += s * -128 * sum
			}
		}
	}
}

// kRowsIGo is the Go form of kRowsI.
func kRowsIGo(nsb int, prep0, prep1, act []byte, rows, aStride int, out []float32, outStride int) {
	for r := range rows {
		a := act[r*aStride:]
		for c, prep := range [2][]byte{prep0, prep1} {
			var acc float64
			for sb := range nsb {
				pw, pa := prep[sb*kSBBytes:], a[sb*kActBytes:]
				scl, negc, bias := asI32(pw[256:512]), asI32(pw[512:576]), asF32(pw[576:640])
				xsb, d := asF32(pa[256:320]), asF32(pa[320:324])[0]
				for l := range 16 {
					sum := negc[l]
					for p := range 4 {
						var t int32
						for i := range 4 {
							t += int32(pa[64*p+4*l+i]) * int32(int8(pw[64*p+4*l+i]))
						}
						sum += t * int32(int16(scl[16*p+l]))
					}
					acc += float64(float32(sum)*(bias[8]*d)) + float64(bias[l]*xsb[l])
				}
			}
			out[r*outStride+c] = float32(acc)
		}
	}
}
