package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/govllm/govllm/internal/atomicfile"
	"github.com/govllm/govllm/model/qwen35"
	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/backends"
	"github.com/spf13/cobra"
)

func newLogitsCmd() *cobra.Command {
	var (
		modelDir, idsFlag, mode, outPath, device string
		composite                                bool
	)
	cmd := &cobra.Command{
		Use:   "logits --model DIR --ids 1,2,3 [--mode full|chunked:N|decode] [--out FILE]",
		Short: "Run token ids through a model and write or summarise the logits",
		Long: "Runs the ids through the model and writes little-endian float32 logits [T, vocab_size] to --out,\n" +
			"or prints the top-5 ids of each position. Modes: full (one forward), chunked:N (prefill N tokens at a\n" +
			"time, carrying the cache), decode (one token at a time).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(idsFlag)
			if err != nil {
				return err
			}
			chunk, err := parseMode(mode, len(ids))
			if err != nil {
				return err
			}
			m, err := loadModel(modelDir, device, composite)
			if err != nil {
				return err
			}
			defer m.Close()
			logits, err := runChunks(m, ids, chunk)
			if err != nil {
				return err
			}
			if outPath != "" {
				return writeF32(outPath, logits)
			}
			return printTop(cmd.OutOrStdout(), logits, m.Config.VocabSize, 5)
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelDir, "model", "", "checkpoint directory (config.json and safetensors)")
	f.StringVar(&idsFlag, "ids", "", "comma-separated token ids")
	f.StringVar(&mode, "mode", "full", "full, chunked:N or decode")
	f.StringVar(&outPath, "out", "", "write float32 logits [T, vocab] here")
	f.StringVar(&device, "device", "cpu", "backend device")
	f.BoolVar(&composite, "composite", false, "run the attention preamble as its unfused chain of ops")
	_ = cmd.MarkFlagRequired("model")
	_ = cmd.MarkFlagRequired("ids")
	return cmd
}

// newBackend reads --device and opens that backend.
func newBackend(device string) (*rt.Backend, error) {
	dev, ok := backends.ParseDevice(device)
	if !ok {
		return nil, fmt.Errorf("--device %q: unknown device (want cpu or cuda)", device)
	}
	return backends.New(dev)
}

func loadModel(dir, device string, composite bool) (*qwen35.Model, error) {
	be, err := newBackend(device)
	if err != nil {
		return nil, err
	}
	dev := be.Device()
	start := time.Now()
	m, err := qwen35.Load(dir, be, qwen35.Options{Composite: composite})
	if err != nil {
		return nil, err
	}
	c := m.Config
	slog.Info("model loaded", "dir", dir, "arch", c.Architecture, "layers", c.NumLayers, "moe", c.MoE,
		"rotary_dim", c.RotaryDim, "device", dev, "elapsed", time.Since(start).Round(time.Millisecond))
	return m, nil
}

func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		v, err := strconv.ParseInt(part, 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("--ids: entry %d %q is not a token id", i, part)
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}

// parseMode returns the number of tokens per forward call.
func parseMode(mode string, n int) (int, error) {
	switch {
	case mode == "full":
		return n, nil
	case mode == "decode":
		return 1, nil
	case strings.HasPrefix(mode, "chunked:"):
		c, err := strconv.Atoi(strings.TrimPrefix(mode, "chunked:"))
		if err != nil || c < 1 {
			return 0, fmt.Errorf("--mode %q: chunked:N needs a positive N", mode)
		}
		return c, nil
	}
	return 0, fmt.Errorf("--mode %q: want full, chunked:N or decode", mode)
}

// runChunks feeds ids chunk tokens at a time through one sequence state and
// gathers every position's logits.
func runChunks(m *qwen35.Model, ids []int32, chunk int) ([]float32, error) {
	st := m.NewState()
	defer st.Close()
	out := make([]float32, 0, len(ids)*m.Config.VocabSize)
	for lo := 0; lo < len(ids); lo += chunk {
		logits, err := m.Forward(st, ids[lo:min(lo+chunk, len(ids))], qwen35.ForwardOptions{})
		if err != nil {
			return nil, err
		}
		out = append(out, logits.F32()[:logits.Len()]...)
	}
	return out, nil
}

func writeF32(path string, data []float32) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		var b [4]byte
		for _, v := range data {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			if _, err := w.Write(b[:]); err != nil {
				return err
			}
		}
		return nil
	})
}

func printTop(w io.Writer, logits []float32, vocab, k int) error {
	for t := 0; t*vocab < len(logits); t++ {
		row := logits[t*vocab : (t+1)*vocab]
		idx := make([]int, vocab)
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return row[idx[a]] > row[idx[b]] })
		fmt.Fprintf(w, "%d:", t)
		for _, i := range idx[:min(k, vocab)] {
			fmt.Fprintf(w, " %d(%.4f)", i, row[i])
		}
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
	}
	return nil
}
