package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/govllm/govllm/engine"
	"github.com/govllm/govllm/tokenizer/chat"
)

type chatRequest struct {
	samplingFields
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	Logprobs            bool            `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	ChatTemplateKwargs  json.RawMessage `json:"chat_template_kwargs"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
}

type toolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatMessage struct {
	Role             string     `json:"role,omitempty"`
	Content          *string    `json:"content,omitempty"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCall `json:"tool_calls,omitempty"`
}

type logprobEntry struct {
	Token       string         `json:"token"`
	Logprob     float32        `json:"logprob"`
	Bytes       []int          `json:"bytes"`
	TopLogprobs []logprobEntry `json:"top_logprobs,omitempty"`
}

type chatLogprobs struct {
	Content []logprobEntry `json:"content"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      *chatMessage  `json:"message,omitempty"`
	Delta        *chatMessage  `json:"delta,omitempty"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *usage       `json:"usage,omitempty"`
}

// toolMode reads tool_choice: "auto" (the default with tools), "none",
// "required" or {"type": "function", "function": {"name": ...}}.
func toolMode(raw json.RawMessage) (mode, name string, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "auto", "", nil
	}
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case "auto", "none", "required":
			return mode, "", nil
		}
		return "", "", badRequest("tool_choice", "tool_choice %q: want auto, none, required or a named function", mode)
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &named) != nil || named.Function.Name == "" {
		return "", "", badRequest("tool_choice", "tool_choice must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}")
	}
	return "named", named.Function.Name, nil
}

func strPtr(s string) *string { return &s }

// promptReasoning tells from a rendered chat prompt where reasoning can be:
// already open (Qwen3.5's generation prompt), closed and empty after the
// last turn's start (thinking disabled), or up to the model (Qwen3's).
func promptReasoning(prompt string) engine.Reasoning {
	if chat.PromptOpensReasoning(prompt) {
		return engine.ReasoningOpen
	}
	turn := prompt[strings.LastIndex(prompt, "<|im_start|>")+1:]
	if strings.Contains(turn, "</think>") {
		return engine.ReasoningNone
	}
	return engine.ReasoningMay
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := s.checkModel(req.Model); err != nil {
		writeError(w, err)
		return
	}
	if s.opts.Template == nil {
		writeError(w, badRequest("messages", "this model has no chat template; pass --chat-template"))
		return
	}
	if !present(req.Messages) {
		writeError(w, badRequest("messages", "messages is required"))
		return
	}
	var tools []chat.Tool
	if present(req.Tools) {
		if err := json.Unmarshal(req.Tools, &tools); err != nil {
			writeError(w, badRequest("tools", "tools: %v", err))
			return
		}
		for i, t := range tools {
			if t.Function.Name == "" {
				writeError(w, badRequest("tools", "tools[%d] has no function name", i))
				return
			}
		}
	}
	mode, named, err := toolMode(req.ToolChoice)
	if err != nil {
		writeError(w, err)
		return
	}
	if (mode == "required" || mode == "named") && len(tools) == 0 {
		writeError(w, badRequest("tool_choice", "tool_choice %s needs tools", mode))
		return
	}
	if mode == "named" {
		found := false
		for _, t := range tools {
			found = found || t.Function.Name == named
		}
		if !found {
			writeError(w, badRequest("tool_choice", "tool_choice names %q, which is not among the tools", named))
			return
		}
	}
	prompt, err := s.opts.Template.Render(chat.Request{Messages: req.Messages, Tools: req.Tools,
		AddGenerationPrompt: req.AddGenerationPrompt == nil || *req.AddGenerationPrompt, Kwargs: req.ChatTemplateKwargs})
	if err != nil {
		writeError(w, badRequest("messages", "%v", err))
		return
	}
	er, err := req.request(s.tok.Encode(prompt), s.eng.Config().MaxModelLen, s.eng.Capacity())
	if err != nil {
		writeError(w, err)
		return
	}
	if req.TopLogprobs != nil {
		if *req.TopLogprobs < 0 || *req.TopLogprobs > 20 {
			writeError(w, badRequest("top_logprobs", "top_logprobs must be in [0, 20]"))
			return
		}
		if !req.Logprobs {
			writeError(w, badRequest("top_logprobs", "top_logprobs needs logprobs: true"))
			return
		}
		er.TopLogprobs = *req.TopLogprobs
	}
	er.Logprobs = req.Logprobs
	er.Reasoning = promptReasoning(prompt)
	if er.Grammar, err = s.constraint(&req.structuredFields); err != nil {
		writeError(w, err)
		return
	}
	if mode == "required" || mode == "named" {
		if er.Grammar != nil {
			writeError(w, badRequest("tool_choice", "tool_choice %s constrains the output to tool calls; it cannot be combined with another constraint", mode))
			return
		}
		many := mode == "required" && (req.ParallelToolCalls == nil || *req.ParallelToolCalls)
		if er.Grammar, err = s.toolCallMasker(tools, mode, named, many); err != nil {
			writeError(w, err)
			return
		}
	}
	popts := chat.ParserOptions{InReasoning: chat.PromptOpensReasoning(prompt), Reasoning: true,
		ToolCalls: len(tools) > 0 && mode != "none", Tools: tools}
	parsers := make([]*chat.Parser, er.N)
	for i := range parsers {
		parsers[i] = chat.NewParser(popts)
	}
	resp := chatResponse{ID: randomID("chatcmpl-"), Created: time.Now().Unix(), Model: s.opts.ModelName}
	var u usage
	logprobs := func(o engine.Output) *chatLogprobs {
		if !req.Logprobs {
			return nil
		}
		lp := &chatLogprobs{Content: []logprobEntry{}}
		for i, id := range o.TokenIDs {
			text, b := s.tokenText(id)
			e := logprobEntry{Token: text, Bytes: b}
			if i < len(o.Logprobs) {
				e.Logprob = o.Logprobs[i].Logprob
			}
			if i < len(o.TopLogprobs) {
				e.TopLogprobs = []logprobEntry{}
				for _, t := range o.TopLogprobs[i] {
					tt, tb := s.tokenText(t.ID)
					e.TopLogprobs = append(e.TopLogprobs, logprobEntry{Token: tt, Logprob: t.Logprob, Bytes: tb})
				}
			}
			lp.Content = append(lp.Content, e)
		}
		return lp
	}
	// events turns parser events into a message delta and counts calls.
	calls := make([]int, er.N)
	streaming := req.Stream
	delta := func(c int, events []chat.Event) *chatMessage {
		m := &chatMessage{}
		var content, reasoning strings.Builder
		for _, ev := range events {
			switch ev.Kind {
			case chat.Content:
				content.WriteString(ev.Text)
			case chat.Reasoning:
				reasoning.WriteString(ev.Text)
			case chat.ToolCallStart:
				if streaming { // the name first, arguments as they are generated
					idx := ev.Call.Index
					tc := toolCall{Index: &idx, ID: randomID("call_"), Type: "function"}
					tc.Function.Name = ev.Call.Name
					m.ToolCalls = append(m.ToolCalls, tc)
				}
			case chat.ToolCallArgs:
				if streaming {
					idx := ev.Call.Index
					tc := toolCall{Index: &idx}
					tc.Function.Arguments = ev.Text
					m.ToolCalls = append(m.ToolCalls, tc)
				}
			case chat.ToolCallDone:
				if ev.Call.Err != nil { // malformed: keep the model's text as content
					content.WriteString("<tool_call>" + ev.Call.Raw + "</tool_call>")
					continue
				}
				if streaming {
					calls[c]++
					continue
				}
				tc := toolCall{ID: randomID("call_"), Type: "function"}
				idx := calls[c]
				tc.Index = &idx
				tc.Function.Name, tc.Function.Arguments = ev.Call.Name, ev.Call.Arguments
				m.ToolCalls = append(m.ToolCalls, tc)
				calls[c]++
			}
		}
		if content.Len() > 0 {
			m.Content = strPtr(content.String())
		}
		if reasoning.Len() > 0 {
			m.ReasoningContent = strPtr(reasoning.String())
		}
		return m
	}
	finishReason := func(c int, o engine.Output) *string {
		if calls[c] > 0 && o.FinishReason == engine.FinishStop {
			return strPtr("tool_calls")
		}
		return strPtr(string(o.FinishReason))
	}
	gen, err := s.submit(r.Context(), []engine.Request{er})
	if err != nil {
		writeError(w, err)
		return
	}
	if req.Stream {
		resp.Object = "chat.completion.chunk"
		out := newSSE(w)
		chunk := func(ch chatChoice) error {
			return out.send(chatResponse{ID: resp.ID, Object: resp.Object, Created: resp.Created, Model: resp.Model, Choices: []chatChoice{ch}})
		}
		for i := range er.N {
			if err := chunk(chatChoice{Index: i, Delta: &chatMessage{Role: "assistant", Content: strPtr("")}}); err != nil {
				return
			}
		}
		err := gen.run(func(o choiceOutput) error {
			events := parsers[o.choice].Push(o.Text)
			if o.Finished {
				events = append(events, parsers[o.choice].Close()...)
				u.add(o.Usage, o.Index == 0)
			}
			d := delta(o.choice, events)
			lp := logprobs(o.Output)
			if d.Content != nil || d.ReasoningContent != nil || len(d.ToolCalls) > 0 || lp != nil {
				if err := chunk(chatChoice{Index: o.choice, Delta: d, Logprobs: lp}); err != nil {
					return err
				}
			}
			if o.Finished {
				return chunk(chatChoice{Index: o.choice, Delta: &chatMessage{}, FinishReason: finishReason(o.choice, o.Output)})
			}
			return nil
		})
		if err != nil {
			out.send(map[string]any{"error": map[string]string{"message": err.Error(), "type": "internal_error"}})
		}
		if req.includeUsage() {
			out.send(chatResponse{ID: resp.ID, Object: resp.Object, Created: resp.Created, Model: resp.Model, Choices: []chatChoice{}, Usage: &u})
		}
		out.done()
		return
	}
	resp.Object = "chat.completion"
	choices := make([]chatChoice, er.N)
	texts := make([]string, er.N)
	lps := make([]*chatLogprobs, er.N)
	err = gen.run(func(o choiceOutput) error {
		texts[o.choice] += o.Text
		if lp := logprobs(o.Output); lp != nil {
			if lps[o.choice] == nil {
				lps[o.choice] = &chatLogprobs{Content: []logprobEntry{}}
			}
			lps[o.choice].Content = append(lps[o.choice].Content, lp.Content...)
		}
		if o.Finished {
			p := parsers[o.choice]
			m := delta(o.choice, append(p.Push(texts[o.choice]), p.Close()...))
			m.Role = "assistant"
			if m.Content == nil && len(m.ToolCalls) == 0 {
				m.Content = strPtr("")
			}
			for i := range m.ToolCalls {
				m.ToolCalls[i].Index = nil
			}
			choices[o.choice] = chatChoice{Index: o.choice, Message: m, Logprobs: lps[o.choice], FinishReason: finishReason(o.choice, o.Output)}
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
