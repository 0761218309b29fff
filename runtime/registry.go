package runtime

import (
	"fmt"
	"sort"
	"sync"
)

// Provider is a named source of kernels. Where several providers register
// the same (op, device, dtype), the highest priority wins; ties are refused
// at registration so that selection is deterministic.
type Provider struct {
	Name     string
	Priority int
}

type regKey struct {
	op  OpID
	dev Device
	dt  DType
}

type regEntry struct {
	provider Provider
	kernel   any
}

// Registry maps (op, device, dtype) to kernels.
type Registry struct {
	mu      sync.RWMutex
	entries map[regKey][]regEntry
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{entries: map[regKey][]regEntry{}} }

// Register adds provider p's kernel k for (d, dev, dt). Registering the same
// provider twice, or a second provider at an equal priority, is an error.
func Register[K any](r *Registry, d Def[K], dev Device, dt DType, p Provider, k K) error {
	if d.ID == OpInvalid || d.ID >= opCount {
		return fmt.Errorf("runtime: register: invalid op id %d", d.ID)
	}
	if any(k) == nil {
		return fmt.Errorf("runtime: register %s on %s[%s] by %q: nil kernel", d.ID, dev, dt, p.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := regKey{d.ID, dev, dt}
	for _, e := range r.entries[key] {
		if e.provider.Name == p.Name {
			return fmt.Errorf("runtime: register %s on %s[%s]: provider %q registered twice", d.ID, dev, dt, p.Name)
		}
		if e.provider.Priority == p.Priority {
			return fmt.Errorf("runtime: register %s on %s[%s]: providers %q and %q share priority %d",
				d.ID, dev, dt, e.provider.Name, p.Name, p.Priority)
		}
	}
	list := append(r.entries[key], regEntry{p, k})
	sort.Slice(list, func(i, j int) bool { return list[i].provider.Priority > list[j].provider.Priority })
	r.entries[key] = list
	return nil
}

// Lookup returns the selected kernel for (d, dev, dt) and its provider.
func Lookup[K any](r *Registry, d Def[K], dev Device, dt DType) (K, Provider, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var zero K
	list := r.entries[regKey{d.ID, dev, dt}]
	if len(list) == 0 {
		return zero, Provider{}, false
	}
	k, ok := list[0].kernel.(K)
	if !ok {
		return zero, Provider{}, false
	}
	return k, list[0].provider, true
}

// Selected returns the provider that serves (op, dev, dt), if any.
func (r *Registry) Selected(op OpID, dev Device, dt DType) (Provider, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	list := r.entries[regKey{op, dev, dt}]
	if len(list) == 0 {
		return Provider{}, false
	}
	return list[0].provider, true
}

// Without returns a copy of r lacking every kernel of op on dev. Tests and
// fault injection use it to prove that a missing kernel is caught.
func (r *Registry) Without(op OpID, dev Device) *Registry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c := NewRegistry()
	for k, v := range r.entries {
		if k.op == op && k.dev == dev {
			continue
		}
		c.entries[k] = append([]regEntry(nil), v...)
	}
	return c
}

// Check reports every requirement of paths that dev does not cover, as a
// *MissingOpsError, or nil.
func (r *Registry) Check(dev Device, paths []Path) error {
	var missing []MissingOp
	index := map[Requirement]int{}
	for _, p := range paths {
		for _, req := range p.Needs {
			if _, ok := r.Selected(req.Op, dev, req.DType); ok {
				continue
			}
			i, seen := index[req]
			if !seen {
				i = len(missing)
				index[req] = i
				missing = append(missing, MissingOp{Requirement: req})
			}
			if m := &missing[i]; len(m.Paths) == 0 || m.Paths[len(m.Paths)-1] != p.Name {
				m.Paths = append(m.Paths, p.Name)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &MissingOpsError{Device: dev, Missing: missing}
}
