package model

import (
	"errors"
	"fmt"

	"github.com/govllm/govllm/format/safetensors"
	rt "github.com/govllm/govllm/runtime"
)

// TensorInfo describes a stored tensor without reading it.
type TensorInfo struct {
	Name  string
	DType rt.DType // DTypeInvalid where the stored dtype is not one govllm computes with
	Raw   string   // the dtype as the file names it
	Shape []int
	File  string
}

// Source is where a model's named tensors come from.
type Source interface {
	// Info describes a tensor by name without reading its data.
	Info(name string) (TensorInfo, bool)
	// Tensor returns the tensor, backed by the file's mapping (not copied).
	Tensor(name string) (*rt.Tensor, error)
	// Names lists every tensor, sorted.
	Names() []string
	// Where names the checkpoint, for error messages.
	Where() string
	Close() error
}

// ErrTensor is wrapped by errors about a stored tensor.
var ErrTensor = errors.New("bad tensor")

// Safetensors is a Source over a safetensors checkpoint directory.
type Safetensors struct{ ckpt *safetensors.Checkpoint }

// OpenSafetensors opens the checkpoint in dir; only headers are read.
func OpenSafetensors(dir string) (*Safetensors, error) {
	c, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	return &Safetensors{ckpt: c}, nil
}

var stDTypes = map[string]rt.DType{"F32": rt.F32, "BF16": rt.BF16, "F16": rt.F16}

func (s *Safetensors) Info(name string) (TensorInfo, bool) {
	info, f, ok := s.ckpt.Lookup(name)
	if !ok {
		return TensorInfo{}, false
	}
	return TensorInfo{Name: name, DType: stDTypes[info.DType], Raw: info.DType, Shape: info.Shape, File: f.Path}, true
}

func (s *Safetensors) Tensor(name string) (*rt.Tensor, error) {
	info, f, ok := s.ckpt.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("model: %w: tensor %q not in checkpoint %s", ErrTensor, name, s.ckpt.Dir)
	}
	dt, ok := stDTypes[info.DType]
	if !ok {
		return nil, fmt.Errorf("model: %s: tensor %q: %w: dtype %s is not supported (want F32, BF16 or F16)", f.Path, name, ErrTensor, info.DType)
	}
	t, err := rt.FromBytes(dt, f.Bytes(info), info.Shape...)
	if err != nil {
		return nil, fmt.Errorf("model: %s: tensor %q: %w", f.Path, name, err)
	}
	return t, nil
}

func (s *Safetensors) Names() []string { return s.ckpt.Names() }
func (s *Safetensors) Where() string   { return s.ckpt.Dir }
func (s *Safetensors) Close() error    { return s.ckpt.Close() }
