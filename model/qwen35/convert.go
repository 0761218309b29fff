package qwen35

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/govllm/govllm/format/gguf"
	"github.com/govllm/govllm/model"
)

// ConvertTypes are the file types Convert writes, with GGUF's file_type codes.
var ConvertTypes = map[string]struct {
	Type     gguf.TensorType
	FileType uint32
	Mix      bool // *_K_M: more bits for output, attn_v and ffn_down as llama.cpp does
}{"f32": {gguf.F32, 0, false}, "f16": {gguf.F16, 1, false}, "bf16": {gguf.BF16, 32, false}, "q8_0": {gguf.Q8_0, 7, false},
	"q4_0": {gguf.Q4_0, 2, false}, "q4_k_m": {gguf.Q4_K, 15, true}, "q5_k_m": {gguf.Q5_K, 17, true}, "q6_k": {gguf.Q6_K, 18, false},
	"q4_1": {gguf.Q4_1, 3, false}, "q5_0": {gguf.Q5_0, 8, false}, "q5_1": {gguf.Q5_1, 9, false},
	"q2_k": {gguf.Q2_K, 10, false}, "q3_k": {gguf.Q3_K, 11, false}, "iq4_nl": {gguf.IQ4_NL, 25, false}, "iq4_xs": {gguf.IQ4_XS, 30, false}}

// typeNames lists ConvertTypes for messages.
const typeNames = "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, q6_k, q2_k, q3_k, iq4_nl, iq4_xs"

// Convert writes the Hugging Face checkpoint in dir as a GGUF file that
// llama.cpp loads, as its own converter would: the same keys and tensor
// names, norms with the +1 folded in, ssm_a = -exp(A_log), value heads in
// the tiled order, small and irregular tensors kept F32/F16 as it does, the
// tokenizer and chat template embedded. Unlike llama.cpp's converter it
// writes the layer pattern exactly (attention.recurrent_layers).
func Convert(dir, out, typeName string, progress func(done, total int)) error {
	ct, ok := ConvertTypes[typeName]
	if !ok {
		return fmt.Errorf("qwen35: convert: type %q is not one of %s", typeName, typeNames)
	}
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return err
	}
	if cfg.LinKeyDim != cfg.LinValueDim {
		return fmt.Errorf("qwen35: convert: %w: linear_key_head_dim %d differs from linear_value_head_dim %d, which llama.cpp's qwen35 loader cannot hold (one ssm.state_size)", ErrConfig, cfg.LinKeyDim, cfg.LinValueDim)
	}
	src, err := model.OpenSafetensors(dir)
	if err != nil {
		return err
	}
	defer src.Close()
	arch := "qwen35"
	if cfg.MoE {
		arch = "qwen35moe"
	}
	w := gguf.NewWriter()
	if err := writeMetadata(w, dir, arch, cfg, ct.FileType); err != nil {
		return err
	}
	if err := writeTokenizer(w, dir, cfg.VocabSize); err != nil {
		return err
	}
	c := &converter{w: w, src: src, choose: chooser{typ: ct.Type, mix: ct.Mix, layers: cfg.NumLayers, tied: cfg.TieEmbeddings}, cfg: cfg, prefix: "model."}
	if _, ok := src.Info("model.language_model.embed_tokens.weight"); ok {
		c.prefix = "model.language_model."
	}
	c.tensors(progress)
	if c.err != nil {
		return c.err
	}
	return w.WriteFile(out)
}

func writeMetadata(w *gguf.Writer, dir, arch string, c *Config, fileType uint32) error {
	k := func(key string) string { return arch + "." + key }
	w.Set("general.architecture", arch)
	w.Set("general.type", "model")
	w.Set("general.name", filepath.Base(filepath.Clean(dir)))
	w.Set(k("block_count"), uint32(c.NumLayers))
	w.Set(k("context_length"), uint32(c.MaxPositions))
	w.Set(k("embedding_length"), uint32(c.HiddenSize))
	if !c.MoE {
		w.Set(k("feed_forward_length"), uint32(c.IntermediateSize))
	}
	w.Set(k("attention.head_count"), uint32(c.NumHeads))
	w.Set(k("attention.head_count_kv"), uint32(c.NumKVHeads))
	w.Set(k("rope.dimension_sections"), mropeSections(dir, c.RotaryDim))
	w.Set(k("rope.freq_base"), c.RopeTheta)
	w.Set(k("attention.layer_norm_rms_epsilon"), c.RMSNormEps)
	w.Set(k("attention.key_length"), uint32(c.HeadDim))
	w.Set(k("attention.value_length"), uint32(c.HeadDim))
	w.Set("general.file_type", fileType)
	if c.MoE {
		w.Set(k("expert_count"), uint32(c.NumExperts))
		w.Set(k("expert_used_count"), uint32(c.TopK))
		w.Set(k("expert_feed_forward_length"), uint32(c.ExpertInterSize))
		w.Set(k("expert_shared_feed_forward_length"), uint32(c.SharedInterSize))
	}
	w.Set(k("ssm.conv_kernel"), uint32(c.ConvKernel))
	w.Set(k("ssm.state_size"), uint32(c.LinKeyDim))
	w.Set(k("ssm.group_count"), uint32(c.LinKeyHeads))
	w.Set(k("ssm.time_step_rank"), uint32(c.LinValueHeads))
	w.Set(k("ssm.inner_size"), uint32(c.LinValueHeads*c.LinValueDim))
	recurrent := make([]bool, c.NumLayers)
	interval := 0
	for i, l := range c.Layers {
		recurrent[i] = l == LinearAttention
		if l == FullAttention && interval == 0 {
			interval = i + 1
		}
	}
	regular := interval > 0
	for i, l := range c.Layers {
		regular = regular && (l == FullAttention) == ((i+1)%interval == 0)
	}
	if regular {
		w.Set(k("full_attention_interval"), uint32(interval))
	}
	w.Set(k("attention.recurrent_layers"), recurrent)
	w.Set(k("rope.dimension_count"), uint32(c.RotaryDim))
	w.Set("general.quantization_version", uint32(2))
	return nil
}

// mropeSections reads rope_parameters.mrope_section (padded to 4), or
// derives Qwen3.5's split of the rotary half.
func mropeSections(dir string, rot int) []int32 {
	var doc struct {
		RopeParameters *struct {
			MropeSection []int32 `json:"mrope_section"`
		} `json:"rope_parameters"`
		TextConfig *struct {
			RopeParameters *struct {
				MropeSection []int32 `json:"mrope_section"`
			} `json:"rope_parameters"`
		} `json:"text_config"`
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	json.Unmarshal(raw, &doc)
	var s []int32
	if doc.TextConfig != nil && doc.TextConfig.RopeParameters != nil {
		s = doc.TextConfig.RopeParameters.MropeSection
	} else if doc.RopeParameters != nil {
		s = doc.RopeParameters.MropeSection
	}
	if len(s) == 0 {
		half := int32(rot / 2)
		s = []int32{half - 2*(half/3), half / 3, half / 3}
	}
	return append(append([]int32(nil), s...), make([]int32, max(0, 4-len(s)))...)[:4]
}

// writeTokenizer embeds tokenizer.json, its token list padded to the
// model's vocabulary size as llama.cpp requires.
func writeTokenizer(w *gguf.Writer, dir string, vocabSize int) error {
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return fmt.Errorf("qwen35: convert: %w", err)
	}
	var tj struct {
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		PreTokenizer json.RawMessage `json:"pre_tokenizer"`
		Model        struct {
			Vocab  map[string]int  `json:"vocab"`
			Merges json.RawMessage `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(raw, &tj); err != nil {
		return fmt.Errorf("qwen35: convert: tokenizer.json: %w", err)
	}
	n := vocabSize
	for _, id := range tj.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range tj.AddedTokens {
		n = max(n, a.ID+1)
	}
	tokens, types := make([]string, n), make([]int32, n)
	for i := range tokens {
		tokens[i], types[i] = fmt.Sprintf("[PAD%d]", i), 5 // unused ids, as llama.cpp names them
	}
	for t, id := range tj.Model.Vocab {
		tokens[id], types[id] = t, 1
	}
	for _, a := range tj.AddedTokens {
		tokens[a.ID], types[a.ID] = a.Content, 4
		if a.Special {
			types[a.ID] = 3
		}
	}
	var merges []string
	if json.Unmarshal(tj.Model.Merges, &merges) != nil {
		merges = nil // a failed decode leaves partial entries
		var pairs [][2]string
		if err := json.Unmarshal(tj.Model.Merges, &pairs); err != nil {
			return fmt.Errorf("qwen35: convert: tokenizer.json merges: %w", err)
		}
		for _, p := range pairs {
			merges = append(merges, p[0]+" "+p[1])
		}
	}
	pre := "qwen2"
	if strings.Contains(string(tj.PreTokenizer), `\\p{M}`) {
		pre = "qwen35"
	}
	w.Set("tokenizer.ggml.model", "gpt2")
	w.Set("tokenizer.ggml.pre", pre)
	w.Set("tokenizer.ggml.tokens", tokens)
	w.Set("tokenizer.ggml.token_type", types)
	w.Set("tokenizer.ggml.merges", merges)
	var tc struct {
		EOS      json.RawMessage `json:"eos_token"`
		Pad      json.RawMessage `json:"pad_token"`
		Template json.RawMessage `json:"chat_template"`
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err == nil {
		json.Unmarshal(raw, &tc)
	}
	id := func(raw json.RawMessage) (int, bool) {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0, false
		}
		for i, t := range tokens {
			if t == s {
				return i, true
			}
		}
		return 0, false
	}
	if eos, ok := id(tc.EOS); ok {
		w.Set("tokenizer.ggml.eos_token_id", uint32(eos))
	}
	if pad, ok := id(tc.Pad); ok {
		w.Set("tokenizer.ggml.padding_token_id", uint32(pad))
	}
	w.Set("tokenizer.ggml.add_bos_token", false)
	var tmpl string
	if json.Unmarshal(tc.Template, &tmpl) == nil && tmpl != "" {
		w.Set("tokenizer.chat_template", tmpl)
	} else if raw, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
		w.Set("tokenizer.chat_template", string(raw))
	}
	return nil
}

type converter struct {
	w      *gguf.Writer
	src    model.Source
	choose chooser
	cfg    *Config
	prefix string
	err    error
}

// read returns a tensor as float32 values and its shape.
func (c *converter) read(name string) ([]float32, []int) {
	if c.err != nil {
		return nil, nil
	}
	t, err := c.src.Tensor(name)
	if err != nil {
		c.err = err
		return nil, nil
	}
	f := toF32(t)
	return f.F32()[:f.Len()], t.Shape()
}

// put writes values of shape (outermost first) as name, F32 when small or
// kept so by llama.cpp, else in the file's type (F16 where Q8_0 rows do
// not fill blocks).
func (c *converter) put(name string, x []float32, shape []int, keepF32 bool) {
	if c.err != nil {
		return
	}
	typ := c.choose.tensorType(name, len(shape), shape[len(shape)-1])
	if keepF32 {
		typ = gguf.F32
	}
	data, err := gguf.Quantize(typ, x)
	if err != nil {
		c.err = fmt.Errorf("qwen35: convert: %s: %w", name, err)
		return
	}
	dims := make([]uint64, len(shape))
	for i, d := range shape {
		dims[len(shape)-1-i] = uint64(d)
	}
	if err := c.w.Add(name, typ, dims, data); err != nil {
		c.err = err
	}
}

// tileRows reorders groups of rows per value head from transformers'
// grouped order to llama.cpp's tiled one: tiled head j is grouped head
// (j mod Hk)·(Hv/Hk) + j/Hk. Rows [off, off+Hv·rows) are affected.
func (c *converter) tileRows(x []float32, cols, off, rows int) {
	hk, hv := c.cfg.LinKeyHeads, c.cfg.LinValueHeads
	src := append([]float32(nil), x[off*cols:(off+hv*rows)*cols]...)
	for j := range hv {
		g := (j%hk)*(hv/hk) + j/hk
		copy(x[(off+j*rows)*cols:(off+(j+1)*rows)*cols], src[g*rows*cols:(g+1)*rows*cols])
	}
}

// tileCols does the same for column groups of a [rowsN, Hv·dv] matrix.
func (c *converter) tileCols(x []float32, rowsN, dv int) {
	hk, hv := c.cfg.LinKeyHeads, c.cfg.LinValueHeads
	width := hv * dv
	for r := range rowsN {
		row := x[r*width : (r+1)*width]
		src := append([]float32(nil), row...)
		for j := range hv {
			g := (j%hk)*(hv/hk) + j/hk
			copy(row[j*dv:(j+1)*dv], src[g*dv:(g+1)*dv])
		}
	}
}

func (c *converter) tensors(progress func(done, total int)) {
	cfg, p := c.cfg, c.prefix
	plus1 := func(x []float32) []float32 {
		for i := range x {
			x[i]++
		}
		return x
	}
	emb, shape := c.read(p + "embed_tokens.weight")
	c.put("token_embd.weight", emb, shape, false)
	if !cfg.TieEmbeddings {
		x, s := c.read("lm_head.weight")
		c.put("output.weight", x, s, false)
	}
	x, s := c.read(p + "norm.weight")
	c.put("output_norm.weight", plus1(x), s, true)
	kd, dv := cfg.LinKeyHeads*cfg.LinKeyDim, cfg.LinValueDim
	for i, kind := range cfg.Layers {
		lp, gp := fmt.Sprintf("%slayers.%d.", p, i), fmt.Sprintf("blk.%d.", i)
		copyAs := func(hf, gg string, keep bool, fix func([]float32, []int)) {
			x, s := c.read(lp + hf)
			if c.err != nil {
				return
			}
			if fix != nil {
				fix(x, s)
			}
			c.put(gp+gg, x, s, keep)
		}
		norm := func(x []float32, _ []int) { plus1(x) }
		copyAs("input_layernorm.weight", "attn_norm.weight", true, norm)
		copyAs("post_attention_layernorm.weight", "post_attention_norm.weight", true, norm)
		if kind == LinearAttention {
			la := "linear_attn."
			copyAs(la+"in_proj_qkv.weight", "attn_qkv.weight", false, func(x []float32, s []int) { c.tileRows(x, s[1], 2*kd, dv) })
			copyAs(la+"in_proj_z.weight", "attn_gate.weight", false, func(x []float32, s []int) { c.tileRows(x, s[1], 0, dv) })
			copyAs(la+"in_proj_a.weight", "ssm_alpha.weight", false, func(x []float32, s []int) { c.tileRows(x, s[1], 0, 1) })
			copyAs(la+"in_proj_b.weight", "ssm_beta.weight", false, func(x []float32, s []int) { c.tileRows(x, s[1], 0, 1) })
			copyAs(la+"dt_bias", "ssm_dt.bias", true, func(x []float32, _ []int) { c.tileRows(x, 1, 0, 1) })
			copyAs(la+"A_log", "ssm_a", true, func(x []float32, _ []int) {
				for i := range x {
					x[i] = -float32(math.Exp(float64(x[i])))
				}
				c.tileRows(x, 1, 0, 1)
			})
			x, s := c.read(lp + la + "conv1d.weight") // [C, 1, K] → [C, K]
			if c.err == nil {
				s = []int{s[0], s[len(s)-1]}
				c.tileRows(x, s[1], 2*kd, dv)
				c.put(gp+"ssm_conv1d.weight", x, s, true)
			}
			copyAs(la+"norm.weight", "ssm_norm.weight", true, nil)
			copyAs(la+"out_proj.weight", "ssm_out.weight", false, func(x []float32, s []int) { c.tileCols(x, s[0], dv) })
		} else {
			sa := "self_attn."
			copyAs(sa+"q_norm.weight", "attn_q_norm.weight", true, norm)
			copyAs(sa+"k_norm.weight", "attn_k_norm.weight", true, norm)
			for hf, gg := range map[string]string{"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output"} {
				copyAs(sa+hf+".weight", gg+".weight", false, nil)
			}
		}
		if cfg.MoE {
			copyAs("mlp.gate.weight", "ffn_gate_inp.weight", true, nil)
			for hf, gg := range map[string]string{"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps"} {
				var all []float32
				var es []int
				for e := range cfg.NumExperts {
					x, s := c.expert(lp, e, hf)
					all, es = append(all, x...), s
				}
				if c.err == nil {
					c.put(gp+gg+".weight", all, append([]int{cfg.NumExperts}, es...), false)
				}
			}
			if cfg.SharedInterSize > 0 {
				for hf, gg := range map[string]string{"gate_proj": "ffn_gate_shexp", "up_proj": "ffn_up_shexp", "down_proj": "ffn_down_shexp"} {
					copyAs("mlp.shared_expert."+hf+".weight", gg+".weight", false, nil)
				}
				copyAs("mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", true, nil)
			}
		} else {
			for _, n := range []string{"gate", "up", "down"} {
				copyAs("mlp."+n+"_proj.weight", "ffn_"+n+".weight", false, nil)
			}
		}
		if progress != nil {
			progress(i+1, cfg.NumLayers)
		}
	}
}

// expert reads one expert's matrix from per-expert or fused keys.
func (c *converter) expert(lp string, e int, proj string) ([]float32, []int) {
	if _, ok := c.src.Info(fmt.Sprintf("%smlp.experts.%d.%s.weight", lp, e, proj)); ok {
		return c.read(fmt.Sprintf("%smlp.experts.%d.%s.weight", lp, e, proj))
	}
	inter := c.cfg.ExpertInterSize
	if proj == "down_proj" {
		x, s := c.read(lp + "mlp.experts.down_proj")
		if c.err != nil {
			return nil, nil
		}
		n := s[1] * s[2]
		return x[e*n : (e+1)*n], s[1:]
	}
	x, s := c.read(lp + "mlp.experts.gate_up_proj") // [E, 2I, H]
	if c.err != nil {
		return nil, nil
	}
	h := s[2]
	blk := x[e*2*inter*h : (e+1)*2*inter*h]
	if proj == "gate_proj" {
		return blk[:inter*h], []int{inter, h}
	}
	return blk[inter*h:], []int{inter, h}
}

// keptF32 lists the GGUF tensors llama.cpp keeps in F32 whatever the file
// type: norms, the DeltaNet constants and conv taps, and the MoE routers.
var keptF32 = []string{"_norm.weight", "ssm_a", "ssm_dt.bias", "ssm_conv1d.weight", "ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight"}

// KeepF32 reports whether llama.cpp keeps the GGUF tensor name in F32.
func KeepF32(name string) bool {
	for _, s := range keptF32 {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// chooser picks each tensor's type in a file of type typ, as llama.cpp's
// quantizer does: F32 where it keeps F32; for *_K_M mixes (and the output
// matrix of every quantized type) Q6_K for output and, on the layers its
// use_more_bits picks, attn_v and ffn_down; a row that does not fill the
// type's blocks falls back (Q4_K→Q5_0, Q5_K→Q5_1, Q6_K→Q8_0, then F16).
type chooser struct {
	typ    gguf.TensorType
	mix    bool
	layers int
	tied   bool
}

func (c chooser) tensorType(name string, dims, cols int) gguf.TensorType {
	if KeepF32(name) || dims == 1 {
		return gguf.F32
	}
	typ := c.typ
	quantized := typ != gguf.F32 && typ != gguf.F16 && typ != gguf.BF16 && typ != gguf.Q8_0
	var layer int
	_, inBlock := fmt.Sscanf(name, "blk.%d.", &layer)
	switch {
	case quantized && (name == "output.weight" || (c.tied && name == "token_embd.weight")):
		typ = gguf.Q6_K
	case c.mix && inBlock == nil && useMoreBits(layer, c.layers) &&
		(strings.HasSuffix(name, ".attn_v.weight") || strings.Contains(name, ".ffn_down")):
		typ = gguf.Q6_K
	}
	for cols%typ.BlockSize() != 0 {
		next := map[gguf.TensorType]gguf.TensorType{gguf.Q4_K: gguf.Q5_0, gguf.Q5_K: gguf.Q5_1, gguf.Q6_K: gguf.Q8_0,
			gguf.Q2_K: gguf.IQ4_NL, gguf.Q3_K: gguf.IQ4_NL, gguf.IQ4_XS: gguf.IQ4_NL}[typ]
		if next == 0 {
			return gguf.F16
		}
		typ = next
	}
	return typ
}

// useMoreBits is llama.cpp's choice of layers that get more bits.
func useMoreBits(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }

// Quantize rewrites a qwen35 GGUF file with its weights in typeName,
// keeping its metadata (file_type updated) and the F32 tensors llama.cpp
// keeps.
func Quantize(in, out, typeName string, progress func(done, total int)) error {
	ct, ok := ConvertTypes[typeName]
	if !ok {
		return fmt.Errorf("qwen35: quantize: type %q is not one of %s", typeName, typeNames)
	}
	f, err := gguf.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	layers, _ := f.Uint(arch(f) + ".block_count")
	_, hasOutput := f.Tensor("output.weight")
	choose := chooser{typ: ct.Type, mix: ct.Mix, layers: int(layers), tied: !hasOutput}
	w := gguf.NewWriter()
	w.Alignment = f.Alignment
	for _, k := range f.Keys {
		if k == "general.alignment" {
			continue
		}
		if k == "general.file_type" {
			w.Set(k, ct.FileType)
			continue
		}
		w.SetValue(k, f.Metadata[k])
	}
	for i, t := range f.Tensors {
		x, err := gguf.Dequantize(t.Type, f.Bytes(t))
		if err != nil {
			return fmt.Errorf("qwen35: quantize: %s: %w", t.Name, err)
		}
		typ := choose.tensorType(t.Name, len(t.Dims), int(t.Dims[0]))
		data, err := gguf.Quantize(typ, x)
		if err != nil {
			return fmt.Errorf("qwen35: quantize: %s: %w", t.Name, err)
		}
		if err := w.Add(t.Name, typ, t.Dims, data); err != nil {
			return err
		}
		if progress != nil {
			progress(i+1, len(f.Tensors))
		}
	}
	return w.WriteFile(out)
}

func arch(f *gguf.File) string {
	a, _ := f.String("general.architecture")
	return a
}
