package cpu

import rt "github.com/govllm/govllm/runtime"

//go:noescape
func quantizeQ8KAVX512(x *float32, nsb int, dst *byte)

//go:noescape
func kPrepIQ4KAVX512(w *byte, nblocks int, dst *byte)

//go:noescape
func kPrepIQ6KAVX512(w *byte, nblocks int, dst *byte)

//go:noescape
func kRowsIAVX512(nsb int, prep0, prep1 *byte, act *byte, rows, aStride int, out *float32, outStride int)

// quantizeQ8K quantizes x (whole super-blocks) into act, but for the
// sub-block sums (kSums).
func quantizeQ8K(x []float32, act []byte) {
	nsb := len(x) / 256
	if !hasVNNI || nsb == 0 {
		quantizeQ8KGo(x, act)
		return
	}
	_ = act[nsb*kActBytes-1]
	quantizeQ8KAVX512(&x[0], nsb, &act[0])
}

// kPrepI prepares a k-quant row of whole blocks for kRowsI.
func kPrepI(dt rt.DType, w []byte, dst []byte) {
	_, bb := dt.Block()
	nb := len(w) / bb
	if !hasVNNI || nb == 0 || dt == rt.Q5_K {
		kPrepIGo(dt, w, dst)
		return
	}
	_ = dst[nb*kSBBytes-1]
	if dt == rt.Q4_K {
		kPrepIQ4KAVX512(&w[0], nb, &dst[0])
	} else {
		kPrepIQ6KAVX512(&w[0], nb, &dst[0])
	}
}

// kRowsI computes out[r·outStride+c] = prepared weight row c (prep0, prep1)
// · activation row r (aStride bytes apart) for rows rows.
func kRowsI(nsb int, prep0, prep1, act []byte, rows, aStride int, out []float32, outStride int) {
	if !hasVNNI || nsb == 0 || rows == 0 {
		kRowsIGo(nsb, prep0, prep1, act, rows, aStride, out, outStride)
		return
	}
	_ = prep0[nsb*kSBBytes-1]
	_ = prep1[nsb*kSBBytes-1]
	_ = act[(rows-1)*aStride+nsb*kActBytes-1]
	_ = out[(rows-1)*outStride+1]
	kRowsIAVX512(nsb, &prep0[0], &prep1[0], &act[0], rows, aStride, &out[0], outStride*4)
}

//go:noescape
func q4kDecodeAVX512(nrows, nblocks int, w *byte, rowBytes int, q *byte, act *byte, out *float32)

//go:noescape
func q6kDecodeAVX512(nrows, nblocks int, w *byte, rowBytes int, q *byte, a32 *int32, act *byte, out *float32)

// kDecodeOK reports whether kDecodeRows has a kernel for dt.
func kDecodeOK(dt rt.DType) bool { return hasVNNI && (dt == rt.Q4_K || dt == rt.Q6_K) }

// kDecodeRows computes out[j] = k-quant weight row j of w · the one
// activation row a, for len(out) rows of rowBytes, reading each weight
// byte once and preparing nothing (the decode step is bound by memory),
// with the bits kRowsI gives the row in a batch.
func kDecodeRows(dt rt.DType, w []byte, rowBytes int, a *kAct, out []float32) {
	_, bb := dt.Block()
	nb := rowBytes / bb
	if len(out) == 0 || nb == 0 {
		return
	}
	_ = w[len(out)*rowBytes-1]
	_ = a.q[nb*256-1]
	_ = a.act[nb*kActBytes-1]
	if dt == rt.Q4_K {
		q4kDecodeAVX512(len(out), nb, &w[0], rowBytes, &a.q[0], &a.act[0], &out[0])
		return
	}
	_ = a.a32[nb*64-1]
	q6kDecodeAVX512(len(out), nb, &w[0], rowBytes, &a.q[0], &a.a32[0], &a.act[0], &out[0])
}

//go:noescape
func q5kRows4AVX2(nrows, nblocks int, w *byte, rowBytes int, act *byte, aStride int, out *float32, outStride int)

//go:noescape
func q5kRows1AVX2(nrows, nblocks int, w *byte, rowBytes int, act *byte, out *float32)

//go:noescape
func q4kRows1AVX2(nrows, nblocks int, w *byte, rowBytes int, act *byte, out *float32)

//go:noescape
func q6kRows1AVX2(nrows, nblocks int, w *byte, rowBytes int, act *byte, bsums *int16, out *float32)

// kAVX2OK reports whether the AVX2 k-quant kernels run for weights of dt:
// AVX2 but no VNNI.
func kAVX2OK(dt rt.DType) bool { return hasAVX2 && !hasVNNI && kQuantSupported(dt) }

// kRows1AVX2 is kRows4AVX2 for one activation row: out[j] for each weight
// row j of w, with the same bits as the row gets in kRows4AVX2.
func kRows1AVX2(dt rt.DType, w []byte, rowBytes int, act []byte, bs []int16, out []float32) {
	n := len(w) / rowBytes
	nsb := rowBytes / dt.ByteLen(256)
	if n == 0 || nsb == 0 {
		return
	}
	_ = act[nsb*kActBytes-1]
	_ = out[n-1]
	switch dt {
	case rt.Q4_K:
		q4kRows1AVX2(n, nsb, &w[0], rowBytes, &act[0], &out[0])
		return
	case rt.Q5_K:
		q5kRows1AVX2(n, nsb, &w[0], rowBytes, &act[0], &out[0])
		return
	}
	_ = bs[nsb*16-1]
	q6kRows1AVX2(n, nsb, &w[0], rowBytes, &act[0], &bs[0], &out[0])
}

//go:noescape
func q4kRows4AVX2(nrows, nblocks int, w *byte, rowBytes int, act *byte, aStride int, out *float32, outStride int)

//go:noescape
func q6kRows4AVX2(nrows, nblocks int, w *byte, rowBytes int, act *byte, aStride int, bsums *int16, bStride int, out *float32, outStride int)

// kRows4AVX2 computes out[r·outStride + j] = k-quant weight row j of w (rows
// of rowBytes) · activation row r for four activation rows of act (nsb
// super-blocks each, aStride bytes apart, as quantizeQ8KSigned writes them)
// and, for Q6_K, their sums of 16 bs (16 a super-block, bStride apart).
func kRows4AVX2(dt rt.DType, w []byte, rowBytes int, act []byte, aStride int, bs []int16, bStride int, out []float32, outStride int) {
	n := len(w) / rowBytes
	nsb := rowBytes / dt.ByteLen(256)
	if n == 0 || nsb == 0 {
		return
	}
	_ = act[3*aStride+nsb*kActBytes-1]
	_ = out[3*outStride+n-1]
	switch dt {
	case rt.Q4_K:
		q4kRows4AVX2(n, nsb, &w[0], rowBytes, &act[0], aStride, &out[0], 4*outStride)
		return
	case rt.Q5_K:
		q5kRows4AVX2(n, nsb, &w[0], rowBytes, &act[0], aStride, &out[0], 4*outStride)
		return
	}
	_ = bs[3*bStride+nsb*16-1]
	q6kRows4AVX2(n, nsb, &w[0], rowBytes, &act[0], aStride, &bs[0], 2*bStride, &out[0], 4*outStride)
}

//go:noescape
func quantizeQ8KSignedAVX2(x *float32, nsb int, act *byte, bs *int16)

// quantizeQ8KSigned quantizes x (whole super-blocks) into act and bs in the
// form the AVX2 k-quant kernels read: what quantizeQ8K, kSums and kSigned
// write, in one pass.
func quantizeQ8KSigned(x []float32, act []byte, bs []int16) {
	nsb := len(x) / 256
	if !hasAVX2 || nsb == 0 {
		quantizeQ8KSignedGo(x, act, bs)
		return
	}
	_ = act[nsb*kActBytes-1]
	_ = bs[nsb*16-1]
	quantizeQ8KSignedAVX2(&x[0], nsb, &act[0], &bs[0])
}
