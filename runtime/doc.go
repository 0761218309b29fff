// Package runtime holds govllm's tensor runtime: dtypes, tensors and views,
// the op registry and the dispatcher that validates every call.
//
// Invariants: every op has a name (OpID.String); kernels are registered under
// (op, device, dtype) by providers with a name and a priority; dispatch through
// a Backend validates dtypes, shapes and contiguity before a kernel runs, so
// kernels contain no validation; every dispatch error is an *OpError that
// names the op, the device, the dtypes and the shapes.
package runtime
