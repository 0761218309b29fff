package cpu

import rt "github.com/govllm/govllm/runtime"

//go:noescape
func quantizeQ8XAVX512(x *float32, nb int, q *byte, s *float32)

//go:noescape
func q8PrepAVX512(w *byte, np int, dst *byte)

//go:noescape
func q8RowsAVX512(np int, prep *byte, q *byte, s *float32, rows, qStride, sStride int, out *float32, outStride int)

func quantizeQ8X(x []float32, q []byte, s []float32) {
	nb := len(x) / q8Block
	if !hasVNNI || nb == 0 {
		quantizeQ8XGo(x, q, s)
		return
	}
	_ = q[(nb+1)/2*64-1]
	_ = s[(nb+1)/2*16-1]
	quantizeQ8XAVX512(&x[0], nb, &q[0], &s[0])
	padOddBlock(nb, q, s)
}

func q8Prep(w []byte, dst []byte) {
	nb := len(w) / 34
	if !hasVNNI || nb == 0 {
		q8PrepGo(w, dst)
		return
	}
	full := nb / 2
	_ = dst[q8Pairs(nb*q8Block)*q8PairBytes-1]
	if full > 0 {
		q8PrepAVX512(&w[0], full, &dst[0])
	}
	if nb%2 == 1 {
		q8PrepGo(w[(nb-1)*34:], dst[full*q8PairBytes:])
	}
}

func q8Rows(np int, prep []byte, q []byte, s []float32, rows, qStride, sStride int, out []float32, outStride int) {
	if !hasVNNI || np == 0 || rows == 0 {
		q8RowsGo(np, prep, q, s, rows, qStride, sStride, out, outStride)
		return
	}
	_ = prep[np*q8PairBytes-1]
	_ = q[(rows-1)*qStride+np*64-1]
	_ = s[(rows-1)*sStride+np*16-1]
	_ = out[(rows-1)*outStride]
	q8RowsAVX512(np, &prep[0], &q[0], &s[0], rows, qStride, sStride*4, &out[0], outStride*4)
}

//go:noescape
func q8Rows2AVX512(np int, prep0, prep1 *byte, q *byte, s *float32, rows, qStride, sStride int, out *float32, outStride int)

// q8Rows2 is q8Rows for two weight rows at once, whose results go to
// adjacent columns: out[r·outStride] and out[r·outStride+1].
func q8Rows2(np int, prep0, prep1 []byte, q []byte, s []float32, rows, qStride, sStride int, out []float32, outStride int) {
	if !hasVNNI || np == 0 || rows == 0 {
		q8RowsGo(np, prep0, q, s, rows, qStride, sStride, out, outStride)
		q8RowsGo(np, prep1, q, s, rows, qStride, sStride, out[1:], outStride)
		return
	}
	_ = prep0[np*q8PairBytes-1]
	_ = prep1[np*q8PairBytes-1]
	_ = q[(rows-1)*qStride+np*64-1]
	_ = s[(rows-1)*sStride+np*16-1]
	_ = out[(rows-1)*outStride+1]
	q8Rows2AVX512(np, &prep0[0], &prep1[0], &q[0], &s[0], rows, qStride, sStride*4, &out[0], outStride*4)
}

// q8DecodeOK reports whether q8Decode has a kernel for rows of rowBytes.
func q8DecodeOK(rowBytes int) bool { return hasVNNI && (rowBytes/34)%2 == 0 }

//go:noescape
func q8DecodeAVX512(nrows, np int, w *byte, rowBytes int, q *byte, s *float32, out *float32)

// q8Decode computes out[j] = Q8_0 weight row j of w · the quantized
// activation row (q, s) for len(out) rows of rowBytes, reading each weight
// once; it reports false where it has no kernel (the caller prepares rows
// instead).
func q8Decode(w []byte, rowBytes int, q []byte, s []float32, out []float32) bool {
	nb := rowBytes / 34
	if !q8DecodeOK(rowBytes) || len(out) == 0 {
		return false
	}
	np := nb / 2
	_ = w[len(out)*rowBytes-1]
	_ = q[np*64-1]
	_ = s[np*16-1]
	q8DecodeAVX512(len(out), np, &w[0], rowBytes, &q[0], &s[0], &out[0])
	return true
}

//go:noescape
func q8Decode4AVX512(nrows, np int, w *byte, rowBytes int, q *byte, s *float32, stride int, out *float32, outStride int)

// q8Decode4 is q8Decode for four activation rows (q, s rows of np pairs,
// packed): out[r·outStride+j] for weight row j of w and activation row r.
func q8Decode4(w []byte, rowBytes int, q []byte, s []float32, out []float32, outStride int) {
	nb := rowBytes / 34
	n := len(w) / rowBytes
	if n == 0 {
		return
	}
	np := nb / 2
	_ = q[4*np*64-1]
	_ = s[4*np*16-1]
	_ = out[3*outStride+n-1]
	q8Decode4AVX512(n, np, &w[0], rowBytes, &q[0], &s[0], np*64, &out[0], outStride*4)
}

//go:noescape
func q8Rows4AVX2(nrows, nblocks int, w *byte, rowBytes int, q *byte, qStride int, s *float32, sStride int, out *float32, outStride int)

//go:noescape
func q8Rows1AVX2(nrows, nblocks int, w *byte, rowBytes int, q *byte, s *float32, out *float32)

//go:noescape
func q40Rows4AVX2(nrows, nblocks int, w *byte, rowBytes int, q *byte, qStride int, s *float32, sStride int, out *float32, outStride int)

//go:noescape
func q40Rows1AVX2(nrows, nblocks int, w *byte, rowBytes int, q *byte, s *float32, out *float32)

//go:noescape
func qnlRows4AVX2(nrows, nblocks int, w *byte, rowBytes int, q *byte, qStride int, s *float32, sStride int, out *float32, outStride int)

//go:noescape
func qnlRows1AVX2(nrows, nblocks int, w *byte, rowBytes int, q *byte, s *float32, out *float32)

//go:noescape
func qxsRows4AVX2(nrows, nblocks int, w *byte, rowBytes int, q *byte, qStride int, s *float32, sStride int, out *float32, outStride int)

//go:noescape
func qxsRows1AVX2(nrows, nblocks int, w *byte, rowBytes int, q *byte, s *float32, out *float32)

// q8AVX2OK reports whether the AVX2 Q8_0 kernels (for CPUs without VNNI)
// run.
func q8AVX2OK() bool { return hasAVX2 && !hasVNNI }

// q8Rows4 computes out[r·outStride + j] = Q8_0 (Q4_0, IQ4_NL, IQ4_XS) weight row j of w
// (rows of rowBytes) · activation row r, for four rows of signed q (qStride
// apart) and s (sStride apart, in floats).
func q8Rows4(dt rt.DType, w []byte, rowBytes int, q []byte, qStride int, s []float32, sStride int, out []float32, outStride int) {
	be, bb := dt.Block()
	n, nb := len(w)/rowBytes, rowBytes/bb
	if n == 0 || nb == 0 {
		return
	}
	_ = q[3*qStride+nb*be-1]
	_ = s[3*sStride+nb*be/4-1]
	_ = out[3*outStride+n-1]
	switch dt {
	case rt.Q4_0:
		q40Rows4AVX2(n, nb, &w[0], rowBytes, &q[0], qStride, &s[0], 4*sStride, &out[0], 4*outStride)
		return
	case rt.IQ4_NL:
		qnlRows4AVX2(n, nb, &w[0], rowBytes, &q[0], qStride, &s[0], 4*sStride, &out[0], 4*outStride)
		return
	case rt.IQ4_XS:
		qxsRows4AVX2(n, nb, &w[0], rowBytes, &q[0], qStride, &s[0], 4*sStride, &out[0], 4*outStride)
		return
	}
	q8Rows4AVX2(n, nb, &w[0], rowBytes, &q[0], qStride, &s[0], 4*sStride, &out[0], 4*outStride)
}

// q8Rows1 is q8Rows4 for one activation row, with the same bits.
func q8Rows1(dt rt.DType, w []byte, rowBytes int, q []byte, s []float32, out []float32) {
	be, bb := dt.Block()
	n, nb := len(w)/rowBytes, rowBytes/bb
	if n == 0 || nb == 0 {
		return
	}
	_ = q[nb*be-1]
	_ = s[nb*be/4-1]
	_ = out[n-1]
	switch dt {
	case rt.Q4_0:
		q40Rows1AVX2(n, nb, &w[0], rowBytes, &q[0], &s[0], &out[0])
		return
	case rt.IQ4_NL:
		qnlRows1AVX2(n, nb, &w[0], rowBytes, &q[0], &s[0], &out[0])
		return
	case rt.IQ4_XS:
		qxsRows1AVX2(n, nb, &w[0], rowBytes, &q[0], &s[0], &out[0])
		return
	}
	q8Rows1AVX2(n, nb, &w[0], rowBytes, &q[0], &s[0], &out[0])
}

//go:noescape
func quantizeQ8XSignedAVX2(x *float32, nb int, q *byte, s *float32)

// quantizeQ8XSigned is quantizeQ8X then q8Signed (the form the AVX2 Q8_0
// kernels read) in one pass; a row of an odd number of blocks gets a zero
// block with scale 0 at the end.
func quantizeQ8XSigned(x []float32, q []byte, s []float32) {
	nb := len(x) / q8Block
	if !hasAVX2 || nb == 0 {
		quantizeQ8XSignedGo(x, q, s)
		return
	}
	_ = q[(nb+1)/2*64-1]
	_ = s[(nb+1)/2*16-1]
	quantizeQ8XSignedAVX2(&x[0], nb, &q[0], &s[0])
	if nb%2 == 1 {
		clear(q[nb*q8Block : (nb+1)*q8Block])
		clear(s[(nb/2)*16+8:][:8])
	}
}
