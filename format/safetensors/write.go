package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/govllm/govllm/internal/atomicfile"
)

// Tensor is one tensor to write.
type Tensor struct {
	Name  string
	DType string
	Shape []int
	Data  []byte
}

// Write writes tensors, in name order, as a safetensors file.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	sorted := append([]Tensor(nil), tensors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	header := map[string]any{}
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	var off int64
	for _, t := range sorted {
		size, ok := dtypeSizes[t.DType]
		if !ok {
			return fmt.Errorf("safetensors: write %q: unknown dtype %q", t.Name, t.DType)
		}
		n := int64(size)
		for _, d := range t.Shape {
			n *= int64(d)
		}
		if n != int64(len(t.Data)) {
			return fmt.Errorf("safetensors: write %q: %d bytes for %s %v, want %d", t.Name, len(t.Data), t.DType, t.Shape, n)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[t.Name] = map[string]any{"dtype": t.DType, "shape": shape, "data_offsets": []int64{off, off + n}}
		off += n
	}
	raw, err := json.Marshal(header)
	if err != nil {
		return err
	}
	// Pad the header with spaces so that the data section is 8-byte aligned.
	for (8+len(raw))%8 != 0 {
		raw = append(raw, ' ')
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(raw)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return err
	}
	if _, err := w.Write(raw); err != nil {
		return err
	}
	for _, t := range sorted {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes tensors to path, atomically: a failure (a full disk)
// leaves what was there.
func WriteFile(path string, tensors []Tensor, metadata map[string]string) error {
	return atomicfile.Write(path, func(w io.Writer) error { return Write(w, tensors, metadata) })
}

// ReadAll returns every tensor of a checkpoint with a copy of its data, for
// rewriting checkpoints in tools and tests.
func (c *Checkpoint) ReadAll() []Tensor {
	var out []Tensor
	for _, name := range c.Names() {
		info, f, _ := c.Lookup(name)
		out = append(out, Tensor{Name: name, DType: info.DType, Shape: append([]int(nil), info.Shape...), Data: append([]byte(nil), f.Bytes(info)...)})
	}
	return out
}
