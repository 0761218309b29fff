package qwen35

// Concatenated returns opts with projections concatenated even in host
// memory, where loading otherwise keeps them apart.
func Concatenated(opts Options) Options {
	opts.concat = true
	return opts
}
