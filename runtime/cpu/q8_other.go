//go:build !amd64

package cpu

import rt "github.com/govllm/govllm/runtime"

func quantizeQ8X(x []float32, q []byte, s []float32) { quantizeQ8XGo(x, q, s) }
func q8Prep(w []byte, dst []byte)                    { q8PrepGo(w, dst) }
func q8Rows(np int, prep []byte, q []byte, s []float32, rows, qStride, sStride int, out []float32, outStride int) {
	q8RowsGo(np, prep, q, s, rows, qStride, sStride, out, outStride)
}

func q8Rows2(np int, prep0, prep1 []byte, q []byte, s []float32, rows, qStride, sStride int, out []float32, outStride int) {
	q8RowsGo(np, prep0, q, s, rows, qStride, sStride, out, outStride)
	q8RowsGo(np, prep1, q, s, rows, qStride, sStride, out[1:], outStride)
}

func q8Decode(w []byte, rowBytes int, q []byte, s []float32, out []float32) bool { return false }
func q8DecodeOK(rowBytes int) bool                                               { return false }

func quantizeQ8K(x []float32, act []byte)      { quantizeQ8KGo(x, act) }
func kPrepI(dt rt.DType, w []byte, dst []byte) { kPrepIGo(dt, w, dst) }
func kRowsI(nsb int, prep0, prep1, act []byte, rows, aStride int, out []float32, outStride int) {
	kRowsIGo(nsb, prep0, prep1, act, rows, aStride, out, outStride)
}

func kDecodeOK(dt rt.DType) bool { return false }
func kDecodeRows(dt rt.DType, w []byte, rowBytes int, a *kAct, out []float32) {
	panic("no k-quant decode kernel")
}

func q8Decode4(w []byte, rowBytes int, q []byte, s []float32, out []float32, outStride int) {
	panic("cpu: no q8Decode4 kernel")
}

func kAVX2OK(dt rt.DType) bool { return false }
func kRows4AVX2(dt rt.DType, w []byte, rowBytes int, act []byte, aStride int, bs []int16, bStride int, out []float32, outStride int) {
	panic("no AVX2 k-quant kernel")
}
func kRows1AVX2(dt rt.DType, w []byte, rowBytes int, act []byte, bs []int16, out []float32) {
	panic("no AVX2 k-quant kernel")
}

func q8AVX2OK() bool { return false }
func q8Rows4(dt rt.DType, w []byte, rowBytes int, q []byte, qStride int, s []float32, sStride int, out []float32, outStride int) {
	panic("no AVX2 Q8_0 kernel")
}
func q8Rows1(dt rt.DType, w []byte, rowBytes int, q []byte, s []float32, out []float32) {
	panic("no AVX2 Q8_0 kernel")
}

func quantizeQ8KSigned(x []float32, act []byte, bs []int16) { quantizeQ8KSignedGo(x, act, bs) }

func quantizeQ8XSigned(x []float32, q []byte, s []float32) { quantizeQ8XSignedGo(x, q, s) }
