package runtime

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel causes wrapped by *OpError; test with errors.Is.
var (
	ErrShape      = errors.New("shape mismatch")
	ErrDType      = errors.New("unsupported dtype")
	ErrContiguity = errors.New("layout not supported")
	ErrNoKernel   = errors.New("no kernel registered")
	ErrPlacement  = errors.New("tensor in the wrong memory")
	// ErrMemoryFault: a kernel touched memory that faulted, as a mapped
	// model file that was truncated or overwritten in place does.
	ErrMemoryFault = errors.New("memory fault reading an operand (was a mapped model file truncated or overwritten in place?)")
)

// OpError is the error of a dispatch: it names the op, the device and the
// dtypes and shapes of the tensor operands.
type OpError struct {
	Op     OpID
	Device Device
	DTypes []DType
	Shapes [][]int
	Err    error
}

func (e *OpError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "runtime: op %s on %s", e.Op, e.Device)
	if len(e.DTypes) > 0 {
		b.WriteString(" (")
		for i := range e.DTypes {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%v%v", e.DTypes[i], e.Shapes[i])
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *OpError) Unwrap() error { return e.Err }

// Requirement is one (op, dtype) kernel that a model path needs.
type Requirement struct {
	Op    OpID
	DType DType
}

func (r Requirement) String() string {
	if r.DType == F32 {
		return r.Op.String()
	}
	return r.Op.String() + "[" + r.DType.String() + "]"
}

// Path is a named execution path of a model and the kernels it needs.
type Path struct {
	Name  string
	Needs []Requirement
}

// MissingOpsError lists, by name, the kernels a device lacks for a model.
type MissingOpsError struct {
	Device  Device
	Missing []MissingOp
}

// MissingOp is one uncovered requirement and the paths that need it.
type MissingOp struct {
	Requirement
	Paths []string
}

func (e *MissingOpsError) Error() string {
	parts := make([]string, len(e.Missing))
	for i, m := range e.Missing {
		parts[i] = fmt.Sprintf("%s (needed by %s)", m.Requirement, strings.Join(m.Paths, ", "))
	}
	return fmt.Sprintf("runtime: backend %s has no kernel for %d op(s): %s", e.Device, len(e.Missing), strings.Join(parts, "; "))
}

func (e *MissingOpsError) Unwrap() error { return ErrNoKernel }

// Has reports whether op is among the missing ones.
func (e *MissingOpsError) Has(op OpID) bool {
	for _, m := range e.Missing {
		if m.Op == op {
			return true
		}
	}
	return false
}
