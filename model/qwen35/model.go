package qwen35

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
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

	be     *rt.Backend
	src    model.Source
	fused  bool
	closer func() error
}

// Options choose among the model's paths.
type Options struct {
	// Composite runs the attention preamble as its chain of ops instead of
	// the fused kernel. Both are checked at load either way.
	Composite bool
}

// Plan reads config.json and the checkpoint headers in dir and returns the
// configuration and the paths the model needs, reading no weight data.
func Plan(dir string) (*Config, []rt.Path, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, nil, err
	}
	src, err := model.OpenSafetensors(dir)
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

// Load opens the safetensors checkpoint in dir for backend be. It checks
// that be covers every path of the model before any weight is read.
func Load(dir string, be *rt.Backend, opts Options) (*Model, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	src, err := model.OpenSafetensors(dir)
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
	m := bindModel(b, cfg)
	if err := b.err(); err != nil {
		return nil, err
	}
	m.Paths, m.be, m.src, m.fused = need, be, src, !opts.Composite
	if unused := unusedTensors(src, b.used); len(unused) > 0 {
		slog.Debug("qwen35: checkpoint tensors not used by the text model", "count", len(unused), "first", unused[0])
	}
	return m, nil
}

// Close releases the weights' mapping.
func (m *Model) Close() error { return m.src.Close() }

func newBinder(src model.Source, bind bool) *binder {
	prefix := "model."
	if _, ok := src.Info("model.language_model.embed_tokens.weight"); ok {
		prefix = "model.language_model."
	}
	return &binder{src: src, prefix: prefix, bind: bind, dtypes: map[string]map[rt.DType]bool{}, used: map[string]bool{}}
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

// State is one sequence's cache: keys and values of the attention layers
// and conv and recurrent state of the DeltaNet layers. Forward extends it.
type State struct {
	Pos    int // tokens consumed so far
	kv     []*kvCache
	deltas []*deltaState
}

// NewState returns an empty sequence state.
func (m *Model) NewState() *State {
	s := &State{kv: make([]*kvCache, len(m.Layers)), deltas: make([]*deltaState, len(m.Layers))}
	for i, l := range m.Layers {
		if l.Kind == FullAttention {
			s.kv[i] = &kvCache{}
		} else {
			s.deltas[i] = newDeltaState(m.Config)
		}
	}
	return s
}

// ForwardOptions observe a forward pass.
type ForwardOptions struct {
	// Hidden, if set, receives the embedding output (index 0), the output
	// of each decoder layer (1..L-1) and the final-norm output (L), as
	// transformers' output_hidden_states gives them.
	Hidden func(index int, h *rt.Tensor)
}

// ErrInput is wrapped by errors about the token ids given to Forward.
var ErrInput = errors.New("invalid input")

// Forward runs ids through the model after the tokens already in st and
// returns logits [len(ids), vocab].
func (m *Model) Forward(st *State, ids []int32, fo ForwardOptions) (*rt.Tensor, error) {
	c := m.Config
	if len(ids) == 0 {
		return nil, fmt.Errorf("qwen35: %w: no token ids", ErrInput)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= c.VocabSize {
			return nil, fmt.Errorf("qwen35: %w: token id %d at index %d is outside the vocabulary of %d", ErrInput, id, i, c.VocabSize)
		}
	}
	t, h := len(ids), c.HiddenSize
	positions := make([]int32, t)
	for i := range positions {
		positions[i] = int32(st.Pos + i)
	}
	x := rt.New(rt.F32, t, h)
	if err := m.be.Embedding(x, m.Embed, ids); err != nil {
		return nil, fmt.Errorf("qwen35: embedding: %w", err)
	}
	if fo.Hidden != nil {
		fo.Hidden(0, x)
	}
	normed, mixed := rt.New(rt.F32, t, h), rt.New(rt.F32, t, h)
	for i := range m.Layers {
		if err := m.layer(i, st, x, normed, mixed, positions); err != nil {
			return nil, fmt.Errorf("qwen35: layer %d (%s): %w", i, m.Layers[i].Kind, err)
		}
		if fo.Hidden != nil && i < len(m.Layers)-1 {
			fo.Hidden(i+1, x)
		}
	}
	if err := m.be.RMSNormOffset(normed, x, m.Norm, c.RMSNormEps); err != nil {
		return nil, fmt.Errorf("qwen35: final norm: %w", err)
	}
	if fo.Hidden != nil {
		fo.Hidden(len(m.Layers), normed)
	}
	logits := rt.New(rt.F32, t, c.VocabSize)
	if err := m.be.MatMul(logits, normed, m.LMHead); err != nil {
		return nil, fmt.Errorf("qwen35: lm_head: %w", err)
	}
	st.Pos += t
	return logits, nil
}

// layer updates x in place: x += mixer(norm(x)); x += ffn(norm(x)).
func (m *Model) layer(i int, st *State, x, normed, out *rt.Tensor, positions []int32) error {
	l, c, be := &m.Layers[i], m.Config, m.be
	if err := be.RMSNormOffset(normed, x, l.InputNorm, c.RMSNormEps); err != nil {
		return err
	}
	var err error
	if l.Kind == FullAttention {
		err = l.Attention.forward(be, c, out, normed, st.kv[i], positions, m.fused)
	} else {
		err = l.DeltaNet.forward(be, c, out, normed, st.deltas[i])
	}
	if err != nil {
		return err
	}
	if err := be.Add(x, x, out); err != nil {
		return err
	}
	if err := be.RMSNormOffset(normed, x, l.PostNorm, c.RMSNormEps); err != nil {
		return err
	}
	if l.MoE != nil {
		err = l.MoE.forward(be, out, normed)
	} else {
		err = l.MLP.forward(be, out, normed)
	}
	if err != nil {
		return err
	}
	return be.Add(x, x, out)
}
