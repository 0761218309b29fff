package qwen35_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/model/qwen35"
)

// closeness is mean |Δ| and argmax agreement of logits against a reference.
func closeness(got, want []float32, vocab int) (mean float64, agree float64) {
	rows := len(want) / vocab
	var sum float64
	same := 0
	for r := range rows {
		g, w := got[r*vocab:(r+1)*vocab], want[r*vocab:(r+1)*vocab]
		bg, bw := 0, 0
		for i := range w {
			sum += math.Abs(float64(g[i]) - float64(w[i]))
			if g[i] > g[bg] {
				bg = i
			}
			if w[i] > w[bw] {
				bw = i
			}
		}
		if bg == bw {
			same++
		}
	}
	return sum / float64(len(want)), float64(same) / float64(rows)
}

// noFurtherThanLlamaCpp fails unless govllm's logits (ours) are as close
// to transformers' (truth) as llama.cpp's on the same file (theirs): mean
// |Δ| within 5% of llama.cpp's, argmax agreement within 0.05.
func noFurtherThanLlamaCpp(t *testing.T, label string, ours, theirs, truth []float32, vocab int) {
	t.Helper()
	a, aa := closeness(ours, truth, vocab)
	b, ba := closeness(theirs, truth, vocab)
	t.Logf("%s: mean |Δ| govllm %.4f, llama.cpp %.4f; argmax agreement %.3f vs %.3f", label, a, b, aa, ba)
	if a > 1.05*b || aa < ba-0.05 {
		t.Errorf("%s: govllm (mean |Δ| %.4f, argmax %.3f) is further from transformers than llama.cpp (%.4f, %.3f)", label, a, aa, b, ba)
	}
}

// TestGGUFFilesFromLlamaCpp loads every GGUF file llama.cpp's converter
// wrote: float files must match transformers to 1e-3; quantized ones must
// be at least as close to transformers as llama.cpp's own logits on the
// same file (mean |Δ| and argmax agreement).
func TestGGUFFilesFromLlamaCpp(t *testing.T) {
	cpuOnly(t)
	for _, name := range oracle.Fixtures {
		fx := oracle.Load(t, name)
		files, _ := filepath.Glob(filepath.Join(fx.Dir, "gguf", "*.gguf"))
		if len(files) == 0 {
			t.Fatalf("%s: no GGUF files", name)
		}
		for _, file := range files {
			m := load(t, file, qwen35.Options{})
			quantized := strings.Contains(file, "q8_0")
			v := m.Config.VocabSize
			var ours, theirs, truth []float32 // every case with a llama.cpp reference, pooled
			for _, c := range fx.Cases {
				want := oracle.ReadF32(t, c.Logits)
				got := run(t, m, c.IDs, len(c.IDs))
				label := fmt.Sprintf("%s %s", filepath.Base(file), c.Name)
				if !quantized {
					d, _ := oracle.MaxDiff(got, want)
					t.Logf("%s: max |Δlogit| %.2g against transformers", label, d)
					if d > tolerance {
						t.Errorf("%s: max |Δlogit| %g against transformers", label, d)
					}
					continue
				}
				ref := strings.TrimSuffix(file, ".gguf") + "." + c.Name + ".llamacpp.f32"
				if _, err := os.Stat(ref); err != nil {
					continue
				}
				lc := oracle.ReadF32(t, ref)
				a, aa := closeness(got, want, v)
				b, ba := closeness(lc, want, v)
				t.Logf("%s: mean |Δ| vs transformers: govllm %.4f, llama.cpp %.4f; argmax agreement %.2f vs %.2f", label, a, b, aa, ba)
				ours, theirs, truth = append(ours, got...), append(theirs, lc...), append(truth, want...)
			}
			if quantized {
				// The integer kernels quantize activations to 8 bits per
				// block of 32, as llama.cpp does, so the two land at the same
				// distance from transformers.
				noFurtherThanLlamaCpp(t, filepath.Base(file)+", all cases", ours, theirs, truth, v)
			}
		}
	}
}

// TestGGUFWithoutRopeKey: the file whose qwen35.rope.dimension_count key
// was removed reads as rotary width 0 and matches the norope oracle.
func TestGGUFWithoutRopeKey(t *testing.T) {
	fx := oracle.Load(t, "qwen35-dense-norope")
	m := load(t, filepath.Join(fx.Dir, "gguf", "qwen35-dense-norope-nokey-f32.gguf"), qwen35.Options{})
	if m.Config.RotaryDim != 0 {
		t.Fatalf("rotary width %d", m.Config.RotaryDim)
	}
	for _, c := range fx.Cases {
		if d, _ := oracle.MaxDiff(run(t, m, c.IDs, 5), oracle.ReadF32(t, c.Logits)); d > tolerance {
			t.Errorf("%s: max |Δlogit| %g", c.Name, d)
		}
	}
}
