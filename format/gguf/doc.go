// Package gguf reads GGUF files (versions 2 and 3), the format llama.cpp
// writes: metadata key/values of every type, tensor infos, alignment, and
// the data section, memory-mapped; and writes them. Block formats are
// encoded and decoded by runtime/quant. Every offset and size is validated;
// errors give the byte offset and the key or tensor.
package gguf
