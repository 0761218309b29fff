package runtime

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Memory allocates the tensors a backend's kernels read and moves data in
// and out of them. The CPU's memory is the Go heap; a GPU backend's is its
// device memory.
type Memory interface {
	// Alloc returns a zeroed, contiguous tensor in this memory.
	Alloc(dt DType, shape ...int) (*Tensor, error)
	// Free releases a tensor made by Alloc (not a view of one).
	Free(t *Tensor) error
	// Copy copies src into dst: both contiguous, of one dtype and length,
	// each in host memory or in this memory.
	Copy(dst, src *Tensor) error
	// Zero clears a contiguous tensor in this memory.
	Zero(t *Tensor) error
	// Sync waits for the work queued so far and returns the first error a
	// kernel recorded since the last Sync.
	Sync() error
	// Available is the number of bytes free for new allocations.
	Available() int64
	// Staging returns a host tensor that Copy moves to and from this memory
	// fastest (page-locked on a GPU); FreeStaging releases it.
	Staging(dt DType, shape ...int) (*Tensor, error)
	FreeStaging(t *Tensor) error
}

// Stepper is a Memory whose backend can record a forward step's work and
// issue it at once (CUDA graphs). Step runs f, which must not read device
// memory back on the host (whatever must wait for the device mid-step
// works, at the cost of the recording), issues the step and returns
// without waiting for it: the host may record or issue the next step
// while the device runs this one.
type Stepper interface {
	Step(f func() error) (Issued, error)
	// Record records f as the step after the last one issued, without
	// running any of it, while the device may still run that one. Where f
	// needs the device mid-step (a copy, a free, a buffer that grows),
	// Record fails and nothing of f has happened on the device.
	Record(f func() error) (Recording, error)
	// ReadBack, called by a step's f, copies t (on the device) to host
	// memory at that point of the step: the returned host tensor holds it
	// once the step has been waited for, until the step after the next one
	// is issued.
	ReadBack(t *Tensor) (*Tensor, error)
}

// PersistentDecoder is a Memory whose device may run DecodeLayers (a run
// of blocks as one persistent kernel); PersistentDecode says whether it can
// here (nil) or why not. Where it cannot, a model runs the ops DecodeLayers
// replaces.
type PersistentDecoder interface {
	PersistentDecode() error
}

// Recording is a step recorded ahead by Stepper.Record; a later Record
// replaces it.
type Recording interface {
	// Restage copies v, a host array the step staged, again: its values
	// changed since (the tokens sampled after the recording).
	Restage(v []int32) error
	// Feed makes the step take the values of v, a host array it staged,
	// from src, an int32 device tensor of len(v), as the step starts: what
	// the step before it left there (its greedy tokens), so the step can be
	// issued before that one ends.
	Feed(v []int32, src *Tensor) error
	// Issue issues the step as Step does. It fails with ErrStaleRecording,
	// having run nothing, where the device buffers the step uses may have
	// changed since it was recorded, or another step was issued since.
	Issue() (Issued, error)
}

// Issued is a step on its way through the device.
type Issued interface {
	// Wait waits for the step (and those before it, not after it) and
	// returns the first error of a kernel since the last Wait or Sync.
	Wait() error
}

// ErrStaleRecording is a Recording that can no longer be issued.
var ErrStaleRecording = errors.New("recording is stale")

// HostMemory is the CPU's memory: the Go heap.
type HostMemory struct{}

func (HostMemory) Alloc(dt DType, shape ...int) (*Tensor, error)   { return New(dt, shape...), nil }
func (HostMemory) Free(*Tensor) error                              { return nil }
func (HostMemory) Sync() error                                     { return nil }
func (HostMemory) Available() int64                                { return hostAvailable() }
func (HostMemory) Staging(dt DType, shape ...int) (*Tensor, error) { return New(dt, shape...), nil }
func (HostMemory) FreeStaging(*Tensor) error                       { return nil }

func (HostMemory) Copy(dst, src *Tensor) error {
	if err := CheckCopy(dst, src); err != nil {
		return err
	}
	if dst.OnDevice() || src.OnDevice() {
		return fmt.Errorf("runtime: %w: host memory copies host tensors (%v %v ← %v %v)", ErrPlacement, dst.dtype, dst.shape, src.dtype, src.shape)
	}
	copy(dst.Bytes()[:dst.ByteLen()], src.Bytes()[:src.ByteLen()])
	return nil
}

func (HostMemory) Zero(t *Tensor) error {
	if !t.IsContiguous() || t.OnDevice() {
		return fmt.Errorf("runtime: %w: zero of %v %v (contiguous host tensors only)", ErrContiguity, t.dtype, t.shape)
	}
	clear(t.Bytes()[:t.ByteLen()])
	return nil
}

// CheckCopy checks the operands of Memory.Copy.
func CheckCopy(dst, src *Tensor) error {
	if dst.dtype != src.dtype || dst.Len() != src.Len() {
		return fmt.Errorf("runtime: %w: copy of %v %v into %v %v", ErrShape, src.dtype, src.shape, dst.dtype, dst.shape)
	}
	if !dst.IsContiguous() || !src.IsContiguous() {
		return fmt.Errorf("runtime: %w: copy of %v %v (strides %v) into %v (strides %v): both must be contiguous",
			ErrContiguity, src.dtype, src.shape, src.strides, dst.shape, dst.strides)
	}
	return nil
}

// ByteLen is the size of the view's elements in bytes.
func (t *Tensor) ByteLen() int { return t.dtype.ByteLen(t.Len()) }

// Place returns t in the backend's memory: t itself on the CPU, else a
// copy the caller frees with Memory().Free.
func (b *Backend) Place(t *Tensor) (*Tensor, error) {
	if b.dev == CPU {
		return t, nil
	}
	d, err := b.mem.Alloc(t.dtype, t.shape...)
	if err != nil {
		return nil, err
	}
	if err := b.mem.Copy(d, t); err != nil {
		b.mem.Free(d)
		return nil, err
	}
	return d, nil
}

// Fetch returns t in host memory: t itself when it is there, else a copy.
func (b *Backend) Fetch(t *Tensor) (*Tensor, error) {
	if !t.OnDevice() {
		return t, nil
	}
	h := New(t.dtype, t.shape...)
	if err := b.mem.Copy(h, t); err != nil {
		return nil, err
	}
	return h, nil
}

// hostAvailable reads MemAvailable from /proc/meminfo (1 GiB if unknown).
func hostAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 1 << 30
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 1 << 30
}
