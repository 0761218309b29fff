package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/govllm/govllm/engine"
	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	var (
		modelDir, device, levels string
		promptLen, maxTokens     int
		requestsPerLevel         int
	)
	cmd := &cobra.Command{
		Use:   "bench --model DIR [--concurrency 1,4,16]",
		Short: "Measure aggregate generation throughput at several concurrency levels",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if modelDir == "" {
				return fmt.Errorf("--model is required (or use `govllm bench serve --url ...`)")
			}
			var conc []int
			for _, f := range strings.Split(levels, ",") {
				c, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || c < 1 {
					return fmt.Errorf("--concurrency: %q is not a positive integer", f)
				}
				conc = append(conc, c)
			}
			if promptLen < 1 || maxTokens < 1 {
				return fmt.Errorf("--prompt-tokens and --max-tokens must be at least 1")
			}
			m, err := loadModel(modelDir, device, false)
			if err != nil {
				return err
			}
			defer m.Close()
			tok, err := loadTokenizer(modelDir)
			if err != nil {
				return err
			}
			e, err := engine.New(m, tok, engine.Config{NoPrefixCaching: true})
			if err != nil {
				return err
			}
			defer e.Close()
			rng := rand.New(rand.NewPCG(1, 2))
			var prompts [][]int32
			for range 64 {
				p := make([]int32, promptLen)
				for i := range p {
					p[i] = int32(rng.IntN(tok.VocabSize()))
				}
				prompts = append(prompts, p)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "concurrency\trequests\ttokens\tseconds\ttok/s\tmean TTFT\tmean ITL")
			for _, c := range conc {
				n := max(requestsPerLevel, c)
				slog.Info("bench: running", "concurrency", c, "requests", n, "prompt_tokens", promptLen, "max_tokens", maxTokens)
				r, err := e.Bench(context.Background(), prompts, c, n, maxTokens)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "%d\t%d\t%d\t%.2f\t%.1f\t%v\t%v\n", c, n, r.GeneratedTokens, r.Elapsed.Seconds(),
					r.TokensPerSecond(), r.MeanTTFT.Round(10e3), r.MeanInterToken.Round(10e3))
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelDir, "model", "", "model directory")
	f.StringVar(&device, "device", "cpu", "backend device")
	f.StringVar(&levels, "concurrency", "1,4,16", "comma-separated concurrency levels")
	f.IntVar(&promptLen, "prompt-tokens", 32, "prompt length in tokens (random ids)")
	f.IntVar(&maxTokens, "max-tokens", 64, "tokens generated per request")
	f.IntVar(&requestsPerLevel, "requests", 16, "requests per level (at least the concurrency)")
	cmd.AddCommand(newBenchServeCmd())
	return cmd
}
