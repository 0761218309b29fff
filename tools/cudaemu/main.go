//go:build linux && amd64

// Command cudaemu builds a stand-in for the CUDA driver, NVRTC and cuBLAS
// that runs runtime/cuda's kernels on the CPU: kernels.cu compiled by the
// C++ compiler, each block's threads as fibers. With its folder on
// LD_LIBRARY_PATH, the GPU tests run on a machine without a GPU:
//
//	go run ./tools/cudaemu -o bin/cudaemu
//	LD_LIBRARY_PATH=$PWD/bin/cudaemu GOVLLM_TEST_DEVICE=cuda go test ./runtime/cuda/
//
// It checks what kernels compute, not how fast, and runs each stream's work
// in order as it is issued, so it cannot show races between streams.
package main

import (
	"embed"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/govllm/govllm/runtime/cuda"
)

//go:embed csrc
var sources embed.FS

func main() {
	out := flag.String("o", "bin/cudaemu", "`folder` for libcuda.so.1 and its aliases libnvrtc.so.12, libcublas.so.12")
	cxx := flag.String("cxx", "g++", "the C++ compiler")
	flag.Parse()
	if err := build(*out, *cxx); err != nil {
		fmt.Fprintln(os.Stderr, "cudaemu:", err)
		os.Exit(1)
	}
}

var globalKernel = regexp.MustCompile(`__emu_global__\s+void\s+(\w+)\s*\(`)

func build(out, cxx string) error {
	tmp, err := os.MkdirTemp("", "cudaemu")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	entries, err := sources.ReadDir("csrc")
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := sources.ReadFile("csrc/" + e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	n := 0
	for _, m := range []struct{ file, src, registry, source, array string }{
		{"kernels.cu", cuda.KernelSource(), "registry.inc", "source.inc", "kernelsSource"},
		{"persistent.cu", cuda.PersistentSource(), "registry_persistent.inc", "source_persistent.inc", "persistentSource"},
	} {
		k, err := module(tmp, cxx, m.file, m.src, m.registry, m.source, m.array)
		if err != nil {
			return err
		}
		n += k
	}

	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	lib, err := filepath.Abs(filepath.Join(out, "libcuda.so.1"))
	if err != nil {
		return err
	}
	slog.Info("compiling kernels.cu and persistent.cu for the CPU", "kernels", n, "cxx", cxx)
	cc := exec.Command(cxx, "-std=c++17", "-O2", "-g", "-fPIC", "-shared", "-pthread", "-fvisibility=hidden",
		"-fno-strict-aliasing", "-ffp-contract=off", "-Wall", "-Wno-unknown-pragmas", "-Wno-unused-function", "-Wno-sign-compare",
		"-Wl,--no-undefined", "-Wl,-soname,libcuda.so.1", "-o", lib+".tmp", "device.cc", "host.cc", "kernels_emu.cc", "persistent_emu.cc")
	cc.Dir = tmp
	cc.Stderr = os.Stderr
	if err := cc.Run(); err != nil {
		return fmt.Errorf("compiling: %w", err)
	}
	if err := os.Rename(lib+".tmp", lib); err != nil {
		return err
	}
	// One library under all three names: the dynamic linker opens it once,
	// so cuBLAS's stream capture and the driver share their state.
	for _, alias := range []string{"libnvrtc.so.12", "libcublas.so.12"} {
		p := filepath.Join(out, alias)
		os.Remove(p)
		if err := os.Symlink("libcuda.so.1", p); err != nil {
			return err
		}
	}
	slog.Info("built", "dir", filepath.Dir(lib), "use", "LD_LIBRARY_PATH="+filepath.Dir(lib))
	return nil
}

// module writes a kernel source into tmp with the table of its kernels
// (registry) and its text as the C array the fake NVRTC compares (source);
// it returns how many kernels it has.
func module(tmp, cxx, file, src, registry, source, array string) (int, error) {
	if err := os.WriteFile(filepath.Join(tmp, file), []byte(src), 0o644); err != nil {
		return 0, err
	}
	// The kernels' names, from the preprocessed source (some come from macros).
	scan := exec.Command(cxx, "-std=c++17", "-E", "-DEMU_SCAN", "-include", "emu.h", "-x", "c++", file)
	scan.Dir = tmp
	pre, err := scan.Output()
	if err != nil {
		return 0, fmt.Errorf("preprocessing %s: %w%s", file, err, stderrOf(err))
	}
	var reg strings.Builder
	names := globalKernel.FindAllSubmatch(pre, -1)
	for _, m := range names {
		fmt.Fprintf(&reg, "EMU_KERNEL(%s)\n", m[1])
	}
	if len(names) == 0 {
		return 0, fmt.Errorf("no __global__ kernel found in %s", file)
	}
	var inc strings.Builder
	fmt.Fprintf(&inc, "const unsigned char %s[] = {", array)
	for i := 0; i < len(src); i++ {
		if i%32 == 0 {
			inc.WriteString("\n")
		}
		fmt.Fprintf(&inc, "%d,", src[i])
	}
	fmt.Fprintf(&inc, "0};\nconst size_t %sLen = %d;\n", array, len(src))
	for name, text := range map[string]string{registry: reg.String(), source: inc.String()} {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(text), 0o644); err != nil {
			return 0, err
		}
	}
	return len(names), nil
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return "\n" + string(ee.Stderr)
	}
	return ""
}
