package qwen35_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/govllm/govllm/format/safetensors"
	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/model"
	"github.com/govllm/govllm/model/qwen35"
	rt "github.com/govllm/govllm/runtime"
)

// countingSource records every tensor whose data is requested.
type countingSource struct {
	model.Source
	reads []string
}

func (c *countingSource) Tensor(name string) (*rt.Tensor, error) {
	c.reads = append(c.reads, name)
	return c.Source.Tensor(name)
}

// TestCoverageGateNamesMissingOp is the bug this design answers: a model of
// rotary width 0 on a backend lacking the query/gate split must fail at
// load, naming the op, before any weight is read.
func TestCoverageGateNamesMissingOp(t *testing.T) {
	dir := filepath.Join(oracle.Dir(t), "qwen35-dense-norope")
	cfg, err := qwen35.LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RotaryDim != 0 {
		t.Fatalf("rotary width %d, want 0", cfg.RotaryDim)
	}
	st, err := model.OpenSafetensors(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := &countingSource{Source: st}
	defer src.Close()
	be := rt.NewBackend(registry(t).Without(rt.OpSplitQueryGate, rt.CPU), rt.CPU)
	_, err = qwen35.LoadFrom(cfg, src, be, qwen35.Options{})
	var missing *rt.MissingOpsError
	if !errors.As(err, &missing) || !missing.Has(rt.OpSplitQueryGate) || len(missing.Missing) != 1 {
		t.Fatalf("err = %v, want a MissingOpsError naming only %s", err, rt.OpSplitQueryGate)
	}
	if missing.Missing[0].Paths[0] != "attention.composite" {
		t.Fatalf("missing op attributed to %v", missing.Missing[0].Paths)
	}
	if len(src.reads) != 0 {
		t.Fatalf("weights read before the coverage check: %v", src.reads)
	}
}

// TestRotaryWidthZeroChangesNothingElse: the norope model takes the same
// paths, with the same ops, as the rotary one.
func TestRotaryWidthZeroChangesNothingElse(t *testing.T) {
	_, withRope, err := qwen35.Plan(filepath.Join(oracle.Dir(t), "qwen35-dense"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, noRope, err := qwen35.Plan(filepath.Join(oracle.Dir(t), "qwen35-dense-norope"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RotaryDim != 0 || fmt.Sprint(withRope) != fmt.Sprint(noRope) {
		t.Fatalf("paths differ:\n%v\n%v", withRope, noRope)
	}
}

// rewrite copies fixture into a temporary checkpoint after edit has changed
// its tensors and config.
func rewrite(t *testing.T, fixture string, edit func(ts []safetensors.Tensor, cfg map[string]any) []safetensors.Tensor) string {
	t.Helper()
	src := filepath.Join(oracle.Dir(t), fixture)
	ck, err := safetensors.OpenDir(src)
	if err != nil {
		t.Fatal(err)
	}
	tensors := ck.ReadAll()
	ck.Close()
	var cfg map[string]any
	raw, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	tensors = edit(tensors, cfg)
	dir := t.TempDir()
	if tensors != nil {
		if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), tensors, map[string]string{"format": "pt"}); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func matchOracle(t *testing.T, dir, fixture string) {
	t.Helper()
	m := load(t, dir, qwen35.Options{})
	c := oracle.Load(t, fixture).Cases[1]
	if d, _ := oracle.MaxDiff(run(t, m, c.IDs, len(c.IDs)), oracle.ReadF32(t, c.Logits)); d > tolerance {
		t.Fatalf("max |Δlogit| %g", d)
	}
}

// TestFusedExpertLayout loads experts stored as experts.gate_up_proj
// [E, 2I, H] and experts.down_proj [E, H, I].
func TestFusedExpertLayout(t *testing.T) {
	dir := rewrite(t, "qwen35moe", func(ts []safetensors.Tensor, _ map[string]any) []safetensors.Tensor {
		by := map[string]safetensors.Tensor{}
		var out []safetensors.Tensor
		for _, x := range ts {
			if strings.Contains(x.Name, ".mlp.experts.") {
				by[x.Name] = x
			} else {
				out = append(out, x)
			}
		}
		for l := range 4 {
			p := fmt.Sprintf("model.layers.%d.mlp.experts.", l)
			var gateUp, down []byte
			for e := range 4 {
				gateUp = append(gateUp, by[fmt.Sprintf("%s%d.gate_proj.weight", p, e)].Data...)
				gateUp = append(gateUp, by[fmt.Sprintf("%s%d.up_proj.weight", p, e)].Data...)
				down = append(down, by[fmt.Sprintf("%s%d.down_proj.weight", p, e)].Data...)
			}
			out = append(out,
				safetensors.Tensor{Name: p + "gate_up_proj", DType: "BF16", Shape: []int{4, 96, 64}, Data: gateUp},
				safetensors.Tensor{Name: p + "down_proj", DType: "BF16", Shape: []int{4, 64, 48}, Data: down})
		}
		return out
	})
	matchOracle(t, dir, "qwen35moe")
}

func TestShardedCheckpoint(t *testing.T) {
	var first, second []safetensors.Tensor
	dir := rewrite(t, "qwen35-dense", func(ts []safetensors.Tensor, _ map[string]any) []safetensors.Tensor {
		for i, x := range ts {
			if i%2 == 0 {
				first = append(first, x)
			} else {
				second = append(second, x)
			}
		}
		return nil
	})
	index := map[string]any{"weight_map": map[string]string{}}
	for shard, ts := range map[string][]safetensors.Tensor{"model-00001-of-00002.safetensors": first, "model-00002-of-00002.safetensors": second} {
		if err := safetensors.WriteFile(filepath.Join(dir, shard), ts, nil); err != nil {
			t.Fatal(err)
		}
		for _, x := range ts {
			index["weight_map"].(map[string]string)[x.Name] = shard
		}
	}
	raw, _ := json.Marshal(index)
	if err := os.WriteFile(filepath.Join(dir, safetensors.IndexName), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	matchOracle(t, dir, "qwen35-dense")
}

func TestBadCheckpoints(t *testing.T) {
	drop := func(name string) func([]safetensors.Tensor, map[string]any) []safetensors.Tensor {
		return func(ts []safetensors.Tensor, _ map[string]any) []safetensors.Tensor {
			var out []safetensors.Tensor
			for _, x := range ts {
				if x.Name != name {
					out = append(out, x)
				}
			}
			return out
		}
	}
	keep := func(ts []safetensors.Tensor, _ map[string]any) []safetensors.Tensor { return ts }
	cases := []struct {
		name  string
		edit  func([]safetensors.Tensor, map[string]any) []safetensors.Tensor
		file  func(t *testing.T, path string) // corrupts model.safetensors after writing
		cause error
	}{
		{name: "missing tensor", edit: drop("model.layers.2.linear_attn.A_log"), cause: model.ErrTensor},
		{name: "shape differs from config", edit: func(ts []safetensors.Tensor, _ map[string]any) []safetensors.Tensor {
			for i := range ts {
				if ts[i].Name == "model.layers.3.self_attn.o_proj.weight" {
					ts[i].Shape = []int{32, 128}
				}
			}
			return ts
		}, cause: model.ErrTensor},
		{name: "unsupported dtype", edit: func(ts []safetensors.Tensor, _ map[string]any) []safetensors.Tensor {
			for i := range ts {
				if ts[i].Name == "model.norm.weight" {
					ts[i].DType, ts[i].Shape = "I16", []int{64}
				}
			}
			return ts
		}, cause: model.ErrTensor},
		{name: "config missing hidden_size", edit: func(ts []safetensors.Tensor, cfg map[string]any) []safetensors.Tensor {
			delete(cfg, "hidden_size")
			return ts
		}, cause: qwen35.ErrConfig},
		{name: "config with a bad layer type", edit: func(ts []safetensors.Tensor, cfg map[string]any) []safetensors.Tensor {
			cfg["layer_types"] = []string{"linear_attention", "mamba", "linear_attention", "full_attention"}
			return ts
		}, cause: qwen35.ErrConfig},
		{name: "truncated file", edit: keep, file: func(t *testing.T, p string) {
			st, _ := os.Stat(p)
			if err := os.Truncate(p, st.Size()-100); err != nil {
				t.Fatal(err)
			}
		}, cause: safetensors.ErrFormat},
		{name: "malformed header JSON", edit: keep, file: func(t *testing.T, p string) { patch(t, p, `"dtype":`, `"dtype" `) }, cause: safetensors.ErrFormat},
		{name: "unknown dtype", edit: keep, file: func(t *testing.T, p string) { patch(t, p, `"BF16"`, `"XF16"`) }, cause: safetensors.ErrFormat},
		{name: "size does not match shape", edit: keep, file: func(t *testing.T, p string) { patch(t, p, `[512,64]`, `[512,63]`) }, cause: safetensors.ErrFormat},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := rewrite(t, "qwen35-dense", c.edit)
			if c.file != nil {
				c.file(t, filepath.Join(dir, "model.safetensors"))
			}
			_, err := qwen35.Load(dir, rt.NewBackend(registry(t), rt.CPU), qwen35.Options{})
			if !errors.Is(err, c.cause) {
				t.Fatalf("err = %v, want %v", err, c.cause)
			}
			t.Log(err)
		})
	}
}

// patch replaces the first occurrence of old in the file's header.
func patch(t *testing.T, path, old, new string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(raw), old)
	if i < 0 || len(old) != len(new) {
		t.Fatalf("cannot patch %q", old)
	}
	copy(raw[i:], new)
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestForwardRejectsBadIDs(t *testing.T) {
	m := load(t, filepath.Join(oracle.Dir(t), "qwen35-dense"), qwen35.Options{})
	for _, ids := range [][]int32{nil, {1, 512}, {-1}} {
		if _, err := m.Forward(m.NewState(), ids, qwen35.ForwardOptions{}); !errors.Is(err, qwen35.ErrInput) {
			t.Errorf("ids %v: err = %v", ids, err)
		}
	}
}

// TestMissingAndDamagedFiles: a missing, truncated or replaced-in-part
// model file is a clear error naming the file, never a panic.
func TestMissingAndDamagedFiles(t *testing.T) {
	src := oracle.Load(t, "qwen35-dense").Dir
	dir := t.TempDir()
	for _, name := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		raw, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, name), raw, 0o644)
	}
	be := rt.NewBackend(registry(t), rt.CPU)
	weights := filepath.Join(dir, "model.safetensors")
	full, _ := os.ReadFile(weights)
	for _, c := range []struct {
		name   string
		damage func()
		says   string
	}{
		{"truncated", func() { os.WriteFile(weights, full[:len(full)/2], 0o644) }, "model.safetensors"},
		{"header only", func() { os.WriteFile(weights, full[:100], 0o644) }, "model.safetensors"},
		{"missing", func() { os.Remove(weights) }, "model.safetensors"},
		{"no config", func() { os.WriteFile(weights, full, 0o644); os.Remove(filepath.Join(dir, "config.json")) }, "config.json"},
	} {
		c.damage()
		_, err := qwen35.Load(dir, be, qwen35.Options{})
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if _, err := qwen35.Load(filepath.Join(dir, "nowhere.gguf"), be, qwen35.Options{}); err == nil || !strings.Contains(err.Error(), "nowhere.gguf") {
		t.Errorf("missing gguf: %v", err)
	}
}

// TestTruncatedWhileMappedIsAnError: weights in host memory are slices of
// the mapped file; a file truncated under a loaded model faults on the
// next read, which is an error naming the op, not a crash.
func TestTruncatedWhileMappedIsAnError(t *testing.T) {
	src := oracle.Load(t, "qwen35-dense")
	dir := t.TempDir()
	for _, name := range []string{"config.json", "model.safetensors"} {
		raw, err := os.ReadFile(filepath.Join(src.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, name), raw, 0o644)
	}
	m, err := qwen35.Load(dir, rt.NewBackend(registry(t), rt.CPU), qwen35.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ids := src.Cases[1].IDs
	if _, err := m.Forward(m.NewState(), ids, qwen35.ForwardOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "model.safetensors"), 0); err != nil {
		t.Fatal(err)
	}
	_, err = m.Forward(m.NewState(), ids, qwen35.ForwardOptions{})
	var opErr *rt.OpError
	if !errors.Is(err, rt.ErrMemoryFault) || !errors.As(err, &opErr) {
		t.Fatalf("forward over a truncated file: %v", err)
	}
	t.Log(err)
}
