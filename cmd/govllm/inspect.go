package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/govllm/govllm/format/gguf"
	"github.com/govllm/govllm/format/safetensors"
	"github.com/govllm/govllm/model/qwen35"
	"github.com/spf13/cobra"
)

func newInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect FILE_OR_DIR",
		Short: "Print a checkpoint's config and its tensors with dtypes, shapes and sizes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return inspect(cmd.OutOrStdout(), args[0])
		},
	}
}

func inspect(w io.Writer, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.IsDir() && qwen35.IsGGUF(path) {
		return inspectGGUF(w, path)
	}
	var files []*safetensors.File
	if st.IsDir() {
		if cfg, err := qwen35.LoadConfig(filepath.Join(path, "config.json")); err == nil {
			kinds := make([]string, len(cfg.Layers))
			for i, k := range cfg.Layers {
				kinds[i] = map[qwen35.LayerKind]string{qwen35.LinearAttention: "L", qwen35.FullAttention: "F"}[k]
			}
			fmt.Fprintf(w, "architecture  %s (moe: %v)\n", cfg.Architecture, cfg.MoE)
			fmt.Fprintf(w, "layers        %d: %s\n", cfg.NumLayers, strings.Join(kinds, ""))
			fmt.Fprintf(w, "hidden        %d, vocab %d, tied embeddings %v\n", cfg.HiddenSize, cfg.VocabSize, cfg.TieEmbeddings)
			fmt.Fprintf(w, "attention     %d heads, %d kv heads, head dim %d, rotary width %d, theta %g\n", cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim, cfg.RotaryDim, cfg.RopeTheta)
			fmt.Fprintf(w, "deltanet      %d key heads × %d, %d value heads × %d, conv %d\n", cfg.LinKeyHeads, cfg.LinKeyDim, cfg.LinValueHeads, cfg.LinValueDim, cfg.ConvKernel)
			if cfg.MoE {
				fmt.Fprintf(w, "experts       %d, top %d, expert inter %d, shared inter %d\n", cfg.NumExperts, cfg.TopK, cfg.ExpertInterSize, cfg.SharedInterSize)
			} else {
				fmt.Fprintf(w, "mlp           intermediate %d\n", cfg.IntermediateSize)
			}
		} else if !os.IsNotExist(unwrapAll(err)) {
			fmt.Fprintf(w, "config        %v\n", err)
		}
		ck, err := safetensors.OpenDir(path)
		if err != nil {
			return err
		}
		defer ck.Close()
		files = ck.Files
	} else {
		f, err := safetensors.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		files = []*safetensors.File{f}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\ntensor\tdtype\tshape\tbytes\tfile")
	var total int64
	byDType := map[string]int64{}
	for _, f := range files {
		names := make([]string, 0, len(f.Header.Tensors))
		for n := range f.Header.Tensors {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			info := f.Header.Tensors[n]
			size := info.End - info.Begin
			total += size
			byDType[info.DType] += size
			fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%s\n", n, info.DType, info.Shape, size, filepath.Base(f.Path))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ntotal %d bytes (%.1f MiB)", total, float64(total)/(1<<20))
	for _, dt := range sortedKeys(byDType) {
		fmt.Fprintf(w, "; %s %.1f MiB", dt, float64(byDType[dt])/(1<<20))
	}
	fmt.Fprintln(w)
	return nil
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func inspectGGUF(w io.Writer, path string) error {
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(w, "gguf version %d, %d keys, %d tensors, alignment %d\n", f.Version, len(f.Keys), len(f.Tensors), f.Alignment)
	if cfg, err := qwen35.ConfigFromGGUF(f); err == nil {
		fmt.Fprintf(w, "architecture  %s, %d layers, hidden %d, vocab %d, rotary width %d\n", cfg.Architecture, cfg.NumLayers, cfg.HiddenSize, cfg.VocabSize, cfg.RotaryDim)
	} else {
		fmt.Fprintf(w, "config        %v\n", err)
	}
	for _, k := range f.Keys {
		v := fmt.Sprint(f.Metadata[k].Value)
		if arr, ok := f.Array(k); ok {
			v = fmt.Sprintf("[%d values]", len(arr))
		}
		if len(v) > 80 {
			v = v[:80] + "…"
		}
		fmt.Fprintf(w, "  %s = %s\n", k, strings.ReplaceAll(v, "\n", "\\n"))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\ntensor\ttype\tshape\tbytes")
	var total int64
	for _, t := range f.Tensors {
		total += int64(t.Size)
		fmt.Fprintf(tw, "%s\t%v\t%v\t%d\n", t.Name, t.Type, t.Shape(), t.Size)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ntotal %d bytes (%.1f MiB)\n", total, float64(total)/(1<<20))
	return nil
}
