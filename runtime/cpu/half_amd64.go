package cpu

//go:noescape
func bf16RowsAVX512(w *uint16, k int, x *float32, rows, xStride int, out *float32, outStride int)

//go:noescape
func f16RowsAVX512(w *uint16, k int, x *float32, rows, xStride int, out *float32, outStride int)

//go:noescape
func bf16DecodeAVX512(nrows int, w *uint16, k int, x *float32, out *float32)

//go:noescape
func f16DecodeAVX512(nrows int, w *uint16, k int, x *float32, out *float32)

// halfRows computes out[r·outStride] = w · x row r (xStride apart) for rows
// activation rows; w holds one BF16 (or, with f16, F16) row of len(w) ≥ 16
// elements, a multiple of 16.
func halfRows(f16 bool, w []uint16, x []float32, rows, xStride int, out []float32, outStride int) {
	k := len(w)
	_ = x[(rows-1)*xStride+k-1]
	_ = out[(rows-1)*outStride]
	if f16 {
		f16RowsAVX512(&w[0], k, &x[0], rows, xStride*4, &out[0], outStride*4)
	} else {
		bf16RowsAVX512(&w[0], k, &x[0], rows, xStride*4, &out[0], outStride*4)
	}
}

// halfDecode computes out[j] = weight row j of w (k elements, a multiple of
// 32) · x for len(out) contiguous rows.
func halfDecode(f16 bool, w []uint16, k int, x []float32, out []float32) {
	if len(out) == 0 {
		return
	}
	_ = w[len(out)*k-1]
	_ = x[k-1]
	if f16 {
		f16DecodeAVX512(len(out), &w[0], k, &x[0], &out[0])
	} else {
		bf16DecodeAVX512(len(out), &w[0], k, &x[0], &out[0])
	}
}
