package cpu

// ActivationsQuantized is exported to the external tests.
var ActivationsQuantized = activationsQuantized

// EachKernelSet runs f with the CPU's kernels and, on an AVX-512 machine,
// again with the AVX2 set.
var EachKernelSet = eachKernelSet
