// Command compare prints govllm's and llama.cpp's benchmark results side
// by side with their ratio: llama-bench and `govllm bench -o json` arrays
// (matched by n_prompt and n_gen), and optionally llama-batched-bench's
// jsonl against `govllm bench --concurrency N -o json` (generation speed).
//
//	go run ./bench/compare -llama L.json -govllm G.json [-llama-batched B.jsonl -govllm-batched GB.json] [-rss-llama KB -rss-govllm KB]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
)

type test struct {
	NPrompt  int     `json:"n_prompt"`
	NGen     int     `json:"n_gen"`
	NThreads int     `json:"n_threads"`
	AvgTs    float64 `json:"avg_ts"`
	StddevTs float64 `json:"stddev_ts"`
	Model    string  `json:"model_type"`
}

type batched struct {
	PP      int     `json:"pp"`
	TG      int     `json:"tg"`
	PL      int     `json:"pl"`
	SpeedTG float64 `json:"speed_tg"`
}

func readJSON(path string, v any) {
	raw, err := os.ReadFile(path)
	if err != nil {
		fail(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		fail(fmt.Errorf("%s: %w", path, err))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "compare:", err)
	os.Exit(1)
}

func name(t test) string {
	if t.NGen == 0 {
		return fmt.Sprintf("pp%d", t.NPrompt)
	}
	return fmt.Sprintf("tg%d", t.NGen)
}

func main() {
	llama := flag.String("llama", "", "llama-bench -o json output")
	gov := flag.String("govllm", "", "govllm bench -o json output")
	llamaB := flag.String("llama-batched", "", "llama-batched-bench --output-format jsonl output")
	govB := flag.String("govllm-batched", "", "govllm bench --concurrency N -o json output")
	rssL := flag.Int64("rss-llama", 0, "llama-bench peak RSS in KiB")
	rssG := flag.Int64("rss-govllm", 0, "govllm bench peak RSS in KiB")
	label := flag.String("label", "", "model label for the table")
	flag.Parse()
	var lt, gt []test
	readJSON(*llama, &lt)
	readJSON(*gov, &gt)
	for _, g := range gt {
		for _, l := range lt {
			if l.NPrompt == g.NPrompt && l.NGen == g.NGen {
				fmt.Printf("| %s | %s | %d | %.2f ± %.2f | %.2f ± %.2f | **%.2f×** |\n", *label, name(g), g.NThreads,
					g.AvgTs, g.StddevTs, l.AvgTs, l.StddevTs, g.AvgTs/l.AvgTs)
			}
		}
	}
	if *llamaB != "" && *govB != "" {
		var g []test
		readJSON(*govB, &g)
		f, err := os.Open(*llamaB)
		if err != nil {
			fail(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if !strings.HasPrefix(line, "{") {
				continue
			}
			var b batched
			if json.Unmarshal([]byte(line), &b) != nil {
				continue
			}
			for _, t := range g {
				if t.NPrompt == b.PP && t.NGen == b.TG {
					fmt.Printf("| %s | pp%d+tg%d ×%d (aggregate tg) | %d | %.2f ± %.2f | %.2f | **%.2f×** |\n", *label, b.PP, b.TG, b.PL,
						t.NThreads, t.AvgTs, t.StddevTs, b.SpeedTG, t.AvgTs/b.SpeedTG)
				}
			}
		}
	}
	if *rssL > 0 && *rssG > 0 {
		fmt.Printf("| %s | peak RSS (MiB, lower is better) | | %.0f | %.0f | **%.2f×** |\n", *label, float64(*rssG)/1024, float64(*rssL)/1024, float64(*rssG)/float64(*rssL))
	}
}
