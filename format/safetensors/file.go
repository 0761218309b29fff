package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// File is one memory-mapped safetensors file.
type File struct {
	Path   string
	Header *Header
	data   []byte // the whole file, mapped read-only
}

// Open maps path and validates its header. Nothing beyond the header is
// read until a tensor's bytes are used.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	size := st.Size()
	var lenBuf [8]byte
	if _, err := io.ReadFull(f, lenBuf[:]); err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, formatErr("", 0, "file of %d bytes is too short for the 8-byte header length", size))
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderSize || int64(n) > size-8 {
		_, err := ParseHeader(lenBuf[:], size)
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	prefix := make([]byte, 8+n)
	if _, err := f.ReadAt(prefix, 0); err != nil {
		return nil, fmt.Errorf("safetensors: %s: reading header: %w", path, err)
	}
	h, err := ParseHeader(prefix, size)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	var data []byte
	if size > 0 {
		data, err = unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return nil, fmt.Errorf("safetensors: %s: mmap: %w", path, err)
		}
	}
	return &File{Path: path, Header: h, data: data}, nil
}

// Bytes returns the data of tensor info, a slice of the mapping.
func (f *File) Bytes(info Info) []byte { return f.data[info.Begin:info.End] }

// Close unmaps the file; slices from Bytes become invalid.
func (f *File) Close() error {
	if f.data == nil {
		return nil
	}
	err := unix.Munmap(f.data)
	f.data = nil
	return err
}

// Checkpoint is a set of files that together hold a model's tensors.
type Checkpoint struct {
	Dir   string
	Files []*File
	where map[string]*File
}

// IndexName is the file that lists the shards of a sharded checkpoint.
const IndexName = "model.safetensors.index.json"

// OpenDir opens the checkpoint in dir: the shards listed by
// model.safetensors.index.json, or else model.safetensors.
func OpenDir(dir string) (*Checkpoint, error) {
	indexPath := filepath.Join(dir, IndexName)
	var names []string
	var weightMap map[string]string
	switch raw, err := os.ReadFile(indexPath); {
	case err == nil:
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(raw, &idx); err != nil {
			return nil, fmt.Errorf("safetensors: %s: %w", indexPath, err)
		}
		if len(idx.WeightMap) == 0 {
			return nil, fmt.Errorf("safetensors: %s: empty weight_map", indexPath)
		}
		weightMap = idx.WeightMap
		seen := map[string]bool{}
		for _, shard := range idx.WeightMap {
			if filepath.Base(shard) != shard {
				return nil, fmt.Errorf("safetensors: %s: shard %q is not a file name in the checkpoint directory", indexPath, shard)
			}
			if !seen[shard] {
				seen[shard] = true
				names = append(names, shard)
			}
		}
		sort.Strings(names)
	case errors.Is(err, os.ErrNotExist):
		names = []string{"model.safetensors"}
	default:
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	c := &Checkpoint{Dir: dir, where: map[string]*File{}}
	for _, name := range names {
		f, err := Open(filepath.Join(dir, name))
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Files = append(c.Files, f)
		for t := range f.Header.Tensors {
			if prev, dup := c.where[t]; dup {
				c.Close()
				return nil, fmt.Errorf("safetensors: tensor %q is in both %s and %s", t, prev.Path, f.Path)
			}
			c.where[t] = f
		}
	}
	for t, shard := range weightMap {
		f, ok := c.where[t]
		if !ok || filepath.Base(f.Path) != shard {
			c.Close()
			return nil, fmt.Errorf("safetensors: %s: tensor %q is listed in %s but not found there", indexPath, t, shard)
		}
	}
	return c, nil
}

// Lookup finds a tensor by name.
func (c *Checkpoint) Lookup(name string) (Info, *File, bool) {
	f, ok := c.where[name]
	if !ok {
		return Info{}, nil, false
	}
	return f.Header.Tensors[name], f, true
}

// Names lists every tensor name, sorted.
func (c *Checkpoint) Names() []string {
	names := make([]string, 0, len(c.where))
	for n := range c.where {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Close unmaps every file.
func (c *Checkpoint) Close() error {
	var first error
	for _, f := range c.Files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
