package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/govllm/govllm/engine"
	"github.com/govllm/govllm/tokenizer/chat"
)

type completionRequest struct {
	samplingFields
	Prompt   json.RawMessage `json:"prompt"`
	Logprobs *int            `json:"logprobs"`
	Echo     bool            `json:"echo"`
}

type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float32            `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

type completionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

type completionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage,omitempty"`
}

// prompts reads prompt as a string, a list of strings, token ids or lists
// of token ids.
func (s *Server) prompts(raw json.RawMessage) ([][]int32, error) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return [][]int32{s.tok.Encode(one)}, nil
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil && len(strs) > 0 {
		out := make([][]int32, len(strs))
		for i, p := range strs {
			out[i] = s.tok.Encode(p)
		}
		return out, nil
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return [][]int32{ids}, nil
	}
	var lists [][]int32
	if json.Unmarshal(raw, &lists) == nil && len(lists) > 0 {
		return lists, nil
	}
	return nil, badRequest("prompt", "prompt must be a string, a list of strings, a list of token ids or a list of such lists")
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := s.checkModel(req.Model); err != nil {
		writeError(w, err)
		return
	}
	prompts, err := s.prompts(req.Prompt)
	if err != nil {
		writeError(w, err)
		return
	}
	var reqs []engine.Request
	for i, p := range prompts {
		if len(p) == 0 {
			writeError(w, badRequest("prompt", "prompt %d is empty", i))
			return
		}
		for _, id := range p {
			if id < 0 || int(id) >= s.eng.VocabSize() {
				writeError(w, badRequest("prompt", "token id %d is outside the vocabulary", id))
				return
			}
		}
		er, err := req.request(p, s.eng.Config().MaxModelLen, s.eng.Capacity())
		if err != nil {
			writeError(w, err)
			return
		}
		if er.Grammar, err = s.constraint(&req.structuredFields); err != nil {
			writeError(w, err)
			return
		}
		if text, err := s.tok.Decode(p, false); err == nil && chat.PromptOpensReasoning(text) {
			er.Reasoning = engine.ReasoningOpen
		}
		if req.Logprobs != nil {
			if *req.Logprobs < 0 || *req.Logprobs > 20 {
				writeError(w, badRequest("logprobs", "logprobs must be in [0, 20]"))
				return
			}
			er.Logprobs, er.TopLogprobs = true, *req.Logprobs
		}
		reqs = append(reqs, er)
	}
	n := reqs[0].N
	resp := completionResponse{ID: randomID("cmpl-"), Object: "text_completion", Created: time.Now().Unix(), Model: s.opts.ModelName}
	choices := make([]completionChoice, len(prompts)*n)
	offsets := make([]int, len(choices))
	for i := range choices {
		choices[i].Index = i
		if req.Logprobs != nil {
			choices[i].Logprobs = &completionLogprobs{}
		}
	}
	var u usage
	logprobs := func(c int, o engine.Output) *completionLogprobs {
		if req.Logprobs == nil {
			return nil
		}
		lp := &completionLogprobs{}
		for i, id := range o.TokenIDs {
			text, _ := s.tokenText(id)
			lp.Tokens = append(lp.Tokens, text)
			lp.TextOffset = append(lp.TextOffset, offsets[c])
			offsets[c] += len(text)
			if i < len(o.Logprobs) {
				lp.TokenLogprobs = append(lp.TokenLogprobs, o.Logprobs[i].Logprob)
			}
			top := map[string]float32{}
			if i < len(o.TopLogprobs) {
				for _, t := range o.TopLogprobs[i] {
					tt, _ := s.tokenText(t.ID)
					top[tt] = t.Logprob
				}
			}
			lp.TopLogprobs = append(lp.TopLogprobs, top)
		}
		return lp
	}
	gen, err := s.submit(r.Context(), reqs)
	if err != nil {
		writeError(w, err)
		return
	}
	if req.Stream {
		out := newSSE(w)
		err := gen.run(func(o choiceOutput) error {
			if o.Finished {
				u.add(o.Usage, o.Index == 0)
			}
			if o.Text == "" && !o.Finished && req.Logprobs == nil {
				return nil // a token that completed no character yet
			}
			ch := completionChoice{Index: o.choice, Text: o.Text, Logprobs: logprobs(o.choice, o.Output)}
			if o.Finished {
				reason := string(o.FinishReason)
				ch.FinishReason = &reason
			}
			return out.send(completionResponse{ID: resp.ID, Object: resp.Object, Created: resp.Created, Model: resp.Model, Choices: []completionChoice{ch}})
		})
		if err != nil {
			out.send(map[string]any{"error": map[string]string{"message": err.Error(), "type": "internal_error"}})
		}
		if req.includeUsage() {
			out.send(completionResponse{ID: resp.ID, Object: resp.Object, Created: resp.Created, Model: resp.Model, Choices: []completionChoice{}, Usage: &u})
		}
		out.done()
		return
	}
	err = gen.run(func(o choiceOutput) error {
		c := &choices[o.choice]
		c.Text += o.Text
		if lp := logprobs(o.choice, o.Output); lp != nil {
			c.Logprobs.Tokens = append(c.Logprobs.Tokens, lp.Tokens...)
			c.Logprobs.TokenLogprobs = append(c.Logprobs.TokenLogprobs, lp.TokenLogprobs...)
			c.Logprobs.TopLogprobs = append(c.Logprobs.TopLogprobs, lp.TopLogprobs...)
			c.Logprobs.TextOffset = append(c.Logprobs.TextOffset, lp.TextOffset...)
		}
		if o.Finished {
			reason := string(o.FinishReason)
			c.FinishReason = &reason
			u.add(o.Usage, o.Index == 0)
		}
		return nil
	})
	if err != nil {
		writeError(w, err)
		return
	}
	resp.Choices, resp.Usage = choices, &u
	writeJSON(w, resp)
}
