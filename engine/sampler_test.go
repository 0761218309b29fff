package engine

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/govllm/govllm/grammar"
)

func TestGreedyAndSeededSampling(t *testing.T) {
	logits := []float32{0.1, 2, 1.9, -1}
	greedy, _ := NewSampler(SamplingParams{})
	if got := greedy.Sample(logits); got != 1 {
		t.Fatalf("greedy picked %d", got)
	}
	seed := uint64(42)
	draw := func() []int32 {
		s, err := NewSampler(SamplingParams{Temperature: 1, Seed: &seed})
		if err != nil {
			t.Fatal(err)
		}
		var out []int32
		for range 64 {
			out = append(out, s.Sample(logits))
		}
		return out
	}
	a, b := draw(), draw()
	seen := map[int32]bool{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seeded draws differ at %d", i)
		}
		seen[a[i]] = true
	}
	if len(seen) < 2 {
		t.Fatalf("temperature 1 drew only %v", seen)
	}
	topK, _ := NewSampler(SamplingParams{Temperature: 5, TopK: 1, Seed: &seed})
	topP, _ := NewSampler(SamplingParams{Temperature: 1, TopP: 0.01, Seed: &seed})
	minP, _ := NewSampler(SamplingParams{Temperature: 1, MinP: 0.99, Seed: &seed})
	for range 32 {
		if topK.Sample(logits) != 1 || topP.Sample(logits) != 1 || minP.Sample(logits) != 1 {
			t.Fatal("top_k 1 / top_p 0.01 / min_p 0.99 left more than the best token")
		}
	}
}

func TestSamplingParamsValidate(t *testing.T) {
	for _, p := range []SamplingParams{{Temperature: -1}, {TopK: -2}, {TopP: 1.5}, {MinP: 2}} {
		if _, err := NewSampler(p); !errors.Is(err, ErrSampling) {
			t.Errorf("%+v: err = %v", p, err)
		}
	}
}

func TestPenaltiesAndLogitBias(t *testing.T) {
	s, err := NewSampler(SamplingParams{RepetitionPenalty: 2, PresencePenalty: 0.5, FrequencyPenalty: 0.25, LogitBias: map[int32]float64{3: 10}})
	if err != nil {
		t.Fatal(err)
	}
	logits := []float32{2, -2, 1, 0}
	seen := map[int32]bool{0: true, 1: true}
	counts := map[int32]int{0: 2}
	s.Penalize(logits, seen, counts)
	// 0: 2/2 - (0.25·2 + 0.5) = 0; 1: -2·2 = -4; 2 untouched; 3: +10.
	want := []float32{0, -4, 1, 10}
	for i := range want {
		if logits[i] != want[i] {
			t.Fatalf("logits %v, want %v", logits, want)
		}
	}
	if !s.Penalized() {
		t.Fatal("Penalized false")
	}
	if plain, _ := NewSampler(SamplingParams{RepetitionPenalty: 1}); plain.Penalized() {
		t.Fatal("repetition_penalty 1 counted as a penalty")
	}
}

func TestStopMatcherAcrossPieces(t *testing.T) {
	m := newStopMatcher([]string{"STOP", "xyz"})
	var got string
	for _, piece := range []string{"hello S", "T", "O", "nly ST", "OP and more"} {
		out, stopped := m.push(piece)
		got += out
		if stopped {
			if got != "hello STOnly " {
				t.Fatalf("emitted %q", got)
			}
			return
		}
	}
	t.Fatal("stop string not found")
}

// TestRejectionSamplingMatchesMasking: drawing from the whole row until an
// allowed token comes (Again, then RedrawIn after a few rejections) gives
// the distribution of sampling the masked row, and greedy the masked argmax.
func TestRejectionSamplingMatchesMasking(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	const n = 60
	logits := make([]float32, n)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 2)
	}
	mask := make(grammar.Mask, 1)
	allowed := map[int32]bool{}
	for len(allowed) < 6 {
		id := int32(rng.IntN(n))
		allowed[id] = true
		mask[0] |= 1 << id
	}
	masked := slices.Clone(logits)
	for i := range masked {
		if !allowed[int32(i)] {
			masked[i] = float32(math.Inf(-1))
		}
	}
	for _, temp := range []float64{0, 1} {
		seed := uint64(1)
		rej, _ := NewSampler(SamplingParams{Temperature: temp, Seed: &seed})
		ref, _ := NewSampler(SamplingParams{Temperature: temp, Seed: &seed})
		const draws = 40000
		got, want := map[int32]int{}, map[int32]int{}
		for range draws {
			tok := rej.Sample(logits)
			for try := 0; !allowed[tok]; try++ {
				if try == 3 {
					tok = rej.RedrawIn(logits, mask, nil)
					break
				}
				tok = rej.Again(logits)
			}
			got[tok]++
			want[ref.Sample(masked)]++
		}
		for id := range allowed {
			if d := math.Abs(float64(got[id]-want[id])) / draws; d > 0.01 {
				t.Errorf("temperature %v: token %d drawn %d times by rejection, %d by masking", temp, id, got[id], want[id])
			}
		}
		for id := range got {
			if !allowed[id] {
				t.Errorf("temperature %v: token %d is not allowed", temp, id)
			}
		}
	}
}

// TestTruncateMatchesSorting: the selection that top-k, top-p and min-p
// keep is the prefix a full sort would keep.
func TestTruncateMatchesSorting(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for c := range 300 {
		n := 1 + rng.IntN(300)
		probs := make([]float64, n)
		var sum float64
		for i := range probs {
			probs[i] = math.Exp(rng.NormFloat64() * float64(1+c%4))
			if rng.IntN(5) == 0 && i > 0 {
				probs[i] = probs[i-1] // ties
			}
			sum += probs[i]
		}
		for i := range probs {
			probs[i] /= sum
		}
		p := SamplingParams{Temperature: 1, TopK: rng.IntN(3) * rng.IntN(n+1), TopP: []float64{1, 0.5, 0.9, 0.99}[rng.IntN(4)], MinP: []float64{0, 0, 0.05}[rng.IntN(3)]}
		s := &Sampler{p: p}
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		keep := s.truncate(order, probs)
		got := slices.Sorted(slices.Values(order[:keep]))
		// The reference: sort, then cut as top-k, top-p, min-p say.
		ref := make([]int, n)
		for i := range ref {
			ref[i] = i
		}
		slices.SortFunc(ref, func(a, b int) int {
			if probs[a] != probs[b] {
				if probs[a] > probs[b] {
					return -1
				}
				return 1
			}
			return a - b
		})
		k := n
		if p.TopK > 0 && p.TopK < k {
			k = p.TopK
		}
		if p.TopP < 1 {
			var cum float64
			for i := 0; i < k; i++ {
				if cum += probs[ref[i]]; cum >= p.TopP {
					k = i + 1
					break
				}
			}
		}
		for p.MinP > 0 && k > 1 && probs[ref[k-1]] < p.MinP*probs[ref[0]] {
			k--
		}
		want := slices.Sorted(slices.Values(ref[:k]))
		if !slices.Equal(got, want) {
			t.Fatalf("case %d (%+v, n %d): kept %v, sorting keeps %v", c, p, n, got, want)
		}
	}
}
