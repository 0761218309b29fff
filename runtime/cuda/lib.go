//go:build linux && amd64

package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ebitengine/purego"
)

// library is one shared library opened at run time.
type library struct {
	name   string // what was asked for, for errors
	path   string // what was opened
	handle uintptr
}

// openLibrary tries each name through the dynamic linker's search path
// first, then in each directory of dirs.
func openLibrary(what string, names []string, dirs []string) (*library, error) {
	for _, n := range names {
		if h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			return &library{name: what, path: n, handle: h}, nil
		}
	}
	for _, d := range dirs {
		for _, n := range names {
			p := filepath.Join(d, n)
			if _, err := os.Stat(p); err != nil {
				continue
			}
			h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			if err != nil {
				return nil, fmt.Errorf("%s: %s exists but does not load: %w", what, p, err)
			}
			return &library{name: what, path: p, handle: h}, nil
		}
	}
	shown := dirs
	if len(shown) > 4 {
		shown = append(shown[:4:4], fmt.Sprintf("%d more", len(dirs)-4))
	}
	return nil, fmt.Errorf("%w: %s not found: tried %s through the dynamic linker and in %s",
		ErrUnavailable, what, strings.Join(names, ", "), strings.Join(shown, ", "))
}

// bind resolves each symbol of syms into its function (a pointer to a func
// variable, bound through purego.RegisterFunc) or its address (a *uintptr).
func (l *library) bind(syms map[string]any) error {
	var missing []string
	for name, fn := range syms {
		sym, err := purego.Dlsym(l.handle, name)
		if err != nil {
			missing = append(missing, name)
			continue
		}
		if addr, ok := fn.(*uintptr); ok {
			*addr = sym
			continue
		}
		purego.RegisterFunc(fn, sym)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s (%s) lacks %s", l.name, l.path, strings.Join(missing, ", "))
	}
	return nil
}

// toolkitDirs lists where CUDA's user-space libraries may be: CUDA_HOME,
// the usual install, and the lib folders of pip's nvidia-* packages.
func toolkitDirs() []string {
	var dirs []string
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if h := os.Getenv(env); h != "" {
			dirs = append(dirs, filepath.Join(h, "lib64"), filepath.Join(h, "lib"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/local/nvidia/lib64")
	var sites []string
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		sites = append(sites, filepath.Join(v, "lib/python3*/site-packages"))
	}
	home, _ := os.UserHomeDir()
	sites = append(sites,
		filepath.Join(home, ".local/lib/python3*/site-packages"),
		"/usr/local/lib/python3*/dist-packages", "/usr/lib/python3/dist-packages",
		"/usr/local/lib/python3*/site-packages", "/opt/*/.venv/lib/python3*/site-packages",
		"/opt/conda/lib/python3*/site-packages")
	for _, s := range sites {
		for _, pat := range []string{"nvidia/*/lib", "nvidia/cu*/lib"} {
			m, _ := filepath.Glob(filepath.Join(s, pat))
			dirs = append(dirs, m...)
		}
	}
	return dirs
}

// ErrUnavailable marks the errors that mean this machine has no usable GPU
// or lacks CUDA's libraries, as opposed to a failure of govllm's own code
// (a kernel that does not compile, a bad launch).
var ErrUnavailable = errors.New("no usable GPU or CUDA library")
