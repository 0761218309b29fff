package cpu

//go:noescape
func bf16RowsAVX512(w *uint16, k int, x *float32, rows, xStride int, out *float32, outStride int)

//go:noescape
func f16RowsAVX512(w *uint16, k int, x *float32, rows, xStride int, out *float32, outStride int)

//go:noescape
func bf16Tile64AVX512(w *uint16, wStride, k int, x *float32, xStride int, out *float32, outStride int)

//go:noescape
func f16Tile64AVX512(w *uint16, wStride, k int, x *float32, xStride int, out *float32, outStride int)

//go:noescape
func f32Tile64AVX512(w *float32, wStride, k int, x *float32, xStride int, out *float32, outStride int)

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

// halfTile64 computes the 6×4 tile out[r·outStride + c] = weight row c (k
// apart in w) · activation row r (xStride apart in x), for r < 6, c < 4; k
// is a multiple of 16.
func halfTile64(f16 bool, w []uint16, k int, x []float32, xStride int, out []float32, outStride int) {
	_ = w[3*k+k-1]
	_ = x[5*xStride+k-1]
	_ = out[5*outStride+3]
	if f16 {
		f16Tile64AVX512(&w[0], 2*k, k, &x[0], 4*xStride, &out[0], 4*outStride)
	} else {
		bf16Tile64AVX512(&w[0], 2*k, k, &x[0], 4*xStride, &out[0], 4*outStride)
	}
}

// f32Tile64 is halfTile64 for f32 rows wStride apart in w.
func f32Tile64(w []float32, wStride, k int, x []float32, xStride int, out []float32, outStride int) {
	_ = w[3*wStride+k-1]
	_ = x[5*xStride+k-1]
	_ = out[5*outStride+3]
	f32Tile64AVX512(&w[0], 4*wStride, k, &x[0], 4*xStride, &out[0], 4*outStride)
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
