//go:build !(linux && amd64)

package cuda

import (
	"errors"
	"fmt"
	"io"

	rt "github.com/govllm/govllm/runtime"
)

// Register adds nothing: the CUDA backend is built for linux/amd64 only.
func Register(*rt.Registry) error { return nil }

// Available says why CUDA cannot be used on this platform.
func Available() error {
	return fmt.Errorf("cuda: %w: this build (not linux/amd64) has no CUDA backend", ErrUnavailable)
}

// ErrUnavailable marks the errors that mean no usable GPU or CUDA library.
var ErrUnavailable = errors.New("no usable GPU or CUDA library")

// DeviceMemory fails: there is no CUDA backend in this build.
func DeviceMemory() (rt.Memory, error) { return nil, Available() }

// GraphStats counts the steps issued as graphs, the graphs captured, and
// the steps recorded ahead that were issued.
type GraphStats struct{ Launches, Captures, Ahead int }

// Graphs reports none: there is no CUDA backend in this build.
func Graphs() GraphStats { return GraphStats{} }

// WriteProfile writes nothing: there is no CUDA backend in this build.
func WriteProfile(io.Writer) {}

// NCCL is NVIDIA's collective library; this build has none.
type NCCL struct {
	Path    string
	Version int
}

// OpenNCCL fails: there is no CUDA backend in this build.
func OpenNCCL() (*NCCL, error) { return nil, Available() }

// Check fails: there is no CUDA backend in this build.
func (n *NCCL) Check() error { return Available() }
