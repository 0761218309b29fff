package cpu

import (
	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/quant"
)

// row returns row r (Dim(-1) elements) of an F32 tensor with a dense last
// dimension.
func row(t *rt.Tensor, r int) []float32 {
	off := t.RowOffset(r)
	return t.F32()[off : off+t.Dim(-1)]
}

// rowsOf returns every row of t, as row does.
func rowsOf(t *rt.Tensor) [][]float32 {
	rows := make([][]float32, t.Rows())
	for r := range rows {
		rows[r] = row(t, r)
	}
	return rows
}

// weightRow returns row n of a contiguous 2-D weight as float32, converting
// BF16/F16 into buf (len ≥ K). F32 rows are returned without a copy.
func weightRow(w *rt.Tensor, n int, buf []float32) []float32 {
	k := w.Dim(-1)
	switch w.DType() {
	case rt.F32:
		return w.F32()[n*k : (n+1)*k]
	case rt.BF16:
		src := w.U16()[n*k : (n+1)*k]
		dst := buf[:k]
		for i, h := range src {
			dst[i] = rt.BF16ToF32(h)
		}
		return dst
	case rt.F16:
		src := w.U16()[n*k : (n+1)*k]
		dst := buf[:k]
		for i, h := range src {
			dst[i] = rt.F16ToF32(h)
		}
		return dst
	}
	if w.DType().Quantized() {
		rb := w.DType().ByteLen(k)
		quant.DequantRow(w.DType(), w.Bytes()[n*rb:(n+1)*rb], buf[:k])
		return buf[:k]
	}
	panic("cpu: weight dtype " + w.DType().String())
}
