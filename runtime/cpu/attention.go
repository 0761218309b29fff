package cpu

import (
	"math"

	rt "github.com/govllm/govllm/runtime"
)

func splitQueryGate(q, gate, qg *rt.Tensor) {
	eachRow(q, rowArgs{dst: q, a: gate, b: qg}, func(o *rowArgs, r int) {
		d := o.dst.Dim(2)
		src := row(o.b, r)
		copy(row(o.dst, r), src[:d])
		copy(row(o.a, r), src[d:])
	})
}

// ropeTable is cos and sin [T][rotaryDim/2] (flat, pooled) computed as
// transformers does: inverse frequencies and angles in float32.
type ropeTable struct {
	half     int
	cos, sin *f32Buf
}

func newRopeTable(positions []int32, rotaryDim int, theta float32) ropeTable {
	half := rotaryDim / 2
	tb := ropeTable{half: half, cos: getF32(len(positions) * half), sin: getF32(len(positions) * half)}
	for i := range half {
		e := float32(2*i) / float32(rotaryDim)
		inv := 1 / float32(math.Pow(float64(theta), float64(e)))
		for t, p := range positions {
			a := float64(float32(p) * inv)
			tb.cos.f[t*half+i], tb.sin.f[t*half+i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	return tb
}

func (tb ropeTable) release() {
	putF32(tb.cos)
	putF32(tb.sin)
}

// rotate applies NeoX rotation at token t to x[:rotaryDim].
func (tb ropeTable) rotate(x []float32, t int) {
	h := tb.half
	rotateHalf(x, tb.cos.f[t*h:(t+1)*h], tb.sin.f[t*h:(t+1)*h])
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
	tb := newRopeTable(positions, rotaryDim, theta)
	eachRow(x, rowArgs{dst: x, rope: tb}, func(o *rowArgs, r int) {
		o.rope.rotate(row(o.dst, r), r/o.dst.Dim(1))
	})
	tb.release()
}

// preamble is attnPreamble over its rows: per token, hq query heads then
// hkv key heads.
type preamble struct {
	q, gate, qg, k *rt.Tensor
	qw, kw         []float32
	tb             ropeTable
	p              rt.PreambleParams
}

var preambleTasks taskPool[preamble]

func (a *preamble) run(lo, hi int) {
	d, hq, hkv := a.q.Dim(2), a.q.Dim(1), a.k.Dim(1)
	for i := lo; i < hi; i++ {
		t, h := i/(hq+hkv), i%(hq+hkv)
		var x []float32
		if h < hq {
			r := t*hq + h
			src := row(a.qg, r)
			x = row(a.q, r)
			rmsNormRow(x, src[:d], a.qw, a.p.Eps, true)
			copy(row(a.gate, r), src[d:])
		} else {
			x = row(a.k, t*hkv+h-hq)
			rmsNormRow(x, x, a.kw, a.p.Eps, true)
		}
		if a.p.RotaryDim > 0 {
			a.tb.rotate(x, t)
		}
	}
}

func attnPreamble(q, gate, qg, k, qNorm, kNorm *rt.Tensor, positions []int32, p rt.PreambleParams) {
	d := q.Dim(2)
	a := preambleTasks.get()
	*a = preamble{q: q, gate: gate, qg: qg, k: k, qw: qNorm.F32()[:d], kw: kNorm.F32()[:d], p: p}
	if p.RotaryDim > 0 {
		a.tb = newRopeTable(positions, p.RotaryDim, p.Theta)
	}
	parallelTask(q.Dim(0)*(q.Dim(1)+k.Dim(1)), max(1, 4096/d), a)
	if p.RotaryDim > 0 {
		a.tb.release()
	}
	preambleTasks.put(a)
	if p.KCache != nil {
		kvWrite(p.KCache, k, p.Slots)
		kvWrite(p.VCache, p.V, p.Slots)
	}
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
// visible keys, an f32 softmax, then the weighted sum of values. With
// AVX-512 and head rows a multiple of 16 it runs in tiles instead
// (attnTile): up to attnTileTokens tokens of a sequence with the query heads
// of one key head, so that each key and value row read serves them all.
func attention(dst, q, k, v *rt.Tensor, seqs []rt.AttnSeq, blockSize int, scale float32) {
	a := attnTasks.get()
	rows, units := a.rows[:0], a.units[:0]
	longest := 0
	for i := range seqs {
		s := &seqs[i]
		for t := range s.Len {
			rows = append(rows, attnRow{int32(i), int32(t)})
		}
		for t0 := 0; t0 < s.Len; t0 += attnTileTokens {
			units = append(units, attnUnit{seq: int32(i), t0: int32(t0), n: int32(min(attnTileTokens, s.Len-t0))})
		}
		longest = max(longest, s.Start+s.Len)
	}
	*a = attnTask{dst: dst, q: q, ks: k.F32(), vs: v.F32(), hkv: k.Dim(1), seqs: seqs, rows: rows, units: units,
		blockSize: blockSize, longest: longest, scale: scale}
	if (hasAVX512 || hasAVX2) && q.Dim(2)%16 == 0 {
		a.tiled = true
		parallelTask(len(units)*a.hkv, 1, a)
	} else {
		parallelTask(len(rows)*q.Dim(1), 1, a)
	}
	*a = attnTask{rows: rows[:0], units: units[:0]} // keep the lists' storage, no tensors
	attnTasks.p.Put(a)
}

// attnTileTokens is how many tokens of a sequence one attention tile takes.
const attnTileTokens = 6

// attnUnit is tokens [t0, t0+n) of a sequence, one tile per key head.
type attnUnit struct{ seq, t0, n int32 }

// attnRow is one query row: a sequence and a token of it.
type attnRow struct{ seq, t int32 }

type attnTask struct {
	dst, q    *rt.Tensor
	ks, vs    []float32
	hkv       int
	seqs      []rt.AttnSeq
	rows      []attnRow
	units     []attnUnit
	tiled     bool // tasks are units × key heads (attnTile), not rows × heads
	blockSize int
	longest   int
	scale     float32
}

var attnTasks taskPool[attnTask]

func (a *attnTask) run(lo, hi int) {
	if a.tiled {
		for i := lo; i < hi; i++ {
			a.tile(a.units[i/a.hkv], i%a.hkv)
		}
		return
	}
	hq, d := a.q.Dim(1), a.q.Dim(2)
	group, kvWidth := hq/a.hkv, a.hkv*d
	scores := getF32(a.longest)
	cacheRows := getBytes(4 * a.longest)
	cr32 := asI32(cacheRows.b)
	for i := lo; i < hi; i++ {
		tk, h := a.rows[i/hq], i%hq
		s := &a.seqs[tk.seq]
		kh := h / group
		r := s.Row + int(tk.t)
		qr := row(a.q, r*hq+h)
		n := s.Start + int(tk.t) + 1
		sc := scores.f[:n]
		mx := float32(math.Inf(-1))
		for p := range n {
			cr := int(s.Blocks[p/a.blockSize])*a.blockSize + p%a.blockSize
			cr32[p] = int32(cr)
			sc[p] = dot(qr, a.ks[cr*kvWidth+kh*d:][:d]) * a.scale
			mx = max(mx, sc[p])
		}
		inv := float32(1 / expShifted(sc, mx))
		out := row(a.dst, r*hq+h)
		clear(out[:d])
		for p, w := range sc {
			axpy(w*inv, a.vs[int(cr32[p])*kvWidth+kh*d:][:d], out[:d])
		}
	}
	putF32(scores)
	putBytes(cacheRows)
}

// tile runs unit u against key head kh: its R = n·group query rows (token
// by token, the group's heads within a token) gathered into a matrix Q,
// scores S = Q·Kᵀ over the keys the last token sees (f32Tile64, 6 rows × 4
// keys at a time), each row's softmax over the keys it may see (the causal
// tail zeroed), then O = P·V block by block (gemmAcc).
func (a *attnTask) tile(u attnUnit, kh int) {
	hq, d := a.q.Dim(1), a.q.Dim(2)
	group, kvWidth, bs := hq/a.hkv, a.hkv*d, a.blockSize
	s := &a.seqs[u.seq]
	nr := int(u.n) * group
	padded := (nr + 5) / 6 * 6
	keys := s.Start + int(u.t0) + int(u.n) // seen by the unit's last token
	// Scores are kept to the end of the last block: whether a key's score comes
	// from the tile or from dot depends on its place in its block only, never
	// on the unit, so a token's output has the same bits however the batch and
	// its chunks fall (the slots past the last key are the sequence's own,
	// finite, and masked).
	width := (keys + bs - 1) / bs * bs
	buf := getF32(padded*d + padded*width + nr*d)
	defer putF32(buf)
	qm, sm, om := buf.f[:padded*d], buf.f[padded*d:padded*(d+width)], buf.f[padded*(d+width):]
	for i := range nr {
		t, h := s.Row+int(u.t0)+i/group, kh*group+i%group
		copy(qm[i*d:(i+1)*d], row(a.q, t*hq+h))
	}
	clear(qm[nr*d:])
	for p0 := 0; p0 < keys; p0 += bs {
		base := int(s.Blocks[p0/bs])*bs*kvWidth + kh*d
		n := min(bs, keys-p0)
		j := 0
		for ; j < n && j+4 <= bs; j += 4 {
			for r := 0; r < padded; r += 6 {
				f32Tile64(a.ks[base+j*kvWidth:], kvWidth, d, qm[r*d:], d, sm[r*width+p0+j:], width)
			}
		}
		for ; j < n; j++ {
			kr := a.ks[base+j*kvWidth:][:d]
			for r := range nr {
				sm[r*width+p0+j] = dot(qm[r*d:(r+1)*d], kr)
			}
		}
	}
	for i := range nr {
		sc := sm[i*width : i*width+keys]
		seen := s.Start + int(u.t0) + i/group + 1
		mx := float32(math.Inf(-1))
		for p := range seen {
			sc[p] *= a.scale
			mx = max(mx, sc[p])
		}
		inv := float32(1 / expShifted(sc[:seen], mx))
		for p := range seen {
			sc[p] *= inv
		}
		clear(sc[seen:])
	}
	clear(om[:nr*d])
	for p0 := 0; p0 < keys; p0 += bs {
		base := int(s.Blocks[p0/bs])*bs*kvWidth + kh*d
		gemmAcc(nr, d, min(bs, keys-p0), sm[p0:], width, a.vs[base:], kvWidth, om, d)
	}
	for i := range nr {
		t, h := s.Row+int(u.t0)+i/group, kh*group+i%group
		copy(row(a.dst, t*hq+h)[:d], om[i*d:(i+1)*d])
	}
}

// expShifted replaces each score x by exp(x − mx) and returns their sum,
// summed in float64: the softmax's numerators and denominator.
func expShifted(sc []float32, mx float32) float64 {
	var sum float64
	for p := range sc {
		e := float32(math.Exp(float64(sc[p] - mx)))
		sc[p] = e
		sum += float64(e)
	}
	return sum
}
