package cpu_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/cpu"
)

// TestFaultInPoolIsAnError: a weight matrix mapped from a file that is
// then truncated faults inside the pool's workers; the op returns an error
// wrapping ErrMemoryFault, and the pool serves the next op.
func TestFaultInPoolIsAnError(t *testing.T) {
	const rows, cols = 512, 256
	path := filepath.Join(t.TempDir(), "w.bin")
	if err := os.WriteFile(path, make([]byte, rows*cols*4), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := unix.Mmap(int(f.Fd()), 0, rows*cols*4, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	reg := rt.NewRegistry()
	if err := cpu.Register(reg); err != nil {
		t.Fatal(err)
	}
	be := rt.NewBackend(reg, rt.CPU)
	w, err := rt.FromBytes(rt.F32, data, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	x, dst := rt.New(rt.F32, 8, cols), rt.New(rt.F32, 8, rows)
	if err := be.MatMul(dst, x, w); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if err := be.MatMul(dst, x, w); !errors.Is(err, rt.ErrMemoryFault) {
		t.Fatalf("matmul over a truncated mapping: %v", err)
	}
	ok := rt.New(rt.F32, rows, cols)
	if err := be.MatMul(dst, x, ok); err != nil {
		t.Fatalf("the next op: %v", err)
	}
}
