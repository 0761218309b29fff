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
func bf16Tail64AVX512(w *uint16, wStride, k int, x *float32, xStride int, out *float32, outStride, rows int)

//go:noescape
func f16Tail64AVX512(w *uint16, wStride, k int, x *float32, xStride int, out *float32, outStride, rows int)

//go:noescape
func f32Tile64AVX512(w *float32, wStride, k int, x *float32, xStride int, out *float32, outStride int)

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

// halfTail64 is halfTile64 for the rows (1 to 5) after a pass's last tile.
func halfTail64(f16 bool, w []uint16, k int, x []float32, xStride, rows int, out []float32, outStride int) {
	_ = w[3*k+k-1]
	_ = x[(rows-1)*xStride+k-1]
	_ = out[(rows-1)*outStride+3]
	if f16 {
		f16Tail64AVX512(&w[0], 2*k, k, &x[0], 4*xStride, &out[0], 4*outStride, rows)
	} else {
		bf16Tail64AVX512(&w[0], 2*k, k, &x[0], 4*xStride, &out[0], 4*outStride, rows)
	}
}

// f32Tile64 is halfTile64 for f32 rows wStride apart in w.
func f32Tile64(w []float32, wStride, k int, x []float32, xStride int, out []float32, outStride int) {
	_ = w[3*wStride+k-1]
	_ = x[5*xStride+k-1]
	_ = out[5*outStride+3]
	if hasAVX512 {
		f32Tile64AVX512(&w[0], 4*wStride, k, &x[0], 4*xStride, &out[0], 4*outStride)
	} else {
		f32Tile64AVX2(&w[0], 4*wStride, k, &x[0], 4*xStride, &out[0], 4*outStride)
	}
}

//go:noescape
func f32Tile64AVX2(w *float32, wStride, k int, x *float32, xStride int, out *float32, outStride int)

//go:noescape
func bf16R4W2AVX2(w *uint16, k, npairs int, x *float32, xStride int, out *float32, outStride int)

//go:noescape
func f16R4W2AVX2(w *uint16, k, npairs int, x *float32, xStride int, out *float32, outStride int)

//go:noescape
func bf16R4W1AVX2(w *uint16, k int, x *float32, xStride int, out *float32, outStride int)

//go:noescape
func f16R4W1AVX2(w *uint16, k int, x *float32, xStride int, out *float32, outStride int)

//go:noescape
func bf16R1W4AVX2(w *uint16, k, nquads int, x *float32, out *float32)

//go:noescape
func f16R1W4AVX2(w *uint16, k, nquads int, x *float32, out *float32)

//go:noescape
func bf16R1W1AVX2(w *uint16, k, nrows int, x *float32, out *float32)

//go:noescape
func f16R1W1AVX2(w *uint16, k, nrows int, x *float32, out *float32)

// halfRows4AVX2 computes out[r·outStride + j] = weight row j of w (rows of
// k halves) · activation row r (xStride apart) for four activation rows:
// weight rows in pairs, an odd last one alone.
func halfRows4AVX2(f16 bool, w []uint16, k int, x []float32, xStride int, out []float32, outStride int) {
	n := len(w) / k
	if n == 0 {
		return
	}
	_ = x[3*xStride+k-1]
	_ = out[3*outStride+n-1]
	if p := n / 2; p > 0 {
		if f16 {
			f16R4W2AVX2(&w[0], k, p, &x[0], 4*xStride, &out[0], 4*outStride)
		} else {
			bf16R4W2AVX2(&w[0], k, p, &x[0], 4*xStride, &out[0], 4*outStride)
		}
	}
	if n%2 == 1 {
		if f16 {
			f16R4W1AVX2(&w[(n-1)*k], k, &x[0], 4*xStride, &out[n-1], 4*outStride)
		} else {
			bf16R4W1AVX2(&w[(n-1)*k], k, &x[0], 4*xStride, &out[n-1], 4*outStride)
		}
	}
}

// halfRows1AVX2 is halfRows4AVX2 for one activation row, with the same
// bits: out[j] for each weight row j, four at a time, then one.
func halfRows1AVX2(f16 bool, w []uint16, k int, x []float32, out []float32) {
	n := len(w) / k
	if n == 0 {
		return
	}
	_ = x[k-1]
	_ = out[n-1]
	if q := n / 4; q > 0 {
		if f16 {
			f16R1W4AVX2(&w[0], k, q, &x[0], &out[0])
		} else {
			bf16R1W4AVX2(&w[0], k, q, &x[0], &out[0])
		}
	}
	if r := n % 4; r > 0 {
		o := n - r
		if f16 {
			f16R1W1AVX2(&w[o*k], k, r, &x[0], &out[o])
		} else {
			bf16R1W1AVX2(&w[o*k], k, r, &x[0], &out[o])
		}
	}
}
