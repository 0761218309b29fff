package qwen35

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/govllm/govllm/model"
	rt "github.com/govllm/govllm/runtime"
)

// Layer is one decoder layer: a token mixer and a feed-forward block, each
// behind a pre-norm and a residual connection.
type Layer struct {
	Kind      LayerKind
	InputNorm *rt.Tensor // [H], scale 1 + w
	PostNorm  *rt.Tensor // [H], scale 1 + w
	DeltaNet  *DeltaNet  // Kind == LinearAttention
	Attention *Attention // Kind == FullAttention
	MLP       *MLP       // dense models
	MoE       *MoE       // MoE models
}

// Model is a loaded Qwen3.5 text model bound to a backend.
type Model struct {
	Config *Config
	Embed  *rt.Tensor // [V, H]
	Norm   *rt.Tensor // [H], f32
	LMHead *rt.Tensor // [V, H]; the embedding when tied
	Layers []Layer
	Paths  []rt.Path // what the model needs of a backend

	weightBytes int64
	params      map[rt.DType]int64

	be        *rt.Backend
	src       model.Source
	placed    []*rt.Tensor // copies of the weights in device memory
	fused     bool
	allReduce func(*rt.Tensor) error // tensor parallel: Options.AllReduce
	// persistent: a batch-1 decode step runs its DeltaNet mixers and MLPs
	// as DecodeLayers ops (persistent.go).
	persistent bool
}

// Options choose among the model's paths.
type Options struct {
	// Composite runs the attention preamble as its chain of ops instead of
	// the fused kernel. Both are checked at load either way.
	Composite bool
	// Progress, if set, is called as weights are bound: done of total layers.
	Progress func(done, total int)
	// AllReduce, set on a tensor-parallel rank (ShardSource), sums a
	// block's output [T, H] over the ranks in place, before the residual.
	AllReduce func(out *rt.Tensor) error
	// OpByOp runs batch-1 decode steps op by op even where the backend
	// has DecodeLayers (runs of a dense model's layers as one persistent
	// kernel, faster on an H100: docs/cuda.md); GOVLLM_CUDA_PERSISTENT=off
	// sets it too.
	OpByOp bool

	concat bool // concatenate projections in host memory too (tests)
}

// Plan reads config.json and the checkpoint headers in dir and returns the
// configuration and the paths the model needs, reading no weight data.
func Plan(dir string) (*Config, []rt.Path, error) {
	cfg, src, err := open(dir)
	if err != nil {
		return nil, nil, err
	}
	defer src.Close()
	b := newBinder(src, false)
	bindModel(b, cfg)
	if err := b.err(); err != nil {
		return nil, nil, err
	}
	return cfg, paths(b.dtypes), nil
}

// Load opens the checkpoint in dir (a safetensors directory or a .gguf
// file) for backend be. It checks
// that be covers every path of the model before any weight is read.
func Load(dir string, be *rt.Backend, opts Options) (*Model, error) {
	cfg, src, err := open(dir)
	if err != nil {
		return nil, err
	}
	m, err := LoadFrom(cfg, src, be, opts)
	if err != nil {
		src.Close()
		return nil, err
	}
	return m, nil
}

// open reads the config and opens the tensors of a checkpoint directory
// (config.json and safetensors) or of a .gguf file.
func open(path string) (*Config, model.Source, error) {
	if IsGGUF(path) {
		return loadGGUF(path)
	}
	cfg, err := LoadConfig(filepath.Join(path, "config.json"))
	if err != nil {
		return nil, nil, err
	}
	src, err := model.OpenSafetensors(path)
	if err != nil {
		return nil, nil, err
	}
	return cfg, src, nil
}

// LoadFrom binds a model from any tensor source. The source is closed by
// Model.Close.
func LoadFrom(cfg *Config, src model.Source, be *rt.Backend, opts Options) (*Model, error) {
	plan := newBinder(src, false)
	bindModel(plan, cfg)
	if err := plan.err(); err != nil {
		return nil, err
	}
	need := paths(plan.dtypes)
	if err := be.Check(need); err != nil {
		return nil, fmt.Errorf("qwen35: cannot run on %s: %w", be.Device(), err)
	}
	b := newBinder(src, true)
	b.be, b.progress = be, opts.Progress
	_, host := be.Memory().(rt.HostMemory)
	b.concat = opts.concat || !host // device weights are copies anyway
	m := bindModel(b, cfg)
	if err := b.err(); err != nil {
		freeTensors(be.Memory(), b.placed)
		return nil, err
	}
	m.Paths, m.be, m.src, m.fused, m.weightBytes, m.params, m.placed = need, be, src, !opts.Composite, b.bytes, b.params, b.placed
	m.allReduce = opts.AllReduce
	if !opts.OpByOp && os.Getenv("GOVLLM_CUDA_PERSISTENT") != "off" && m.allReduce == nil && be.Device() != rt.CPU {
		err := m.persistentPath()
		m.persistent = err == nil
		if err != nil {
			slog.Info("qwen35: batch-1 decode runs op by op", "why", err)
		}
	}
	if unused := unusedTensors(src, b.used); len(unused) > 0 {
		slog.Debug("qwen35: checkpoint tensors not used by the text model", "count", len(unused), "first", unused[0])
	}
	// What parsing the headers and metadata allocated is garbage now: hand
	// it back before the first step sizes its buffers, so that the peak
	// RSS is the weights and one step's activations.
	debug.FreeOSMemory()
	return m, nil
}

// ParamCount is the number of weights the model uses.
func (m *Model) ParamCount() int64 {
	var n int64
	for _, c := range m.params {
		n += c
	}
	return n
}

// WeightTypes names the dtype that holds most weights, as llama-bench's
// model type does (e.g. "Q8_0").
func (m *Model) WeightTypes() string {
	best, bestN := rt.DTypeInvalid, int64(-1)
	for dt, n := range m.params {
		if n > bestN || (n == bestN && dt < best) {
			best, bestN = dt, n
		}
	}
	return best.String()
}

// WeightBytes is the stored size of the weights the model uses.
func (m *Model) WeightBytes() int64 { return m.weightBytes }

// Backend is the backend the model runs on.
func (m *Model) Backend() *rt.Backend { return m.be }

// Close releases the weights: their mapping and their device copies.
func (m *Model) Close() error {
	freeTensors(m.be.Memory(), m.placed)
	m.placed = nil
	return m.src.Close()
}

func newBinder(src model.Source, bind bool) *binder {
	prefix := "model."
	if _, ok := src.Info("model.language_model.embed_tokens.weight"); ok {
		prefix = "model.language_model."
	}
	return &binder{src: src, prefix: prefix, bind: bind, dtypes: map[string]map[rt.DType]bool{}, used: map[string]bool{}, params: map[rt.DType]int64{}}
}

func bindModel(b *binder, c *Config) *Model {
	m := &Model{Config: c, Layers: make([]Layer, c.NumLayers)}
	h := c.HiddenSize
	b.enter("embedding")
	var embDType rt.DType
	m.Embed, embDType = b.stored(b.prefix+"embed_tokens.weight", c.VocabSize, h)
	b.record(embDType)
	b.enter("lm_head")
	m.Norm = b.f32(b.prefix+"norm.weight", h)
	if c.TieEmbeddings {
		m.LMHead = m.Embed
		b.record(embDType)
	} else {
		m.LMHead = b.matrix("lm_head.weight", c.VocabSize, h)
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		p := fmt.Sprintf("%slayers.%d.", b.prefix, i)
		l.Kind = c.Layers[i]
		b.enter("decoder")
		l.InputNorm = b.f32(p+"input_layernorm.weight", h)
		l.PostNorm = b.f32(p+"post_attention_layernorm.weight", h)
		if l.Kind == FullAttention {
			b.enter("attention.fused", "attention.composite")
			l.Attention = bindAttention(b, p+"self_attn.", c)
		} else {
			b.enter("deltanet")
			l.DeltaNet = bindDeltaNet(b, p+"linear_attn.", c)
		}
		if c.MoE {
			b.enter("moe")
			l.MoE = bindMoE(b, p+"mlp.", c)
		} else {
			b.enter("mlp")
			l.MLP = bindMLP(b, p+"mlp.", h, c.IntermediateSize)
		}
		if b.progress != nil {
			b.progress(i+1, c.NumLayers)
		}
	}
	return m
}

// unusedTensors lists checkpoint tensors the text model did not bind,
// besides the vision tower and the multi-token-prediction head.
func unusedTensors(src model.Source, used map[string]bool) []string {
	var out []string
	for _, n := range src.Names() {
		if used[n] || strings.HasPrefix(n, "model.visual.") || strings.HasPrefix(n, "mtp.") {
			continue
		}
		out = append(out, n)
	}
	return out
}

// LogitsMode picks the positions of a sequence that get logits.
type LogitsMode uint8

const (
	NoLogits   LogitsMode = iota // a prefill chunk that samples nothing
	LastLogits                   // the last position (sampling)
	AllLogits                    // every position (scoring, prompt logprobs)
	// LastToken: the last position's greedy token (the argmax of its
	// logits), written to Seq.Next; on a GPU the logits stay there and
	// only the id is copied back (a 248k-token row is 1 MB).
	LastToken
)

// Seq is one sequence of a batched forward: Tokens at positions
// Start..Start+len(Tokens), keys and values in the cache blocks Blocks
// (which cover positions 0..Start+len(Tokens)), DeltaNet state in Slot.
type Seq struct {
	Tokens []int32
	Start  int
	Blocks []int32
	Slot   int
	Logits LogitsMode
	Next   int32 // LastToken: set by ForwardBatch
}

// ForwardOptions observe a forward pass.
type ForwardOptions struct {
	// Hidden, if set, receives the embedding output (index 0), the output
	// of each decoder layer (1..L-1) and the final-norm output (L), as
	// transformers' output_hidden_states gives them, for all rows of the
	// batch, in the backend's memory (Backend.Fetch copies it to the host).
	// The tensor is only valid during the call.
	Hidden func(index int, h *rt.Tensor)
}

// ErrInput is wrapped by errors about the sequences given to a forward.
var ErrInput = errors.New("invalid input")

// batch is what the layers need to know about a batch of sequences.
type batch struct {
	seqs      []Seq
	rows      []int        // first row of each sequence
	positions []int32      // per row
	kvSlots   []int32      // cache row of each row
	attn      []rt.AttnSeq // per sequence
	logitRows []int32      // rows that get logits, tokenRows last
	tokenRows []int32      // rows of LastToken sequences
	blockSize int
	slots     []int32 // DeltaNet state slot of each sequence

	ids   []int32   // the tokens of all rows
	arena *rt.Arena // the step's tensors

	deltaNet rt.DeltaNetStepArgs // a layer's step operands, kept here so that passing them allocates nothing
}

func (m *Model) plan(c *Cache, seqs []Seq) (*batch, error) {
	if len(seqs) == 0 {
		return nil, fmt.Errorf("qwen35: %w: an empty batch", ErrInput)
	}
	// The batch and its tensors are the cache's, reused step after step.
	b := &c.step
	*b = batch{seqs: seqs, blockSize: c.BlockSize, arena: &c.arena,
		rows: b.rows[:0], positions: b.positions[:0], kvSlots: b.kvSlots[:0],
		attn: b.attn[:0], logitRows: b.logitRows[:0], tokenRows: b.tokenRows[:0],
		ids: b.ids[:0], slots: b.slots[:0]}
	b.arena.Reset()
	row := 0
	for si, s := range seqs {
		if len(s.Tokens) == 0 {
			return nil, fmt.Errorf("qwen35: %w: sequence %d has no tokens", ErrInput, si)
		}
		for i, id := range s.Tokens {
			if id < 0 || int(id) >= m.Config.VocabSize {
				return nil, fmt.Errorf("qwen35: %w: sequence %d: token id %d at index %d is outside the vocabulary of %d", ErrInput, si, id, i, m.Config.VocabSize)
			}
		}
		end := s.Start + len(s.Tokens)
		if s.Start < 0 || len(s.Blocks)*c.BlockSize < end {
			return nil, fmt.Errorf("qwen35: %w: sequence %d: %d blocks of %d cannot hold %d positions", ErrInput, si, len(s.Blocks), c.BlockSize, end)
		}
		for _, blk := range s.Blocks {
			if blk < 0 || int(blk) >= c.NumBlocks {
				return nil, fmt.Errorf("qwen35: %w: sequence %d: block %d outside the cache of %d", ErrInput, si, blk, c.NumBlocks)
			}
		}
		if s.Slot < 0 || s.Slot >= c.NumSlots {
			return nil, fmt.Errorf("qwen35: %w: sequence %d: state slot %d outside %d slots", ErrInput, si, s.Slot, c.NumSlots)
		}
		for _, other := range b.slots { // the state of one slot cannot advance twice in a step
			if int(other) == s.Slot {
				return nil, fmt.Errorf("qwen35: %w: sequence %d: state slot %d is another sequence's in this batch", ErrInput, si, s.Slot)
			}
		}
		b.rows = append(b.rows, row)
		b.slots = append(b.slots, int32(s.Slot))
		b.ids = append(b.ids, s.Tokens...)
		b.attn = append(b.attn, rt.AttnSeq{Row: row, Len: len(s.Tokens), Start: s.Start, Blocks: s.Blocks})
		for i := range s.Tokens {
			p := s.Start + i
			b.positions = append(b.positions, int32(p))
			b.kvSlots = append(b.kvSlots, s.Blocks[p/c.BlockSize]*int32(c.BlockSize)+int32(p%c.BlockSize))
		}
		switch s.Logits {
		case LastLogits:
			b.logitRows = append(b.logitRows, int32(row+len(s.Tokens)-1))
		case AllLogits:
			for i := range s.Tokens {
				b.logitRows = append(b.logitRows, int32(row+i))
			}
		case LastToken:
			b.tokenRows = append(b.tokenRows, int32(row+len(s.Tokens)-1))
		}
		row += len(s.Tokens)
	}
	b.logitRows = append(b.logitRows, b.tokenRows...)
	return b, nil
}

// ForwardBatch runs one step over several sequences, their tokens
// concatenated without padding, and returns the logits of the rows their
// LogitsMode asks for, in order: [rows, vocab] in host memory, or nil if
// none; LastToken sequences get their token in Next instead. The logits
// live in c's step buffers: they are valid until the next ForwardBatch on
// c (a decode step that repeats the shapes of the last allocates
// nothing). On a GPU the step's errors are the kernels' too: ForwardBatch
// waits for them.
func (m *Model) ForwardBatch(c *Cache, seqs []Seq, fo ForwardOptions) (*rt.Tensor, error) {
	l, err := m.Launch(c, seqs, fo)
	if err != nil {
		return nil, err
	}
	return l.Wait()
}

// stepOut is what a step leaves on its backend: the logits rows asked for
// and the greedy tokens, and where a device's step reads them back, their
// host copy.
type stepOut struct{ logits, tokens, host *rt.Tensor }

// toHost copies t, if on the device, into the staging buffer *staged
// (grown as needed) and returns the copy.
func toHost(c *Cache, staged **rt.Tensor, t *rt.Tensor) (*rt.Tensor, error) {
	if t == nil || !t.OnDevice() {
		return t, nil
	}
	if *staged == nil || (*staged).Len() < t.Len() {
		if *staged != nil {
			c.mem.FreeStaging(*staged)
			*staged = nil
		}
		s, err := c.mem.Staging(t.DType(), t.Len()+t.Len()/4)
		if err != nil {
			return nil, fmt.Errorf("host buffer: %w", err)
		}
		*staged = s
	}
	out, _ := (*staged).Slice(0, 0, t.Len())
	out = out.MustReshape(t.Shape()...)
	if err := c.mem.Copy(out, t); err != nil {
		return nil, err
	}
	return out, nil
}

func (m *Model) forward(c *Cache, seqs []Seq, fo ForwardOptions) (stepOut, error) {
	b, err := m.plan(c, seqs)
	if err != nil {
		return stepOut{}, err
	}
	cfg, ar := m.Config, b.arena
	n, h := len(b.positions), cfg.HiddenSize
	x := ar.New(rt.F32, n, h)
	if err := m.be.Embedding(x, m.Embed, b.ids); err != nil {
		return stepOut{}, fmt.Errorf("qwen35: embedding: %w", err)
	}
	if fo.Hidden != nil {
		fo.Hidden(0, x)
	}
	// A layer leaves its ffn output in mixed, added into x by the next
	// norm (one pass for the add and the norm), or here where the caller
	// observes each layer's x.
	normed, mixed := ar.New(rt.F32, n, h), ar.New(rt.F32, n, h)
	pending := false
	layers := m.Layers
	if m.persistent && len(seqs) == 1 && len(seqs[0].Tokens) == 1 && fo.Hidden == nil {
		if err := m.persistentStep(c, b, x); err != nil {
			return stepOut{}, err
		}
		layers = nil
	}
	for i := range layers {
		mark := ar.Mark() // a layer's intermediates are the next one's buffers
		if err := m.layer(i, c, b, x, normed, mixed, pending); err != nil {
			return stepOut{}, fmt.Errorf("qwen35: layer %d (%s): %w", i, m.Layers[i].Kind, err)
		}
		ar.Release(mark)
		pending = true
		if fo.Hidden != nil && i < len(m.Layers)-1 {
			if err := m.be.Add(x, x, mixed); err != nil {
				return stepOut{}, fmt.Errorf("qwen35: layer %d residual: %w", i, err)
			}
			pending = false
			fo.Hidden(i+1, x)
		}
	}
	if err := m.norm(normed, x, mixed, m.Norm, pending); err != nil {
		return stepOut{}, fmt.Errorf("qwen35: final norm: %w", err)
	}
	if fo.Hidden != nil {
		fo.Hidden(len(m.Layers), normed)
	}
	if len(b.logitRows) == 0 {
		return stepOut{}, nil
	}
	last := normed
	if !identity(b.logitRows, n) {
		last = ar.New(rt.F32, len(b.logitRows), h)
		if err := m.be.GatherRows(last, normed, b.logitRows); err != nil {
			return stepOut{}, fmt.Errorf("qwen35: lm_head rows: %w", err)
		}
	}
	logits := ar.New(rt.F32, len(b.logitRows), cfg.VocabSize)
	if err := m.be.MatMul(logits, last, m.LMHead); err != nil {
		return stepOut{}, fmt.Errorf("qwen35: lm_head: %w", err)
	}
	nl := len(b.logitRows) - len(b.tokenRows)
	if len(b.tokenRows) == 0 {
		return stepOut{logits: logits}, nil
	}
	out := stepOut{tokens: ar.New(rt.I32, len(b.tokenRows))}
	if err := m.be.Argmax(out.tokens, ar.Slice(logits, 0, nl, len(b.logitRows))); err != nil {
		return stepOut{}, fmt.Errorf("qwen35: greedy tokens: %w", err)
	}
	if st, ok := m.be.Memory().(rt.Stepper); ok && out.tokens.OnDevice() {
		// A copy queued in the step: the host reads the tokens when the
		// step is done, while the next one may run.
		if out.host, err = st.ReadBack(out.tokens); err != nil {
			return stepOut{}, fmt.Errorf("qwen35: greedy tokens to the host: %w", err)
		}
	}
	if nl > 0 {
		out.logits = ar.Slice(logits, 0, 0, nl)
	}
	return out, nil
}

// identity reports whether rows are 0, 1, …, n-1.
func identity(rows []int32, n int) bool {
	if len(rows) != n {
		return false
	}
	for i, r := range rows {
		if int(r) != i {
			return false
		}
	}
	return true
}

// layer updates x in place: x += out when the previous layer's output is
// pending there, then x += mixer(norm(x)), and leaves ffn(norm(x)) in out.
func (m *Model) layer(i int, c *Cache, b *batch, x, normed, out *rt.Tensor, pending bool) error {
	l, cfg, be := &m.Layers[i], m.Config, m.be
	if err := m.norm(normed, x, out, l.InputNorm, pending); err != nil {
		return err
	}
	var err error
	mark := b.arena.Mark() // the mixer's intermediates are the ffn's buffers
	if l.Kind == FullAttention {
		err = l.Attention.forward(be, cfg, out, normed, c.k[i], c.v[i], b, m.fused)
	} else {
		err = l.DeltaNet.forward(be, cfg, out, normed, c, i, b)
	}
	if err != nil {
		return err
	}
	if err := m.reduce(out); err != nil {
		return err
	}
	b.arena.Release(mark)
	if err := m.norm(normed, x, out, l.PostNorm, true); err != nil {
		return err
	}
	if l.MoE != nil {
		err = l.MoE.forward(be, b, out, normed)
	} else {
		err = l.MLP.forward(be, b.arena, out, normed)
	}
	if err != nil {
		return err
	}
	return m.reduce(out)
}

// reduce sums a block's partial output over tensor-parallel ranks.
func (m *Model) reduce(out *rt.Tensor) error {
	if m.allReduce == nil {
		return nil
	}
	return m.allReduce(out)
}

// norm writes rmsnorm(x)·(1 + w) into normed, first adding the pending
// block output out into x.
func (m *Model) norm(normed, x, out, w *rt.Tensor, pending bool) error {
	if pending {
		return m.be.AddRMSNormOffset(normed, x, out, w, m.Config.RMSNormEps)
	}
	return m.be.RMSNormOffset(normed, x, w, m.Config.RMSNormEps)
}

// State is one sequence on a private, growing cache: the simple API for
// running a single sequence (the CLI's logits command, tests).
type State struct {
	Pos    int // tokens consumed so far
	cache  *Cache
	blocks []int32
}

const stateBlockSize = 64

// NewState returns an empty sequence state.
// Its cache is allocated by the first Forward; Close frees it.
func (m *Model) NewState() *State { return &State{} }

// Close frees the state's cache.
func (st *State) Close() {
	if st.cache != nil {
		st.cache.Close()
		st.cache = nil
	}
}

// Forward runs ids after the tokens already in st and returns logits
// [len(ids), vocab].
func (m *Model) Forward(st *State, ids []int32, fo ForwardOptions) (*rt.Tensor, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("qwen35: %w: no token ids", ErrInput)
	}
	if st.cache == nil {
		c, err := m.NewCache(stateBlockSize, 0, 1)
		if err != nil {
			return nil, err
		}
		st.cache = c
	}
	need := (st.Pos + len(ids) + stateBlockSize - 1) / stateBlockSize
	if need > st.cache.NumBlocks {
		if err := st.cache.grow(max(need, 2*st.cache.NumBlocks)); err != nil {
			return nil, err
		}
	}
	for len(st.blocks) < need {
		st.blocks = append(st.blocks, int32(len(st.blocks)))
	}
	logits, err := m.ForwardBatch(st.cache, []Seq{{Tokens: ids, Start: st.Pos, Blocks: st.blocks, Logits: AllLogits}}, fo)
	if err != nil {
		return nil, err
	}
	st.Pos += len(ids)
	// A copy: the caller may keep the logits of several steps.
	out := rt.New(rt.F32, logits.Shape()...)
	copy(out.F32(), logits.F32()[:logits.Len()])
	return out, nil
}
