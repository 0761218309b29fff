package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/govllm/govllm/grammar"
)

// Request is one generation request.
type Request struct {
	Prompt       []int32
	Sampling     SamplingParams
	MaxTokens    int // default 256
	MinTokens    int
	StopStrings  []string
	StopTokenIDs []int32
	IgnoreEOS    bool
	Logprobs     bool // return each chosen token's logprob
	TopLogprobs  int  // and the k most likely tokens at each step
	N            int  // completions (default 1)
	KeepSpecial  bool // keep special tokens in the text (skip_special_tokens false)

	// Grammar constrains the answer (after any reasoning block) to its
	// language; nil leaves it free. Maskers may be shared by requests.
	Grammar   *grammar.Masker
	Reasoning Reasoning
	// ThinkingBudget, if set, ends the reasoning block with </think> after
	// that many tokens of it.
	ThinkingBudget *int
}

// ErrRequest is wrapped by invalid requests.
var ErrRequest = errors.New("invalid request")

// FinishReason says why a completion ended.
type FinishReason string

const (
	FinishStop   FinishReason = "stop"   // eos, a stop token or a stop string
	FinishLength FinishReason = "length" // max_tokens or the model length
	FinishAbort  FinishReason = "abort"  // the caller cancelled
)

// Usage counts tokens of a request.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	CachedTokens     int // prompt tokens served from the prefix cache
}

// Timings of one completion, for metrics.
type Timings struct {
	Queue            time.Duration // arrival to first scheduled
	TimeToFirstToken time.Duration
	MeanInterToken   time.Duration
}

// Output is one step of one completion: the tokens it added, the text
// delta, and on the last output the finish reason, usage and timings.
type Output struct {
	Index        int // which of the N completions
	TokenIDs     []int32
	Text         string
	Logprobs     []TokenLogprob   // per token, if asked
	TopLogprobs  [][]TokenLogprob // per token, if asked
	Finished     bool
	FinishReason FinishReason
	Usage        Usage
	Timings      Timings
	Err          error // set on the final output if the engine failed
}

func (r *Request) validate(maxLen int) error {
	if r.N == 0 {
		r.N = 1
	}
	if r.MaxTokens == 0 {
		r.MaxTokens = 256
	}
	switch {
	case len(r.Prompt) == 0:
		return fmt.Errorf("%w: empty prompt", ErrRequest)
	case r.MaxTokens < 1 || r.MinTokens < 0 || r.MinTokens > r.MaxTokens:
		return fmt.Errorf("%w: max_tokens %d and min_tokens %d", ErrRequest, r.MaxTokens, r.MinTokens)
	case r.N < 1 || r.N > 64:
		return fmt.Errorf("%w: n %d must be in [1, 64]", ErrRequest, r.N)
	case r.TopLogprobs < 0 || r.TopLogprobs > 20:
		return fmt.Errorf("%w: top_logprobs %d must be in [0, 20]", ErrRequest, r.TopLogprobs)
	case r.ThinkingBudget != nil && *r.ThinkingBudget < 0:
		return fmt.Errorf("%w: thinking_token_budget %d must be ≥ 0", ErrRequest, *r.ThinkingBudget)
	case len(r.Prompt)+1 > maxLen:
		return fmt.Errorf("%w: the prompt has %d tokens, the model length is %d", ErrRequest, len(r.Prompt), maxLen)
	}
	if r.Sampling.TopP == 0 {
		r.Sampling.TopP = 1
	}
	return r.Sampling.Validate()
}
