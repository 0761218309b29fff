package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/model/qwen35"
	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/backends"
)

func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func idList(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}

func TestLogitsCommandWritesTransformersLogits(t *testing.T) {
	fx := oracle.Load(t, "qwen35moe-vlayout")
	c := fx.Cases[1]
	want := oracle.ReadF32(t, c.Logits)
	for _, mode := range []string{"full", "chunked:3", "decode"} {
		out := filepath.Join(t.TempDir(), "logits.f32")
		if _, err := execute(t, "logits", "--model", fx.Dir, "--ids", idList(c.IDs), "--mode", mode, "--out", out); err != nil {
			t.Fatal(err)
		}
		got := oracle.ReadF32(t, out)
		if d, _ := oracle.MaxDiff(got, want); len(got) != len(want) || d > 1e-3 {
			t.Errorf("%s: %d values, max diff %g", mode, len(got), d)
		}
	}
	text, err := execute(t, "logits", "--model", fx.Dir, "--ids", idList(c.IDs[:2]))
	if err != nil || strings.Count(text, "\n") != 2 || !strings.HasPrefix(text, "0: ") {
		t.Fatalf("top-5 listing: %q, %v", text, err)
	}
}

func TestLogitsCommandRejectsBadFlags(t *testing.T) {
	dir := filepath.Join(oracle.Dir(t), "qwen35-dense")
	for _, args := range [][]string{
		{"logits", "--model", dir, "--ids", "1,x"},
		{"logits", "--model", dir, "--ids", "1,2", "--mode", "chunked:0"},
		{"logits", "--model", dir, "--ids", "1,2", "--mode", "sideways"},
		{"logits", "--model", dir, "--ids", "1,99999"},
		{"logits", "--model", t.TempDir(), "--ids", "1"},
	} {
		if _, err := execute(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestOpsMatrixListsEveryOp(t *testing.T) {
	text, err := execute(t, "ops")
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range rt.Ops() {
		if !strings.Contains(text, op.String()+" ") {
			t.Errorf("matrix lacks %s", op)
		}
	}
}

func TestOpsForModel(t *testing.T) {
	dir := filepath.Join(oracle.Dir(t), "qwen35-dense-norope")
	text, err := execute(t, "ops", "--model", dir)
	if err != nil || !strings.Contains(text, "split_query_gate") || strings.Contains(text, "MISSING") {
		t.Fatalf("%v\n%s", err, text)
	}
	// With the split op removed, the listing marks it and the status is 1.
	reg, err := backends.Registry()
	if err != nil {
		t.Fatal(err)
	}
	_, paths, err := qwen35.Plan(dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err = printModelCoverage(&buf, reg.Without(rt.OpSplitQueryGate, rt.CPU), rt.CPU, paths)
	var missing *rt.MissingOpsError
	if exitCode(err) != 1 || !errors.As(err, &missing) || !missing.Has(rt.OpSplitQueryGate) {
		t.Fatalf("err = %v (exit %d)", err, exitCode(err))
	}
	marked := false
	for _, line := range strings.Split(buf.String(), "\n") {
		f := strings.Fields(line)
		marked = marked || (len(f) == 3 && f[1] == "split_query_gate" && f[2] == "MISSING")
	}
	if !marked {
		t.Fatalf("listing does not mark the op missing:\n%s", buf.String())
	}
}
