package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Quantize encodes float32 values (a whole number of rows of the type's
// block) as typ, with GGML's reference formulas.
func Quantize(typ TensorType, x []float32) ([]byte, error) {
	switch typ {
	case F32:
		out := make([]byte, 4*len(x))
		for i, v := range x {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
		return out, nil
	case F16, BF16:
		out := make([]byte, 2*len(x))
		for i, v := range x {
			var h uint16
			if typ == F16 {
				h = f32ToF16(v)
			} else {
				h = f32ToBF16(v)
			}
			binary.LittleEndian.PutUint16(out[2*i:], h)
		}
		return out, nil
	case Q8_0:
		if len(x)%32 != 0 {
			return nil, fmt.Errorf("gguf: %d values are not whole Q8_0 blocks", len(x))
		}
		out := make([]byte, len(x)/32*34)
		for b := 0; b*32 < len(x); b++ {
			blk := x[b*32 : (b+1)*32]
			var amax float32
			for _, v := range blk {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			d := amax / 127
			id := float32(0)
			if d != 0 {
				id = 1 / d
			}
			o := out[b*34:]
			binary.LittleEndian.PutUint16(o, f32ToF16(d))
			for i, v := range blk {
				o[2+i] = byte(int8(math.Round(float64(v * id))))
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("gguf: quantizing to %v is not supported", typ)
}

// Dequantize decodes data of typ into float32 values.
func Dequantize(typ TensorType, data []byte) ([]float32, error) {
	switch typ {
	case F32:
		out := make([]float32, len(data)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		return out, nil
	case F16, BF16:
		out := make([]float32, len(data)/2)
		for i := range out {
			h := binary.LittleEndian.Uint16(data[2*i:])
			if typ == F16 {
				out[i] = f16ToF32(h)
			} else {
				out[i] = math.Float32frombits(uint32(h) << 16)
			}
		}
		return out, nil
	case Q8_0:
		out := make([]float32, len(data)/34*32)
		for b := 0; b*34 < len(data); b++ {
			d := f16ToF32(binary.LittleEndian.Uint16(data[b*34:]))
			for i := range 32 {
				out[b*32+i] = d * float32(int8(data[b*34+2+i]))
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("gguf: dequantizing %v is not supported", typ)
}
