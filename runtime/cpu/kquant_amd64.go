package cpu

import rt "github.com/govllm/govllm/runtime"

//go:noescape
func kPrepQ4KAVX512(w *byte, nblocks int, dst *byte)

//go:noescape
func kPrepQ6KAVX512(w *byte, nblocks int, dst *byte)

// kPrep prepares a k-quant row of whole blocks for q8Rows2B.
func kPrep(dt rt.DType, w []byte, dst []byte) {
	_, bb := dt.Block()
	nb := len(w) / bb
	if !hasVNNI || nb == 0 || (dt != rt.Q4_K && dt != rt.Q6_K) {
		kPrepGo(dt, w, dst)
		return
	}
	_ = dst[nb*4*kPairBytes-1]
	if dt == rt.Q4_K {
		kPrepQ4KAVX512(&w[0], nb, &dst[0])
	} else {
		kPrepQ6KAVX512(&w[0], nb, &dst[0])
	}
}

//go:noescape
func q4kDecodeAVX512(nrows, nblocks int, w *byte, rowBytes int, q *byte, s, xm *float32, out *float32)

//go:noescape
func q6kDecodeAVX512(nrows, nblocks int, w *byte, rowBytes int, q *byte, s *float32, a32 *int32, out *float32)

// kDecodeOK reports whether kDecodeRows has a kernel for dt.
func kDecodeOK(dt rt.DType) bool { return hasVNNI && (dt == rt.Q4_K || dt == rt.Q6_K) }

// kDecodeRows computes out[j] = k-quant weight row j of w · the one
// activation row a, for len(out) rows of rowBytes, reading each weight
// byte once and preparing nothing (the decode step is bound by memory).
func kDecodeRows(dt rt.DType, w []byte, rowBytes int, a *kAct, out []float32) {
	_, bb := dt.Block()
	nb := rowBytes / bb
	if len(out) == 0 || nb == 0 {
		return
	}
	_ = w[len(out)*rowBytes-1]
	_ = a.q[nb*256-1]
	_ = a.s[nb*64-1]
	if dt == rt.Q4_K {
		_ = a.xm[nb*64-1]
		q4kDecodeAVX512(len(out), nb, &w[0], rowBytes, &a.q[0], &a.s[0], &a.xm[0], &out[0])
		return
	}
	_ = a.a32[nb*64-1]
	q6kDecodeAVX512(len(out), nb, &w[0], rowBytes, &a.q[0], &a.s[0], &a.a32[0], &out[0])
}
