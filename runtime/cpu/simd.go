package cpu

import (
	"math/bits"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// CPU features the assembly kernels need. GOVLLM_NOASM=1 turns them all
// off, so that the pure-Go fallbacks run (and can be compared).
var (
	noASM     = os.Getenv("GOVLLM_NOASM") == "1"
	hasAVX512 = !noASM && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512DQ
	hasVNNI   = hasAVX512 && cpu.X86.HasAVX512VNNI
	hasAVX2   = !noASM && cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C
	// vecWidth is the f32 kernels' vector length: 16, 8 (AVX2) or 0 (Go).
	vecWidth = widthOf(hasAVX512, hasAVX2)
)

func widthOf(avx512, avx2 bool) int {
	switch {
	case avx512:
		return 16
	case avx2:
		return 8
	}
	return 0
}

// Features names the kernels in use, for logs and benchmarks.
func Features() string {
	switch {
	case hasVNNI:
		return "avx512+vnni"
	case hasAVX512:
		return "avx512"
	case hasAVX2:
		return "avx2"
	}
	return "go"
}

func asI32(b []byte) []int32 {
	return unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

func asI16(b []byte) []int16 {
	return unsafe.Slice((*int16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2)
}

func asF32(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// Scratch buffers are pooled by power-of-two size class, so that a
// forward step does not allocate: a buffer from a class always fits.
type byteBuf struct{ b []byte }
type f32Buf struct{ f []float32 }

var (
	bytePools [48]sync.Pool
	f32Pools  [48]sync.Pool
)

// sizeClass is the smallest c with 1<<c ≥ n.
func sizeClass(n int) int { return bits.Len(uint(max(n, 1) - 1)) }

func getBytes(n int) *byteBuf {
	c := sizeClass(n)
	if v, ok := bytePools[c].Get().(*byteBuf); ok {
		v.b = v.b[:n]
		return v
	}
	// 64-byte aligned, for vector loads.
	raw := make([]byte, 1<<c+64)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(raw)))) & 63
	return &byteBuf{b: raw[off : off+n : off+1<<c]}
}

func putBytes(b *byteBuf) { bytePools[sizeClass(cap(b.b))].Put(b) }

func getF32(n int) *f32Buf {
	c := sizeClass(n)
	if v, ok := f32Pools[c].Get().(*f32Buf); ok {
		v.f = v.f[:n]
		return v
	}
	raw := make([]float32, 1<<c+16)
	off := (int(-uintptr(unsafe.Pointer(unsafe.SliceData(raw)))) & 63) / 4
	return &f32Buf{f: raw[off : off+n : off+1<<c]}
}

func putF32(f *f32Buf) { f32Pools[sizeClass(cap(f.f))].Put(f) }
