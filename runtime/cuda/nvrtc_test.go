//go:build linux && amd64

package cuda

import (
	"errors"
	"os"
	"regexp"
	"testing"
)

// TestKernelsCompile compiles kernels.cu with NVRTC for Hopper and Ampere;
// it needs NVRTC only, no GPU (e.g. Debian's libnvrtc11.2 on the library
// path), and is skipped without it.
func TestKernelsCompile(t *testing.T) {
	for _, arch := range [][2]int{{9, 0}, {8, 0}} {
		image, err := compileKernels(arch[0], arch[1])
		if errors.Is(err, ErrUnavailable) {
			t.Skipf("no NVRTC here: %v", err)
		}
		if err != nil {
			t.Fatalf("sm_%d%d: %v", arch[0], arch[1], err)
		}
		if len(image) == 0 {
			t.Fatalf("sm_%d%d: empty image", arch[0], arch[1])
		}
	}
}

// TestLaunchedKernelsExist checks, without a GPU, that every kernel the
// wrappers launch by name is defined in kernels.cu (a missing one would
// compile and fail only at its first launch).
func TestLaunchedKernelsExist(t *testing.T) {
	src, err := os.ReadFile("ops.go")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`launch2?\("([a-z0-9_]+)"`).FindAllSubmatch(src, -1) {
		names[string(m[1])] = true
	}
	for _, m := range regexp.MustCompile(`"((?:embed|to)_[a-z0-9]+)"`).FindAllSubmatch(src, -1) {
		names[string(m[1])] = true // launched through a table or variable
	}
	if len(names) < 20 {
		t.Fatalf("found only %d kernel names in ops.go", len(names))
	}
	for n := range names {
		if !regexp.MustCompile(`__global__ void (__launch_bounds__\([0-9, ]+\) )?` + n + `\(`).MatchString(kernelSource) {
			t.Errorf("ops.go launches %s, which kernels.cu does not define", n)
		}
	}
}
