package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// MaxHeaderSize bounds the JSON header, as the reference implementation does.
const MaxHeaderSize = 100 << 20

// ErrFormat is wrapped by every error about malformed file contents.
var ErrFormat = errors.New("malformed safetensors")

// dtypeSizes are the element sizes of the safetensors dtypes.
var dtypeSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// Info describes one tensor: its dtype name as written, shape, and the
// absolute byte range of its data in the file.
type Info struct {
	Name  string
	DType string
	Shape []int
	Begin int64
	End   int64
}

// Header is the parsed header of one file.
type Header struct {
	Tensors  map[string]Info
	Metadata map[string]string
	DataAt   int64 // file offset of the data section
}

// HeaderError locates a header problem.
type HeaderError struct {
	Tensor string // empty for file-level problems
	Offset int64  // byte offset in the file, or -1
	Err    error
}

func (e *HeaderError) Error() string {
	s := ""
	if e.Tensor != "" {
		s = fmt.Sprintf("tensor %q: ", e.Tensor)
	}
	if e.Offset >= 0 {
		s += fmt.Sprintf("at byte %d: ", e.Offset)
	}
	return s + e.Err.Error()
}

func (e *HeaderError) Unwrap() error { return e.Err }

func formatErr(tensor string, off int64, format string, args ...any) error {
	return &HeaderError{Tensor: tensor, Offset: off, Err: fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))}
}

type rawEntry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// ParseHeader validates the start of a safetensors file of fileSize bytes;
// prefix holds at least the 8-byte length and the JSON header.
func ParseHeader(prefix []byte, fileSize int64) (*Header, error) {
	if fileSize < 8 || len(prefix) < 8 {
		return nil, formatErr("", 0, "file of %d bytes is too short for the 8-byte header length", fileSize)
	}
	n := binary.LittleEndian.Uint64(prefix[:8])
	if n > MaxHeaderSize {
		return nil, formatErr("", 0, "header length %d exceeds the limit of %d", n, MaxHeaderSize)
	}
	if int64(n) > fileSize-8 {
		return nil, formatErr("", 0, "header length %d runs past the end of the %d-byte file (truncated?)", n, fileSize)
	}
	if uint64(len(prefix)) < 8+n {
		return nil, formatErr("", 8, "header of %d bytes not fully read", n)
	}
	raw := prefix[8 : 8+n]
	dataAt := int64(8 + n)
	dataLen := fileSize - dataAt

	var entries map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&entries); err != nil {
		return nil, jsonErr(err, raw)
	}
	if entries == nil {
		return nil, formatErr("", 8, "header is not a JSON object")
	}
	h := &Header{Tensors: make(map[string]Info, len(entries)), DataAt: dataAt}
	for name, msg := range entries {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &h.Metadata); err != nil {
				return nil, formatErr(name, -1, "metadata is not an object of strings: %v", err)
			}
			continue
		}
		info, err := parseEntry(name, msg, dataAt, dataLen)
		if err != nil {
			return nil, err
		}
		h.Tensors[name] = info
	}
	if err := checkOverlap(h.Tensors); err != nil {
		return nil, err
	}
	return h, nil
}

func jsonErr(err error, raw []byte) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return formatErr("", 8+se.Offset, "header JSON: %v", err)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return formatErr("", 8+te.Offset, "header JSON: %v", err)
	}
	return formatErr("", 8, "header JSON (%d bytes): %v", len(raw), err)
}

func parseEntry(name string, msg json.RawMessage, dataAt, dataLen int64) (Info, error) {
	var e rawEntry
	if err := json.Unmarshal(msg, &e); err != nil {
		return Info{}, formatErr(name, -1, "entry: %v", err)
	}
	if e.DType == nil || e.Shape == nil || e.DataOffsets == nil {
		return Info{}, formatErr(name, -1, "entry needs dtype, shape and data_offsets")
	}
	size, ok := dtypeSizes[*e.DType]
	if !ok {
		return Info{}, formatErr(name, -1, "unknown dtype %q", *e.DType)
	}
	shape := make([]int, len(*e.Shape))
	elems := int64(1)
	for i, d := range *e.Shape {
		if d < 0 || d > 1<<40 {
			return Info{}, formatErr(name, -1, "dimension %d of shape %v is out of range", i, *e.Shape)
		}
		shape[i] = int(d)
		if d != 0 && elems > (1<<62)/d {
			return Info{}, formatErr(name, -1, "shape %v overflows", *e.Shape)
		}
		elems *= d
	}
	offs := *e.DataOffsets
	if len(offs) != 2 {
		return Info{}, formatErr(name, -1, "data_offsets has %d values, want 2", len(offs))
	}
	begin, end := offs[0], offs[1]
	if begin < 0 || end < begin {
		return Info{}, formatErr(name, -1, "data_offsets [%d, %d] are not an increasing range", begin, end)
	}
	if end > dataLen {
		return Info{}, formatErr(name, dataAt+begin, "data_offsets [%d, %d] run past the %d-byte data section (truncated file?)", begin, end, dataLen)
	}
	if want := elems * int64(size); end-begin != want {
		return Info{}, formatErr(name, dataAt+begin, "holds %d bytes, but %s %v needs %d", end-begin, *e.DType, shape, want)
	}
	return Info{Name: name, DType: *e.DType, Shape: shape, Begin: dataAt + begin, End: dataAt + end}, nil
}

func checkOverlap(tensors map[string]Info) error {
	list := make([]Info, 0, len(tensors))
	for _, t := range tensors {
		if t.End > t.Begin {
			list = append(list, t)
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Begin != list[j].Begin {
			return list[i].Begin < list[j].Begin
		}
		return list[i].Name < list[j].Name
	})
	for i := 1; i < len(list); i++ {
		if list[i].Begin < list[i-1].End {
			return formatErr(list[i].Name, list[i].Begin, "data overlaps tensor %q (bytes %d..%d)", list[i-1].Name, list[i-1].Begin, list[i-1].End)
		}
	}
	return nil
}
