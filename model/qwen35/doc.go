// Package qwen35 implements the Qwen3.5 text model, dense and mixture of
// experts: a stack of Gated DeltaNet (linear attention) and gated full
// attention layers, each followed by a SwiGLU MLP or a routed MoE block.
// There is one file per block kind. The model declares the ops of each of
// its paths (paths.go) and Load checks that the backend covers them all
// before it reads any weight.
package qwen35
