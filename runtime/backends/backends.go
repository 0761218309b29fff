// Package backends assembles the registry of every backend compiled into
// govllm. Today that is the CPU; the CUDA backend will register here too.
package backends

import (
	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/cpu"
)

// Registry returns a fresh registry holding every backend's kernels.
func Registry() (*rt.Registry, error) {
	reg := rt.NewRegistry()
	if err := cpu.Register(reg); err != nil {
		return nil, err
	}
	return reg, nil
}

// ParseDevice reads a device name as the CLI takes it.
func ParseDevice(name string) (rt.Device, bool) {
	for _, d := range rt.Devices {
		if d.String() == name {
			return d, true
		}
	}
	return 0, false
}
