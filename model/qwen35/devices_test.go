package qwen35_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/govllm/govllm/internal/oracle"
	"github.com/govllm/govllm/model/qwen35"
	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/backends"
	"github.com/govllm/govllm/runtime/cuda"
)

// device is a backend the oracle tests run on, with its bound on
// max |Δlogit| against transformers.
type device struct {
	name string
	be   *rt.Backend
	tol  float64
}

// cudaTolerance is the bound for bf16 compute: cuBLAS takes
// activations rounded to the weights' bf16.
const cudaTolerance = 1e-2

// devices is the CPU and, where a GPU is usable, CUDA. Without one the
// CUDA runs are skipped with the reason.
func devices(t *testing.T) []device {
	t.Helper()
	var out []device
	if gpuPass {
		t.Log("cpu runs skipped: GOVLLM_TEST_DEVICE=cuda is the GPU pass, the CPU's ran in the first")
	} else {
		out = append(out, device{"cpu", rt.NewBackend(registry(t), rt.CPU), tolerance})
	}
	be, err := backends.New(rt.CUDA)
	switch {
	case err == nil:
		out = append(out, device{"cuda", be, cudaTolerance})
	case errors.Is(err, cuda.ErrUnavailable) && gpuPass:
		t.Fatalf("GOVLLM_TEST_DEVICE=cuda, but: %v", err)
	case errors.Is(err, cuda.ErrUnavailable):
		t.Logf("cuda runs skipped: %v", err)
	default:
		t.Errorf("cuda: %v", err)
	}
	return out
}

// gpuPass is the test command's second pass (README.md), which runs the
// package again with CUDA usable (on cudaemu where there is no GPU): the
// tests that only the CPU runs ran in the first, and skip (cpuOnly).
var gpuPass = os.Getenv("GOVLLM_TEST_DEVICE") == "cuda"

// cpuOnly skips a test that runs no GPU path in the GPU pass.
func cpuOnly(t *testing.T) {
	t.Helper()
	if gpuPass {
		t.Skip("CPU only: ran in the first pass (GOVLLM_TEST_DEVICE=cuda is the GPU pass)")
	}
}

// onCUDA loads an oracle fixture on the GPU, or skips the test where
// there is none.
func onCUDA(t *testing.T, fixture string) (*oracle.Fixture, *qwen35.Model) {
	t.Helper()
	fx := oracle.Load(t, fixture)
	return fx, loadOn(t, cudaBackend(t), fx.Dir, qwen35.Options{})
}

// cudaBackend is the CUDA backend, or skips the test where there is none.
func cudaBackend(t *testing.T) *rt.Backend {
	t.Helper()
	be, err := backends.New(rt.CUDA)
	if errors.Is(err, cuda.ErrUnavailable) && !gpuPass {
		t.Skipf("no CUDA here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// TestGGUFFilesOnGPU runs llama.cpp's GGUF files of the fixtures on the
// GPU, over whole prompts and token by token (the batch-1 GEMVs): f32 and
// bf16 files within cudaTolerance of transformers; Q8_0 files (dense, and
// MoE with quantized experts) no further from transformers than llama.cpp
// is on the same file (mean |Δlogit| within 5%, argmax agreement within
// 0.05), as TestGGUFFilesFromLlamaCpp asks of the CPU.
func TestGGUFFilesOnGPU(t *testing.T) {
	be := cudaBackend(t)
	for _, name := range oracle.Fixtures {
		fx := oracle.Load(t, name)
		files, _ := filepath.Glob(filepath.Join(fx.Dir, "gguf", "*.gguf"))
		for _, file := range files {
			m := loadOn(t, be, file, qwen35.Options{})
			quantized := strings.Contains(file, "q8_0")
			var ours, theirs, truth []float32
			for _, c := range fx.Cases {
				want := oracle.ReadF32(t, c.Logits)
				ref := strings.TrimSuffix(file, ".gguf") + "." + c.Name + ".llamacpp.f32"
				_, noRef := os.Stat(ref)
				for _, chunk := range []int{len(c.IDs), 1} {
					if chunk == 1 && len(c.IDs) > 32 {
						continue // long decodes: TestGPUDecodeStepsReplayAsGraphs
					}
					got := run(t, m, c.IDs, chunk)
					label := fmt.Sprintf("%s %s chunk %d", filepath.Base(file), c.Name, chunk)
					switch {
					case !quantized:
						if d, _ := oracle.MaxDiff(got, want); d > cudaTolerance {
							t.Errorf("%s on cuda: max |Δlogit| %g against transformers", label, d)
						}
					case noRef == nil:
						ours, theirs, truth = append(ours, got...), append(theirs, oracle.ReadF32(t, ref)...), append(truth, want...)
					}
				}
			}
			if quantized {
				if len(truth) == 0 {
					t.Errorf("%s: no llama.cpp reference to compare with", filepath.Base(file))
				}
				noFurtherThanLlamaCpp(t, filepath.Base(file)+" on cuda", ours, theirs, truth, m.Config.VocabSize)
			}
		}
	}
}

// TestLowBitGGUFsOnGPU converts the h256 fixture to every low-bit file type
// and runs each file on the GPU and on the CPU, whole prompts and token by
// token: the GPU within TestConvertLowBitTypes' bound of transformers, no
// further from transformers than the CPU is on the same file, and close to
// the CPU (the CPU rounds x to 8 bits for Q4_K, Q5_K, Q6_K and Q8_0, the
// GPU keeps it in f32 up to 8 rows: ~0.07 apart on those mixes, ~0.01 on
// the others).
func TestLowBitGGUFsOnGPU(t *testing.T) {
	gpu, cpu := cudaBackend(t), rt.NewBackend(registry(t), rt.CPU)
	fx := oracle.Load(t, "qwen35-dense-h256-vlayout")
	types := slices.Sorted(maps.Keys(lowBitBounds))
	for _, typ := range types {
		file := filepath.Join(t.TempDir(), typ+".gguf")
		if err := qwen35.Convert(fx.Dir, file, typ, nil); err != nil {
			t.Fatal(err)
		}
		onGPU, onCPU := loadOn(t, gpu, file, qwen35.Options{}), loadOn(t, cpu, file, qwen35.Options{})
		var got, ref, want []float32
		for _, c := range fx.Cases {
			for _, chunk := range []int{len(c.IDs), 1} {
				if chunk == 1 && len(c.IDs) > 16 {
					continue
				}
				got = append(got, run(t, onGPU, c.IDs, chunk)...)
				ref = append(ref, run(t, onCPU, c.IDs, chunk)...)
				want = append(want, oracle.ReadF32(t, c.Logits)...)
			}
		}
		vocab := onGPU.Config.VocabSize
		mean, agree := closeness(got, want, vocab)
		cpuMean, _ := closeness(ref, want, vocab)
		apart, same := closeness(got, ref, vocab)
		t.Logf("%s on cuda: mean |Δ| %.3f from transformers (the CPU %.3f; argmax agreement %.3f), %.4f from the CPU (argmax agreement %.3f)",
			typ, mean, cpuMean, agree, apart, same)
		if mean > lowBitBounds[typ] || mean > 1.02*cpuMean {
			t.Errorf("%s on cuda: mean |Δ| %.3f from transformers, the CPU %.3f, the bound %v", typ, mean, cpuMean, lowBitBounds[typ])
		}
		if apart > 0.1 || same < 0.8 {
			t.Errorf("%s on cuda: mean |Δ| %.4f from the CPU on the same file, argmax agreement %.3f", typ, apart, same)
		}
	}
}

func loadOn(t testing.TB, be *rt.Backend, dir string, opts qwen35.Options) *qwen35.Model {
	t.Helper()
	m, err := qwen35.Load(dir, be, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// hostF32 returns the elements of a tensor in either memory.
func hostF32(t testing.TB, be *rt.Backend, x *rt.Tensor) []float32 {
	t.Helper()
	h, err := be.Fetch(x)
	if err != nil {
		t.Fatal(err)
	}
	return h.F32()[:h.Len()]
}

// TestGPUDecodeStepsReplayAsGraphs decodes on the GPU, where repeated steps
// run as captured graphs, and checks every step's logits against the same
// steps run eagerly (observed, which turns recording off) and against
// transformers. The MoE model's steps are graphs too: it routes on the GPU.
func TestGPUDecodeStepsReplayAsGraphs(t *testing.T) {
	for _, name := range gpuStepFixtures {
		t.Run(name, func(t *testing.T) { decodeStepsReplayAsGraphs(t, name) })
	}
}

// gpuStepFixtures are the models the GPU step tests run: dense and MoE.
var gpuStepFixtures = []string{"qwen35-dense", "qwen35moe"}

func decodeStepsReplayAsGraphs(t *testing.T, name string) {
	// Op by op, as the eager steps below run (ForwardOptions.Hidden keeps
	// a step off the persistent kernel, whose sums are in another order:
	// TestPersistentDecodeMatchesOpByOp compares the two).
	fx := oracle.Load(t, name)
	m := loadOn(t, cudaBackend(t), fx.Dir, qwen35.Options{OpByOp: true})
	c := fx.Cases[2] // 80 tokens
	before := cuda.Graphs()
	graphed := run(t, m, c.IDs, 1)
	after := cuda.Graphs()
	if after.Launches-before.Launches < len(c.IDs)/2 {
		t.Errorf("%d of %d decode steps ran as graphs (%d captured)", after.Launches-before.Launches, len(c.IDs), after.Captures-before.Captures)
	}
	st := m.NewState()
	defer st.Close()
	var eager []float32
	observe := qwen35.ForwardOptions{Hidden: func(int, *rt.Tensor) {}}
	for _, id := range c.IDs {
		lg, err := m.Forward(st, []int32{id}, observe)
		if err != nil {
			t.Fatal(err)
		}
		eager = append(eager, lg.F32()[:lg.Len()]...)
	}
	if d, _ := oracle.MaxDiff(graphed, eager); d > 1e-5 {
		t.Errorf("graph and eager steps differ by %g", d)
	}
	if d, _ := oracle.MaxDiff(graphed, oracle.ReadF32(t, c.Logits)); d > cudaTolerance {
		t.Errorf("graph steps: max |Δlogit| %g against transformers", d)
	}
}

// TestGPUStepsRecordedAheadMatch decodes three sequences together on the
// GPU twice, recording each next step ahead and not, with block
// boundaries (where no step is recorded ahead), a step of two tokens
// (where the one recorded ahead is dropped) and a device free between
// steps (which stales it): every step's logits must be equal bit for bit.
func TestGPUStepsRecordedAheadMatch(t *testing.T) {
	for _, name := range gpuStepFixtures {
		t.Run(name, func(t *testing.T) { stepsRecordedAheadMatch(t, name) })
	}
}

func stepsRecordedAheadMatch(t *testing.T, name string) {
	fx, m := onCUDA(t, name)
	const bs, steps = 4, 40
	decode := func(ahead bool) (logits []float32, issuedAhead int) {
		qwen35.SetRecordAhead(ahead)
		defer qwen35.SetRecordAhead(true)
		cache, err := m.NewCache(bs, 3*(steps+16)/bs+3, 3)
		if err != nil {
			t.Fatal(err)
		}
		defer cache.Close()
		seqs := make([]qwen35.Seq, 3)
		next := int32(0)
		for i := range seqs {
			seqs[i] = qwen35.Seq{Tokens: fx.Cases[i+1].IDs[:3], Slot: i, Logits: qwen35.LastLogits}
		}
		before := cuda.Graphs().Ahead
		for step := range steps {
			if step == 20 {
				seqs[1].Tokens = append(seqs[1].Tokens, seqs[1].Tokens[0])
			}
			growBlocks(seqs, bs, &next)
			if step == 30 {
				mem := m.Backend().Memory()
				x, err := mem.Alloc(rt.F32, 16)
				if err != nil {
					t.Fatal(err)
				}
				mem.Free(x)
			}
			lg, err := m.ForwardBatch(cache, seqs, qwen35.ForwardOptions{})
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			rows := lg.F32()[:lg.Len()]
			logits = append(logits, rows...)
			v := len(rows) / len(seqs)
			for i := range seqs {
				s := &seqs[i]
				s.Start += len(s.Tokens)
				s.Tokens = []int32{int32(argmax(rows[i*v : (i+1)*v]))}
			}
		}
		return logits, cuda.Graphs().Ahead - before
	}
	late, none := decode(false)
	early, issued := decode(true)
	if none != 0 {
		t.Errorf("%d steps issued ahead with recording ahead off", none)
	}
	if issued < steps/2 {
		t.Errorf("%d of %d steps were issued from a recording made ahead", issued, steps)
	}
	for i := range late {
		if early[i] != late[i] {
			t.Fatalf("logit %d: %g recorded ahead, %g recorded on the spot", i, early[i], late[i])
		}
	}
}

// TestGreedyTokensMatchLogits decodes three sequences together twice on
// each backend: once with every step's logits brought back and the
// argmax taken here, once with two of them asking for LastToken (the
// argmax taken where the logits are) beside one asking for logits. The
// tokens must be the same, and the logits of the sequence that still
// asks for them too.
func TestGreedyTokensMatchLogits(t *testing.T) {
	fx := oracle.Load(t, "qwen35-dense")
	for _, d := range devices(t) {
		t.Run(d.name, func(t *testing.T) {
			m := loadOn(t, d.be, fx.Dir, qwen35.Options{})
			byLogits, logits := greedyBatch(t, m, fx, false)
			byTokens, kept := greedyBatch(t, m, fx, true)
			for i := range byLogits {
				if !slices.Equal(byTokens[i], byLogits[i]) {
					t.Errorf("sequence %d: %v by LastToken, %v by the argmax of LastLogits", i, byTokens[i], byLogits[i])
				}
			}
			if d, _ := oracle.MaxDiff(kept, logits); d > 1e-5 {
				t.Errorf("sequence 1's logits differ by %g beside LastToken sequences", d)
			}
		})
	}
}

// greedyBatch decodes fixture cases 1-3 greedily for 24 steps in one
// cache (blocks of 4: steps cross block boundaries) and returns each
// sequence's tokens and sequence 1's logits, every step.
func greedyBatch(t *testing.T, m *qwen35.Model, fx *oracle.Fixture, tokens bool) (out [3][]int32, logits1 []float32) {
	const bs, steps = 4, 24
	cache, err := m.NewCache(bs, 3*(steps+40)/bs+3, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	seqs := make([]qwen35.Seq, 3)
	next := int32(0)
	for i := range seqs {
		seqs[i] = qwen35.Seq{Tokens: fx.Cases[i+1].IDs[:5], Slot: i, Logits: qwen35.LastLogits}
		if tokens && i != 1 {
			seqs[i].Logits = qwen35.LastToken
		}
	}
	for step := range steps {
		growBlocks(seqs, bs, &next)
		lg, err := m.ForwardBatch(cache, seqs, qwen35.ForwardOptions{})
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		v, want := m.Config.VocabSize, 0
		for _, s := range seqs {
			if s.Logits == qwen35.LastLogits {
				want += v
			}
		}
		rows := lg.F32()[:lg.Len()]
		if len(rows) != want {
			t.Fatalf("step %d: %d logits, want %d", step, len(rows), want)
		}
		for i := range seqs {
			s := &seqs[i]
			id := s.Next
			if s.Logits == qwen35.LastLogits {
				id = argmax(rows[:v])
				if i == 1 {
					logits1 = append(logits1, rows[:v]...)
				}
				rows = rows[v:]
			}
			out[i] = append(out[i], id)
			s.Start += len(s.Tokens)
			s.Tokens = []int32{id}
		}
	}
	return out, logits1
}

// growBlocks gives each sequence the blocks (of bs) its next step needs,
// numbered from *next on.
func growBlocks(seqs []qwen35.Seq, bs int, next *int32) {
	for i := range seqs {
		s := &seqs[i]
		for len(s.Blocks)*bs < s.Start+len(s.Tokens) {
			s.Blocks = append(s.Blocks, *next)
			*next++
		}
	}
}

// TestChainedStepsMatch decodes fixture cases 1-3 greedily on each backend
// with every step after the second issued by LaunchNext, behind the step
// before and fed its tokens on the device, crossing block boundaries
// (where the step is recorded on the spot, not ahead): the tokens must be
// those of steps launched one at a time from the argmax of their logits.
func TestChainedStepsMatch(t *testing.T) {
	fx := oracle.Load(t, "qwen35-dense")
	for _, d := range devices(t) {
		t.Run(d.name, func(t *testing.T) {
			m := loadOn(t, d.be, fx.Dir, qwen35.Options{})
			want, _ := greedyBatch(t, m, fx, false)
			// The second round's cache takes the addresses the first freed,
			// so its steps launch the first's graphs (the engine suite,
			// which does that across tests, crashed in cuGraphLaunch on an
			// H100 while those graphs held copy nodes).
			for round := range 2 {
				const bs, steps = 4, 24
				cache, err := m.NewCache(bs, 3*(steps+40)/bs+3, 3)
				if err != nil {
					t.Fatal(err)
				}
				sets := [2][]qwen35.Seq{make([]qwen35.Seq, 3), make([]qwen35.Seq, 3)}
				next := int32(0)
				for i := range sets[0] {
					sets[0][i] = qwen35.Seq{Tokens: fx.Cases[i+1].IDs[:5], Slot: i, Logits: qwen35.LastToken}
				}
				var got [3][]int32
				keep := func(l *qwen35.Launched) {
					if _, err := l.Wait(); err != nil {
						t.Fatal(err)
					}
					for i, id := range l.Tokens() {
						got[i] = append(got[i], id)
					}
				}
				growBlocks(sets[0], bs, &next)
				l, err := m.Launch(cache, sets[0], qwen35.ForwardOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for step := 1; step < steps; step++ {
					prev, cur := sets[(step+1)%2], sets[step%2]
					for i := range cur {
						cur[i] = prev[i]
						cur[i].Start = prev[i].Start + len(prev[i].Tokens)
						cur[i].Tokens = []int32{0} // ignored by LaunchNext
					}
					growBlocks(cur, bs, &next)
					var l2 *qwen35.Launched
					if step == 1 { // the prompt step has five tokens a sequence: not one to follow
						if _, err := m.LaunchNext(cache, l, cur); !errors.Is(err, qwen35.ErrNotChained) {
							t.Fatalf("a step followed one of five tokens a sequence: %v", err)
						}
						keep(l)
						for i := range cur {
							cur[i].Tokens = []int32{prev[i].Next}
						}
						l2, err = m.Launch(cache, cur, qwen35.ForwardOptions{})
					} else {
						l2, err = m.LaunchNext(cache, l, cur)
						if err == nil {
							keep(l)
						}
					}
					if err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
					l = l2
				}
				keep(l)
				cache.Close()
				for i := range want {
					if !slices.Equal(got[i], want[i]) {
						t.Errorf("round %d, sequence %d: %v chained, %v one step at a time", round, i, got[i], want[i])
					}
				}
			}
		})
	}
}

// TestPersistentDecodeMatchesOpByOp decodes the dense fixtures token by
// token on the GPU with the persistent kernel (DecodeLayers: every DeltaNet
// mixer and MLP between two attention layers as one launch, replayed in
// graphs) and op by op: the logits must agree to float rounding, and
// stay within cudaTolerance of transformers. Every GPU the tests run on
// (sm_80 and later, and cudaemu) must take the path.
func TestPersistentDecodeMatchesOpByOp(t *testing.T) {
	be := cudaBackend(t)
	if pd, ok := be.Memory().(rt.PersistentDecoder); !ok {
		t.Fatal("cuda memory is no PersistentDecoder")
	} else if err := pd.PersistentDecode(); err != nil {
		t.Fatalf("a GPU that cannot run the persistent kernel: %v", err)
	}
	for _, name := range []string{"qwen35-dense", "qwen35-dense-norope", "qwen35-dense-h256-vlayout"} {
		t.Run(name, func(t *testing.T) {
			fx := oracle.Load(t, name)
			fused := loadOn(t, be, fx.Dir, qwen35.Options{})
			chain := loadOn(t, be, fx.Dir, qwen35.Options{OpByOp: true})
			if !qwen35.Persistent(fused) || qwen35.Persistent(chain) {
				t.Fatalf("persistent: %v and %v, want true and false", qwen35.Persistent(fused), qwen35.Persistent(chain))
			}
			c := fx.Cases[2] // 80 tokens
			before := cuda.Graphs()
			got := run(t, fused, c.IDs, 1)
			if after := cuda.Graphs(); after.Launches-before.Launches < len(c.IDs)/2 {
				t.Errorf("%d of %d decode steps ran as graphs", after.Launches-before.Launches, len(c.IDs))
			}
			want := run(t, chain, c.IDs, 1)
			if d, i := oracle.MaxDiff(got, want); d > 1e-3 {
				t.Errorf("persistent and op-by-op steps differ by %g (token %d)", d, i/fused.Config.VocabSize)
			}
			if d, _ := oracle.MaxDiff(got, oracle.ReadF32(t, c.Logits)); d > cudaTolerance {
				t.Errorf("persistent steps: max |Δlogit| %g against transformers", d)
			}
		})
	}
}

// persistentPair synthesizes a small bf16 model of the given layers with
// DeltaNet heads hk x dk (keys) and hv x dv (values), and loads it on the
// GPU twice: taking the persistent path, and op by op.
func persistentPair(t *testing.T, hk, hv, dk, dv int, seed uint64, layers ...qwen35.LayerKind) (cfg *qwen35.Config, fused, chain *qwen35.Model) {
	t.Helper()
	be := cudaBackend(t)
	cfg = &qwen35.Config{Architecture: "synthetic", VocabSize: 512, HiddenSize: 256, IntermediateSize: 512, NumLayers: len(layers),
		RMSNormEps: 1e-6, TieEmbeddings: true, MaxPositions: 4096, NumHeads: 4, NumKVHeads: 2, HeadDim: 64, RotaryDim: 32,
		RopeTheta: 1e7, ConvKernel: 4, LinKeyHeads: hk, LinValueHeads: hv, LinKeyDim: dk, LinValueDim: dv,
		EOSTokenIDs: []int{511}, Layers: layers}
	path := filepath.Join(t.TempDir(), "synth.gguf")
	if err := qwen35.Synth(cfg, "bf16", path, seed, nil); err != nil {
		t.Fatal(err)
	}
	fused = loadOn(t, be, path, qwen35.Options{})
	chain = loadOn(t, be, path, qwen35.Options{OpByOp: true})
	if !qwen35.Persistent(fused) {
		t.Fatal("the synthesized model does not take the persistent path")
	}
	return cfg, fused, chain
}

// TestPersistentDecodeLongContext decodes after a 700-token prompt, so that
// decode_layers' attention splits each head's keys into its most chunks
// (DecodeAttnSplit, of 44 keys) over a table of 44 blocks and merges them:
// the persistent steps must agree with op by op.
func TestPersistentDecodeLongContext(t *testing.T) {
	cfg, fused, chain := persistentPair(t, 2, 4, 64, 64, 11, qwen35.LinearAttention, qwen35.FullAttention)
	ids := make([]int32, 706)
	for i := range ids {
		ids[i] = int32((i*7919 + 13) % 511)
	}
	decode := func(m *qwen35.Model) []float32 {
		st := m.NewState()
		defer st.Close()
		if _, err := m.Forward(st, ids[:700], qwen35.ForwardOptions{}); err != nil {
			t.Fatal(err)
		}
		var out []float32
		for _, id := range ids[700:] {
			lg, err := m.Forward(st, []int32{id}, qwen35.ForwardOptions{})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, lg.F32()[:lg.Len()]...)
		}
		return out
	}
	got, want := decode(fused), decode(chain)
	if d, i := oracle.MaxDiff(got, want); d > 1e-3 || d != d {
		t.Errorf("persistent and op-by-op steps differ by %g (step %d)", d, i/cfg.VocabSize)
	}
}

// TestPersistentDecodeWideHeads decodes synthesized models whose DeltaNet
// layers have more value heads than decode_layers has consumer warps, in
// the widths the kernel takes apart (heads of 64 and 128 columns; GGUF
// has one head size for keys and values), through the persistent kernel and op by
// op: the fixtures' four heads leave a warp one head, so a kernel that
// mixed up heads it holds together would pass them.
func TestPersistentDecodeWideHeads(t *testing.T) {
	for _, s := range []struct{ hk, hv, dk, dv int }{{8, 16, 128, 128}, {8, 32, 64, 64}, {4, 24, 128, 128}} {
		t.Run(fmt.Sprintf("%dx%d_%dx%d", s.hk, s.dk, s.hv, s.dv), func(t *testing.T) {
			cfg, fused, chain := persistentPair(t, s.hk, s.hv, s.dk, s.dv, 7,
				qwen35.LinearAttention, qwen35.LinearAttention, qwen35.LinearAttention, qwen35.FullAttention)
			ids := []int32{3, 141, 59, 265, 358, 97, 93, 238}
			got, want := run(t, fused, ids, 1), run(t, chain, ids, 1)
			if d, i := oracle.MaxDiff(got, want); d > 1e-3 || d != d {
				t.Errorf("persistent and op-by-op steps differ by %g (token %d)", d, i/cfg.VocabSize)
			}
		})
	}
}
