// Command govllm is an LLM inference engine for Qwen3.5 models.
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/govllm/govllm/internal/defaultmodel"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "govllm:", err)
		os.Exit(exitCode(err))
	}
}

// exitError carries a specific exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	if e, ok := err.(*exitError); ok {
		return e.code
	}
	return 1
}

func newRootCmd() *cobra.Command {
	var verbose bool
	root := &cobra.Command{
		Use:           "govllm",
		Short:         "An LLM inference engine for Qwen3.5 models",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, args []string) {
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
		},
	}
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "debug logging")
	root.AddCommand(newLogitsCmd(), newOpsCmd(), newRunCmd(), newTokenizeCmd(), newDetokenizeCmd(), newTemplateCmd(), newBenchCmd(), newServeCmd(), newInspectCmd(), newChatCmd(), newConvertCmd(), newQuantizeCmd())
	return root
}

// modelOrDefault returns path, or the embedded default model's when path is
// empty.
func modelOrDefault(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	p, err := defaultmodel.Path()
	if err != nil {
		return "", err
	}
	slog.Debug("using the embedded default model", "name", defaultmodel.Name, "path", p)
	return p, nil
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}
