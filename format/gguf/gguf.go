package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"

	"golang.org/x/sys/unix"
)

// ErrFormat is wrapped by every error about malformed file contents.
var ErrFormat = errors.New("malformed gguf")

// ValueType is a metadata value type.
type ValueType uint32

const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
)

// GGML tensor types that govllm reads.
type TensorType uint32

const (
	F32    TensorType = 0
	F16    TensorType = 1
	Q4_0   TensorType = 2
	Q4_1   TensorType = 3
	Q5_0   TensorType = 6
	Q5_1   TensorType = 7
	Q8_0   TensorType = 8
	Q2_K   TensorType = 10
	Q3_K   TensorType = 11
	Q4_K   TensorType = 12
	Q5_K   TensorType = 13
	Q6_K   TensorType = 14
	IQ4_NL TensorType = 20
	BF16   TensorType = 30
	IQ4_XS TensorType = 23
)

// blockInfo is (elements per block, bytes per block) of each type.
var blockInfo = map[TensorType][2]int{
	F32: {1, 4}, F16: {1, 2}, BF16: {1, 2},
	Q4_0: {32, 18}, Q4_1: {32, 20}, Q5_0: {32, 22}, Q5_1: {32, 24}, Q8_0: {32, 34},
	Q2_K: {256, 84}, Q3_K: {256, 110}, Q4_K: {256, 144}, Q5_K: {256, 176}, Q6_K: {256, 210},
	IQ4_NL: {32, 18}, IQ4_XS: {256, 136},
}

var typeNames = map[TensorType]string{F32: "F32", F16: "F16", BF16: "BF16", Q4_0: "Q4_0", Q4_1: "Q4_1", Q5_0: "Q5_0",
	Q5_1: "Q5_1", Q8_0: "Q8_0", Q2_K: "Q2_K", Q3_K: "Q3_K", Q4_K: "Q4_K", Q5_K: "Q5_K", Q6_K: "Q6_K", IQ4_NL: "IQ4_NL", IQ4_XS: "IQ4_XS"}

func (t TensorType) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of elements per block of t (0 if unknown).
func (t TensorType) BlockSize() int { return blockInfo[t][0] }

// BlockBytes is the number of bytes per block of t (0 if unknown).
func (t TensorType) BlockBytes() int { return blockInfo[t][1] }

// TensorInfo describes one tensor. Dims are in GGML order: Dims[0] is the
// row length (innermost); Shape gives them outermost first, as row-major
// code expects.
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   TensorType
	Offset uint64 // from the start of the data section
	Size   uint64 // bytes
}

// Shape is Dims reversed: [rows..., row length].
func (t TensorInfo) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[len(t.Dims)-1-i] = int(d)
	}
	return s
}

// File is one memory-mapped GGUF file.
type File struct {
	Path      string
	Version   uint32
	Metadata  map[string]Value
	Keys      []string // metadata keys in file order
	Tensors   []TensorInfo
	byName    map[string]int
	Alignment uint64
	DataAt    uint64
	data      []byte
}

// Value is one metadata value: a scalar, a string, or an array of them.
type Value struct {
	Type  ValueType
	Elem  ValueType // of an array
	Value any       // uint64, int64, float64, bool, string, or []any for arrays
}

// FormatError locates a problem in a file.
type FormatError struct {
	Offset int64
	What   string // the key or tensor, if known
	Err    error
}

func (e *FormatError) Error() string {
	s := fmt.Sprintf("at byte %d: ", e.Offset)
	if e.What != "" {
		s += e.What + ": "
	}
	return s + e.Err.Error()
}

func (e *FormatError) Unwrap() error { return e.Err }

// reader decodes little-endian values from a byte slice with bounds checks.
type reader struct {
	b    []byte
	off  int64
	what string
}

func (r *reader) fail(format string, args ...any) error {
	return &FormatError{Offset: r.off, What: r.what, Err: fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))}
}

func (r *reader) take(n uint64) ([]byte, error) {
	if n > uint64(len(r.b))-uint64(r.off) || r.off > int64(len(r.b)) {
		return nil, r.fail("%d bytes needed, the file ends at %d (truncated?)", n, len(r.b))
	}
	b := r.b[r.off : r.off+int64(n)]
	r.off += int64(n)
	return b, nil
}

func (r *reader) u32() (uint32, error) {
	b, err := r.take(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) u64() (uint64, error) {
	b, err := r.take(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

const maxString = 1 << 26

func (r *reader) str() (string, error) {
	n, err := r.u64()
	if err != nil {
		return "", err
	}
	if n > maxString {
		return "", r.fail("string of %d bytes", n)
	}
	b, err := r.take(n)
	return string(b), err
}

func (r *reader) scalar(t ValueType) (any, error) {
	size := map[ValueType]uint64{TypeUint8: 1, TypeInt8: 1, TypeBool: 1, TypeUint16: 2, TypeInt16: 2, TypeUint32: 4,
		TypeInt32: 4, TypeFloat32: 4, TypeUint64: 8, TypeInt64: 8, TypeFloat64: 8}
	if t == TypeString {
		return r.str()
	}
	n, ok := size[t]
	if !ok {
		return nil, r.fail("unknown value type %d", t)
	}
	b, err := r.take(n)
	if err != nil {
		return nil, err
	}
	var u uint64
	for i := int(n) - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	switch t {
	case TypeUint8, TypeUint16, TypeUint32, TypeUint64:
		return u, nil
	case TypeInt8:
		return int64(int8(u)), nil
	case TypeInt16:
		return int64(int16(u)), nil
	case TypeInt32:
		return int64(int32(u)), nil
	case TypeInt64:
		return int64(u), nil
	case TypeFloat32:
		return float64(math.Float32frombits(uint32(u))), nil
	case TypeFloat64:
		return math.Float64frombits(u), nil
	case TypeBool:
		if u > 1 {
			return nil, r.fail("bool value %d", u)
		}
		return u == 1, nil
	}
	return nil, r.fail("unknown value type %d", t)
}

func (r *reader) value() (Value, error) {
	t, err := r.u32()
	if err != nil {
		return Value{}, err
	}
	if ValueType(t) != TypeArray {
		v, err := r.scalar(ValueType(t))
		return Value{Type: ValueType(t), Value: v}, err
	}
	et, err := r.u32()
	if err != nil {
		return Value{}, err
	}
	n, err := r.u64()
	if err != nil {
		return Value{}, err
	}
	if ValueType(et) == TypeArray {
		return Value{}, r.fail("nested arrays are not supported")
	}
	if n > uint64(len(r.b)) { // every element takes at least one byte
		return Value{}, r.fail("array of %d elements in a file of %d bytes", n, len(r.b))
	}
	items := make([]any, n)
	for i := range items {
		if items[i], err = r.scalar(ValueType(et)); err != nil {
			return Value{}, err
		}
	}
	return Value{Type: TypeArray, Elem: ValueType(et), Value: items}, nil
}

// Parse validates a whole GGUF file held in b (usually a mapping).
func Parse(b []byte) (*File, error) {
	r := &reader{b: b}
	magic, err := r.take(4)
	if err != nil {
		return nil, err
	}
	if string(magic) != "GGUF" {
		return nil, &FormatError{Offset: 0, Err: fmt.Errorf("%w: magic %q, want \"GGUF\"", ErrFormat, magic)}
	}
	f := &File{Metadata: map[string]Value{}, byName: map[string]int{}, Alignment: 32, data: b}
	if f.Version, err = r.u32(); err != nil {
		return nil, err
	}
	if f.Version != 2 && f.Version != 3 {
		return nil, r.fail("version %d (want 2 or 3)", f.Version)
	}
	nTensors, err := r.u64()
	if err != nil {
		return nil, err
	}
	nKV, err := r.u64()
	if err != nil {
		return nil, err
	}
	if nTensors > uint64(len(b))/8 || nKV > uint64(len(b))/8 {
		return nil, r.fail("%d tensors and %d keys cannot fit in %d bytes", nTensors, nKV, len(b))
	}
	for range nKV {
		r.what = ""
		key, err := r.str()
		if err != nil {
			return nil, err
		}
		r.what = "key " + key
		v, err := r.value()
		if err != nil {
			return nil, err
		}
		if _, dup := f.Metadata[key]; dup {
			return nil, r.fail("duplicate key")
		}
		f.Metadata[key] = v
		f.Keys = append(f.Keys, key)
	}
	if a, ok := f.Metadata["general.alignment"]; ok {
		u, isInt := a.Value.(uint64)
		if !isInt || u == 0 || u&(u-1) != 0 {
			return nil, &FormatError{What: "key general.alignment", Err: fmt.Errorf("%w: alignment %v is not a power of two", ErrFormat, a.Value)}
		}
		f.Alignment = u
	}
	for range nTensors {
		r.what = ""
		name, err := r.str()
		if err != nil {
			return nil, err
		}
		r.what = "tensor " + name
		nd, err := r.u32()
		if err != nil {
			return nil, err
		}
		if nd == 0 || nd > 4 {
			return nil, r.fail("%d dimensions", nd)
		}
		ti := TensorInfo{Name: name, Dims: make([]uint64, nd)}
		elems := uint64(1)
		for i := range ti.Dims {
			if ti.Dims[i], err = r.u64(); err != nil {
				return nil, err
			}
			if ti.Dims[i] == 0 || ti.Dims[i] > 1<<40 || elems > (1<<50)/ti.Dims[i] {
				return nil, r.fail("dimension %d is %d", i, ti.Dims[i])
			}
			elems *= ti.Dims[i]
		}
		t, err := r.u32()
		if err != nil {
			return nil, err
		}
		ti.Type = TensorType(t)
		bs, bb := ti.Type.BlockSize(), ti.Type.BlockBytes()
		if bs == 0 {
			return nil, r.fail("tensor type %d is not supported", t)
		}
		if ti.Dims[0]%uint64(bs) != 0 {
			return nil, r.fail("row length %d is not a multiple of the %v block of %d", ti.Dims[0], ti.Type, bs)
		}
		ti.Size = elems / uint64(bs) * uint64(bb)
		if ti.Offset, err = r.u64(); err != nil {
			return nil, err
		}
		if ti.Offset%f.Alignment != 0 {
			return nil, r.fail("data offset %d is not aligned to %d", ti.Offset, f.Alignment)
		}
		if _, dup := f.byName[name]; dup {
			return nil, r.fail("duplicate tensor")
		}
		f.byName[name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, ti)
	}
	f.DataAt = (uint64(r.off) + f.Alignment - 1) / f.Alignment * f.Alignment
	dataLen := uint64(len(b)) - min(f.DataAt, uint64(len(b)))
	sorted := append([]TensorInfo(nil), f.Tensors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Offset < sorted[j].Offset })
	for i, t := range sorted {
		if t.Offset > dataLen || t.Size > dataLen-t.Offset {
			return nil, &FormatError{Offset: int64(f.DataAt + t.Offset), What: "tensor " + t.Name,
				Err: fmt.Errorf("%w: %d bytes at data offset %d run past the end of the file (truncated?)", ErrFormat, t.Size, t.Offset)}
		}
		if i > 0 && t.Offset < sorted[i-1].Offset+sorted[i-1].Size {
			return nil, &FormatError{Offset: int64(f.DataAt + t.Offset), What: "tensor " + t.Name,
				Err: fmt.Errorf("%w: overlaps tensor %s", ErrFormat, sorted[i-1].Name)}
		}
	}
	return f, nil
}

// Open maps path and parses it.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if st.Size() < 24 {
		return nil, fmt.Errorf("gguf: %s: %w", path, &FormatError{Err: fmt.Errorf("%w: %d bytes is too short for a header", ErrFormat, st.Size())})
	}
	data, err := unix.Mmap(int(fd.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: mmap: %w", path, err)
	}
	f, err := Parse(data)
	if err != nil {
		unix.Munmap(data)
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	f.Path = path
	return f, nil
}

// Close unmaps the file.
func (f *File) Close() error {
	if f.data == nil || f.Path == "" {
		return nil
	}
	err := unix.Munmap(f.data)
	f.data = nil
	return err
}

// Tensor looks a tensor up by name.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// Bytes is the data of a tensor, a slice of the mapping.
func (f *File) Bytes(t TensorInfo) []byte {
	return f.data[f.DataAt+t.Offset : f.DataAt+t.Offset+t.Size]
}

// Uint reads an unsigned or non-negative integer key.
func (f *File) Uint(key string) (uint64, bool) {
	v, ok := f.Metadata[key]
	if !ok {
		return 0, false
	}
	switch x := v.Value.(type) {
	case uint64:
		return x, true
	case int64:
		if x >= 0 {
			return uint64(x), true
		}
	}
	return 0, false
}

// Float reads a numeric key as float64.
func (f *File) Float(key string) (float64, bool) {
	v, ok := f.Metadata[key]
	if !ok {
		return 0, false
	}
	switch x := v.Value.(type) {
	case float64:
		return x, true
	case uint64:
		return float64(x), true
	case int64:
		return float64(x), true
	}
	return 0, false
}

// String reads a string key.
func (f *File) String(key string) (string, bool) {
	v, ok := f.Metadata[key]
	if !ok {
		return "", false
	}
	s, ok := v.Value.(string)
	return s, ok
}

// Array reads an array key.
func (f *File) Array(key string) ([]any, bool) {
	v, ok := f.Metadata[key]
	if !ok || v.Type != TypeArray {
		return nil, false
	}
	return v.Value.([]any), true
}
