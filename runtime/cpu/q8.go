package cpu

import (
	"math"

	rt "github.com/govllm/govllm/runtime"
)

// Q8_0 weights times activations quantized to 8 bits, in integers.
//
// Activations are quantized per 32-element block (as llama.cpp quantizes
// them for Q8_0 weights) into unsigned bytes q+128 with a float scale, so
// that the VNNI instruction VPDPBUSD (unsigned × signed bytes) multiplies
// them with the signed weights directly; the +128 is taken back per lane
// with -128·Σw, computed once per weight row. Blocks go in pairs, one
// 64-byte vector each:
//
//	activation row: q   [pairs × 64 bytes]   (block 2p in bytes 0..31)
//	                s   [pairs × 16 floats]  (block 2p's scale in lanes 0..7,
//	                                          2p+1's in 8..15)
//	prepared weight row, per pair (q8Prep, 192 bytes):
//	                w   64 signed bytes, negC 16 int32 (-128·Σ of each lane's
//	                4 weights), ws 16 floats (the blocks' scales, as s)
//
// A row with an odd number of blocks gets a zero block at the end.
const (
	q8PairBytes = 192
	q8Block     = 32
)

// q8Family reports whether the AVX2 Q8_0 kernels take weights of dt
// (blocks of 32 with a scale each: Q8_0, Q4_0, IQ4_NL, and IQ4_XS's
// sub-blocks).
func q8Family(dt rt.DType) bool {
	return dt == rt.Q8_0 || dt == rt.Q4_0 || dt == rt.IQ4_NL || dt == rt.IQ4_XS
}

// activationsQuantized reports whether matmul with weights of dt
// quantizes the activations to 8 bits.
func activationsQuantized(dt rt.DType) bool {
	return dt == rt.Q8_0 || kQuantSupported(dt) || q8Family(dt) && q8AVX2OK()
}

// q8Pairs is the number of block pairs of a row of k elements.
func q8Pairs(k int) int { return (k/q8Block + 1) / 2 }

// quantizeQ8XGo quantizes x (len = blocks·32) into q, s as laid out above.
func quantizeQ8XGo(x []float32, q []byte, s []float32) {
	nb := len(x) / q8Block
	for b := range nb {
		blk := x[b*q8Block : (b+1)*q8Block]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		id := float32(0)
		if amax > 0 {
			id = 127 / amax
		}
		qb := q[b*q8Block : (b+1)*q8Block]
		for i, v := range blk {
			qb[i] = byte(int8(min(127, max(-127, roundEven(v*id))))) ^ 0x80
		}
		sb := s[(b/2)*16+(b%2)*8:][:8]
		for i := range sb {
			sb[i] = d
		}
	}
	padOddBlock(nb, q, s)
}

// padOddBlock fills the missing second block of a row with an odd number
// nb of blocks: integers 0 (stored 0x80) and scale 0.
func padOddBlock(nb int, q []byte, s []float32) {
	if nb%2 == 0 {
		return
	}
	pad := q[nb*q8Block : (nb+1)*q8Block]
	for i := range pad {
		pad[i] = 0x80
	}
	clear(s[(nb/2)*16+8:][:8])
}

// roundEven rounds to the nearest integer, ties to even, as VCVTPS2DQ does.
func roundEven(v float32) int32 { return int32(math.RoundToEven(float64(v))) }

// q8PrepGo prepares a Q8_0 weight row (blocks of 34 bytes) as laid out above.
func q8PrepGo(w []byte, dst []byte) {
	nb := len(w) / 34
	for p := range q8Pairs(nb * q8Block) {
		out := dst[p*q8PairBytes : (p+1)*q8PairBytes]
		negC, ws := asI32(out[64:128]), asF32(out[128:192])
		for h := range 2 {
			b := 2*p + h
			if b >= nb {
				clear(out[h*32 : h*32+32])
				for l := range 8 {
					negC[h*8+l], ws[h*8+l] = 0, 0
				}
				continue
			}
			blk := w[b*34 : (b+1)*34]
			d := rt.F16ToF32(uint16(blk[0]) | uint16(blk[1])<<8)
			copy(out[h*32:h*32+32], blk[2:34])
			for l := range 8 {
				var sum int32
				for _, v := range blk[2+4*l : 6+4*l] {
					sum += int32(int8(v))
				}
				negC[h*8+l], ws[h*8+l] = -128*sum, d
			}
		}
	}
}

// q8RowsGo computes out[r·outStride] = prepared weight row · activation row
// r, for rows activation rows of q8Pairs layout np pairs.
func q8RowsGo(np int, prep []byte, q []byte, s []float32, rows, qStride, sStride int, out []float32, outStride int) {
	for r := range rows {
		qr, sr := q[r*qStride:], s[r*sStride:]
		var acc float64
		for p := range np {
			pp := prep[p*q8PairBytes:]
			negC, ws := asI32(pp[64:128]), asF32(pp[128:192])
			for l := range 16 {
				sum := negC[l]
				for i := range 4 {
					sum += int32(qr[p*64+4*l+i]) * int32(int8(pp[4*l+i]))
				}
				acc += float64(float32(sum) * (ws[l] * sr[p*16+l]))
			}
		}
		out[r*outStride] = float32(acc)
	}
}

// quantizeRows quantizes each row of x (quantizeQ8X) into q and s at np
// pairs per row.
func quantizeRows(x *rt.Tensor, np int, q []byte, s []float32) {
	t := quantTasks.get()
	*t = quantTask{x: x, np: np, q: q, s: s}
	parallelTask(x.Dim(0), max(1, 4096/x.Dim(1)), t)
	quantTasks.put(t)
}

type quantTask struct {
	x      *rt.Tensor
	np     int
	q      []byte
	s      []float32
	signed bool // quantizeQ8XSigned's form, for the AVX2 kernels
}

var quantTasks taskPool[quantTask]

func (t *quantTask) run(lo, hi int) {
	np := t.np
	for i := lo; i < hi; i++ {
		if t.signed {
			quantizeQ8XSigned(row(t.x, i), t.q[i*np*64:(i+1)*np*64], t.s[i*np*16:(i+1)*np*16])
		} else {
			quantizeQ8X(row(t.x, i), t.q[i*np*64:(i+1)*np*64], t.s[i*np*16:(i+1)*np*16])
		}
	}
}

// q8DecodeMaxRows is the most activation rows (sequences of a decode
// step) that stream the weights instead of preparing them.
const q8DecodeMaxRows = 16

// q8DecodeTask streams Q8_0 weight rows [lo, hi) against m activation
// rows, four at a time: the chunk of weight rows stays in L2 between them.
type q8DecodeTask struct {
	w         []byte
	rb, np, m int
	q         []byte
	s, out    []float32
	ds        int
}

var q8DecodeTasks taskPool[q8DecodeTask]

func (t *q8DecodeTask) run(lo, hi int) {
	w, np := t.w[lo*t.rb:hi*t.rb], t.np
	r := 0
	for ; r+4 <= t.m; r += 4 {
		q8Decode4(w, t.rb, t.q[r*np*64:], t.s[r*np*16:], t.out[r*t.ds+lo:], t.ds)
	}
	for ; r < t.m; r++ {
		q8Decode(w, t.rb, t.q[r*np*64:(r+1)*np*64], t.s[r*np*16:(r+1)*np*16], t.out[r*t.ds+lo:r*t.ds+hi])
	}
}

// matMulQ8 is matMul for Q8_0 weights: x is quantized once, then each
// worker prepares its weight rows and runs them against blocks of
// activation rows that stay in cache.
func matMulQ8(dst, x, w *rt.Tensor) {
	m, k, n := x.Dim(0), x.Dim(1), w.Dim(0)
	np := q8Pairs(k)
	if q8AVX2OK() {
		matMulQ8AVX2(dst, x, w)
		return
	}
	xq := getBytes(m * np * 64)
	xs := getF32(m * np * 16)
	quantizeRows(x, np, xq.b, xs.f)
	rb := w.DType().ByteLen(k)
	wb := w.Bytes()
	d := dst.F32()
	ds := dst.Strides()[0]
	if m <= q8DecodeMaxRows && q8DecodeOK(rb) {
		// Decode: stream each weight row once against the few activation rows.
		t := q8DecodeTasks.get()
		*t = q8DecodeTask{w: wb, rb: rb, np: np, m: m, q: xq.b, s: xs.f, out: d, ds: ds}
		parallelTask(n, 64, t)
		q8DecodeTasks.put(t)
		putBytes(xq)
		putF32(xs)
		return
	}
	// Activation rows per pass: about 512 KB of them stay in L2 while each
	// weight row is prepared once per pass.
	t := q8MatTasks.get()
	*t = q8MatTask{w: wb, rb: rb, n: n, m: m, np: np, rowBlock: max(4, min(m, (512<<10)/(np*128))),
		q: xq.b, s: xs.f, out: d, ds: ds}
	// Weight rows go two at a time.
	parallelTask((n+1)/2, max(1, 32*1024/max(1, m*k)), t)
	q8MatTasks.put(t)
	putBytes(xq)
	putF32(xs)
}

// q8MatTask runs the weight-row pairs [lo, hi) of matMulQ8 against every
// activation row, rowBlock rows (about 512 KB, kept in L2) per pass.
type q8MatTask struct {
	w                      []byte
	rb, n, m, np, rowBlock int
	q                      []byte
	s, out                 []float32
	ds                     int
}

var q8MatTasks taskPool[q8MatTask]

func (t *q8MatTask) run(lo, hi int) {
	np, rb, ds := t.np, t.rb, t.ds
	prep := getBytes(2 * np * q8PairBytes)
	p0, p1 := prep.b[:np*q8PairBytes], prep.b[np*q8PairBytes:]
	for r0 := 0; r0 < t.m; r0 += t.rowBlock {
		rows := min(t.rowBlock, t.m-r0)
		xq, xs := t.q[r0*np*64:], t.s[r0*np*16:]
		for jp := lo; jp < hi; jp++ {
			j := 2 * jp
			q8Prep(t.w[j*rb:(j+1)*rb], p0)
			if j+1 == t.n {
				q8Rows(np, p0, xq, xs, rows, np*64, np*16, t.out[r0*ds+j:], ds)
				continue
			}
			q8Prep(t.w[(j+1)*rb:(j+2)*rb], p1)
			q8Rows2(np, p0, p1, xq, xs, rows, np*64, np*16, t.out[r0*ds+j:], ds)
		}
	}
	putBytes(prep)
}

// matMulQ8AVX2 is matMulQ8 on CPUs without VNNI (for the q8Family weights):
// the activation rows are quantized signed (quantizeQ8XSigned), and each
// weight block is multiplied in registers with four activation rows at a
// time (q8Rows4), weight rows in blocks that stay in L1 against activation
// rows from L2; the rows past a multiple of four (a decode step's one) one
// at a time, with the same bits.
func matMulQ8AVX2(dst, x, w *rt.Tensor) {
	m, k, n := x.Dim(0), x.Dim(1), w.Dim(0)
	np := q8Pairs(k)
	xq, xs := getBytes(m*np*64), getF32(m*np*16)
	defer putBytes(xq)
	defer putF32(xs)
	q, s := xq.b, xs.f
	qt := quantTasks.get()
	*qt = quantTask{x: x, np: np, q: q, s: s, signed: true}
	parallelTask(m, max(1, 4096/k), qt)
	quantTasks.put(qt)
	rb := w.DType().ByteLen(k)
	t := q8Rows4Tasks.get()
	*t = q8Rows4Task{dt: w.DType(), w: w.Bytes(), rb: rb, m: m, np: np, rowBlock: max(4, (256<<10)/(np*128)/4*4),
		wBlock: max(4, (16<<10)/rb), q: q, s: s, out: dst.F32(), ds: dst.Strides()[0]}
	parallelTask(n, t.wBlock, t)
	q8Rows4Tasks.put(t)
}

// quantizeQ8XSignedGo is the Go form of quantizeQ8XSigned.
func quantizeQ8XSignedGo(x []float32, q []byte, s []float32) {
	quantizeQ8XGo(x, q, s)
	q8Signed(q[:(len(x)/q8Block+1)/2*64])
}

// q8Signed takes the +128 off quantized activations.
func q8Signed(q []byte) {
	for i := range q {
		q[i] ^= 0x80
	}
}

// q8Rows4Task runs weight rows [lo, hi) of matMulQ8AVX2 against every
// activation row: rowBlock rows (about 256 KB) a pass, wBlock weight rows
// (about 16 KB) against each four of them.
type q8Rows4Task struct {
	dt                          rt.DType
	w                           []byte
	rb, m, np, rowBlock, wBlock int
	q                           []byte
	s, out                      []float32
	ds                          int
}

var q8Rows4Tasks taskPool[q8Rows4Task]

func (t *q8Rows4Task) run(lo, hi int) {
	qs, ss := t.np*64, t.np*16
	for r0 := 0; r0 < t.m; r0 += t.rowBlock {
		r1 := min(t.m, r0+t.rowBlock)
		for j0 := lo; j0 < hi; j0 += t.wBlock {
			j1 := min(hi, j0+t.wBlock)
			w := t.w[j0*t.rb : j1*t.rb]
			r := r0
			for ; r+4 <= r1; r += 4 {
				q8Rows4(t.dt, w, t.rb, t.q[r*qs:], qs, t.s[r*ss:], ss, t.out[r*t.ds+j0:], t.ds)
			}
			for ; r < r1; r++ {
				q8Rows1(t.dt, w, t.rb, t.q[r*qs:], t.s[r*ss:], t.out[r*t.ds+j0:r*t.ds+j1])
			}
		}
	}
}
