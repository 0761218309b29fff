package cuda_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/govllm/govllm/runtime/cuda"
)

// TestOpenNCCL: where NCCL is installed it loads and reports its version
// (and NVLink multicast is off); where it is not, the error says what was
// looked for, where, and how to install it, and wraps ErrUnavailable.
func TestOpenNCCL(t *testing.T) {
	lib, err := cuda.OpenNCCL()
	if err == nil {
		if lib.Version < 20000 {
			t.Fatalf("NCCL %s reports version %d", lib.Path, lib.Version)
		}
		if os.Getenv("NCCL_NVLS_ENABLE") != "0" {
			t.Errorf("NCCL_NVLS_ENABLE=%q", os.Getenv("NCCL_NVLS_ENABLE"))
		}
		t.Logf("NCCL %d from %s", lib.Version, lib.Path)
		if err := lib.Check(); errors.Is(err, cuda.ErrUnavailable) {
			t.Logf("no GPU to run NCCL on: %v", err)
		} else if err != nil {
			t.Fatal(err)
		}
		return
	}
	if !errors.Is(err, cuda.ErrUnavailable) {
		t.Fatalf("not an ErrUnavailable: %v", err)
	}
	for _, want := range []string{"libnccl", "nvidia-nccl"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	t.Log(err)
}
