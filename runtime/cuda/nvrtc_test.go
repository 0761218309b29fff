//go:build linux && amd64

package cuda

import (
	"errors"
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
