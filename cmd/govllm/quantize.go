package main

import (
	"github.com/govllm/govllm/model/qwen35"
	"github.com/spf13/cobra"
)

func newQuantizeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "quantize IN.gguf OUT.gguf TYPE",
		Short: "Rewrite a qwen35 GGUF file with its weights in TYPE (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, q6_k, q2_k, q3_k, iq4_nl, iq4_xs)",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			bar, progress := newProgress("quantizing")
			defer bar.Finish()
			return qwen35.Quantize(args[0], args[1], args[2], progress)
		},
	}
}
