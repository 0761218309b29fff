package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/govllm/govllm/internal/oracle"
)

type renderCase struct {
	Name                string          `json:"name"`
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	Kwargs              json.RawMessage `json:"kwargs"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	Rendered            string          `json:"rendered"`
}

func renderAll(t *testing.T, tmpl *Template, file string) {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Cases []renderCase }
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) == 0 {
		t.Fatalf("%s has no cases", file)
	}
	for _, c := range doc.Cases {
		got, err := tmpl.Render(Request{Messages: c.Messages, Tools: c.Tools, AddGenerationPrompt: c.AddGenerationPrompt, Kwargs: c.Kwargs})
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if got != c.Rendered {
			t.Errorf("%s:\n got %q\nwant %q", c.Name, got, c.Rendered)
		}
	}
}

func TestQwen3TemplateMatchesTransformers(t *testing.T) {
	tmpl, err := LoadTemplate(filepath.Join(oracle.Dir(t), "..", "tokenizers", "qwen3"), "")
	if err != nil {
		t.Fatal(err)
	}
	renderAll(t, tmpl, filepath.Join(oracle.Dir(t), "chat_qwen3.json"))
}

func TestQwen35TemplateMatchesTransformers(t *testing.T) {
	tmpl, err := LoadTemplate(filepath.Join(oracle.Dir(t), "..", "tokenizers", "qwen3"), filepath.Join(oracle.Dir(t), "..", "templates", "qwen3.5.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	renderAll(t, tmpl, filepath.Join(oracle.Dir(t), "chat_qwen35.json"))
}

func TestFixtureChatPrompt(t *testing.T) {
	for _, name := range oracle.Fixtures {
		dir := filepath.Join(oracle.Dir(t), name)
		tmpl, err := LoadTemplate(dir, "")
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ Prompt string }
		raw, _ := os.ReadFile(filepath.Join(dir, "tokenizer_oracle.json"))
		json.Unmarshal(raw, &doc)
		got, err := tmpl.Render(Request{Messages: json.RawMessage(`[{"role": "user", "content": "def add(a, b):"}]`), AddGenerationPrompt: true})
		if err != nil || got != doc.Prompt {
			t.Errorf("%s: %q, want %q (%v)", name, got, doc.Prompt, err)
		}
	}
}

func TestNamedTemplatesAndErrors(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"chat_template": [{"name": "default", "template": "D{{ messages|length }}"}, {"name": "tool_use", "template": "T{{ tools|length }}"}], "eos_token": {"content": "</s>"}}`
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(cfg), 0o644)
	tmpl, err := LoadTemplate(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	msgs := json.RawMessage(`[{"role": "user", "content": "x"}]`)
	if got, _ := tmpl.Render(Request{Messages: msgs}); got != "D1" {
		t.Errorf("default: %q", got)
	}
	if got, _ := tmpl.Render(Request{Messages: msgs, Tools: json.RawMessage(`[{}, {}]`)}); got != "T2" {
		t.Errorf("tool_use: %q", got)
	}
	if tmpl.EOSToken != "</s>" {
		t.Errorf("eos %q", tmpl.EOSToken)
	}
	raise, _ := ParseTemplate(`{{ raise_exception("only user and assistant roles") }}`, "", "")
	if _, err := raise.Render(Request{Messages: msgs}); !errors.Is(err, ErrTemplate) {
		t.Errorf("raise_exception: %v", err)
	}
	if _, err := LoadTemplate(t.TempDir(), ""); !errors.Is(err, ErrTemplate) {
		t.Errorf("no template: %v", err)
	}
	if _, err := tmpl.Render(Request{Messages: json.RawMessage(`{"role": "user"}`)}); !errors.Is(err, ErrTemplate) {
		t.Errorf("messages not a list: %v", err)
	}
}
