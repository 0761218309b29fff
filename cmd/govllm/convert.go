package main

import (
	"log/slog"
	"os"
	"time"

	"github.com/govllm/govllm/model/qwen35"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func newConvertCmd() *cobra.Command {
	var typ string
	cmd := &cobra.Command{
		Use:   "convert HF_DIR OUT.gguf [--type f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q4_k_m|q5_k_m|q6_k|q2_k|q3_k|iq4_nl|iq4_xs]",
		Short: "Convert a Hugging Face Qwen3.5 checkpoint to a GGUF file that llama.cpp loads",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			bar, progress := newProgress("converting")
			start := time.Now()
			err := qwen35.Convert(args[0], args[1], typ, progress)
			bar.Finish()
			if err != nil {
				return err
			}
			slog.Info("convert: written", "out", args[1], "type", typ, "elapsed", time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().StringVar(&typ, "type", "f16", "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, q6_k, q2_k, q3_k, iq4_nl or iq4_xs")
	return cmd
}

// newProgress is the progress bar of long CLI work, on stderr; its callback
// takes (done, total) as the loaders and converters report them.
func newProgress(desc string) (*progressbar.ProgressBar, func(done, total int)) {
	bar := progressbar.NewOptions(1, progressbar.OptionSetDescription(desc), progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionClearOnFinish(), progressbar.OptionShowCount())
	return bar, func(done, total int) {
		bar.ChangeMax(total)
		bar.Set(done)
	}
}
