package gguf

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// builder writes GGUF bytes for tests.
type builder struct{ b []byte }

func (w *builder) u32(v uint32) { w.b = binary.LittleEndian.AppendUint32(w.b, v) }
func (w *builder) u64(v uint64) { w.b = binary.LittleEndian.AppendUint64(w.b, v) }
func (w *builder) str(s string) { w.u64(uint64(len(s))); w.b = append(w.b, s...) }

// sample is a file with every scalar type, a string array and two tensors.
func sample() []byte {
	w := &builder{}
	w.b = append(w.b, "GGUF"...)
	w.u32(3)
	w.u64(2)  // tensors
	w.u64(12) // keys
	w.str("general.architecture")
	w.u32(uint32(TypeString))
	w.str("qwen35")
	for i, t := range []ValueType{TypeUint8, TypeInt8, TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeUint64, TypeInt64} {
		w.str("k" + string(rune('a'+i)))
		w.u32(uint32(t))
		size := map[ValueType]int{TypeUint8: 1, TypeInt8: 1, TypeUint16: 2, TypeInt16: 2, TypeUint32: 4, TypeInt32: 4, TypeUint64: 8, TypeInt64: 8}[t]
		for j := range size {
			w.b = append(w.b, byte(0xff*(j/(size-1+boolInt(size == 1)))))
		}
	}
	w.str("f")
	w.u32(uint32(TypeFloat32))
	w.u32(math.Float32bits(0.5))
	w.str("flag")
	w.u32(uint32(TypeBool))
	w.b = append(w.b, 1)
	w.str("list")
	w.u32(uint32(TypeArray))
	w.u32(uint32(TypeString))
	w.u64(2)
	w.str("a")
	w.str("bc")
	// tensors: a [2, 4] f32 at 0, b [32] q8_0 at 32
	w.str("a")
	w.u32(2)
	w.u64(4)
	w.u64(2)
	w.u32(uint32(F32))
	w.u64(0)
	w.str("b")
	w.u32(1)
	w.u64(32)
	w.u32(uint32(Q8_0))
	w.u64(32)
	for len(w.b)%32 != 0 {
		w.b = append(w.b, 0)
	}
	w.b = append(w.b, make([]byte, 32+34)...)
	return w.b
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestParseSample(t *testing.T) {
	f, err := Parse(sample())
	if err != nil {
		t.Fatal(err)
	}
	if arch, _ := f.String("general.architecture"); arch != "qwen35" || len(f.Keys) != 12 {
		t.Fatalf("keys %v", f.Keys)
	}
	if v, _ := f.Float("f"); v != 0.5 {
		t.Fatalf("f = %v", v)
	}
	if l, _ := f.Array("list"); len(l) != 2 || l[1] != "bc" {
		t.Fatalf("list %v", l)
	}
	a, ok := f.Tensor("a")
	if !ok || a.Size != 32 || a.Shape()[0] != 2 || a.Shape()[1] != 4 {
		t.Fatalf("a %+v", a)
	}
	b, _ := f.Tensor("b")
	if b.Size != 34 || len(f.Bytes(b)) != 34 {
		t.Fatalf("b %+v", b)
	}
}

func TestBadFiles(t *testing.T) {
	good := sample()
	cases := map[string][]byte{
		"bad magic":    append([]byte("GGUX"), good[4:]...),
		"truncated":    good[:len(good)-10],
		"header only":  good[:40],
		"bad version":  append(append([]byte("GGUF"), 9, 0, 0, 0), good[8:]...),
		"huge strings": append(append([]byte(nil), good[:24]...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f),
	}
	for name, data := range cases {
		_, err := Parse(data)
		var fe *FormatError
		if !errors.Is(err, ErrFormat) || !errors.As(err, &fe) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "x.gguf")
	os.WriteFile(p, good[:len(good)-10], 0o644)
	if _, err := Open(p); !errors.Is(err, ErrFormat) {
		t.Fatalf("Open truncated: %v", err)
	}
}

func TestOracleFilesParse(t *testing.T) {
	files, _ := filepath.Glob("../../../shared/oracle/*/gguf/*.gguf")
	if len(files) == 0 {
		t.Fatal("no oracle GGUF files found")
	}
	for _, p := range files {
		f, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := f.Tensor("token_embd.weight"); !ok {
			t.Errorf("%s: no token_embd.weight", p)
		}
		f.Close()
	}
}

// FuzzParse: any bytes give a file whose tensors lie inside the data, or
// an ErrFormat error; never a panic.
func FuzzParse(f *testing.F) {
	f.Add(sample())
	if raw, err := os.ReadFile("../../../shared/oracle/qwen35-dense-norope/gguf/qwen35-dense-norope-f32.gguf"); err == nil {
		f.Add(raw[:min(len(raw), 4096)])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error without ErrFormat: %v", err)
			}
			return
		}
		for _, ti := range g.Tensors {
			if g.DataAt+ti.Offset+ti.Size > uint64(len(data)) {
				t.Fatalf("%s outside the file", ti.Name)
			}
			_ = g.Bytes(ti)
		}
	})
}

func TestWriteReadRoundTrip(t *testing.T) {
	w := NewWriter()
	w.Set("general.architecture", "qwen35")
	w.Set("n", uint32(7))
	w.Set("f", float32(0.25))
	w.Set("flags", []bool{true, false})
	w.Set("names", []string{"a", "b"})
	x := make([]float32, 64)
	for i := range x {
		x[i] = float32(i-32) / 7
	}
	for _, typ := range []TensorType{F32, F16, BF16, Q8_0} {
		data, err := Quantize(typ, x)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Add("t."+typ.String(), typ, []uint64{32, 2}, data); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(t.TempDir(), "x.gguf")
	if err := w.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, _ := f.Uint("n"); n != 7 {
		t.Fatalf("n = %d", n)
	}
	if a, _ := f.Array("flags"); len(a) != 2 || a[0] != true {
		t.Fatalf("flags %v", a)
	}
	for _, typ := range []TensorType{F32, F16, BF16, Q8_0} {
		ti, ok := f.Tensor("t." + typ.String())
		if !ok || ti.Type != typ {
			t.Fatalf("%v missing", typ)
		}
		y, _ := Dequantize(typ, f.Bytes(ti))
		tol := map[TensorType]float64{F32: 0, F16: 4e-3, BF16: 2e-2, Q8_0: 0.02}[typ]
		for i := range x {
			if math.Abs(float64(y[i]-x[i])) > tol {
				t.Fatalf("%v: value %d: %v vs %v", typ, i, y[i], x[i])
			}
		}
	}
	// Q8_0 of a known block: max 127·d, d as f16.
	blk, _ := Quantize(Q8_0, append([]float32{-2, 1}, make([]float32, 30)...))
	if d := f16ToF32(binary.LittleEndian.Uint16(blk)); math.Abs(float64(d)-2.0/127) > 1e-5 || int8(blk[2]) != -127 || int8(blk[3]) != 64 {
		t.Fatalf("q8_0 block %v", blk[:4])
	}
}
