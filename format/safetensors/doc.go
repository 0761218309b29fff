// Package safetensors reads Hugging Face safetensors checkpoints, single
// files and sharded ones (model.safetensors.index.json), by memory-mapping
// them. Every header is validated before use: offsets inside the data
// section, sizes equal to dtype × shape, no two tensors overlapping. Errors
// name the file, the tensor and, where it applies, the byte offset.
package safetensors
