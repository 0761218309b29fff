package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/govllm/govllm/format/gguf"
	"github.com/govllm/govllm/model/qwen35"

	"github.com/govllm/govllm/tokenizer"
	"github.com/govllm/govllm/tokenizer/chat"
	"github.com/spf13/cobra"
)

func newTokenizeCmd() *cobra.Command {
	var modelDir, text string
	var hasText bool
	cmd := &cobra.Command{
		Use:   "tokenize --model DIR [--text S]",
		Short: `Encode text: JSON lines {"text": ...} on stdin to {"ids": [...]} lines`,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := loadTokenizer(modelDir)
			if err != nil {
				return err
			}
			out := json.NewEncoder(cmd.OutOrStdout())
			encode := func(s string) error {
				ids := tok.Encode(s)
				if ids == nil {
					ids = []int32{}
				}
				return out.Encode(map[string][]int32{"ids": ids})
			}
			if hasText = cmd.Flags().Changed("text"); hasText {
				return encode(text)
			}
			return eachLine(cmd.InOrStdin(), func(line []byte) error {
				var in struct {
					Text *string `json:"text"`
				}
				if err := json.Unmarshal(line, &in); err != nil || in.Text == nil {
					return fmt.Errorf(`want {"text": "..."}: %v`, orMissing(err, "text"))
				}
				return encode(*in.Text)
			})
		},
	}
	cmd.Flags().StringVar(&modelDir, "model", "", "directory with tokenizer.json")
	cmd.Flags().StringVar(&text, "text", "", "encode this one string instead of reading stdin")
	_ = cmd.MarkFlagRequired("model")
	return cmd
}

func newDetokenizeCmd() *cobra.Command {
	var modelDir string
	var skipSpecial bool
	cmd := &cobra.Command{
		Use:   "detokenize --model DIR",
		Short: `Decode ids: JSON lines {"ids": [...]} on stdin to {"text": ...} lines`,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := loadTokenizer(modelDir)
			if err != nil {
				return err
			}
			out := json.NewEncoder(cmd.OutOrStdout())
			out.SetEscapeHTML(false)
			return eachLine(cmd.InOrStdin(), func(line []byte) error {
				var in struct {
					IDs *[]int32 `json:"ids"`
				}
				if err := json.Unmarshal(line, &in); err != nil || in.IDs == nil {
					return fmt.Errorf(`want {"ids": [...]}: %v`, orMissing(err, "ids"))
				}
				text, err := tok.Decode(*in.IDs, skipSpecial)
				if err != nil {
					return err
				}
				return out.Encode(map[string]string{"text": text})
			})
		},
	}
	cmd.Flags().StringVar(&modelDir, "model", "", "directory with tokenizer.json")
	cmd.Flags().BoolVar(&skipSpecial, "skip-special-tokens", false, "leave special tokens out")
	_ = cmd.MarkFlagRequired("model")
	return cmd
}

func newTemplateCmd() *cobra.Command {
	var modelDir, override string
	cmd := &cobra.Command{
		Use:   "template --model DIR [--chat-template FILE]",
		Short: "Render a chat template: one JSON request on stdin, the prompt on stdout",
		Long: `Reads {"messages": [...], "tools": [...], "add_generation_prompt": true, "chat_template_kwargs": {...}}
on stdin and writes the rendered prompt exactly, with no newline added.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tmpl, err := loadTemplate(modelDir, override)
			if err != nil {
				return err
			}
			raw, err := io.ReadAll(cmd.InOrStdin())
			if err != nil {
				return err
			}
			var req chat.Request
			if err := json.Unmarshal(raw, &req); err != nil {
				return fmt.Errorf("stdin: %w", err)
			}
			if len(req.Messages) == 0 {
				return fmt.Errorf(`stdin: the request has no "messages"`)
			}
			prompt, err := tmpl.Render(req)
			if err != nil {
				return err
			}
			_, err = io.WriteString(cmd.OutOrStdout(), prompt)
			return err
		},
	}
	cmd.Flags().StringVar(&modelDir, "model", "", "directory with tokenizer_config.json or chat_template.jinja")
	cmd.Flags().StringVar(&override, "chat-template", "", "use this Jinja file instead of the model's template")
	_ = cmd.MarkFlagRequired("model")
	return cmd
}

// eachLine calls fn for every non-blank line of r; errors name the line.
func eachLine(r io.Reader, fn func([]byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if strings.TrimSpace(string(line)) == "" {
			continue
		}
		if err := fn(line); err != nil {
			return fmt.Errorf("stdin line %d: %w", n, err)
		}
	}
	return sc.Err()
}

func orMissing(err error, field string) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("no %q field", field)
}

// loadTokenizer reads the tokenizer of a model directory (tokenizer.json)
// or of a .gguf file (tokenizer.ggml.*).
func loadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	if !qwen35.IsGGUF(path) {
		return tokenizer.Load(path)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return tokenizer.FromGGUF(f)
}

// loadTemplate reads the chat template of a model directory or of a .gguf
// file (tokenizer.chat_template); override replaces it.
func loadTemplate(path, override string) (*chat.Template, error) {
	if !qwen35.IsGGUF(path) || override != "" {
		dir := path
		if qwen35.IsGGUF(path) {
			dir = filepath.Dir(path)
		}
		return chat.LoadTemplate(dir, override)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	src, ok := f.String("tokenizer.chat_template")
	if !ok {
		return nil, fmt.Errorf("%s has no tokenizer.chat_template; pass --chat-template: %w", path, chat.ErrTemplate)
	}
	tokens, _ := f.Array("tokenizer.ggml.tokens")
	text := func(key string) string {
		if id, ok := f.Uint(key); ok && int(id) < len(tokens) {
			s, _ := tokens[id].(string)
			return s
		}
		return ""
	}
	return chat.ParseTemplate(src, text("tokenizer.ggml.bos_token_id"), text("tokenizer.ggml.eos_token_id"))
}
