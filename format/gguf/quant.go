package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/quant"
)

// blockTypes are the GGML block types govllm reads and writes, as
// runtime dtypes.
var blockTypes = map[TensorType]rt.DType{Q8_0: rt.Q8_0, Q4_0: rt.Q4_0, Q4_1: rt.Q4_1, Q5_0: rt.Q5_0, Q5_1: rt.Q5_1,
	Q4_K: rt.Q4_K, Q5_K: rt.Q5_K, Q6_K: rt.Q6_K, Q2_K: rt.Q2_K, Q3_K: rt.Q3_K, IQ4_NL: rt.IQ4_NL, IQ4_XS: rt.IQ4_XS}

// RuntimeDType is the runtime dtype of a tensor type, if govllm computes with it.
func RuntimeDType(t TensorType) (rt.DType, bool) {
	switch t {
	case F32:
		return rt.F32, true
	case F16:
		return rt.F16, true
	case BF16:
		return rt.BF16, true
	}
	dt, ok := blockTypes[t]
	return dt, ok
}

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
	}
	if dt, ok := blockTypes[typ]; ok {
		return quant.Quantize(dt, x)
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
	}
	if dt, ok := blockTypes[typ]; ok {
		e, bb := dt.Block()
		out := make([]float32, len(data)/bb*e)
		quant.DequantRow(dt, data, out)
		return out, nil
	}
	return nil, fmt.Errorf("gguf: dequantizing %v is not supported", typ)
}
