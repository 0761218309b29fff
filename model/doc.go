// Package model holds what every model architecture shares: the Source of
// named weight tensors (safetensors today, GGUF later) that an architecture
// package such as model/qwen35 binds its weights from.
package model
