//go:build !(linux && amd64)

package cuda

import (
	"errors"

	rt "github.com/govllm/govllm/runtime"
)

// Register adds nothing: the CUDA backend is built for linux/amd64 only.
func Register(*rt.Registry) error { return nil }

// Available says why CUDA cannot be used on this platform.
func Available() error { return errors.New("cuda: this build (not linux/amd64) has no CUDA backend") }
