// Package cpu is govllm's CPU backend: a kernel for every op of the Qwen3.5
// paths, registered by Register under the provider "go" (plain Go). Kernels
// trust their arguments, which the runtime dispatcher has validated, and
// split work over all cores through a small worker pool.
package cpu
