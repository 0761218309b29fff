// Package server is govllm's OpenAI-compatible HTTP API in front of an
// engine: /v1/models, /v1/completions, /v1/chat/completions (with streaming,
// tools and reasoning), /tokenize, /detokenize, /health, /version and
// Prometheus metrics under vLLM's names.
package server
