package runtime

import (
	"fmt"
	"strings"
	"unsafe"
)

// Tensor is a typed, strided view of a byte buffer. Shapes and strides are in
// elements; a view shares its parent's buffer.
type Tensor struct {
	dtype   DType
	shape   []int // in dims and strd below up to maxRank, so a view
	strides []int // allocates nothing beyond its Tensor
	offset  int   // elements from the start of data
	data    []byte
	device  uintptr // base address of device memory; data is nil then
	dims    [maxRank]int
	strd    [maxRank]int
}

const maxRank = 4

// init sets the dtype, data, shape and strides (copied; contiguous where
// strides is nil).
func (t *Tensor) init(dt DType, data []byte, offset int, shape, strides []int) {
	t.dtype, t.data, t.offset = dt, data, offset
	r := len(shape)
	if r <= maxRank {
		t.shape, t.strides = t.dims[:r:r], t.strd[:r:r]
	} else {
		t.shape, t.strides = make([]int, r), make([]int, r)
	}
	copy(t.shape, shape)
	if strides != nil {
		copy(t.strides, strides)
		return
	}
	st := 1
	for i := r - 1; i >= 0; i-- {
		t.strides[i] = st
		st *= shape[i]
	}
}

// viewOf makes t a view of parent's buffer (host or device).
func (t *Tensor) viewOf(parent *Tensor, offset int, shape, strides []int) {
	t.init(parent.dtype, parent.data, offset, shape, strides)
	t.device = parent.device
}

// FromDevice wraps device memory at base (not owned) as a contiguous tensor;
// a backend's kernels read it through DevicePtr.
func FromDevice(dt DType, base uintptr, shape ...int) (*Tensor, error) {
	if err := wholeBlocks(dt, shape); err != nil {
		return nil, err
	}
	if base == 0 {
		return nil, fmt.Errorf("runtime: device tensor %v %v at address 0", dt, shape)
	}
	t := &Tensor{}
	t.init(dt, nil, 0, shape, nil)
	t.device = base
	return t, nil
}

// wholeBlocks checks that rows of shape are whole blocks of dt.
func wholeBlocks(dt DType, shape []int) error {
	if e, _ := dt.Block(); e == 0 || (len(shape) > 0 && shape[len(shape)-1]%e != 0) {
		return fmt.Errorf("runtime: %w: %v for shape %v", ErrDType, dt, shape)
	}
	return nil
}

// OnDevice reports whether the tensor's elements are in device memory.
func (t *Tensor) OnDevice() bool { return t.device != 0 }

// DevicePtr is the device address of the view's first element (0 for a host
// tensor).
func (t *Tensor) DevicePtr() uintptr {
	if t.device == 0 {
		return 0
	}
	return t.device + uintptr(t.dtype.ByteLen(t.offset))
}

// New allocates a zeroed, contiguous tensor.
func New(dt DType, shape ...int) *Tensor {
	n := dt.ByteLen(numel(shape))
	t := &Tensor{}
	t.init(dt, wordBytes(n), 0, shape, nil)
	return t
}

// wordBytes allocates n zeroed bytes as float32 words, so that F32 data is
// 4-byte aligned.
func wordBytes(n int) []byte {
	words := make([]float32, (n+3)/4)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*4)[:n]
}

// FromF32 wraps data (not copied) as a contiguous F32 tensor.
func FromF32(data []float32, shape ...int) (*Tensor, error) {
	if numel(shape) != len(data) {
		return nil, fmt.Errorf("runtime: %d floats do not fill shape %v", len(data), shape)
	}
	buf := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(data))), len(data)*4)
	t := &Tensor{}
	t.init(F32, buf, 0, shape, nil)
	return t, nil
}

// FromBytes wraps data (not copied, e.g. a memory-mapped weight) as a
// contiguous tensor of dtype dt.
func FromBytes(dt DType, data []byte, shape ...int) (*Tensor, error) {
	if err := wholeBlocks(dt, shape); err != nil {
		return nil, err
	}
	if want := dt.ByteLen(numel(shape)); want != len(data) {
		return nil, fmt.Errorf("runtime: %w: %d bytes for %v %v, want %d", ErrShape, len(data), dt, shape, want)
	}
	t := &Tensor{}
	t.init(dt, data, 0, shape, nil)
	return t, nil
}

func (t *Tensor) DType() DType   { return t.dtype }
func (t *Tensor) Shape() []int   { return t.shape }
func (t *Tensor) Strides() []int { return t.strides }
func (t *Tensor) Rank() int      { return len(t.shape) }

// Dim is the size of dimension i; negative i counts from the end.
func (t *Tensor) Dim(i int) int {
	if i < 0 {
		i += len(t.shape)
	}
	return t.shape[i]
}

// Len is the number of elements.
func (t *Tensor) Len() int { return numel(t.shape) }

// IsContiguous reports whether the elements are dense in row-major order.
func (t *Tensor) IsContiguous() bool {
	want := 1
	for i := len(t.shape) - 1; i >= 0; i-- {
		if t.shape[i] != 1 && t.strides[i] != want {
			return false
		}
		want *= t.shape[i]
	}
	return true
}

// RowsContiguous reports whether the last dimension is dense, so that the
// tensor reads as rows of Dim(-1) elements at strided offsets.
func (t *Tensor) RowsContiguous() bool {
	return len(t.shape) > 0 && (t.shape[len(t.shape)-1] <= 1 || t.strides[len(t.strides)-1] == 1)
}

// Rows is the number of rows of Dim(-1) elements.
func (t *Tensor) Rows() int {
	if len(t.shape) == 0 {
		return 1
	}
	return numel(t.shape[:len(t.shape)-1])
}

// RowOffset is the element offset, within F32()/Bytes(), of row r.
func (t *Tensor) RowOffset(r int) int {
	off := 0
	for i := len(t.shape) - 2; i >= 0; i-- {
		off += (r % t.shape[i]) * t.strides[i]
		r /= t.shape[i]
	}
	return off
}

// F32 returns the float32 elements from the view's first element to the end
// of the buffer; index it with strides. It panics unless the dtype is F32.
func (t *Tensor) F32() []float32 { return elements[float32](t, F32) }

// I32 returns the int32 elements like F32 does. It panics unless the
// dtype is I32.
func (t *Tensor) I32() []int32 { return elements[int32](t, I32) }

// elements is F32 and I32: the host buffer from the view on as 4-byte Es.
func elements[E float32 | int32](t *Tensor, want DType) []E {
	if t.dtype != want {
		panic("runtime: " + strings.ToUpper(want.String()) + "() on a " + t.dtype.String() + " tensor")
	}
	if t.device != 0 {
		panic("runtime: " + strings.ToUpper(want.String()) + "() on a device tensor")
	}
	b := t.data[t.offset*4:]
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*E)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// U16 returns the 16-bit elements (BF16 or F16 bit patterns) like F32 does.
func (t *Tensor) U16() []uint16 {
	if t.dtype.Size() != 2 {
		panic("runtime: U16() on a " + t.dtype.String() + " tensor")
	}
	b := t.data[t.offset*2:]
	if len(b) < 2 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2)
}

// Bytes returns the raw bytes from the view's first element.
func (t *Tensor) Bytes() []byte { return t.data[t.dtype.ByteLen(t.offset):] }

// Slice is the view of elements [start, end) along dim.
func (t *Tensor) Slice(dim, start, end int) (*Tensor, error) {
	v := &Tensor{}
	return v, t.sliceInto(v, dim, start, end)
}

func (t *Tensor) sliceInto(v *Tensor, dim, start, end int) error {
	if dim < 0 || dim >= len(t.shape) || start < 0 || end > t.shape[dim] || start > end {
		return fmt.Errorf("runtime: %w: slice [%d:%d] of dim %d of shape %v", ErrShape, start, end, dim, t.shape)
	}
	v.viewOf(t, t.offset+start*t.strides[dim], t.shape, t.strides)
	v.shape[dim] = end - start
	return nil
}

// Index is the view of element i along dimension 0, one rank lower.
func (t *Tensor) Index(i int) (*Tensor, error) {
	if len(t.shape) == 0 || i < 0 || i >= t.shape[0] {
		return nil, fmt.Errorf("runtime: %w: index %d of shape %v", ErrShape, i, t.shape)
	}
	v := &Tensor{}
	v.viewOf(t, t.offset+i*t.strides[0], t.shape[1:], t.strides[1:])
	return v, nil
}

// Reshape is a view with a new shape. Splitting or merging dimensions is
// allowed where the strides permit it; one dimension may be -1.
func (t *Tensor) Reshape(shape ...int) (*Tensor, error) {
	v := &Tensor{}
	return v, t.reshapeInto(v, shape)
}

func (t *Tensor) reshapeInto(v *Tensor, shape []int) error {
	var sb, stb [maxRank]int
	shape = append(sb[:0], shape...)
	infer, known := -1, 1
	for i, d := range shape {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d < 0:
			return fmt.Errorf("runtime: %w: reshape %v to %v", ErrShape, t.shape, clone(shape))
		default:
			known *= d
		}
	}
	if infer >= 0 && known > 0 {
		shape[infer] = t.Len() / known
	}
	if numel(shape) != t.Len() {
		return fmt.Errorf("runtime: %w: reshape %v to %v", ErrShape, t.shape, clone(shape))
	}
	strides := append(stb[:0], shape...)
	if !reshapeStrides(t.shape, t.strides, shape, strides) {
		return fmt.Errorf("runtime: %w: reshape of a non-contiguous %v (strides %v) to %v", ErrContiguity, t.shape, t.strides, clone(shape))
	}
	v.viewOf(t, t.offset, shape, strides)
	return nil
}

// MatrixStride is the row stride of t seen as a [Rows(), Dim(-1)] matrix,
// found without making that view (kernels ask it of every operand of
// every op); an error where the rows cannot be merged without a copy.
func (t *Tensor) MatrixStride() (int, error) {
	var stb [2]int
	if len(t.shape) == 0 || !reshapeStrides(t.shape, t.strides, []int{t.Rows(), t.Dim(-1)}, stb[:]) {
		return 0, fmt.Errorf("runtime: %w: a non-contiguous %v (strides %v) as a matrix", ErrContiguity, t.shape, t.strides)
	}
	return stb[0], nil
}

// MustReshape is Reshape for shapes the caller has already validated.
func (t *Tensor) MustReshape(shape ...int) *Tensor {
	v, err := t.Reshape(shape...)
	if err != nil {
		panic(err)
	}
	return v
}

func (t *Tensor) String() string {
	return fmt.Sprintf("%v%v", t.dtype, t.shape)
}

// reshapeStrides computes strides for newShape over a tensor (old, strides)
// whose dimension groups can be merged or split without copying, into out
// (len(newShape)).
func reshapeStrides(old, strides, newShape, out []int) bool {
	oi, ni := 0, 0
	for oi < len(old) || ni < len(newShape) {
		// Skip size-1 dims, which carry no stride constraint.
		if oi < len(old) && old[oi] == 1 {
			oi++
			continue
		}
		if ni < len(newShape) && newShape[ni] == 1 {
			out[ni] = 1
			ni++
			continue
		}
		if oi >= len(old) || ni >= len(newShape) {
			return false
		}
		// Grow a group of old dims and new dims with equal element counts.
		oj, nj := oi+1, ni+1
		op, np := old[oi], newShape[ni]
		for op != np {
			if op < np {
				if oj >= len(old) {
					return false
				}
				op *= old[oj]
				oj++
			} else {
				if nj >= len(newShape) {
					return false
				}
				np *= newShape[nj]
				nj++
			}
		}
		// The old group's non-unit dims must be contiguous among themselves.
		last := -1
		for k := oi; k < oj; k++ {
			if old[k] == 1 {
				continue
			}
			if last >= 0 && strides[last] != strides[k]*old[k] {
				return false
			}
			last = k
		}
		st := strides[last]
		for k := nj - 1; k >= ni; k-- {
			out[k] = st
			st *= newShape[k]
		}
		oi, ni = oj, nj
	}
	return true
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

func clone(s []int) []int { return append([]int(nil), s...) }
