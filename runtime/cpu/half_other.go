//go:build !amd64

package cpu

// halfSupported is false off amd64, so these are never called there.
func halfRows(f16 bool, w []uint16, x []float32, rows, xStride int, out []float32, outStride int) {
	panic("cpu: no half-precision kernel")
}

func halfTile64(f16 bool, w []uint16, k int, x []float32, xStride int, out []float32, outStride int) {
	panic("cpu: no half-precision kernel")
}

func f32Tile64(w []float32, wStride, k int, x []float32, xStride int, out []float32, outStride int) {
	panic("cpu: no tile kernel")
}

func halfRows4AVX2(f16 bool, w []uint16, k int, x []float32, xStride int, out []float32, outStride int) {
	panic("cpu: no half-precision kernel")
}

func halfRows1AVX2(f16 bool, w []uint16, k int, x []float32, out []float32) {
	panic("cpu: no half-precision kernel")
}

func halfTail64(f16 bool, w []uint16, k int, x []float32, xStride, rows int, out []float32, outStride int) {
	panic("cpu: no half-precision kernel")
}
