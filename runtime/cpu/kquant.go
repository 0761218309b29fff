package cpu

import (
	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/quant"
)

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

// kAct is one quantized activation row in the form the k-quant decode
// kernels read: the row as quantizeRowsK wrote it (act: its sub-block sums
// and scale), its integers signed (q) and, per lane of 4, -32·Σ of them
// for the offset of Q6_K's 6-bit values (a32).
type kAct struct {
	act, q []byte
	a32    []int32
}

// kActOf sets a, for the decode kernels, from a row quantized by
// quantizeRowsK (nsb super-blocks at act); buf (2·256·nsb bytes) holds
// q and a32.
func kActOf(a *kAct, act []byte, nsb int, buf []byte) {
	n := nsb * 256
	*a = kAct{act: act[:nsb*kActBytes], q: buf[:n], a32: asI32(buf[n : 2*n])}
	for sb := range nsb {
		src := act[sb*kActBytes:]
		for l := range 64 {
			var sum int32
			for i := range 4 {
				v := src[4*l+i] ^ 0x80
				a.q[sb*256+4*l+i] = v
				sum += int32(int8(v))
			}
			a.a32[sb*64+l] = -32 * sum
		}
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

// matMulK is matMul for k-quant weights: activations quantized per
// super-block; one row streams the weights through the decode kernels,
// several run on prepared super-blocks (kRowsI).
func matMulK(dst, x, w *rt.Tensor) {
	m, k, n := x.Dim(0), x.Dim(1), w.Dim(0)
	nsb := k / 256
	if kAVX2OK(w.DType()) {
		matMulKAVX2(dst, x, w)
		return
	}
	act := getBytes(m * nsb * kActBytes)
	quantizeRowsK(x, nsb, act.b)
	dt := w.DType()
	rb := dt.ByteLen(k)
	wb := w.Bytes()
	d := dst.F32()
	ds := dst.Strides()[0]
	if m == 1 && kDecodeOK(dt) {
		buf := getBytes(2 * k)
		t := kDecodeTasks.get()
		*t = kDecodeTask{dt: dt, w: wb, rb: rb, out: d}
		kActOf(&t.a, act.b, nsb, buf.b)
		parallelTask(n, 64, t)
		kDecodeTasks.put(t)
		putBytes(buf)
		putBytes(act)
		return
	}
	t := kMatTasks.get()
	*t = kMatTask{dt: dt, w: wb, rb: rb, n: n, m: m, nsb: nsb, rowBlock: max(4, min(m, (512<<10)/(nsb*kActBytes))),
		act: act.b, out: d, ds: ds}
	parallelTask((n+1)/2, max(1, 32*1024/max(1, m*k)), t) // weight rows in pairs
	kMatTasks.put(t)
	putBytes(act)
}

// quantizeRowsK quantizes each row of x into nsb super-blocks of act.
func quantizeRowsK(x *rt.Tensor, nsb int, act []byte) {
	t := quantKTasks.get()
	*t = quantKTask{x: x, nsb: nsb, act: act}
	parallelTask(x.Dim(0), max(1, 4096/x.Dim(1)), t)
	quantKTasks.put(t)
}

type quantKTask struct {
	x   *rt.Tensor
	nsb int
	act []byte
}

var quantKTasks taskPool[quantKTask]

func (t *quantKTask) run(lo, hi int) {
	for i := lo; i < hi; i++ {
		a := t.act[i*t.nsb*kActBytes : (i+1)*t.nsb*kActBytes]
		quantizeQ8K(row(t.x, i), a)
		kSums(a, t.nsb)
	}
}

// kMatTask runs the weight-row pairs [lo, hi) of matMulK against every
// activation row, rowBlock rows (about 512 KB, kept in L2) per pass.
type kMatTask struct {
	dt                      rt.DType
	w                       []byte
	rb, n, m, nsb, rowBlock int
	act                     []byte
	out                     []float32
	ds                      int
}

var kMatTasks taskPool[kMatTask]

func (t *kMatTask) run(lo, hi int) {
	nsb, rb, ds, d := t.nsb, t.rb, t.ds, t.out
	as := nsb * kActBytes
	prep := getBytes(2 * nsb * kSBBytes)
	p0, p1 := prep.b[:nsb*kSBBytes], prep.b[nsb*kSBBytes:]
	for r0 := 0; r0 < t.m; r0 += t.rowBlock {
		rows := min(t.rowBlock, t.m-r0)
		act := t.act[r0*as:]
		for jp := lo; jp < hi; jp++ {
			j := 2 * jp
			kPrepI(t.dt, t.w[j*rb:(j+1)*rb], p0)
			if j+1 < t.n {
				kPrepI(t.dt, t.w[(j+1)*rb:(j+2)*rb], p1)
				kRowsI(nsb, p0, p1, act, rows, as, d[r0*ds+j:], ds)
				continue
			}
			// The last of an odd number of rows: run it twice, keep one.
			tmp := getF32(2 * rows)
			kRowsI(nsb, p0, p0, act, rows, as, tmp.f, 2)
			for r := range rows {
				d[(r0+r)*ds+j] = tmp.f[2*r]
			}
			putF32(tmp)
		}
	}
	putBytes(prep)
}

// matMulKAVX2 is matMulK on CPUs without VNNI: the activation rows are
// quantized signed with their sums of 16 (quantizeQ8KSigned), and each
// weight row is decoded in registers against four activation rows at a time
// (q4kRows4AVX2), weight rows in blocks that stay in L1 against activation
// rows from L2; the rows past a multiple of four (a decode step's one) one
// at a time, with the same bits.
func matMulKAVX2(dst, x, w *rt.Tensor) {
	m, k, n := x.Dim(0), x.Dim(1), w.Dim(0)
	nsb := k / 256
	ab := getBytes(m * nsb * kActBytes)
	defer putBytes(ab)
	act := ab.b
	bs := getBytes(2 * m * nsb * 16)
	bsums := asI16(bs.b)
	st := kQuantSignedTasks.get()
	*st = kQuantSignedTask{x: x, act: act, nsb: nsb, bs: bsums}
	parallelTask(m, max(1, 4096/k), st)
	kQuantSignedTasks.put(st)
	dt := w.DType()
	t := kRows4Tasks.get()
	*t = kRows4Task{dt: dt, w: w.Bytes(), rb: dt.ByteLen(k), m: m, nsb: nsb,
		rowBlock: max(4, (256<<10)/(nsb*kActBytes)/4*4), act: act, bs: bsums, out: dst.F32(), ds: dst.Strides()[0]}
	parallelTask(n, kRows4Block, t)
	kRows4Tasks.put(t)
	putBytes(bs)
}

// kRows4Block is the weight rows that kRows4Task runs against each group
// of activation rows: 32 rows of 1,024 Q4_K weights are 18 KB, in L1.
const kRows4Block = 32

// kQuantSignedTask quantizes activation rows [lo, hi) for the AVX2 kernels.
type kQuantSignedTask struct {
	x   *rt.Tensor
	act []byte
	nsb int
	bs  []int16
}

var kQuantSignedTasks taskPool[kQuantSignedTask]

func (t *kQuantSignedTask) run(lo, hi int) {
	for i := lo; i < hi; i++ {
		quantizeQ8KSigned(row(t.x, i), t.act[i*t.nsb*kActBytes:(i+1)*t.nsb*kActBytes], t.bs[i*t.nsb*16:(i+1)*t.nsb*16])
	}
}

// quantizeQ8KSignedGo is the Go form of quantizeQ8KSigned.
func quantizeQ8KSignedGo(x []float32, act []byte, bs []int16) {
	nsb := len(x) / 256
	quantizeQ8KGo(x, act)
	kSums(act, nsb)
	kSigned(act[:nsb*kActBytes], bs)
}

// kSigned turns quantized super-blocks (as quantizeRowsK writes them) into
// the form kRows4AVX2 reads (quantizeQ8KSigned's Go form): the integers signed (not +128), and the sum of
// each 16 of them in bs.
func kSigned(act []byte, bs []int16) {
	for sb := range len(act) / kActBytes {
		q := act[sb*kActBytes : sb*kActBytes+256]
		for j := range 16 {
			var sum int32
			for i := 16 * j; i < 16*j+16; i++ {
				v := int8(q[i] ^ 0x80)
				q[i] = byte(v)
				sum += int32(v)
			}
			bs[sb*16+j] = int16(sum)
		}
	}
}

// kRows4Task runs weight rows [lo, hi) of matMulKAVX2 against every
// activation row, rowBlock rows (about 256 KB) per pass.
type kRows4Task struct {
	dt                   rt.DType
	w                    []byte
	rb, m, nsb, rowBlock int
	act                  []byte
	bs                   []int16
	out                  []float32
	ds                   int
}

var kRows4Tasks taskPool[kRows4Task]

func (t *kRows4Task) run(lo, hi int) {
	as, bn := t.nsb*kActBytes, t.nsb*16
	for r0 := 0; r0 < t.m; r0 += t.rowBlock {
		r1 := min(t.m, r0+t.rowBlock)
		for j0 := lo; j0 < hi; j0 += kRows4Block {
			j1 := min(hi, j0+kRows4Block)
			w := t.w[j0*t.rb : j1*t.rb]
			r := r0
			for ; r+4 <= r1; r += 4 {
				kRows4AVX2(t.dt, w, t.rb, t.act[r*as:], as, t.bs[r*bn:], bn, t.out[r*t.ds+j0:], t.ds)
			}
			for ; r < r1; r++ {
				kRows1AVX2(t.dt, w, t.rb, t.act[r*as:], t.bs[r*bn:], t.out[r*t.ds+j0:r*t.ds+j1])
			}
		}
	}
}
