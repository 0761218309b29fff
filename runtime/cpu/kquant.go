package cpu

import (
	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/quant"
)

// K-quant weights (Q4_K, Q5_K, Q6_K) run on the Q8_0 integer kernels: a
// row is prepared as small signed integers with a scale per 4-element lane
// (their sub-blocks are 16 or 32 wide), plus a per-block offset (the
// "min" of Q4_K/Q5_K) taken against the activation block sums. A prepared
// pair is the Q8_0 one followed by 16 bias floats.
const kPairBytes = 256

func kQuantSupported(dt rt.DType) bool { return dt == rt.Q4_K || dt == rt.Q5_K || dt == rt.Q6_K }

// kDecode decodes one 256-element k-quant block into integers q, a scale
// per 16 elements and an offset per 32: value i = scale[i/16]·q[i] + bias[i/32].
func kDecode(dt rt.DType, blk []byte, q *[256]int8, scale *[16]float32, bias *[8]float32) {
	switch dt {
	case rt.Q4_K, rt.Q5_K:
		d, dmin := f16At(blk, 0), f16At(blk, 2)
		scales := blk[4:16]
		qs, qh := blk[16:144], []byte(nil)
		if dt == rt.Q5_K {
			qh, qs = blk[16:48], blk[48:176]
		}
		for c := range 4 {
			s1, m1 := quant.ScaleMin(2*c, scales)
			s2, m2 := quant.ScaleMin(2*c+1, scales)
			scale[4*c], scale[4*c+1] = d*float32(s1), d*float32(s1)
			scale[4*c+2], scale[4*c+3] = d*float32(s2), d*float32(s2)
			bias[2*c], bias[2*c+1] = -dmin*float32(m1), -dmin*float32(m2)
			for l := range 32 {
				lo, hi := qs[32*c+l]&0xf, qs[32*c+l]>>4
				if qh != nil {
					if qh[l]&(1<<(2*c)) != 0 {
						lo += 16
					}
					if qh[l]&(2<<(2*c)) != 0 {
						hi += 16
					}
				}
				q[64*c+l], q[64*c+32+l] = int8(lo), int8(hi)
			}
		}
	case rt.Q6_K:
		d := f16At(blk, 208)
		*bias = [8]float32{}
		for n := range 2 {
			ql, qh, sc := blk[64*n:64*n+64], blk[128+32*n:128+32*n+32], blk[192+8*n:192+8*n+8]
			for l := range 32 {
				o := 128 * n
				q[o+l] = int8(ql[l]&0xf|(qh[l]&3)<<4) - 32
				q[o+l+32] = int8(ql[l+32]&0xf|((qh[l]>>2)&3)<<4) - 32
				q[o+l+64] = int8(ql[l]>>4|((qh[l]>>4)&3)<<4) - 32
				q[o+l+96] = int8(ql[l+32]>>4|((qh[l]>>6)&3)<<4) - 32
			}
			for i := range 8 {
				scale[8*n+i] = d * float32(int8(sc[i]))
			}
		}
	}
}

func f16At(b []byte, i int) float32 { return rt.F16ToF32(uint16(b[i]) | uint16(b[i+1])<<8) }

// kPrepGo prepares a k-quant row of whole 256-element blocks.
func kPrepGo(dt rt.DType, w []byte, dst []byte) {
	_, bb := dt.Block()
	var q [256]int8
	var scale [16]float32
	var bias [8]float32
	for b := range len(w) / bb {
		kDecode(dt, w[b*bb:(b+1)*bb], &q, &scale, &bias)
		for p := range 4 { // four pairs of 32 per block
			out := dst[(4*b+p)*kPairBytes:][:kPairBytes]
			negC, ws, bs := asI32(out[64:128]), asF32(out[128:192]), asF32(out[192:256])
			for l := range 16 {
				e := 64*p + 4*l // first element of the lane
				var sum int32
				for i := range 4 {
					out[4*l+i] = byte(q[e+i])
					sum += int32(q[e+i])
				}
				negC[l], ws[l], bs[l] = -128*sum, scale[e/16], bias[e/32]/8
			}
		}
	}
}

// blockSums computes xm = s·(Σ of each block's integers) for a quantized
// activation row (the offset of the bytes, 128 per element, is removed).
func blockSums(np int, q []byte, s, xm []float32) {
	for b := range 2 * np {
		var sum int32
		for _, v := range q[b*32 : b*32+32] {
			sum += int32(v) - 128
		}
		f := float32(sum)
		for l := range 8 {
			xm[b*8+l] = s[b*8+l] * f
		}
	}
}

// q8Rows2BGo is the Go form of q8Rows2B.
func q8Rows2BGo(np int, prep0, prep1 []byte, q []byte, s, xm []float32, rows, qStride, sStride int, out []float32, outStride int) {
	for r := range rows {
		qr, sr, mr := q[r*qStride:], s[r*sStride:], xm[r*sStride:]
		for c, prep := range [][]byte{prep0, prep1} {
			var acc float64
			for p := range np {
				pp := prep[p*kPairBytes:]
				negC, ws, bs := asI32(pp[64:128]), asF32(pp[128:192]), asF32(pp[192:256])
				for l := range 16 {
					sum := negC[l]
					for i := range 4 {
						sum += int32(qr[p*64+4*l+i]) * int32(int8(pp[4*l+i]))
					}
					acc += float64(float32(sum)*(ws[l]*sr[p*16+l])) + float64(bs[l]*mr[p*16+l])
				}
			}
			out[r*outStride+c] = float32(acc)
		}
	}
}

// kAct is one quantized activation row in the form the k-quant decode
// kernels read: the integers signed (q), their lane scales (s), the block
// sums for the mins of Q4_K (xm, as blockSums) and, per lane, -32·Σ of
// its four integers for the offset of Q6_K's 6-bit values (a32).
type kAct struct {
	q     []byte
	s, xm []float32
	a32   []int32
}

// newKAct sets a from a row quantized by quantizeQ8X (offset bytes xq,
// scales xs, block sums xm); buf holds its q and a32.
func newKAct(a *kAct, xq []byte, xs, xm []float32, buf []byte) {
	n := len(xq)
	*a = kAct{q: buf[:n], s: xs, xm: xm, a32: asI32(buf[n : 2*n])}
	for l := range n / 4 {
		var sum int32
		for i := range 4 {
			v := xq[4*l+i] ^ 0x80
			a.q[4*l+i] = v
			sum += int32(int8(v))
		}
		a.a32[l] = -32 * sum
	}
}

// kDecodeTask streams k-quant weight rows [lo, hi) against one activation row.
type kDecodeTask struct {
	dt  rt.DType
	w   []byte
	rb  int
	a   kAct
	out []float32
}

var kDecodeTasks taskPool[kDecodeTask]

func (t *kDecodeTask) run(lo, hi int) {
	kDecodeRows(t.dt, t.w[lo*t.rb:hi*t.rb], t.rb, &t.a, t.out[lo:hi])
}

// matMulK is matMul for k-quant weights, on the prepared-pair kernels.
func matMulK(dst, x, w *rt.Tensor) {
	m, k, n := x.Dim(0), x.Dim(1), w.Dim(0)
	np := k / 64
	xq := getBytes(m * np * 64)
	xs := getF32(m * np * 16)
	xm := getF32(m * np * 16)
	quantizeRows(x, np, xq.b, xs.f, xm.f)
	dt := w.DType()
	rb := dt.ByteLen(k)
	wb := w.Bytes()
	d := dst.F32()
	ds := dst.Strides()[0]
	if m == 1 && kDecodeOK(dt) {
		buf := getBytes(2 * np * 64)
		t := kDecodeTasks.get()
		*t = kDecodeTask{dt: dt, w: wb, rb: rb, out: d}
		newKAct(&t.a, xq.b, xs.f, xm.f, buf.b)
		parallelTask(n, 64, t)
		kDecodeTasks.put(t)
		putBytes(buf)
		putBytes(xq)
		putF32(xs)
		putF32(xm)
		return
	}
	t := kMatTasks.get()
	*t = kMatTask{dt: dt, w: wb, rb: rb, n: n, m: m, np: np, rowBlock: max(4, min(m, (512<<10)/(np*192))),
		q: xq.b, s: xs.f, xm: xm.f, out: d, ds: ds}
	parallelTask((n+1)/2, max(1, 32*1024/max(1, m*k)), t)
	kMatTasks.put(t)
	putBytes(xq)
	putF32(xs)
	putF32(xm)
}

// kMatTask is q8MatTask for k-quant weights.
type kMatTask struct {
	dt                     rt.DType
	w                      []byte
	rb, n, m, np, rowBlock int
	q                      []byte
	s, xm, out             []float32
	ds                     int
}

var kMatTasks taskPool[kMatTask]

func (t *kMatTask) run(lo, hi int) {
	np, rb, ds, d := t.np, t.rb, t.ds, t.out
	prep := getBytes(2 * np * kPairBytes)
	p0, p1 := prep.b[:np*kPairBytes], prep.b[np*kPairBytes:]
	for r0 := 0; r0 < t.m; r0 += t.rowBlock {
		rows := min(t.rowBlock, t.m-r0)
		xq, xs, xm := t.q[r0*np*64:], t.s[r0*np*16:], t.xm[r0*np*16:]
		for jp := lo; jp < hi; jp++ {
			j := 2 * jp
			kPrep(t.dt, t.w[j*rb:(j+1)*rb], p0)
			if j+1 < t.n {
				kPrep(t.dt, t.w[(j+1)*rb:(j+2)*rb], p1)
				q8Rows2B(np, p0, p1, xq, xs, xm, rows, np*64, np*16, d[r0*ds+j:], ds)
				continue
			}
			// The last of an odd number of rows: run it twice, keep one.
			tmp := getF32(2 * rows)
			q8Rows2B(np, p0, p0, xq, xs, xm, rows, np*64, np*16, tmp.f, 2)
			for r := range rows {
				d[(r0+r)*ds+j] = tmp.f[2*r]
			}
			putF32(tmp)
		}
	}
	putBytes(prep)
}
