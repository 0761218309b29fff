package qwen35_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/govllm/govllm/format/gguf"
	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/model/qwen35"
)

// nodeLlamaCpp finds node and an install of node-llama-cpp@3.22.1
// ($GOVLLM_NODE_LLAMA_CPP, else ~/.cache/govllm/node-llama-cpp, where
// .ci/run installs it).
func nodeLlamaCpp(t *testing.T) (node, dir string) {
	dir = os.Getenv("GOVLLM_NODE_LLAMA_CPP")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "govllm", "node-llama-cpp")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; .ci/run installs it")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "node-llama-cpp")); err != nil {
		t.Skipf("node-llama-cpp is not installed in %s; .ci/run installs it", dir)
	}
	return node, dir
}

// llamaLogits runs llama.cpp (through node-llama-cpp) on a GGUF file.
func llamaLogits(t *testing.T, node, dir, model string, ids []int32) []float32 {
	script, err := os.ReadFile(filepath.Join(oracle.Dir(t), "tools", "nlc_logits.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	js := filepath.Join(dir, "govllm_nlc_logits.mjs")
	if err := os.WriteFile(js, script, 0o644); err != nil {
		t.Fatal(err)
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	out := filepath.Join(t.TempDir(), "logits.f32")
	cmd := exec.Command(node, js, model, strings.Join(parts, ","), out)
	cmd.Dir = dir
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("llama.cpp on %s: %v\n%s", model, err, msg)
	}
	return oracle.ReadF32(t, out)
}

// TestLlamaCppLoadsOurFiles: llama.cpp loads every GGUF govllm writes, and
// its logits on our file equal its logits on the file its own converter
// wrote from the same checkpoint.
func TestLlamaCppLoadsOurFiles(t *testing.T) {
	cpuOnly(t)
	node, dir := nodeLlamaCpp(t)
	for _, name := range oracle.Fixtures {
		fx := oracle.Load(t, name)
		for _, typ := range []string{"f32", "q8_0"} {
			theirs := filepath.Join(fx.Dir, "gguf", fmt.Sprintf("%s-%s.gguf", name, typ))
			// llama.cpp aborts on rotary width 0, so the norope files have
			// no llama.cpp logits to compare with.
			if _, err := os.Stat(strings.TrimSuffix(theirs, ".gguf") + ".len7.llamacpp.f32"); err != nil {
				continue
			}
			ours := filepath.Join(t.TempDir(), name+".gguf")
			if err := qwen35.Convert(fx.Dir, ours, typ, nil); err != nil {
				t.Fatal(err)
			}
			for _, c := range fx.Cases {
				if c.Name != "len7" && c.Name != "greedy" {
					continue
				}
				// Both files run here, in this run: llama.cpp's stored logits
				// came from another CPU, whose kernels round differently, and
				// a long greedy case amplifies that past the bound.
				want := llamaLogits(t, node, dir, theirs, c.IDs)
				got := llamaLogits(t, node, dir, ours, c.IDs)
				d, _ := oracle.MaxDiff(got, want)
				t.Logf("%s %s %s: llama.cpp on ours vs on its own file: max |Δ| %.2g", name, typ, c.Name, d)
				if bound := map[string]float64{"f32": 1e-4, "q8_0": 1e-2}[typ]; len(got) != len(want) || d > bound {
					t.Errorf("%s %s %s: max |Δ| %g (bound %g)", name, typ, c.Name, d, bound)
				}
			}
		}
	}
}

// TestQuantizeLikeLlamaCpp: quantizing llama.cpp's own f32 file to q8_0
// gives, tensor for tensor, the bytes and types of the q8_0 file its
// converter wrote, so the blocks are llama.cpp's reference blocks.
func TestQuantizeLikeLlamaCpp(t *testing.T) {
	cpuOnly(t)
	for _, name := range []string{"qwen35-dense", "qwen35moe"} {
		fx := oracle.Load(t, name)
		out := filepath.Join(t.TempDir(), "q8.gguf")
		if err := qwen35.Quantize(filepath.Join(fx.Dir, "gguf", name+"-f32.gguf"), out, "q8_0", nil); err != nil {
			t.Fatal(err)
		}
		ours, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := gguf.Open(filepath.Join(fx.Dir, "gguf", name+"-q8_0.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range theirs.Tensors {
			ot, ok := ours.Tensor(tt.Name)
			if !ok || ot.Type != tt.Type || !bytes.Equal(ours.Bytes(ot), theirs.Bytes(tt)) {
				t.Errorf("%s: tensor %s: ours %v, llama.cpp's %v (bytes equal: %v)", name, tt.Name, ot.Type, tt.Type, ok && bytes.Equal(ours.Bytes(ot), theirs.Bytes(tt)))
			}
		}
		ours.Close()
		theirs.Close()
		m := load(t, out, qwen35.Options{})
		c := fx.Cases[1]
		want := run(t, load(t, filepath.Join(fx.Dir, "gguf", name+"-q8_0.gguf"), qwen35.Options{}), c.IDs, len(c.IDs))
		if d, _ := oracle.MaxDiff(run(t, m, c.IDs, len(c.IDs)), want); d != 0 {
			t.Errorf("%s: logits differ by %g", name, d)
		}
	}
}

// TestLlamaCppReadsOurQuantizedBlocks: for each block type govllm writes,
// llama.cpp decodes our file as govllm does: the two disagree far less than
// either differs from transformers (what is left is llama.cpp quantizing
// its activations).
func TestLlamaCppReadsOurQuantizedBlocks(t *testing.T) {
	cpuOnly(t)
	node, dir := nodeLlamaCpp(t)
	// The h256 fixture's rows fill 256-element blocks; the dense one's rows
	// of 64 and 128 make the k-quant mixes fall back to Q5_0, Q5_1 and Q8_0.
	for _, run1 := range []struct {
		fixture string
		types   []string
	}{{"qwen35-dense-h256-vlayout", []string{"q4_0", "q4_1", "q5_0", "q5_1", "q4_k_m", "q5_k_m", "q6_k", "q2_k", "q3_k", "iq4_nl", "iq4_xs"}}, {"qwen35-dense", []string{"q4_k_m", "q5_k_m"}}} {
		fx := oracle.Load(t, run1.fixture)
		c := fx.Cases[2]
		want := oracle.ReadF32(t, c.Logits)
		for _, typ := range run1.types {
			checkOurBlocks(t, node, dir, fx, c.IDs, want, typ)
		}
	}
}

func checkOurBlocks(t *testing.T, node, dir string, fx *oracle.Fixture, ids []int32, want []float32, typ string) {
	{
		out := filepath.Join(t.TempDir(), typ+".gguf")
		if err := qwen35.Convert(fx.Dir, out, typ, nil); err != nil {
			t.Fatal(err)
		}
		m := load(t, out, qwen35.Options{})
		ours := run(t, m, ids, len(ids))
		theirs := llamaLogits(t, node, dir, out, ids)
		v := m.Config.VocabSize
		between, _ := closeness(ours, theirs, v)
		oursHF, oursAgree := closeness(ours, want, v)
		theirsHF, theirAgree := closeness(theirs, want, v)
		t.Logf("%s %s: govllm vs llama.cpp on our file: mean |Δ| %.4f; vs transformers: govllm %.4f (argmax %.2f), llama.cpp %.4f (argmax %.2f)",
			fx.Name, typ, between, oursHF, oursAgree, theirsHF, theirAgree)
		if between > 0.5*theirsHF || oursHF > theirsHF*1.05 {
			t.Errorf("%s: govllm and llama.cpp read our blocks differently (mean |Δ| %.4f; to transformers %.4f and %.4f)", typ, between, oursHF, theirsHF)
		}
	}
}
