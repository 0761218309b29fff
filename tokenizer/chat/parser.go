package chat

import (
	"strings"
)

// Kind says what part of the output an Event carries.
type Kind uint8

const (
	Content Kind = iota
	Reasoning
	ToolCallDone
)

// Event is one step of parsed output: a text delta of content or
// reasoning, or a completed tool call.
type Event struct {
	Kind Kind
	Text string
	Call *ToolCall
}

// ParserOptions configure what the parser looks for.
type ParserOptions struct {
	// InReasoning: the prompt already opened <think> (Qwen3.5's generation
	// prompt does), so output starts as reasoning. PromptOpensReasoning
	// tells from the rendered prompt.
	InReasoning bool
	// Reasoning enables <think>…</think> parsing; without it, think tags are
	// content.
	Reasoning bool
	// Tools enables <tool_call> parsing; their schemas type XML parameters.
	Tools     []Tool
	ToolCalls bool
}

const (
	thinkOpen     = "<think>"
	thinkClose    = "</think>"
	toolCallOpen  = "<tool_call>"
	toolCallClose = "</tool_call>"
)

// PromptOpensReasoning reports whether a rendered prompt ends inside an
// open <think> block, as Qwen3.5's generation prompt does unless thinking is
// disabled (then it writes an empty block).
func PromptOpensReasoning(prompt string) bool {
	open := strings.LastIndex(prompt, thinkOpen)
	return open >= 0 && strings.LastIndex(prompt, thinkClose) < open
}

type state uint8

const (
	inContent state = iota
	inReasoning
	inToolCall
)

// Parser splits a stream of output text into content, reasoning and tool
// calls. Text that might begin a tag is held back until it is decided.
type Parser struct {
	opts      ParserOptions
	state     state
	buf       string // undecided text of the current section
	held      string // whitespace held at the end of a section
	trimStart bool   // drop whitespace at the start of this section
	call      strings.Builder
	calls     int
	out       []Event
}

// NewParser starts parsing one output.
func NewParser(opts ParserOptions) *Parser {
	p := &Parser{opts: opts}
	if opts.Reasoning && opts.InReasoning {
		p.state, p.trimStart = inReasoning, true
	}
	return p
}

// tags lists what the current state watches for.
func (p *Parser) tags() []string {
	var tags []string
	switch p.state {
	case inContent:
		if p.opts.Reasoning {
			tags = append(tags, thinkOpen)
		}
		if p.opts.ToolCalls {
			tags = append(tags, toolCallOpen)
		}
	case inReasoning:
		tags = append(tags, thinkClose)
		if p.opts.ToolCalls {
			tags = append(tags, toolCallOpen) // a tool call ends reasoning left open
		}
	case inToolCall:
		tags = append(tags, toolCallClose)
	}
	return tags
}

// Push adds a delta of output text and returns the events it completes.
func (p *Parser) Push(text string) []Event {
	p.out = p.out[:0]
	p.buf += text
	for p.step() {
	}
	return append([]Event(nil), p.out...)
}

// Close ends the output: held text is flushed and an unterminated tool call
// is parsed as it stands.
func (p *Parser) Close() []Event {
	p.out = p.out[:0]
	for p.step() {
	}
	switch p.state {
	case inToolCall:
		p.call.WriteString(p.buf)
		p.finishCall()
	case inContent:
		p.emit(p.held + p.buf)
	default:
		p.emit(strings.TrimRight(p.buf, " \t\r\n"))
	}
	p.buf, p.held = "", ""
	return append([]Event(nil), p.out...)
}

// step consumes what can be decided in buf; it reports whether it changed
// state (and so should run again).
func (p *Parser) step() bool {
	tags := p.tags()
	at, tag := -1, ""
	for _, t := range tags {
		if i := strings.Index(p.buf, t); i >= 0 && (at < 0 || i < at) {
			at, tag = i, t
		}
	}
	if at < 0 {
		keep := 0
		for _, t := range tags {
			keep = max(keep, partialSuffix(p.buf, t))
		}
		p.text(p.buf[:len(p.buf)-keep])
		p.buf = p.buf[len(p.buf)-keep:]
		return false
	}
	p.text(p.buf[:at])
	p.buf = p.buf[at+len(tag):]
	p.held = ""
	switch tag {
	case thinkOpen:
		p.state, p.trimStart = inReasoning, true
	case thinkClose:
		p.state, p.trimStart = inContent, true
	case toolCallOpen:
		p.state = inToolCall
		p.call.Reset()
	case toolCallClose:
		p.finishCall()
		p.state, p.trimStart = inContent, true
	}
	return true
}

// text handles decided text of the current section.
func (p *Parser) text(s string) {
	if p.state == inToolCall {
		p.call.WriteString(s)
		return
	}
	if p.trimStart {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return
		}
		p.trimStart = false
	}
	// Hold trailing whitespace: it is dropped if a tag ends the section.
	body := strings.TrimRight(s, " \t\r\n")
	if body == "" {
		p.held += s
		return
	}
	p.emit(p.held + body)
	p.held = s[len(body):]
}

func (p *Parser) emit(s string) {
	if s == "" {
		return
	}
	kind := Content
	if p.state == inReasoning {
		kind = Reasoning
	}
	if n := len(p.out); n > 0 && p.out[n-1].Kind == kind {
		p.out[n-1].Text += s
		return
	}
	p.out = append(p.out, Event{Kind: kind, Text: s})
}

func (p *Parser) finishCall() {
	call := parseToolCall(p.call.String(), p.opts.Tools)
	call.Index = p.calls
	p.calls++
	p.out = append(p.out, Event{Kind: ToolCallDone, Call: call})
	p.call.Reset()
}

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of tag.
func partialSuffix(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}

// ParseAll parses a complete output at once.
func ParseAll(text string, opts ParserOptions) (content, reasoning string, calls []*ToolCall) {
	p := NewParser(opts)
	var c, r strings.Builder
	for _, events := range [][]Event{p.Push(text), p.Close()} {
		for _, e := range events {
			switch e.Kind {
			case Content:
				c.WriteString(e.Text)
			case Reasoning:
				r.WriteString(e.Text)
			case ToolCallDone:
				calls = append(calls, e.Call)
			}
		}
	}
	return c.String(), r.String(), calls
}
