package runtime

import (
	"errors"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestOpNames(t *testing.T) {
	seen := map[string]OpID{}
	for _, op := range Ops() {
		name := op.String()
		if strings.HasPrefix(name, "OpID(") || name == "" || strings.ContainsAny(name, " \t") {
			t.Errorf("op %d has no proper name: %q", op, name)
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("ops %d and %d share the name %q", prev, op, name)
		}
		seen[name] = op
	}
}

func TestF16RoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if back := F32ToF16(f); back != uint16(h) {
			t.Fatalf("f16 %#04x -> %v -> %#04x", h, f, back)
		}
	}
	if got := F16ToF32(F32ToF16(1.0 / 3)); math.Abs(float64(got)-1.0/3) > 1e-3 {
		t.Fatalf("1/3 -> %v", got)
	}
}

func TestBF16RoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := BF16ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if back := F32ToBF16(f); back != uint16(h) {
			t.Fatalf("bf16 %#04x -> %v -> %#04x", h, f, back)
		}
	}
	// Round to nearest even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
	if got := F32ToBF16(1 + 1.0/256); got != 0x3f80 {
		t.Fatalf("tie rounded to %#04x", got)
	}
}

func TestViews(t *testing.T) {
	x := New(F32, 4, 6)
	for i := range x.F32() {
		x.F32()[i] = float32(i)
	}
	cols, err := x.Slice(1, 2, 5)
	if err != nil || cols.IsContiguous() || !cols.RowsContiguous() {
		t.Fatalf("slice: %v contiguous=%v", err, cols.IsContiguous())
	}
	if got := cols.F32()[cols.RowOffset(3)]; got != 20 {
		t.Fatalf("row 3 of the column slice starts at %v, want 20", got)
	}
	heads, err := x.Reshape(4, 2, 3)
	if err != nil || !heads.IsContiguous() {
		t.Fatal(err)
	}
	r, _ := heads.Index(2)
	if r.F32()[r.RowOffset(1)] != 15 {
		t.Fatalf("index/row offset wrong: %v", r.F32()[r.RowOffset(1)])
	}
	// A column slice of width 3 splits into one head of 3; merging rows
	// with it is not expressible by strides.
	if _, err := cols.Reshape(4, 1, 3); err != nil {
		t.Fatalf("split of a strided view: %v", err)
	}
	if _, err := cols.Reshape(12); !errors.Is(err, ErrContiguity) {
		t.Fatalf("merging strided rows: err = %v, want ErrContiguity", err)
	}
	if _, err := x.Reshape(5, -1); !errors.Is(err, ErrShape) {
		t.Fatalf("bad reshape: %v", err)
	}
	if _, err := x.Slice(1, 4, 7); !errors.Is(err, ErrShape) {
		t.Fatalf("bad slice: %v", err)
	}
}

func TestRegistrySelection(t *testing.T) {
	r := NewRegistry()
	var calls []string
	low := func(dst, a, b *Tensor) { calls = append(calls, "low") }
	high := func(dst, a, b *Tensor) { calls = append(calls, "high") }
	if err := Register(r, Add, CPU, F32, Provider{"low", 0}, AddKernel(low)); err != nil {
		t.Fatal(err)
	}
	if err := Register(r, Add, CPU, F32, Provider{"high", 10}, AddKernel(high)); err != nil {
		t.Fatal(err)
	}
	if err := Register(r, Add, CPU, F32, Provider{"low", 5}, AddKernel(low)); err == nil {
		t.Fatal("the same provider registered twice")
	}
	if err := Register(r, Add, CPU, F32, Provider{"tie", 10}, AddKernel(low)); err == nil {
		t.Fatal("two providers at one priority accepted")
	}
	if p, ok := r.Selected(OpAdd, CPU, F32); !ok || p.Name != "high" {
		t.Fatalf("selected %v", p)
	}
	x := New(F32, 2)
	if err := NewBackend(r, CPU).Add(x, x, x); err != nil || len(calls) != 1 || calls[0] != "high" {
		t.Fatalf("err %v calls %v", err, calls)
	}
	without := r.Without(OpAdd, CPU)
	if _, ok := without.Selected(OpAdd, CPU, F32); ok {
		t.Fatal("Without kept the op")
	}
	if _, ok := r.Selected(OpAdd, CPU, F32); !ok {
		t.Fatal("Without changed the original")
	}
}

func TestDispatchErrorsNameOpDeviceDTypesShapes(t *testing.T) {
	r := NewRegistry()
	if err := Register(r, MatMul, CPU, F32, Provider{"test", 0}, MatMulKernel(func(dst, x, w *Tensor) {})); err != nil {
		t.Fatal(err)
	}
	be := NewBackend(r, CPU)
	dst, x := New(F32, 3, 4), New(F32, 3, 5)
	cases := []struct {
		name  string
		w     *Tensor
		dst   *Tensor
		cause error
	}{
		{"inner dims differ", New(F32, 4, 6), dst, ErrShape},
		{"output shape", New(F32, 5, 5), dst, ErrShape},
		{"no kernel for dtype", New(BF16, 4, 5), dst, ErrNoKernel},
		{"activation dtype", New(F32, 4, 5), New(F16, 3, 4), ErrDType},
		{"nil operand", nil, dst, ErrShape},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := be.MatMul(c.dst, x, c.w)
			var oe *OpError
			if !errors.As(err, &oe) || !errors.Is(err, c.cause) {
				t.Fatalf("err = %v, want an OpError wrapping %v", err, c.cause)
			}
			if oe.Op != OpMatMul || oe.Device != CPU || len(oe.Shapes) != len(oe.DTypes) || len(oe.Shapes) == 0 {
				t.Fatalf("error does not name op, device, dtypes and shapes: %+v", oe)
			}
		})
	}
	wT, _ := New(F32, 5, 4).Slice(0, 0, 4) // [4, 4] rows of a [5, 4]: contiguous
	if err := be.MatMul(New(F32, 3, 4), New(F32, 3, 4), wT); err != nil {
		t.Fatalf("contiguous slice rejected: %v", err)
	}
	strided, _ := New(F32, 4, 8).Slice(1, 0, 5)
	if err := be.MatMul(dst, x, strided); !errors.Is(err, ErrContiguity) {
		t.Fatalf("strided weight: err = %v, want ErrContiguity", err)
	}
}

func TestCheckListsMissingOpsByPath(t *testing.T) {
	r := NewRegistry()
	_ = Register(r, Add, CPU, F32, Provider{"t", 0}, AddKernel(func(dst, a, b *Tensor) {}))
	err := r.Check(CPU, []Path{
		{Name: "p1", Needs: []Requirement{{OpAdd, F32}, {OpMatMul, BF16}}},
		{Name: "p2", Needs: []Requirement{{OpMatMul, BF16}, {OpSplitQueryGate, F32}}},
	})
	var m *MissingOpsError
	if !errors.As(err, &m) || !errors.Is(err, ErrNoKernel) {
		t.Fatalf("err = %v", err)
	}
	if len(m.Missing) != 2 || !m.Has(OpMatMul) || !m.Has(OpSplitQueryGate) || m.Has(OpAdd) {
		t.Fatalf("missing = %+v", m.Missing)
	}
	if got := m.Missing[0].Paths; len(got) != 2 {
		t.Fatalf("matmul[bf16] paths = %v, want both", got)
	}
}

// TestOpStringsAreGenerated fails when op_string.go is stale: each name
// must be the line comment of its constant in op.go (run go generate).
func TestOpStringsAreGenerated(t *testing.T) {
	src, err := os.ReadFile("op.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^\t(Op\w+)\s.*// (\S+)$`)
	matches := re.FindAllStringSubmatch(string(src), -1)
	if len(matches) != int(opCount) {
		t.Fatalf("%d commented op constants, %d ops", len(matches), opCount)
	}
	for i, m := range matches {
		if got := OpID(i).String(); got != m[2] {
			t.Errorf("%s is %q in op_string.go, %q in op.go: run go generate ./runtime", m[1], got, m[2])
		}
	}
}

func TestPlacementIsChecked(t *testing.T) {
	reg := NewRegistry()
	host := New(F32, 2, 4)
	dev, err := FromDevice(F32, 0x1000, 2, 4) // never dereferenced: the check fails first
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := dev.Slice(0, 1, 2); v.DevicePtr() != 0x1000+16 || !v.OnDevice() {
		t.Errorf("view of a device tensor at %#x, want %#x", v.DevicePtr(), 0x1000+16)
	}
	for _, c := range []struct {
		dev  Device
		x, y *Tensor
		want string
	}{
		{CPU, host, dev, "operand 2 is in device memory, the op runs on cpu"},
		{CUDA, dev, host, "operand 2 is in host memory, the op runs on cuda"},
	} {
		err := NewBackend(reg, c.dev).Add(c.x, c.x, c.y)
		var oe *OpError
		if !errors.As(err, &oe) || !errors.Is(err, ErrPlacement) || oe.Op != OpAdd || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an add OpError saying %q", c.dev, err, c.want)
		}
	}
}

// TestMatrixStrideMatchesReshape: the row stride MatrixStride finds is the
// one a [Rows, Dim(-1)] reshape gives, and both refuse the same views.
func TestMatrixStrideMatchesReshape(t *testing.T) {
	base := New(F32, 4, 6, 8)
	views := []*Tensor{base, New(F32, 5), New(F32, 1, 7), New(F32, 3, 1, 5)}
	for _, sl := range [][3]int{{0, 1, 3}, {1, 2, 5}, {2, 0, 4}, {1, 0, 6}} {
		v, err := base.Slice(sl[0], sl[1], sl[2])
		if err != nil {
			t.Fatal(err)
		}
		views = append(views, v)
		if w, err := v.Slice(0, 1, 2); err == nil {
			views = append(views, w)
		}
	}
	for _, v := range views {
		s, err := v.MatrixStride()
		r, rerr := v.Reshape(v.Rows(), v.Dim(-1))
		if (err == nil) != (rerr == nil) {
			t.Fatalf("%v strides %v: MatrixStride %v, Reshape %v", v.Shape(), v.Strides(), err, rerr)
		}
		if err == nil && s != r.Strides()[0] {
			t.Fatalf("%v strides %v: MatrixStride %d, Reshape %d", v.Shape(), v.Strides(), s, r.Strides()[0])
		}
	}
	if n := testing.AllocsPerRun(100, func() { base.MatrixStride() }); n != 0 {
		t.Errorf("MatrixStride allocates %v times", n)
	}
}
