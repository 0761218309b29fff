// Command synth writes random-weight Qwen3.5 GGUF files with the exact
// tensor shapes of real models, for benchmarks: speed does not depend on
// the weights' values, and llama.cpp loads the files too.
//
//	go run ./tools/synth -shape qwen3.5-0.8b -type q8_0 -o /tmp/q08-q8_0.gguf
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/govllm/govllm/model/qwen35"
)

func main() {
	shape := flag.String("shape", "qwen3.5-0.8b", "model shape: "+strings.Join(qwen35.ShapeNames(), ", "))
	typ := flag.String("type", "q8_0", "file type: q8_0, q4_k_m, bf16 (or any type govllm convert writes)")
	out := flag.String("o", "", "output GGUF file")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	mk, ok := qwen35.Shapes[*shape]
	if !ok || *out == "" {
		fmt.Fprintf(os.Stderr, "synth: want -shape (one of %s) and -o FILE\n", strings.Join(qwen35.ShapeNames(), ", "))
		os.Exit(2)
	}
	start := time.Now()
	last := time.Now()
	err := qwen35.Synth(mk(), *typ, *out, *seed, func(done, total int) {
		if time.Since(last) > 2*time.Second || done == total {
			slog.Info("synth", "layers", fmt.Sprintf("%d/%d", done, total), "elapsed", time.Since(start).Round(time.Second))
			last = time.Now()
		}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "synth:", err)
		os.Exit(1)
	}
	st, _ := os.Stat(*out)
	slog.Info("wrote", "file", *out, "shape", *shape, "type", *typ, "MiB", st.Size()>>20, "elapsed", time.Since(start).Round(time.Second))
}
