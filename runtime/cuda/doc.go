// Package cuda is govllm's NVIDIA GPU backend. It opens the CUDA driver,
// NVRTC and cuBLAS at run time through purego (no cgo), compiles its
// kernels (kernels.cu, embedded) with NVRTC on first use and caches the
// image per GPU architecture under the user cache directory. Without a GPU
// or the libraries, Available says why and the binary runs on the CPU.
package cuda
