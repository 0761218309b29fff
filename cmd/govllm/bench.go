package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/govllm/govllm/model/qwen35"
	"github.com/govllm/govllm/runtime/cuda"
	"github.com/spf13/cobra"
)

// benchResult is one test, with llama-bench's JSON field names so that
// tools read both programs' output alike.
type benchResult struct {
	Build       string    `json:"build_commit"`
	CPUInfo     string    `json:"cpu_info"`
	Backends    string    `json:"backends"`
	ModelFile   string    `json:"model_filename"`
	ModelType   string    `json:"model_type"`
	ModelSize   int64     `json:"model_size"`
	ModelParams int64     `json:"model_n_params"`
	NBatch      int       `json:"n_batch"`
	NUBatch     int       `json:"n_ubatch"`
	NThreads    int       `json:"n_threads"`
	NSeqs       int       `json:"n_parallel"`
	NPrompt     int       `json:"n_prompt"`
	NGen        int       `json:"n_gen"`
	NDepth      int       `json:"n_depth"`
	TestTime    string    `json:"test_time"`
	AvgNs       int64     `json:"avg_ns"`
	StddevNs    int64     `json:"stddev_ns"`
	AvgTs       float64   `json:"avg_ts"`
	StddevTs    float64   `json:"stddev_ts"`
	SamplesNs   []int64   `json:"samples_ns"`
	SamplesTs   []float64 `json:"samples_ts"`
	AllocsPerTk float64   `json:"allocs_per_token"`
}

func newBenchCmd() *cobra.Command {
	var (
		modelPath, device, output string
		prompts, gens             string
		threads, reps, conc       int
		greedy, overlap           bool
		cpuProfile, memProfile    string
	)
	cmd := &cobra.Command{
		Use:   "bench --model FILE [-p 512] [-n 128] [-t 2] [-r 5] [-o md|json] [--concurrency 8]",
		Short: "Measure prompt processing and generation speed, as llama-bench does",
		Long: `Measure prompt processing (pp: one forward over -p random tokens) and generation
(tg: -n tokens decoded one at a time from an empty context) in tokens/s, over -r
repetitions after one warm-up, as llama-bench does; -o json writes llama-bench's
JSON array. With --concurrency N, generation decodes N sequences together (each
after a -p token prompt) and reports their aggregate tokens/s, as
llama-batched-bench's S_TG does. With --greedy, each generated token is the
greedy choice of the step before, taken where the logits are (on a GPU only the
ids come back), as a greedy request decodes; there, on a GPU, each step is
issued before the one before it ends, fed its tokens on the device (turn it
off with --overlap=false). Without --greedy each step's token is random and
its logits row comes back to the host, as in llama-bench.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if modelPath == "" {
				return fmt.Errorf("--model is required (or use `govllm bench serve --url ...`)")
			}
			pp, err := parseCounts("-p", prompts)
			if err != nil {
				return err
			}
			tg, err := parseCounts("-n", gens)
			if err != nil {
				return err
			}
			if threads < 1 || reps < 1 || conc < 1 {
				return fmt.Errorf("-t, -r and --concurrency must be at least 1")
			}
			if output != "md" && output != "json" {
				return fmt.Errorf("-o %q: want md or json", output)
			}
			goruntime.GOMAXPROCS(threads)
			m, err := loadModel(modelPath, device, false)
			if err != nil {
				return err
			}
			defer m.Close()
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			if memProfile != "" {
				defer func() {
					if err := writeHeapProfile(memProfile); err != nil {
						slog.Error("bench: memory profile", "file", memProfile, "err", err)
					}
				}()
			}
			b := &bencher{m: m, rng: rand.New(rand.NewPCG(1, 2)), reps: reps, greedy: greedy, overlap: overlap}
			var tests [][2]int // (n_prompt, n_gen)
			if conc == 1 {
				for _, p := range pp {
					if p > 0 {
						tests = append(tests, [2]int{p, 0})
					}
				}
				for _, n := range tg {
					if n > 0 {
						tests = append(tests, [2]int{0, n})
					}
				}
			} else {
				for _, p := range pp {
					for _, n := range tg {
						tests = append(tests, [2]int{p, n})
					}
				}
			}
			var results []benchResult
			for _, t := range tests {
				slog.Info("bench: running", "n_prompt", t[0], "n_gen", t[1], "sequences", conc, "threads", threads, "reps", reps)
				r, err := b.run(t[0], t[1], conc)
				if err != nil {
					return err
				}
				// The test's cache is garbage now: free it before the next
				// test makes its own, as llama-bench frees its context.
				goruntime.GC()
				r.Build, r.CPUInfo, r.Backends = "govllm", cpuName(), strings.ToUpper(m.Backend().Device().String())
				r.ModelFile, r.ModelSize, r.ModelParams = modelPath, fileSize(modelPath), m.ParamCount()
				r.ModelType = modelType(m)
				r.NThreads, r.NSeqs, r.NBatch, r.NUBatch = threads, conc, max(t[0], 1), max(t[0], 1)
				r.TestTime = time.Now().UTC().Format(time.RFC3339)
				results = append(results, r)
			}
			cuda.WriteProfile(cmd.ErrOrStderr())
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(results)
			}
			return printBenchTable(cmd.OutOrStdout(), results)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&modelPath, "model", "m", "", "model file (.gguf) or safetensors directory")
	f.StringVar(&device, "device", "cpu", "backend device")
	f.StringVarP(&prompts, "n-prompt", "p", "512", "prompt lengths, comma-separated")
	f.StringVarP(&gens, "n-gen", "n", "128", "generation lengths, comma-separated")
	f.IntVarP(&threads, "threads", "t", goruntime.NumCPU(), "threads")
	f.IntVarP(&reps, "repetitions", "r", 5, "repetitions of each test")
	f.StringVarP(&output, "output", "o", "md", "output format: md or json")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the runs to this file")
	f.StringVar(&memProfile, "memprofile", "", "write a heap profile (allocations since start: go tool pprof -sample_index=alloc_objects) to this file")
	f.IntVar(&conc, "concurrency", 1, "sequences decoded together (aggregate generation throughput)")
	f.BoolVar(&greedy, "greedy", false, "generate greedily, the token chosen on the backend (no logits to the host)")
	f.BoolVar(&overlap, "overlap", true, "with --greedy, issue each step behind the one before (a GPU)")
	cmd.AddCommand(newBenchServeCmd())
	return cmd
}

// writeHeapProfile writes the allocations so far to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func parseCounts(flag, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%s: %q is not a count", flag, f)
		}
		out = append(out, v)
	}
	return out, nil
}

type bencher struct {
	m       *qwen35.Model
	rng     *rand.Rand
	reps    int
	greedy  bool // generation feeds back LastToken's choice
	overlap bool // and issues each step behind the one before (LaunchNext)
}

// chained decodes nGen greedy steps after a prompt of nPrompt, each issued
// behind the one before (qwen35.LaunchNext) where the backend allows, as
// a server decoding greedily does.
func (b *bencher) chained(cache *qwen35.Cache, seqs []qwen35.Seq, tok [][]int32, nPrompt, nGen int) error {
	for i := range seqs {
		tok[i][0] = int32(b.rng.IntN(b.m.Config.VocabSize))
		seqs[i].Tokens, seqs[i].Start, seqs[i].Logits = tok[i], nPrompt, qwen35.LastToken
	}
	// Two sets of sequences: a step's Wait writes their Next while the
	// step after it is out with the other.
	sets := [2][]qwen35.Seq{seqs, slices.Clone(seqs)}
	l, err := b.m.Launch(cache, sets[0], qwen35.ForwardOptions{})
	if err != nil {
		return err
	}
	for g := 1; g < nGen; g++ {
		next := sets[g%2]
		for i := range next {
			next[i].Start = nPrompt + g
		}
		l2, err := b.m.LaunchNext(cache, l, next)
		if errors.Is(err, qwen35.ErrNotChained) {
			if _, err := l.Wait(); err != nil {
				return err
			}
			prev := sets[(g+1)%2]
			for i := range next {
				tok[i][0] = prev[i].Next
				next[i].Tokens = tok[i]
			}
			l2, err = b.m.Launch(cache, next, qwen35.ForwardOptions{})
		}
		if err != nil {
			return err
		}
		if _, err := l.Wait(); err != nil {
			return err
		}
		l = l2
	}
	_, err = l.Wait()
	return err
}

func (b *bencher) tokens(n int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(b.rng.IntN(b.m.Config.VocabSize))
	}
	return ids
}

// run times one test reps times after a warm-up. A test with a prompt and
// no generation times the prompt; otherwise the prompt (if any) is run
// untimed and the generation is timed, over conc sequences together.
func (b *bencher) run(nPrompt, nGen, conc int) (benchResult, error) {
	const blockSize = 16
	ctx := nPrompt + nGen
	perSeq := (ctx + blockSize - 1) / blockSize
	cache, err := b.m.NewCache(blockSize, perSeq*conc, conc)
	if err != nil {
		return benchResult{}, err
	}
	defer cache.Close()
	seqs := make([]qwen35.Seq, conc)
	for i := range seqs {
		for j := range perSeq {
			seqs[i].Blocks = append(seqs[i].Blocks, int32(i*perSeq+j))
		}
		seqs[i].Slot = i
	}
	mode := qwen35.LastLogits
	if b.greedy && nGen > 0 {
		mode = qwen35.LastToken
	}
	step := func(tokens [][]int32, start int) error {
		for i := range seqs {
			seqs[i].Tokens, seqs[i].Start, seqs[i].Logits = tokens[i], start, mode
		}
		_, err := b.m.ForwardBatch(cache, seqs, qwen35.ForwardOptions{})
		return err
	}
	prompt := func() error {
		if nPrompt == 0 {
			return nil
		}
		p := make([][]int32, conc)
		for i := range p {
			p[i] = b.tokens(nPrompt)
		}
		return step(p, 0)
	}
	var r benchResult
	r.NPrompt, r.NGen = nPrompt, nGen
	var allocs, counted uint64
	for rep := -1; rep < b.reps; rep++ {
		for s := range conc {
			if err := cache.ResetSlot(s); err != nil {
				return r, err
			}
		}
		var elapsed time.Duration
		var ms0, ms1 goruntime.MemStats
		if nGen == 0 {
			goruntime.ReadMemStats(&ms0)
			start := time.Now()
			if err := prompt(); err != nil {
				return r, err
			}
			elapsed = time.Since(start)
			goruntime.ReadMemStats(&ms1)
		} else {
			if err := prompt(); err != nil {
				return r, err
			}
			tok := make([][]int32, conc)
			for i := range tok {
				tok[i] = make([]int32, 1)
			}
			goruntime.ReadMemStats(&ms0)
			start := time.Now()
			if b.greedy && b.overlap {
				if err := b.chained(cache, seqs, tok, nPrompt, nGen); err != nil {
					return r, err
				}
			}
			for g := range nGen {
				if b.greedy && b.overlap {
					break
				}
				for i := range tok {
					if b.greedy && g > 0 {
						tok[i][0] = seqs[i].Next
					} else {
						tok[i][0] = int32(b.rng.IntN(b.m.Config.VocabSize))
					}
				}
				if err := step(tok, nPrompt+g); err != nil {
					return r, err
				}
			}
			elapsed = time.Since(start)
			goruntime.ReadMemStats(&ms1)
		}
		if rep < 0 {
			continue // warm-up
		}
		n := float64(conc * nGen)
		if nGen == 0 {
			n = float64(nPrompt)
		}
		allocs += ms1.Mallocs - ms0.Mallocs
		counted += uint64(n)
		r.SamplesNs = append(r.SamplesNs, elapsed.Nanoseconds())
		r.SamplesTs = append(r.SamplesTs, n/elapsed.Seconds())
	}
	r.AvgNs, r.StddevNs = meanStd64(r.SamplesNs)
	r.AvgTs, r.StddevTs = meanStd(r.SamplesTs)
	r.AllocsPerTk = float64(allocs) / float64(counted)
	return r, nil
}

func meanStd(xs []float64) (float64, float64) {
	var s float64
	for _, x := range xs {
		s += x
	}
	mean := s / float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var v float64
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(v / float64(len(xs)-1))
}

func meanStd64(xs []int64) (int64, int64) {
	f := make([]float64, len(xs))
	for i, x := range xs {
		f[i] = float64(x)
	}
	m, s := meanStd(f)
	return int64(m), int64(s)
}

func printBenchTable(w io.Writer, rs []benchResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| model\t size\t params\t backend\t threads\t test\t t/s\t allocs/token")
	for _, r := range rs {
		test := fmt.Sprintf("pp%d", r.NPrompt)
		if r.NGen > 0 {
			test = fmt.Sprintf("tg%d", r.NGen)
			if r.NSeqs > 1 {
				test = fmt.Sprintf("pp%d+tg%d ×%d", r.NPrompt, r.NGen, r.NSeqs)
			}
		}
		fmt.Fprintf(tw, "| %s\t %.2f MiB\t %.2f M\t %s\t %d\t %s\t %.2f ± %.2f\t %.1f\n", r.ModelType, float64(r.ModelSize)/(1<<20),
			float64(r.ModelParams)/1e6, r.Backends, r.NThreads, test, r.AvgTs, r.StddevTs, r.AllocsPerTk)
	}
	return tw.Flush()
}

func modelType(m *qwen35.Model) string {
	arch := "qwen35"
	if m.Config.MoE {
		arch = "qwen35moe"
	}
	return fmt.Sprintf("%s %.1fB %s", arch, float64(m.ParamCount())/1e9, m.WeightTypes())
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if !st.IsDir() {
		return st.Size()
	}
	var n int64
	files, _ := filepath.Glob(filepath.Join(path, "*.safetensors"))
	for _, f := range files {
		if s, err := os.Stat(f); err == nil {
			n += s.Size()
		}
	}
	return n
}

func cpuName() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return goruntime.GOARCH
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return goruntime.GOARCH
}
