package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func header(t *testing.T, entries map[string]any, dataLen int) []byte {
	t.Helper()
	raw, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	return file(raw, dataLen)
}

func file(raw []byte, dataLen int) []byte {
	b := make([]byte, 8, 8+len(raw)+dataLen)
	binary.LittleEndian.PutUint64(b, uint64(len(raw)))
	b = append(b, raw...)
	return append(b, make([]byte, dataLen)...)
}

func entry(dtype string, shape []int, begin, end int) map[string]any {
	return map[string]any{"dtype": dtype, "shape": shape, "data_offsets": []int{begin, end}}
}

func TestParseHeaderValid(t *testing.T) {
	b := header(t, map[string]any{
		"__metadata__": map[string]string{"format": "pt"},
		"a":            entry("BF16", []int{2, 3}, 0, 12),
		"b":            entry("F32", []int{1}, 12, 16),
		"empty":        entry("F32", []int{0, 4}, 16, 16),
	}, 16)
	h, err := ParseHeader(b, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Tensors["a"]; got.Begin != h.DataAt || got.End != h.DataAt+12 || got.DType != "BF16" {
		t.Fatalf("a = %+v (data at %d)", got, h.DataAt)
	}
	if h.Metadata["format"] != "pt" {
		t.Fatalf("metadata %v", h.Metadata)
	}
}

func TestParseHeaderErrors(t *testing.T) {
	valid := map[string]any{"a": entry("F32", []int{2}, 0, 8)}
	cases := []struct {
		name   string
		data   []byte
		tensor string
	}{
		{"shorter than the length prefix", []byte{1, 2, 3}, ""},
		{"header length past the end", func() []byte { b := header(t, valid, 8); return b[:len(b)-20] }(), ""},
		{"malformed JSON", file([]byte(`{"a": {"dtype": "F32",`), 8), ""},
		{"not an object", file([]byte(`[1, 2]`), 8), ""},
		{"unknown dtype", header(t, map[string]any{"a": entry("F33", []int{2}, 0, 8)}, 8), "a"},
		{"size does not match shape", header(t, map[string]any{"a": entry("F32", []int{3}, 0, 8)}, 8), "a"},
		{"offsets past the data", header(t, map[string]any{"a": entry("F32", []int{4}, 0, 16)}, 8), "a"},
		{"decreasing offsets", header(t, map[string]any{"a": entry("F32", []int{0}, 8, 4)}, 8), "a"},
		{"negative dimension", header(t, map[string]any{"a": entry("F32", []int{-2}, 0, 8)}, 8), "a"},
		{"missing field", header(t, map[string]any{"a": map[string]any{"dtype": "F32", "shape": []int{2}}}, 8), "a"},
		{"overlap", header(t, map[string]any{"a": entry("F32", []int{2}, 0, 8), "b": entry("F32", []int{1}, 4, 8)}, 8), "b"},
		{"one offset", header(t, map[string]any{"a": map[string]any{"dtype": "F32", "shape": []int{2}, "data_offsets": []int{0}}}, 8), "a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseHeader(c.data, int64(len(c.data)))
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("err = %v, want ErrFormat", err)
			}
			var he *HeaderError
			if !errors.As(err, &he) || he.Tensor != c.tensor {
				t.Fatalf("err = %#v, want a HeaderError for tensor %q", err, c.tensor)
			}
		})
	}
}

func TestOpenTruncatedNamesFile(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	if err := Write(&buf, []Tensor{{Name: "w", DType: "F32", Shape: []int{4}, Data: make([]byte, 16)}}, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "model.safetensors")
	if err := os.WriteFile(path, buf.Bytes()[:buf.Len()-4], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	var he *HeaderError
	if !errors.As(err, &he) || he.Tensor != "w" || he.Offset < 8 {
		t.Fatalf("err = %v, want a HeaderError for tensor w with its byte offset", err)
	}
}

func TestWriteOpenRoundTripAndShards(t *testing.T) {
	dir := t.TempDir()
	a := Tensor{Name: "a", DType: "BF16", Shape: []int{2, 2}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}
	b := Tensor{Name: "b", DType: "F32", Shape: []int{1}, Data: []byte{9, 9, 9, 9}}
	if err := WriteFile(filepath.Join(dir, "s1.safetensors"), []Tensor{a}, nil); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "s2.safetensors"), []Tensor{b}, nil); err != nil {
		t.Fatal(err)
	}
	index := `{"metadata": {}, "weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}}`
	if err := os.WriteFile(filepath.Join(dir, IndexName), []byte(index), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, want := range []Tensor{a, b} {
		info, f, ok := c.Lookup(want.Name)
		if !ok || !bytes.Equal(f.Bytes(info), want.Data) {
			t.Fatalf("%s: ok=%v data=%v", want.Name, ok, f.Bytes(info))
		}
	}

	bad := `{"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors"}}`
	if err := os.WriteFile(filepath.Join(dir, IndexName), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDir(dir); err == nil {
		t.Fatal("index naming the wrong shard was accepted")
	}
}

// FuzzParseHeader: any input yields a header or an ErrFormat error, never a
// panic, and every accepted tensor lies inside the file.
func FuzzParseHeader(f *testing.F) {
	var buf bytes.Buffer
	Write(&buf, []Tensor{{Name: "a", DType: "BF16", Shape: []int{2, 2}, Data: make([]byte, 8)}, {Name: "b", DType: "F32", Shape: []int{1}, Data: make([]byte, 4)}}, map[string]string{"format": "pt"})
	f.Add(buf.Bytes())
	f.Add(file([]byte(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`), 8))
	f.Add(file([]byte(`{}`), 0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHeader(data, int64(len(data)))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error without ErrFormat: %v", err)
			}
			return
		}
		for name, info := range h.Tensors {
			if info.Begin < h.DataAt || info.End > int64(len(data)) || info.Begin > info.End {
				t.Fatalf("%s: range [%d, %d) outside file of %d", name, info.Begin, info.End, len(data))
			}
		}
	})
}
