package tokenizer

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/govllm/govllm/internal/oracle"
)

// mixedCorpus is 1 MiB of the oracle's 50 mixed strings (prose, code, CJK,
// scripts, emoji) in an LCG order; the peer's benchmark builds the same.
func mixedCorpus(t testing.TB) string {
	var doc struct{ Cases []encCase }
	readJSON(t, filepath.Join(oracle.Dir(t), "tokenize_qwen3.json"), &doc)
	var b strings.Builder
	state := uint32(12345)
	for b.Len() < 1<<20 {
		state = state*1664525 + 1013904223
		b.WriteString(doc.Cases[(state>>8)%uint32(len(doc.Cases))].Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// BenchmarkEncode reports MB/s of Encode over the mixed corpus: "cold"
// clears the word cache before each run so that every merge is counted,
// "warm" keeps it, as a long-running server would.
func BenchmarkEncode(b *testing.B) {
	tok := qwen3(b)
	text := mixedCorpus(b)
	for _, cold := range []bool{true, false} {
		name := map[bool]string{true: "cold", false: "warm"}[cold]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				if cold {
					tok.model.mu.Lock()
					clear(tok.model.cache)
					tok.model.mu.Unlock()
				}
				tok.Encode(text)
			}
		})
	}
}
