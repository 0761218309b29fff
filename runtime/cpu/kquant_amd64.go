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
