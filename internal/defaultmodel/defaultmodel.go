// Package defaultmodel embeds govllm's default model, a small Qwen3.5 model
// trained for this repository (see README.md beside this file), so that
// `govllm run`, `chat` and `serve` work with no model given.
package defaultmodel

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// Name is the model's name, as /v1/models lists it.
const Name = "govllm-default"

//go:embed govllm-default-q8_0.gguf
var data []byte

// Bytes is the GGUF file.
func Bytes() []byte { return data }

// Path writes the embedded file once into the user's cache directory (so
// that it is memory-mapped like any other model) and returns its path.
func Path() (string, error) {
	sum := sha256.Sum256(data)
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "govllm")
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.gguf", Name, hex.EncodeToString(sum[:6])))
	if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, data) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("defaultmodel: %w", err)
	}
	tmp, err := os.CreateTemp(dir, Name+"-*.tmp")
	if err != nil {
		return "", fmt.Errorf("defaultmodel: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", fmt.Errorf("defaultmodel: %w", err)
	}
	tmp.Close()
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("defaultmodel: %w", err)
	}
	return path, nil
}
