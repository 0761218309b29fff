// Package grammar constrains generation to a context-free grammar: it
// parses GBNF (llama.cpp's grammar format), tracks where a generation is in
// the grammar as a set of parse stacks advanced one code point at a time,
// and computes which tokens of a vocabulary may come next (a mask over the
// whole vocabulary, walked through a prefix trie of the token byte strings
// and cached per parse state).
package grammar
