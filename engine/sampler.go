package engine

import (
	"errors"
	"fmt"
	"math"
	mathbits "math/bits"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/govllm/govllm/grammar"
	rt "github.com/govllm/govllm/runtime"
)

// SamplingParams choose the next token from logits. Temperature 0 is greedy.
type SamplingParams struct {
	Temperature float64
	TopK        int     // 0: all tokens
	TopP        float64 // 1: all tokens
	MinP        float64 // 0: off
	Seed        *uint64 // nil: a random seed

	RepetitionPenalty float64           // 1 (or 0): off; > 1 discourages tokens seen in prompt or output
	PresencePenalty   float64           // subtracted once from tokens already generated
	FrequencyPenalty  float64           // subtracted per occurrence in the output
	LogitBias         map[int32]float64 // added to the logits of these tokens
}

// ErrSampling is wrapped by invalid sampling parameters.
var ErrSampling = errors.New("invalid sampling parameters")

// Validate reports the first parameter out of range.
func (p SamplingParams) Validate() error {
	switch {
	case p.Temperature < 0 || math.IsNaN(p.Temperature):
		return fmt.Errorf("%w: temperature %v must be ≥ 0", ErrSampling, p.Temperature)
	case p.TopK < 0:
		return fmt.Errorf("%w: top_k %d must be ≥ 0", ErrSampling, p.TopK)
	case !(p.TopP > 0 && p.TopP <= 1):
		return fmt.Errorf("%w: top_p %v must be in (0, 1]", ErrSampling, p.TopP)
	case p.MinP < 0 || p.MinP > 1:
		return fmt.Errorf("%w: min_p %v must be in [0, 1]", ErrSampling, p.MinP)
	case p.RepetitionPenalty < 0 || p.RepetitionPenalty > 100:
		return fmt.Errorf("%w: repetition_penalty %v must be in (0, 100]", ErrSampling, p.RepetitionPenalty)
	case math.Abs(p.PresencePenalty) > 2 || math.Abs(p.FrequencyPenalty) > 2:
		return fmt.Errorf("%w: presence and frequency penalties must be in [-2, 2]", ErrSampling)
	}
	for id, b := range p.LogitBias {
		if id < 0 || math.IsNaN(b) || math.Abs(b) > 100 {
			return fmt.Errorf("%w: logit_bias %d: %v (ids ≥ 0, bias in [-100, 100])", ErrSampling, id, b)
		}
	}
	return nil
}

// Sampler draws tokens for one request with its own random stream, so that
// a seeded request samples the same tokens whatever else runs.
type Sampler struct {
	p     SamplingParams
	rng   *rand.Rand
	probs []float64
	order []int
	cdf   []float64 // the last plain draw's cumulative weights, for Again
	tried []int32   // tokens Again has returned since the last Sample (greedy)
}

// NewSampler validates p and seeds the request's random stream.
func NewSampler(p SamplingParams) (*Sampler, error) {
	if p.TopP == 0 {
		p.TopP = 1
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	seed := rand.Uint64()
	if p.Seed != nil {
		seed = *p.Seed
	}
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}, nil
}

// Penalize applies logit bias and the repetition, presence and frequency
// penalties (as vLLM does) to logits in place. seen holds the prompt and
// output tokens, counts the output tokens' occurrences.
func (s *Sampler) Penalize(logits []float32, seen map[int32]bool, counts map[int32]int) {
	for id, b := range s.p.LogitBias {
		if int(id) < len(logits) {
			logits[id] += float32(b)
		}
	}
	if rp := s.p.RepetitionPenalty; rp != 0 && rp != 1 {
		for id := range seen {
			if logits[id] > 0 {
				logits[id] /= float32(rp)
			} else {
				logits[id] *= float32(rp)
			}
		}
	}
	if s.p.PresencePenalty != 0 || s.p.FrequencyPenalty != 0 {
		for id, n := range counts {
			logits[id] -= float32(s.p.FrequencyPenalty*float64(n) + s.p.PresencePenalty)
		}
	}
}

// Penalized reports whether Penalize changes anything.
func (s *Sampler) Penalized() bool {
	return len(s.p.LogitBias) > 0 || (s.p.RepetitionPenalty != 0 && s.p.RepetitionPenalty != 1) ||
		s.p.PresencePenalty != 0 || s.p.FrequencyPenalty != 0
}

// truncate applies min-p, top-k and top-p to order (tokens with weight) and
// returns how many to keep: order[:keep] are then the most likely tokens
// (by probability, then id), in no particular order. It selects rather
// than sorts: over a 151k vocabulary a sort costs more than a model step.
func (s *Sampler) truncate(order []int, probs []float64) int {
	if s.p.MinP > 0 { // min-p keeps what is above a floor: filter first
		pmax := 0.0
		for _, i := range order {
			pmax = max(pmax, probs[i])
		}
		kept := order[:0]
		for _, i := range order {
			if probs[i] >= s.p.MinP*pmax {
				kept = append(kept, i)
			}
		}
		order = kept
	}
	done := func(n int, mass float64) bool {
		return s.p.TopK > 0 && n >= s.p.TopK || s.p.TopP < 1 && mass >= s.p.TopP
	}
	before := func(a, b int) bool { return probs[a] > probs[b] || probs[a] == probs[b] && a < b }
	// Quickselect for the shortest prefix of the ranking that is done:
	// order[:lo] ranks above order[lo:hi], which ranks above order[hi:],
	// and mass is the weight of order[:lo].
	lo, hi, mass := 0, len(order), 0.0
	for lo < hi {
		mid := lo + (hi-lo)/2
		order[mid], order[hi-1] = order[hi-1], order[mid]
		pivot := order[hi-1]
		m := lo
		var above float64
		for j := lo; j < hi-1; j++ {
			if before(order[j], pivot) {
				order[j], order[m] = order[m], order[j]
				above += probs[order[m]]
				m++
			}
		}
		order[m], order[hi-1] = order[hi-1], order[m]
		switch {
		case done(m, mass+above):
			hi = m // the prefix ends before the pivot
		case done(m+1, mass+above+probs[pivot]):
			return m + 1
		default:
			lo, mass = m+1, mass+above+probs[pivot]
		}
	}
	return lo
}

func (s *Sampler) fromCDF() int32 {
	r := s.rng.Float64() * s.cdf[len(s.cdf)-1]
	k, _ := slices.BinarySearch(s.cdf, r)
	return int32(s.order[min(k, len(s.cdf)-1)])
}

// Again draws another token from the distribution of the last Sample of
// logits, for rejection sampling: greedy gives the next best token,
// temperature sampling an independent draw. Only for unranked samplers.
func (s *Sampler) Again(logits []float32) int32 {
	if s.p.Temperature > 0 {
		return s.fromCDF()
	}
	if len(s.tried) == 0 {
		s.tried = append(s.tried, argmax(logits))
	}
	best := int32(-1)
	for i, l := range logits {
		if (best < 0 || l > logits[best]) && !slices.Contains(s.tried, int32(i)) {
			best = int32(i)
		}
	}
	s.tried = append(s.tried, best)
	return best
}

// RedrawIn samples again from the distribution of the last Sample of
// logits, restricted to the ids in m and extra: for plain temperature
// sampling from the probabilities already computed, for greedy the largest
// logit among them. It returns -1 if none of them has any weight.
func (s *Sampler) RedrawIn(logits []float32, m grammar.Mask, extra []int32) int32 {
	each := func(f func(i int)) {
		for w, bits := range m {
			for bits != 0 {
				i := w*64 + mathbits.TrailingZeros64(bits)
				bits &= bits - 1
				if i < len(logits) {
					f(i)
				}
			}
		}
		for _, id := range extra {
			f(int(id))
		}
	}
	ninf := float32(math.Inf(-1))
	if s.p.Temperature == 0 || len(s.probs) < len(logits) {
		best := -1
		each(func(i int) {
			if logits[i] != ninf && (best < 0 || logits[i] > logits[best] || logits[i] == logits[best] && i < best) {
				best = i
			}
		})
		return int32(best)
	}
	var sum float64
	each(func(i int) { sum += s.probs[i] })
	if sum == 0 {
		return -1
	}
	r, picked := s.rng.Float64()*sum, -1
	each(func(i int) {
		if picked < 0 && s.probs[i] > 0 {
			if r -= s.probs[i]; r <= 0 {
				picked = i
			}
		}
	})
	if picked < 0 { // rounding: the last with weight
		each(func(i int) {
			if s.probs[i] > 0 {
				picked = i
			}
		})
	}
	return int32(picked)
}

// Ranked reports whether sampling truncates by rank or probability (top-k,
// top-p, min-p), so that masking tokens out changes which others are kept.
func (s *Sampler) Ranked() bool {
	return s.p.Temperature > 0 && (s.p.TopK > 0 || s.p.TopP < 1 || s.p.MinP > 0)
}

// Greedy reports whether Sample takes the largest logit.
func (s *Sampler) Greedy() bool { return s.p.Temperature == 0 }

// Sample picks a token from one row of logits. Tokens at -inf (masked)
// are never drawn.
func (s *Sampler) Sample(logits []float32) int32 {
	if s.p.Temperature == 0 {
		return argmax(logits)
	}
	n := len(logits)
	if cap(s.probs) < n {
		s.probs, s.order = make([]float64, n), make([]int, n)
	}
	probs, order := s.probs[:n], s.order[:0]
	s.tried = s.tried[:0]
	mx := float64(logits[argmax(logits)])
	var sum float64
	for i, l := range logits {
		probs[i] = math.Exp((float64(l) - mx) / s.p.Temperature)
		sum += probs[i]
		if probs[i] > 0 {
			order = append(order, i)
		}
	}
	if s.p.TopK == 0 && s.p.TopP >= 1 && s.p.MinP == 0 {
		// Plain temperature sampling needs no ranking: draw from the
		// cumulative weights of the tokens that have any.
		s.cdf = s.cdf[:0]
		var c float64
		for _, i := range order {
			c += probs[i]
			s.cdf = append(s.cdf, c)
		}
		return s.fromCDF()
	}
	for _, i := range order {
		probs[i] /= sum
	}
	keep := s.truncate(order, probs)
	var total float64
	for _, i := range order[:keep] {
		total += probs[i]
	}
	r := s.rng.Float64() * total
	for _, i := range order[:keep] {
		r -= probs[i]
		if r <= 0 {
			return int32(i)
		}
	}
	return int32(order[keep-1])
}

// argmax is the index of x's largest element, the lowest of equal ones,
// NaN never: the token a backend's argmax op picks from the same row.
func argmax(x []float32) int32 { return rt.ArgmaxRow(x) }

// TokenLogprob is a token and its log-probability.
type TokenLogprob struct {
	ID      int32
	Logprob float32
}

// Logprobs returns the log-probability of chosen under logits and the top
// k tokens (k may be 0), from the model's distribution before sampling
// parameters are applied.
func Logprobs(logits []float32, chosen int32, k int) (TokenLogprob, []TokenLogprob) {
	mx := float64(logits[argmax(logits)])
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l) - mx)
	}
	lse := mx + math.Log(sum)
	lp := func(id int32) TokenLogprob { return TokenLogprob{ID: id, Logprob: float32(float64(logits[id]) - lse)} }
	var top []TokenLogprob
	if k > 0 {
		ids := make([]int32, len(logits))
		for i := range ids {
			ids[i] = int32(i)
		}
		sort.SliceStable(ids, func(a, b int) bool { return logits[ids[a]] > logits[ids[b]] })
		for _, id := range ids[:min(k, len(ids))] {
			top = append(top, lp(id))
		}
	}
	return lp(chosen), top
}
