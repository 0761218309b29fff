// Package engine turns a model into a text generator: sampling now, and the
// scheduler, paged KV cache and batching as they land.
package engine
