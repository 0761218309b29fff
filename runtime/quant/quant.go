// Package quant holds GGML's block quantization formats: how a row of
// blocks decodes to float32 (what kernels read) and how float32 values
// encode (what the converter and quantizer write). The encoders follow
// GGML's reference formulas where they are simple (Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1) and a direct min/scale rounding for the k-quants, whose blocks any
// GGML reader decodes alike.
package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	rt "github.com/govllm/govllm/runtime"
)

// DequantRow decodes whole blocks of src into dst (len dst = elements).
func DequantRow(dt rt.DType, src []byte, dst []float32) {
	e, b := dt.Block()
	for i := 0; i*b < len(src) && (i+1)*e <= len(dst); i++ {
		blk, out := src[i*b:(i+1)*b], dst[i*e:(i+1)*e]
		switch dt {
		case rt.Q8_0:
			d := f16(blk)
			for j, q := range blk[2:34] {
				out[j] = d * float32(int8(q))
			}
		case rt.Q4_0, rt.Q4_1:
			d, m, qs := f16(blk), float32(-8), blk[2:18]
			if dt == rt.Q4_1 {
				d, m, qs = f16(blk), 0, blk[4:20]
			}
			for j, q := range qs {
				out[j], out[j+16] = (float32(q&0xf)+m)*d, (float32(q>>4)+m)*d
			}
			if dt == rt.Q4_1 {
				mn := f16(blk[2:])
				for j := range out {
					out[j] += mn
				}
			}
		case rt.Q5_0, rt.Q5_1:
			d, off, hq := f16(blk), 2, 0
			if dt == rt.Q5_1 {
				off = 4
			}
			qh := binary.LittleEndian.Uint32(blk[off:])
			qs := blk[off+4 : off+20]
			if dt == rt.Q5_0 {
				hq = 16
			}
			for j, q := range qs {
				h0 := byte((qh>>j)<<4) & 0x10
				h1 := byte(qh>>(j+12)) & 0x10
				out[j] = float32(int(q&0xf|h0)-hq) * d
				out[j+16] = float32(int(q>>4|h1)-hq) * d
			}
			if dt == rt.Q5_1 {
				mn := f16(blk[2:])
				for j := range out {
					out[j] += mn
				}
			}
		case rt.Q4_K, rt.Q5_K:
			dequantQ45K(dt, blk, out)
		case rt.Q6_K:
			dequantQ6K(blk, out)
		case rt.Q2_K:
			dequantQ2K(blk, out)
		case rt.Q3_K:
			dequantQ3K(blk, out)
		case rt.IQ4_NL:
			d := f16(blk)
			for j, q := range blk[2:18] {
				out[j], out[j+16] = d*float32(iq4nl[q&0xf]), d*float32(iq4nl[q>>4])
			}
		case rt.IQ4_XS:
			dequantIQ4XS(blk, out)
		}
	}
}

// iq4nl is the non-linear grid of IQ4_NL and IQ4_XS.
var iq4nl = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// dequantQ2K: scales[16] (scale | min<<4), qs[64] of 2-bit quants, d, dmin.
func dequantQ2K(blk []byte, out []float32) {
	d, dmin := f16(blk[80:]), f16(blk[82:])
	for e := range 256 {
		n, j, r := e/128, (e%128)/32, e%32
		sc := blk[e/16]
		q := (blk[16+32*n+r] >> (2 * j)) & 3
		out[e] = d*float32(sc&0xf)*float32(q) - dmin*float32(sc>>4)
	}
}

// q3Scales unpacks Q3_K's sixteen 6-bit scales from 12 bytes.
func q3Scales(s []byte) [16]int {
	var out [16]int
	for b := range 4 {
		out[b] = int(s[b]&0xf | (s[8+b]&3)<<4)
		out[4+b] = int(s[4+b]&0xf | ((s[8+b]>>2)&3)<<4)
		out[8+b] = int(s[b]>>4 | ((s[8+b]>>4)&3)<<4)
		out[12+b] = int(s[4+b]>>4 | ((s[8+b]>>6)&3)<<4)
	}
	return out
}

// dequantQ3K: hmask[32], qs[64], scales[12], d; 3-bit quants L−4 with the
// high bit in hmask.
func dequantQ3K(blk []byte, out []float32) {
	hm, qs, d := blk[:32], blk[32:96], f16(blk[108:])
	sc := q3Scales(blk[96:108])
	for e := range 256 {
		n, j, r := e/128, (e%128)/32, e%32
		low := int(qs[32*n+r]>>(2*j)) & 3
		if hm[r]&(1<<(4*n+j)) == 0 {
			low -= 4
		}
		out[e] = d * float32(sc[e/16]-32) * float32(low)
	}
}

// dequantIQ4XS: d, scales_h (uint16), scales_l[4], qs[128]; 8 sub-blocks
// of 32 on the iq4nl grid with 6-bit scales.
func dequantIQ4XS(blk []byte, out []float32) {
	d := f16(blk)
	sh := binary.LittleEndian.Uint16(blk[2:])
	sl, qs := blk[4:8], blk[8:136]
	for ib := range 8 {
		ls := int((sl[ib/2]>>(4*(ib%2)))&0xf) | int((sh>>(2*ib))&3)<<4
		dl := d * float32(ls-32)
		for j, q := range qs[16*ib : 16*ib+16] {
			out[32*ib+j], out[32*ib+j+16] = dl*float32(iq4nl[q&0xf]), dl*float32(iq4nl[q>>4])
		}
	}
}

func f16(b []byte) float32 { return rt.F16ToF32(binary.LittleEndian.Uint16(b)) }

func putF16(b []byte, v float32) { binary.LittleEndian.PutUint16(b, rt.F32ToF16(v)) }

// ScaleMin unpacks the 6-bit scale and min of sub-block j of a Q4_K/Q5_K
// block's 12 scale bytes (GGML's get_scale_min_k4).
func ScaleMin(j int, q []byte) (sc, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// dequantQ45K: d, dmin (f16), 12 bytes of scales, [qh 32 bytes for Q5_K],
// 128 bytes of low nibbles; 8 sub-blocks of 32.
func dequantQ45K(dt rt.DType, blk []byte, out []float32) {
	d, dmin := f16(blk), f16(blk[2:])
	scales := blk[4:16]
	qs, qh := blk[16:144], []byte(nil)
	if dt == rt.Q5_K {
		qh, qs = blk[16:48], blk[48:176]
	}
	for c := range 4 { // chunks of 64: two sub-blocks
		s1, m1 := ScaleMin(2*c, scales)
		s2, m2 := ScaleMin(2*c+1, scales)
		d1, d2 := d*float32(s1), d*float32(s2)
		n1, n2 := dmin*float32(m1), dmin*float32(m2)
		q := qs[32*c : 32*c+32]
		for l := range 32 {
			lo, hi := float32(q[l]&0xf), float32(q[l]>>4)
			if qh != nil {
				if qh[l]&(1<<(2*c)) != 0 {
					lo += 16
				}
				if qh[l]&(2<<(2*c)) != 0 {
					hi += 16
				}
			}
			out[64*c+l] = d1*lo - n1
			out[64*c+32+l] = d2*hi - n2
		}
	}
}

// dequantQ6K: ql[128], qh[64], int8 scales[16], d (f16); 16 sub-blocks of 16.
func dequantQ6K(blk []byte, out []float32) {
	d := f16(blk[208:])
	for n := range 2 {
		ql, qh, sc := blk[64*n:64*n+64], blk[128+32*n:128+32*n+32], blk[192+8*n:192+8*n+8]
		y := out[128*n : 128*n+128]
		for l := range 32 {
			is := l / 16
			q1 := int(ql[l]&0xf|(qh[l]&3)<<4) - 32
			q2 := int(ql[l+32]&0xf|((qh[l]>>2)&3)<<4) - 32
			q3 := int(ql[l]>>4|((qh[l]>>4)&3)<<4) - 32
			q4 := int(ql[l+32]>>4|((qh[l]>>6)&3)<<4) - 32
			y[l] = d * float32(int8(sc[is])) * float32(q1)
			y[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
			y[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
			y[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
		}
	}
}

// Tensor encodes x as a contiguous tensor of dtype dt and the given shape:
// f32 copied, bf16 and f16 rounded to nearest, block types quantized.
func Tensor(dt rt.DType, x []float32, shape ...int) (*rt.Tensor, error) {
	switch dt {
	case rt.F32:
		t := rt.New(rt.F32, shape...)
		if t.Len() != len(x) {
			return nil, fmt.Errorf("quant: %d values for shape %v", len(x), shape)
		}
		copy(t.F32(), x)
		return t, nil
	case rt.BF16, rt.F16:
		t := rt.New(dt, shape...)
		if t.Len() != len(x) {
			return nil, fmt.Errorf("quant: %d values for shape %v", len(x), shape)
		}
		conv := rt.F32ToBF16
		if dt == rt.F16 {
			conv = rt.F32ToF16
		}
		for i, v := range x {
			t.U16()[i] = conv(v)
		}
		return t, nil
	}
	raw, err := Quantize(dt, x)
	if err != nil {
		return nil, err
	}
	return rt.FromBytes(dt, raw, shape...)
}

// Quantize encodes x (whole blocks) as dt.
func Quantize(dt rt.DType, x []float32) ([]byte, error) {
	e, b := dt.Block()
	if e <= 1 || len(x)%e != 0 {
		return nil, fmt.Errorf("quant: %d values are not whole %v blocks", len(x), dt)
	}
	out := make([]byte, len(x)/e*b)
	for i := 0; i*e < len(x); i++ {
		blk, o := x[i*e:(i+1)*e], out[i*b:(i+1)*b]
		switch dt {
		case rt.Q8_0:
			amax := maxAbs(blk)
			d := amax / 127
			putF16(o, d)
			id := inv(d)
			for j, v := range blk {
				o[2+j] = byte(int8(math.Round(float64(v * id))))
			}
		case rt.Q4_0, rt.Q5_0:
			nq, half := 8, 16
			if dt == rt.Q5_0 {
				nq, half = 16, 32
			}
			mx := signedMax(blk)
			d := mx / float32(-nq)
			putF16(o, d)
			id := inv(d)
			q := make([]int, 32)
			for j, v := range blk {
				q[j] = min(half-1, int(v*id+float32(nq)+0.5))
			}
			packLow(dt, o, q, 2)
		case rt.Q4_1, rt.Q5_1:
			levels := 15
			if dt == rt.Q5_1 {
				levels = 31
			}
			lo, hi := blk[0], blk[0]
			for _, v := range blk {
				lo, hi = min(lo, v), max(hi, v)
			}
			d := (hi - lo) / float32(levels)
			putF16(o, d)
			putF16(o[2:], lo)
			id := inv(d)
			q := make([]int, 32)
			for j, v := range blk {
				q[j] = min(levels, int((v-lo)*id+0.5))
			}
			packLow(dt, o, q, 4)
		case rt.Q4_K, rt.Q5_K:
			quantQ45K(dt, blk, o)
		case rt.Q6_K:
			quantQ6K(blk, o)
		case rt.Q2_K:
			quantQ2K(blk, o)
		case rt.Q3_K:
			quantQ3K(blk, o)
		case rt.IQ4_NL:
			mx := signedMax(blk)
			d := mx / float32(iq4nl[0])
			putF16(o, d)
			d = f16(o)
			for j := range 16 {
				o[2+j] = nearestIQ4(blk[j], d) | nearestIQ4(blk[j+16], d)<<4
			}
		case rt.IQ4_XS:
			quantIQ4XS(blk, o)
		default:
			return nil, fmt.Errorf("quant: no encoder for %v", dt)
		}
	}
	return out, nil
}

func maxAbs(x []float32) float32 {
	var m float32
	for _, v := range x {
		m = max(m, float32(math.Abs(float64(v))))
	}
	return m
}

// signedMax is the value of largest magnitude, with its sign.
func signedMax(x []float32) float32 {
	var m float32
	for _, v := range x {
		if math.Abs(float64(v)) > math.Abs(float64(m)) {
			m = v
		}
	}
	return m
}

func inv(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// packLow writes 32 quants: low nibbles in 16 bytes (element j and j+16),
// and for 5-bit types the fifth bits in a uint32 before them.
func packLow(dt rt.DType, o []byte, q []int, off int) {
	qs := o[off:]
	if dt == rt.Q5_0 || dt == rt.Q5_1 {
		var qh uint32
		for j := range 16 {
			qh |= uint32((q[j]>>4)&1) << j
			qh |= uint32((q[j+16]>>4)&1) << (j + 16)
		}
		binary.LittleEndian.PutUint32(o[off:], qh)
		qs = o[off+4:]
	}
	for j := range 16 {
		qs[j] = byte(q[j]&0xf) | byte(q[j+16]&0xf)<<4
	}
}

// quantQ45K: per sub-block of 32 a scale and a min (x ≈ sc·q − m), both
// stored as 6-bit multiples of the block's d and dmin.
func quantQ45K(dt rt.DType, x []float32, o []byte) {
	levels := float32(15)
	if dt == rt.Q5_K {
		levels = 31
	}
	var sc, mn [8]float32
	var maxSc, maxMn float32
	for j := range 8 {
		sub := x[32*j : 32*j+32]
		lo, hi := float32(0), sub[0]
		for _, v := range sub {
			lo, hi = min(lo, v), max(hi, v)
		}
		sc[j], mn[j] = (hi-lo)/levels, -lo
		maxSc, maxMn = max(maxSc, sc[j]), max(maxMn, mn[j])
	}
	d, dmin := maxSc/63, maxMn/63
	putF16(o, d)
	putF16(o[2:], dmin)
	d, dmin = f16(o), f16(o[2:]) // quantize against the stored values
	var ls, lm [8]byte
	for j := range 8 {
		ls[j] = byte(min(63, int(math.Round(float64(sc[j]*inv(d))))))
		lm[j] = byte(min(63, int(math.Round(float64(mn[j]*inv(dmin))))))
	}
	scales := o[4:16]
	for j := range 4 {
		scales[j] = ls[j]&63 | (ls[j+4]>>4)<<6
		scales[j+4] = lm[j]&63 | (lm[j+4]>>4)<<6
		scales[j+8] = ls[j+4]&0xf | (lm[j+4]&0xf)<<4
	}
	qs, qh := o[16:144], []byte(nil)
	if dt == rt.Q5_K {
		qh, qs = o[16:48], o[48:176]
		clear(qh)
	}
	for c := range 4 {
		for half := range 2 {
			j := 2*c + half
			step := d * float32(ls[j])
			for l := range 32 {
				q := 0
				if step > 0 {
					q = int(math.Round(float64((x[32*j+l] + dmin*float32(lm[j])) / step)))
				}
				q = max(0, min(int(levels), q))
				if half == 0 {
					qs[32*c+l] = byte(q & 0xf)
				} else {
					qs[32*c+l] |= byte(q&0xf) << 4
				}
				if qh != nil && q >= 16 {
					qh[l] |= byte(1+half) << (2 * c)
				}
			}
		}
	}
}

// quantQ6K: per sub-block of 16 an int8 scale (of the block's d), 6-bit
// quants centred on 32.
func quantQ6K(x []float32, o []byte) {
	var sc [16]float32
	var maxScale float32
	for j := range 16 {
		sc[j] = signedMax(x[16*j:16*j+16]) / -32
		if math.Abs(float64(sc[j])) > math.Abs(float64(maxScale)) {
			maxScale = sc[j]
		}
	}
	iscale := float32(0)
	if maxScale != 0 {
		iscale = -128 / maxScale
	}
	putF16(o[208:], inv(iscale))
	d := f16(o[208:])
	var scales [16]int8
	for j := range 16 {
		scales[j] = int8(max(-128, min(127, int(math.Round(float64(iscale*sc[j]))))))
	}
	clear(o[:208])
	for n := range 2 {
		ql, qh, s := o[64*n:64*n+64], o[128+32*n:128+32*n+32], o[192+8*n:192+8*n+8]
		for k := range 8 {
			s[k] = byte(scales[8*n+k])
		}
		q := func(e int) int { // element e of this half
			step := d * float32(scales[8*n+e/16])
			if step == 0 {
				return 32
			}
			return max(0, min(63, int(math.Round(float64(x[128*n+e]/step)))+32))
		}
		for l := range 32 {
			q1, q2, q3, q4 := q(l), q(l+32), q(l+64), q(l+96)
			ql[l] = byte(q1&0xf) | byte(q3&0xf)<<4
			ql[l+32] = byte(q2&0xf) | byte(q4&0xf)<<4
			qh[l] = byte(q1>>4) | byte(q2>>4)<<2 | byte(q3>>4)<<4 | byte(q4>>4)<<6
		}
	}
}

// nearestIQ4 is the index of the grid value nearest to x/d.
func nearestIQ4(x, d float32) byte {
	if d == 0 {
		return 8 // the grid value nearest zero
	}
	v, best := x/d, 0
	for i, g := range iq4nl {
		if math.Abs(float64(v-float32(g))) < math.Abs(float64(v-float32(iq4nl[best]))) {
			best = i
		}
	}
	return byte(best)
}

func quantIQ4XS(x []float32, o []byte) {
	var s [8]float32
	var maxAbsScale float32
	for ib := range 8 {
		s[ib] = signedMax(x[32*ib:32*ib+32]) / float32(iq4nl[0])
		maxAbsScale = max(maxAbsScale, float32(math.Abs(float64(s[ib]))))
	}
	d := maxAbsScale / 31
	putF16(o, d)
	d = f16(o)
	var sh uint16
	sl, qs := o[4:8], o[8:136]
	clear(sl)
	for ib := range 8 {
		ls := 32
		if d != 0 {
			ls = max(0, min(63, int(math.Round(float64(s[ib]/d)))+32))
		}
		sl[ib/2] |= byte(ls&0xf) << (4 * (ib % 2))
		sh |= uint16(ls>>4) << (2 * ib)
		dl := d * float32(ls-32)
		for j := range 16 {
			qs[16*ib+j] = nearestIQ4(x[32*ib+j], dl) | nearestIQ4(x[32*ib+j+16], dl)<<4
		}
	}
	binary.LittleEndian.PutUint16(o[2:], sh)
}

// quantQ2K: per sub-block of 16 a 4-bit scale and min (x ≈ sc·q − m, q in
// 0..3), of the block's d and dmin.
func quantQ2K(x []float32, o []byte) {
	var sc, mn [16]float32
	var maxSc, maxMn float32
	for j := range 16 {
		sub := x[16*j : 16*j+16]
		lo, hi := float32(0), sub[0]
		for _, v := range sub {
			lo, hi = min(lo, v), max(hi, v)
		}
		sc[j], mn[j] = (hi-lo)/3, -lo
		maxSc, maxMn = max(maxSc, sc[j]), max(maxMn, mn[j])
	}
	putF16(o[80:], maxSc/15)
	putF16(o[82:], maxMn/15)
	d, dmin := f16(o[80:]), f16(o[82:])
	var ls, lm [16]int
	for j := range 16 {
		ls[j] = min(15, int(math.Round(float64(sc[j]*inv(d)))))
		lm[j] = min(15, int(math.Round(float64(mn[j]*inv(dmin)))))
		o[j] = byte(ls[j] | lm[j]<<4)
	}
	clear(o[16:80])
	for e := range 256 {
		n, j, r := e/128, (e%128)/32, e%32
		step := d * float32(ls[e/16])
		q := 0
		if step > 0 {
			q = max(0, min(3, int(math.Round(float64((x[e]+dmin*float32(lm[e/16]))/step)))))
		}
		o[16+32*n+r] |= byte(q) << (2 * j)
	}
}

// quantQ3K: per sub-block of 16 a 6-bit signed scale of d; quants in
// -4..3, stored as L = q+4 (low two bits in qs, the third in hmask).
func quantQ3K(x []float32, o []byte) {
	var sc [16]float32
	var maxScale float32
	for j := range 16 {
		sc[j] = signedMax(x[16*j:16*j+16]) / -4
		if math.Abs(float64(sc[j])) > math.Abs(float64(maxScale)) {
			maxScale = sc[j]
		}
	}
	putF16(o[108:], maxScale/-32)
	d := f16(o[108:])
	var ls [16]int
	for j := range 16 {
		ls[j] = 0
		if d != 0 {
			ls[j] = max(-32, min(31, int(math.Round(float64(sc[j]/d)))))
		}
	}
	s := o[96:108]
	clear(o[:108])
	for b := range 4 {
		u := func(i int) byte { return byte(ls[i] + 32) }
		s[b] = u(b)&0xf | (u(8+b)&0xf)<<4
		s[4+b] = u(4+b)&0xf | (u(12+b)&0xf)<<4
		s[8+b] = u(b)>>4 | (u(4+b)>>4)<<2 | (u(8+b)>>4)<<4 | (u(12+b)>>4)<<6
	}
	for e := range 256 {
		n, j, r := e/128, (e%128)/32, e%32
		step := d * float32(ls[e/16])
		q := 0
		if step != 0 {
			q = max(-4, min(3, int(math.Round(float64(x[e]/step)))))
		}
		l := q + 4
		o[32+32*n+r] |= byte(l&3) << (2 * j)
		if l >= 4 {
			o[r] |= 1 << (4*n + j)
		}
	}
}
