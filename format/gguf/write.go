package gguf

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/govllm/govllm/internal/atomicfile"
)

// Writer builds a GGUF v3 file: metadata in the order set, tensors in the
// order added, each aligned.
type Writer struct {
	Alignment uint64
	keys      []string
	values    []Value
	tensors   []wtensor
}

type wtensor struct {
	info TensorInfo
	data []byte
}

// NewWriter starts a file with llama.cpp's default alignment of 32.
func NewWriter() *Writer { return &Writer{Alignment: 32} }

// Set adds a metadata key. v is a string, bool, uint32, int32, uint64,
// float32, float64 or a slice of string, int32, uint32, float32 or bool.
func (w *Writer) Set(key string, v any) {
	var val Value
	switch x := v.(type) {
	case string:
		val = Value{Type: TypeString, Value: x}
	case bool:
		val = Value{Type: TypeBool, Value: x}
	case uint32:
		val = Value{Type: TypeUint32, Value: uint64(x)}
	case int32:
		val = Value{Type: TypeInt32, Value: int64(x)}
	case uint64:
		val = Value{Type: TypeUint64, Value: x}
	case float32:
		val = Value{Type: TypeFloat32, Value: float64(x)}
	case float64:
		val = Value{Type: TypeFloat64, Value: x}
	case []string:
		val = arrayOf(TypeString, x)
	case []int32:
		val = arrayOf(TypeInt32, x)
	case []uint32:
		val = arrayOf(TypeUint32, x)
	case []float32:
		val = arrayOf(TypeFloat32, x)
	case []bool:
		val = arrayOf(TypeBool, x)
	default:
		panic(fmt.Sprintf("gguf: Set %s: unsupported value type %T", key, v))
	}
	w.keys = append(w.keys, key)
	w.values = append(w.values, val)
}

func arrayOf[T any](t ValueType, xs []T) Value {
	items := make([]any, len(xs))
	for i, x := range xs {
		items[i] = x
	}
	return Value{Type: TypeArray, Elem: t, Value: items}
}

// SetValue adds a metadata key with a value as read from a File.
func (w *Writer) SetValue(key string, v Value) {
	w.keys = append(w.keys, key)
	w.values = append(w.values, v)
}

// Add appends a tensor; dims are in GGML order (row length first).
func (w *Writer) Add(name string, typ TensorType, dims []uint64, data []byte) error {
	n := uint64(1)
	for _, d := range dims {
		n *= d
	}
	bs, bb := typ.BlockSize(), typ.BlockBytes()
	if bs == 0 || dims[0]%uint64(bs) != 0 {
		return fmt.Errorf("gguf: tensor %s: row of %d does not fit %v blocks", name, dims[0], typ)
	}
	if want := n / uint64(bs) * uint64(bb); uint64(len(data)) != want {
		return fmt.Errorf("gguf: tensor %s: %d bytes, want %d", name, len(data), want)
	}
	w.tensors = append(w.tensors, wtensor{info: TensorInfo{Name: name, Dims: dims, Type: typ, Size: uint64(len(data))}, data: data})
	return nil
}

// WriteFile writes the file to path, atomically: a failure (a full disk)
// leaves what was there.
func (w *Writer) WriteFile(path string) error {
	return atomicfile.Write(path, w.Encode)
}

// Encode writes the file to out.
func (w *Writer) Encode(out io.Writer) error {
	var b []byte
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	u64 := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	str := func(s string) { u64(uint64(len(s))); b = append(b, s...) }
	scalar := func(t ValueType, v any) {
		var bits uint64
		switch x := v.(type) {
		case string:
			str(x)
			return
		case bool:
			if x {
				bits = 1
			}
		case uint64:
			bits = x
		case uint32:
			bits = uint64(x)
		case int64:
			bits = uint64(x)
		case int32:
			bits = uint64(int64(x))
		case float64:
			if t == TypeFloat32 {
				bits = uint64(math.Float32bits(float32(x)))
			} else {
				bits = math.Float64bits(x)
			}
		case float32:
			bits = uint64(math.Float32bits(x))
		}
		size := map[ValueType]int{TypeUint8: 1, TypeInt8: 1, TypeBool: 1, TypeUint16: 2, TypeInt16: 2,
			TypeUint32: 4, TypeInt32: 4, TypeFloat32: 4, TypeUint64: 8, TypeInt64: 8, TypeFloat64: 8}[t]
		for i := range size {
			b = append(b, byte(bits>>(8*i)))
		}
	}
	b = append(b, "GGUF"...)
	u32(3)
	u64(uint64(len(w.tensors)))
	u64(uint64(len(w.keys)) + 1)
	str("general.alignment")
	u32(uint32(TypeUint32))
	u32(uint32(w.Alignment))
	for i, k := range w.keys {
		str(k)
		v := w.values[i]
		u32(uint32(v.Type))
		if v.Type == TypeArray {
			items := v.Value.([]any)
			u32(uint32(v.Elem))
			u64(uint64(len(items)))
			for _, it := range items {
				scalar(v.Elem, it)
			}
			continue
		}
		scalar(v.Type, v.Value)
	}
	var off uint64
	for i := range w.tensors {
		t := &w.tensors[i]
		t.info.Offset = off
		str(t.info.Name)
		u32(uint32(len(t.info.Dims)))
		for _, d := range t.info.Dims {
			u64(d)
		}
		u32(uint32(t.info.Type))
		u64(off)
		off = (off + t.info.Size + w.Alignment - 1) / w.Alignment * w.Alignment
	}
	for uint64(len(b))%w.Alignment != 0 {
		b = append(b, 0)
	}
	if _, err := out.Write(b); err != nil {
		return err
	}
	pad := make([]byte, w.Alignment)
	for _, t := range w.tensors {
		if _, err := out.Write(t.data); err != nil {
			return err
		}
		if r := t.info.Size % w.Alignment; r != 0 {
			if _, err := out.Write(pad[:w.Alignment-r]); err != nil {
				return err
			}
		}
	}
	return nil
}
