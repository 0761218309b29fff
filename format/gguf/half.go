package gguf

import (
	rt "github.com/govllm/govllm/runtime"
)

func f32ToF16(f float32) uint16  { return rt.F32ToF16(f) }
func f16ToF32(h uint16) float32  { return rt.F16ToF32(h) }
func f32ToBF16(f float32) uint16 { return rt.F32ToBF16(f) }
