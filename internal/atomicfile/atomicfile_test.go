package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// failAfter writes n bytes, then fails as a full disk does.
type failAfter struct {
	w io.Writer
	n int
}

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k, _ := f.w.Write(p[:f.n])
		f.n = 0
		return k, syscall.ENOSPC
	}
	f.n -= len(p)
	return f.w.Write(p)
}

func TestFailedWriteLeavesTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.gguf")
	if err := os.WriteFile(path, []byte("the old, whole file"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 3<<20) // past the buffer, so the file itself is written to
	err := Write(path, func(w io.Writer) error {
		_, err := io.WriteString(&failAfter{w: w, n: 1 << 20}, big)
		return err
	})
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "unchanged") {
		t.Fatalf("error %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "the old, whole file" {
		t.Fatalf("the old file became %d bytes", len(got))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
	if err := Write(path, func(w io.Writer) error { _, err := io.WriteString(w, big); return err }); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Size() != int64(len(big)) || st.Mode().Perm() != 0o644 {
		t.Fatalf("new file: %v", st)
	}
}

// TestRenameKeepsMappedReaders: a reader holding the old file open reads
// the old data whole after the new file replaces it.
func TestRenameKeepsMappedReaders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.bin")
	os.WriteFile(path, []byte("old data"), 0o644)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if n, _ := f.ReadAt(buf, 0); string(buf[:n]) != "old data" {
		t.Fatalf("the open reader sees %q", buf[:n])
	}
}
