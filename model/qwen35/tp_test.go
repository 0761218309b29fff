package qwen35_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/model"
	"github.com/govllm/govllm/model/qwen35"
	rt "github.com/govllm/govllm/runtime"
)

// tpFixtures split across 2 ranks (their heads allow no more).
var tpFixtures = []string{"qwen35-dense", "qwen35moe", "qwen35-dense-h256-vlayout"}

func openHF(t *testing.T, dir string) (*qwen35.Config, model.Source) {
	t.Helper()
	cfg, err := qwen35.LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := model.OpenSafetensors(dir)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, src
}

// TestShardsReassemble: every tensor's shares, put back where each rank's
// ranges say, cover it exactly and equal it; replicated tensors are equal
// on every rank.
func TestShardsReassemble(t *testing.T) {
	const n = 2
	for _, name := range tpFixtures {
		cfg, full := openHF(t, oracle.Load(t, name).Dir)
		defer full.Close()
		ranks := make([]model.Source, n)
		for r := range ranks {
			var err error
			if ranks[r], err = qwen35.ShardSource(full, cfg, r, n); err != nil {
				t.Fatal(err)
			}
		}
		split := 0
		for _, tensor := range full.Names() {
			whole, err := full.Tensor(tensor)
			if err != nil {
				t.Fatal(err)
			}
			want := whole.Bytes()[:whole.DType().ByteLen(whole.Len())]
			shape, es := whole.Shape(), whole.DType().ByteLen(1)
			got := make([]byte, len(want))
			covered := make([]bool, len(want))
			for r := range ranks {
				part, err := ranks[r].Tensor(tensor)
				if err != nil {
					t.Fatal(err)
				}
				info, _ := ranks[r].Info(tensor)
				if !slices.Equal(info.Shape, part.Shape()) {
					t.Fatalf("%s %s rank %d: Info says %v, the tensor is %v", name, tensor, r, info.Shape, part.Shape())
				}
				data := part.Bytes()[:part.DType().ByteLen(part.Len())]
				dim, ranges := qwen35.ShardRanges(ranks[r], r, tensor)
				if dim == -2 {
					if !bytes.Equal(data, want) {
						t.Fatalf("%s %s: replicated, but rank %d differs", name, tensor, r)
					}
					continue
				}
				// Scatter the share back: [outer, dim, inner] elements.
				outer, inner := 1, 1
				for _, d := range shape[:dim] {
					outer *= d
				}
				for _, d := range shape[dim+1:] {
					inner *= d
				}
				at := 0
				for o := range outer {
					for _, rg := range ranges {
						lo := (o*shape[dim] + rg[0]) * inner * es
						hi := (o*shape[dim] + rg[1]) * inner * es
						for i := lo; i < hi; i++ {
							if covered[i] && got[i] != data[at] {
								t.Fatalf("%s %s: ranks disagree on a shared byte", name, tensor)
							}
							got[i], covered[i] = data[at], true
							at++
						}
					}
				}
				if at != len(data) {
					t.Fatalf("%s %s rank %d: %d bytes placed of %d", name, tensor, r, at, len(data))
				}
			}
			if dim, _ := qwen35.ShardRanges(ranks[0], 0, tensor); dim == -2 {
				continue
			}
			split++
			for i := range covered {
				if !covered[i] {
					t.Fatalf("%s %s: byte %d is on no rank", name, tensor, i)
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s %s: the shares do not reassemble the tensor", name, tensor)
			}
		}
		if split == 0 {
			t.Fatalf("%s: nothing was split", name)
		}
		t.Logf("%s: %d of %d tensors split", name, split, len(full.Names()))
	}
}

// simAllReduce sums F32 tensors over n ranks that call in lockstep (each
// in its own goroutine), in rank order, as NCCL's all-reduce would.
type simAllReduce struct {
	mu      sync.Mutex
	cond    *sync.Cond
	n       int
	parts   [][]float32
	total   []float32
	arrived int
	round   int
}

func newSimAllReduce(n int) *simAllReduce {
	r := &simAllReduce{n: n, parts: make([][]float32, n)}
	r.cond = sync.NewCond(&r.mu)
	return r
}

func (r *simAllReduce) rank(i int) func(*rt.Tensor) error {
	return func(t *rt.Tensor) error {
		if t.DType() != rt.F32 {
			return errors.New("all-reduce: not f32")
		}
		data := t.F32()[:t.Len()]
		r.mu.Lock()
		defer r.mu.Unlock()
		r.parts[i] = append(r.parts[i][:0], data...)
		round := r.round
		if r.arrived++; r.arrived == r.n {
			r.total = append(r.total[:0], r.parts[0]...)
			for _, p := range r.parts[1:] {
				for j, v := range p {
					r.total[j] += v
				}
			}
			r.arrived, r.round = 0, r.round+1
			r.cond.Broadcast()
		}
		for round == r.round {
			r.cond.Wait()
		}
		copy(data, r.total) // the next round cannot start before this rank arrives
		return nil
	}
}

// TestTensorParallelLogitsMatch runs each fixture split over 2 simulated
// ranks (their own weights, states and KV caches, all-reduces in lockstep
// goroutines) and compares every rank's logits with the unsplit model's
// and with transformers'.
func TestTensorParallelLogitsMatch(t *testing.T) {
	const n = 2
	for _, name := range tpFixtures {
		fx := oracle.Load(t, name)
		c := fx.Cases[1]
		whole := run(t, load(t, fx.Dir, qwen35.Options{}), c.IDs, 3)
		cfg, full := openHF(t, fx.Dir)
		shard, err := cfg.Shard(n)
		if err != nil {
			t.Fatal(err)
		}
		reduce := newSimAllReduce(n)
		logits := make([][]float32, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			src, err := qwen35.ShardSource(full, cfg, r, n)
			if err != nil {
				t.Fatal(err)
			}
			m, err := qwen35.LoadFrom(shard, src, rt.NewBackend(registry(t), rt.CPU), qwen35.Options{AllReduce: reduce.rank(r)})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				st := m.NewState()
				defer st.Close()
				for lo := 0; lo < len(c.IDs); lo += 3 { // prefill in chunks, state carried
					lg, err := m.Forward(st, c.IDs[lo:min(lo+3, len(c.IDs))], qwen35.ForwardOptions{})
					if err != nil {
						errs[r] = err
						return
					}
					logits[r] = append(logits[r], lg.F32()[:lg.Len()]...)
				}
			}()
		}
		wg.Wait()
		ref := oracle.ReadF32(t, c.Logits)
		for r := range n {
			if errs[r] != nil {
				t.Fatalf("%s rank %d: %v", name, r, errs[r])
			}
			d, at := oracle.MaxDiff(logits[r], whole)
			if d > 1e-4 {
				t.Errorf("%s rank %d: max |Δ| %.2g against the unsplit model (at %d)", name, r, d, at)
			}
			if d, _ := oracle.MaxDiff(logits[r], ref); d > 1e-3 {
				t.Errorf("%s rank %d: max |Δ| %.2g against transformers", name, r, d)
			}
		}
		d, _ := oracle.MaxDiff(logits[0], whole)
		t.Logf("%s: 2 ranks, %s: max |Δ| %.2g against unsplit", name, c.Name, d)
	}
}

func TestShardErrors(t *testing.T) {
	cfg, err := qwen35.LoadConfig(filepath.Join(oracle.Load(t, "qwen35-dense").Dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Shard(3); !errors.Is(err, qwen35.ErrShard) {
		t.Errorf("3 ranks of 2 heads: %v", err)
	}
	if _, err := cfg.Shard(4); !errors.Is(err, qwen35.ErrShard) { // 2 query heads
		t.Errorf("4 ranks: %v", err)
	}
}
