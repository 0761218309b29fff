package defaultmodel_test

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/govllm/govllm/format/gguf"
	"github.com/govllm/govllm/internal/defaultmodel"
	"github.com/govllm/govllm/model/qwen35"
	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/cpu"
	"github.com/govllm/govllm/tokenizer"
)

// TestPerplexityMatchesTransformers: govllm's perplexity on the held-out
// probe (256 tokens) equals what transformers computed on the device for the
// same Q8_0-rounded checkpoint, within 1% (train_report.json).
func TestPerplexityMatchesTransformers(t *testing.T) {
	var report struct {
		ProbeIDs  []int32 `json:"probe_ids"`
		ProbePPL  float64 `json:"probe_ppl_q8_0"`
		HeldPPL   float64 `json:"heldout_ppl_f32"`
		Params    int     `json:"params"`
		TrainLoss float64 `json:"final_train_loss"`
	}
	raw, err := os.ReadFile("train_report.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &report); err != nil || len(report.ProbeIDs) != 257 {
		t.Fatalf("report: %v (%d ids)", err, len(report.ProbeIDs))
	}
	path, err := defaultmodel.Path()
	if err != nil {
		t.Fatal(err)
	}
	reg := rt.NewRegistry()
	if err := cpu.Register(reg); err != nil {
		t.Fatal(err)
	}
	m, err := qwen35.Load(path, rt.NewBackend(reg, rt.CPU), qwen35.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ids := report.ProbeIDs
	logits, err := m.Forward(m.NewState(), ids[:len(ids)-1], qwen35.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v := m.Config.VocabSize
	var nll float64
	for i := range len(ids) - 1 {
		row := logits.F32()[i*v : (i+1)*v]
		mx := math.Inf(-1)
		for _, x := range row {
			mx = math.Max(mx, float64(x))
		}
		var sum float64
		for _, x := range row {
			sum += math.Exp(float64(x) - mx)
		}
		nll += mx + math.Log(sum) - float64(row[ids[i+1]])
	}
	ppl := math.Exp(nll / float64(len(ids)-1))
	t.Logf("probe perplexity: govllm %.3f, transformers %.3f (held-out perplexity %.1f over the whole held-out set)", ppl, report.ProbePPL, report.HeldPPL)
	if math.Abs(ppl-report.ProbePPL)/report.ProbePPL > 0.01 {
		t.Fatalf("govllm %.3f vs transformers %.3f: more than 1%% apart", ppl, report.ProbePPL)
	}
}

func TestEmbeddedFileIsComplete(t *testing.T) {
	f, err := gguf.Parse(defaultmodel.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(defaultmodel.Bytes()) > 25<<20 {
		t.Fatalf("%d bytes: over 25 MB", len(defaultmodel.Bytes()))
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	text := "Call me Ishmael. Some years ago, never mind how long precisely."
	got, err := tok.Decode(tok.Encode(text), false)
	if err != nil || got != text {
		t.Fatalf("round trip %q, %v", got, err)
	}
	if s, _ := f.String("tokenizer.chat_template"); s == "" {
		t.Fatal("no chat template")
	}
}
