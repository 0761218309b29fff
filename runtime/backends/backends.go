// Package backends assembles the registry of every backend compiled into
// govllm: the CPU, and CUDA (usable where a GPU and its libraries are).
package backends

import (
	"fmt"

	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/cpu"
	"github.com/govllm/govllm/runtime/cuda"
)

// Registry returns a fresh registry holding every backend's kernels.
func Registry() (*rt.Registry, error) {
	reg := rt.NewRegistry()
	if err := cpu.Register(reg); err != nil {
		return nil, err
	}
	if err := cuda.Register(reg); err != nil {
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

// Usable reports why dev cannot run here (no GPU, no driver, no NVRTC or
// cuBLAS), or nil.
func Usable(dev rt.Device) error {
	if dev == rt.CUDA {
		if err := cuda.Available(); err != nil {
			return fmt.Errorf("--device cuda: CUDA is unavailable: %w", err)
		}
	}
	return nil
}

// New returns a backend on dev with every backend's kernels and dev's
// memory; for a GPU the error says why it cannot run here.
func New(dev rt.Device) (*rt.Backend, error) {
	if err := Usable(dev); err != nil {
		return nil, err
	}
	reg, err := Registry()
	if err != nil {
		return nil, err
	}
	if dev == rt.CPU {
		return rt.NewBackend(reg, dev), nil
	}
	mem, err := cuda.DeviceMemory()
	if err != nil {
		return nil, fmt.Errorf("--device %s: %w", dev, err)
	}
	return rt.NewBackendWith(reg, dev, mem), nil
}
