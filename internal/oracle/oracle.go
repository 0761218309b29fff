// Package oracle reads the reference outputs in ../shared/oracle (Hugging
// Face transformers' logits for the Qwen3.5 fixtures) for tests.
package oracle

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// Fixtures are the model folders of the oracle.
var Fixtures = []string{"qwen35-dense", "qwen35-dense-norope", "qwen35moe", "qwen35moe-vlayout", "qwen35-dense-h256-vlayout"}

// Case is one prompt with its reference logits file.
type Case struct {
	Name   string
	IDs    []int32
	Logits string // path of float32 [T, vocab]
}

// Greedy is the greedy-decoding reference.
type Greedy struct {
	Prompt []int32 `json:"prompt_ids"`
	Output []int32 `json:"output_ids"`
	Full   []int32 `json:"full_seq_ids"`
}

// Fixture is one model folder and its cases.
type Fixture struct {
	Name   string
	Dir    string
	Cases  []Case // lenN cases in length order, then the greedy full sequence
	Greedy Greedy
}

// Dir finds ../shared/oracle from the repository root.
func Dir(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			dir := filepath.Join(d, "..", "shared", "oracle")
			if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
				t.Fatalf("oracle: the reference data is expected at %s: %v", dir, err)
			}
			return dir
		}
		if filepath.Dir(d) == d {
			t.Fatal("oracle: no go.mod above the test directory")
		}
	}
}

// Load reads one fixture's oracle.json.
func Load(t testing.TB, name string) *Fixture {
	t.Helper()
	dir := filepath.Join(Dir(t), name)
	raw, err := os.ReadFile(filepath.Join(dir, "oracle.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Spec  struct{ Lens []int } `json:"spec"`
		Cases map[string]json.RawMessage
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("oracle: %s: %v", name, err)
	}
	f := &Fixture{Name: name, Dir: dir}
	for _, n := range doc.Spec.Lens {
		key := fmt.Sprintf("len%d", n)
		var c struct {
			IDs []int32 `json:"input_ids"`
		}
		if err := json.Unmarshal(doc.Cases[key], &c); err != nil {
			t.Fatalf("oracle: %s %s: %v", name, key, err)
		}
		f.Cases = append(f.Cases, Case{Name: key, IDs: c.IDs, Logits: filepath.Join(dir, "logits_"+key+".f32")})
	}
	if err := json.Unmarshal(doc.Cases["greedy"], &f.Greedy); err != nil {
		t.Fatalf("oracle: %s greedy: %v", name, err)
	}
	f.Cases = append(f.Cases, Case{Name: "greedy", IDs: f.Greedy.Full, Logits: filepath.Join(dir, "logits_greedy_full.f32")})
	return f
}

// ReadF32 reads a little-endian float32 file.
func ReadF32(t testing.TB, path string) []float32 {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// MaxDiff is the largest absolute difference and where it is.
func MaxDiff(a, b []float32) (float64, int) {
	var m float64
	at := -1
	for i := range min(len(a), len(b)) {
		if d := math.Abs(float64(a[i]) - float64(b[i])); d > m || math.IsNaN(d) {
			m, at = d, i
			if math.IsNaN(d) {
				return math.Inf(1), i
			}
		}
	}
	return m, at
}
