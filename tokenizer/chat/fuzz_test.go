package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/govllm/govllm/internal/oracle"
)

// FuzzRenderMessages renders hostile requests (messages, tools and
// template variables as the API passes them) through the real Qwen3 and
// Qwen3.5 templates: a prompt or an ErrTemplate error, never a panic.
func FuzzRenderMessages(f *testing.F) {
	dir := filepath.Join(oracle.Dir(f), "..")
	q3, err := LoadTemplate(filepath.Join(dir, "tokenizers", "qwen3"), "")
	if err != nil {
		f.Fatal(err)
	}
	q35, err := LoadTemplate(filepath.Join(dir, "tokenizers", "qwen3"), filepath.Join(dir, "templates", "qwen3.5.jinja"))
	if err != nil {
		f.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "oracle", "chat_qwen35.json"))
	if err != nil {
		f.Fatal(err)
	}
	var doc struct{ Cases []renderCase }
	json.Unmarshal(raw, &doc)
	for _, c := range doc.Cases {
		f.Add(string(c.Messages), string(c.Tools), string(c.Kwargs))
	}
	f.Add(`[{"role":"user","content":[{"type":"text","text":{"a":1}}]}]`, `[{"function":null}]`, `{"enable_thinking":"x"}`)
	f.Add(`[{"role":"assistant","tool_calls":[{"function":{"name":1,"arguments":"{"}}]}]`, `null`, `[]`)
	f.Fuzz(func(t *testing.T, messages, tools, kwargs string) {
		if len(messages)+len(tools)+len(kwargs) > 4096 {
			return
		}
		for _, tmpl := range []*Template{q3, q35} {
			_, err := tmpl.Render(Request{Messages: json.RawMessage(messages), Tools: json.RawMessage(tools),
				Kwargs: json.RawMessage(kwargs), AddGenerationPrompt: true})
			if err != nil && !errors.Is(err, ErrTemplate) {
				t.Fatalf("error not wrapping ErrTemplate: %v", err)
			}
		}
	})
}

// FuzzParseTemplate compiles hostile template sources (rendering an
// arbitrary template is not bounded: see docs, only trusted templates are
// rendered).
func FuzzParseTemplate(f *testing.F) {
	src, err := os.ReadFile(filepath.Join(oracle.Dir(f), "..", "templates", "qwen3.5.jinja"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(src))
	f.Add("{% for m in messages %}{{ m.content }}{% endfor %}")
	f.Add("{{ 'a' ~ }}{% if %}")
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 8192 {
			return
		}
		if _, err := ParseTemplate(src, "", ""); err != nil && !errors.Is(err, ErrTemplate) {
			t.Fatalf("error not wrapping ErrTemplate: %v", err)
		}
	})
}

// TestHostileTemplatesAreBounded: range() in a template is capped, a
// macro that calls itself is refused at compile time (a Go stack overflow
// would be fatal), and a template has no way to the file system (no
// include, import or extends).
func TestHostileTemplatesAreBounded(t *testing.T) {
	req := Request{Messages: json.RawMessage(`[{"role": "user", "content": "hi"}]`)}
	ok, err := ParseTemplate("{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(10, 0, -4) %}{{ i }}{% endfor %}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ok.Render(req); err != nil || got != "0121062" {
		t.Fatalf("range: %q %v", got, err)
	}
	for _, src := range []string{
		"{% for i in range(1000000000) %}x{% endfor %}",
		"{% for i in range(0, 9000000000000, 1) %}{% endfor %}",
		"{{ range(100000000) | length }}",
		"{% for i in range(60000) %}{% for j in range(60000) %}{% endfor %}{% endfor %}", // nested: the render's budget
	} {
		tmpl, err := ParseTemplate(src, "", "")
		if err != nil {
			continue
		}
		if _, err := tmpl.Render(req); err == nil || !errors.Is(err, ErrTemplate) {
			t.Errorf("%s: rendered (%v)", src, err)
		}
	}
	for _, src := range []string{
		"{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
		"{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}",
	} {
		if _, err := ParseTemplate(src, "", ""); !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), "calls itself") {
			t.Errorf("%s: a recursive macro compiled (%v)", src, err)
		}
	}
	for _, src := range []string{`{% include "/etc/passwd" %}`, `{% import "/etc/hosts" as h %}`, `{% extends "/etc/passwd" %}`} {
		tmpl, err := ParseTemplate(src, "", "")
		if err != nil {
			continue // not even compiled
		}
		if out, err := tmpl.Render(req); err == nil && strings.Contains(out, "root") {
			t.Errorf("%s read a file: %q", src, out)
		}
	}
}
