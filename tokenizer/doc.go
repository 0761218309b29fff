// Package tokenizer implements the tokenizers that Hugging Face's
// tokenizer.json describes for byte-level BPE models (Qwen, Llama 3, GPT-2
// style): normalizers, the Split and ByteLevel pre-tokenizers with the exact
// regex semantics, BPE merges by rank, added and special tokens matched
// before pre-tokenization, and the ByteLevel decoder, plus a streaming
// detokenizer that never emits half a UTF-8 character.
//
// The pre-tokenizer regexes of the Qwen family run on a hand-written
// splitter; any other pattern runs on a backtracking regex engine
// (regexp2), and a test holds the two to the same answers.
package tokenizer
