package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// SamplingParams choose the next token from logits. Temperature 0 is greedy.
type SamplingParams struct {
	Temperature float64
	TopK        int     // 0: all tokens
	TopP        float64 // 1: all tokens
	MinP        float64 // 0: off
	Seed        *uint64 // nil: a random seed
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

// Sample picks a token from one row of logits.
func (s *Sampler) Sample(logits []float32) int32 {
	if s.p.Temperature == 0 {
		return argmax(logits)
	}
	n := len(logits)
	if cap(s.probs) < n {
		s.probs, s.order = make([]float64, n), make([]int, n)
	}
	probs, order := s.probs[:n], s.order[:n]
	mx := float64(logits[argmax(logits)])
	var sum float64
	for i, l := range logits {
		probs[i] = math.Exp((float64(l) - mx) / s.p.Temperature)
		sum += probs[i]
		order[i] = i
	}
	for i := range probs {
		probs[i] /= sum
	}
	sort.Slice(order, func(a, b int) bool {
		if probs[order[a]] != probs[order[b]] {
			return probs[order[a]] > probs[order[b]]
		}
		return order[a] < order[b]
	})
	keep := n
	if s.p.TopK > 0 && s.p.TopK < keep {
		keep = s.p.TopK
	}
	if s.p.TopP < 1 {
		var cum float64
		for i := 0; i < keep; i++ {
			cum += probs[order[i]]
			if cum >= s.p.TopP {
				keep = i + 1
				break
			}
		}
	}
	if s.p.MinP > 0 {
		floor := s.p.MinP * probs[order[0]]
		for keep > 1 && probs[order[keep-1]] < floor {
			keep--
		}
	}
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

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}
