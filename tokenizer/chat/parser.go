package chat

import (
	"encoding/json"
	"strings"
)

// Kind says what part of the output an Event carries.
type Kind uint8

const (
	Content Kind = iota
	Reasoning
	ToolCallStart // a call's name is known: Call has Index and Name
	ToolCallArgs  // Text continues the arguments of call Call.Index
	ToolCallDone  // the call is complete: Call has everything (or Err)
)

// Event is one step of parsed output: a text delta of content or
// reasoning, or progress of a tool call. The ToolCallArgs deltas of a call
// add up to a JSON object (the raw text the model wrote for JSON calls,
// converted parameter by parameter for XML ones); ToolCallDone's Arguments
// is the compact form.
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
	stream    callStream // progress of the call being read
}

// callStream tracks what of the current call has been emitted.
type callStream struct {
	started bool
	args    strings.Builder // argument text emitted so far
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
		p.stream = callStream{}
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
		p.progressCall()
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
	if call.Err == nil {
		if !p.stream.started {
			p.out = append(p.out, Event{Kind: ToolCallStart, Call: &ToolCall{Index: call.Index, Name: call.Name}})
		}
		// Complete the streamed arguments where they are a prefix of the
		// final ones (XML, or JSON written compactly); raw JSON already
		// streamed whole stands as it is.
		if sent := p.stream.args.String(); strings.HasPrefix(call.Arguments, sent) && len(call.Arguments) > len(sent) {
			p.out = append(p.out, Event{Kind: ToolCallArgs, Text: call.Arguments[len(sent):], Call: &ToolCall{Index: call.Index}})
		}
	}
	p.calls++
	p.out = append(p.out, Event{Kind: ToolCallDone, Call: call})
	p.call.Reset()
	p.stream = callStream{}
}

// progressCall emits the start and argument deltas of the call being read.
func (p *Parser) progressCall() {
	body := strings.TrimLeft(p.call.String(), " \t\r\n")
	var name, args string
	var ok bool
	if strings.HasPrefix(body, "<function=") {
		name, args, ok = p.xmlProgress(body)
	} else if strings.HasPrefix(body, "{") {
		name, args, ok = jsonProgress(body)
	}
	if !ok {
		return
	}
	idx := p.calls
	if !p.stream.started {
		p.stream.started = true
		p.out = append(p.out, Event{Kind: ToolCallStart, Call: &ToolCall{Index: idx, Name: name}})
	}
	if sent := p.stream.args.String(); len(args) > len(sent) && strings.HasPrefix(args, sent) {
		p.out = append(p.out, Event{Kind: ToolCallArgs, Text: args[len(sent):], Call: &ToolCall{Index: idx}})
		p.stream.args.WriteString(args[len(sent):])
	}
}

// xmlProgress reads the function name and the parameters completed so far,
// as the start of the arguments object.
func (p *Parser) xmlProgress(body string) (name, args string, ok bool) {
	rest := body[len("<function="):]
	gt := strings.IndexByte(rest, '>')
	if gt < 0 {
		return "", "", false
	}
	name = strings.TrimSpace(rest[:gt])
	if name == "" {
		return "", "", false
	}
	rest = rest[gt+1:]
	types := paramTypes(p.opts.Tools, name)
	var b strings.Builder
	n := 0
	for {
		rest = strings.TrimLeft(rest, " \t\r\n")
		if !strings.HasPrefix(rest, "<parameter=") {
			break
		}
		inner := rest[len("<parameter="):]
		gt := strings.IndexByte(inner, '>')
		end := strings.Index(inner, "</parameter>")
		if gt < 0 || end < gt {
			break
		}
		value := strings.TrimSuffix(strings.TrimPrefix(inner[gt+1:end], "\n"), "\n")
		key := strings.TrimSpace(inner[:gt])
		if n == 0 {
			b.WriteByte('{')
		} else {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(typedValue(value, types[key]))
		n++
		rest = inner[end+len("</parameter>"):]
	}
	return name, b.String(), true
}

// jsonProgress finds "name" and the raw text of an object "arguments" so
// far in a JSON call being written.
func jsonProgress(body string) (name, args string, ok bool) {
	name, ok = jsonStringField(body, "name")
	if !ok {
		return "", "", false
	}
	at := fieldValue(body, "arguments")
	if at < 0 {
		at = fieldValue(body, "parameters")
	}
	if at < 0 || body[at] != '{' {
		return name, "", true
	}
	depth, inStr, esc := 0, false, false
	for i := at; i < len(body); i++ {
		c := body[i]
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && c == '{':
			depth++
		case !inStr && c == '}':
			depth--
			if depth == 0 {
				return name, body[at : i+1], true
			}
		}
	}
	return name, body[at:], true
}

// fieldValue is the offset of the value of "key" in a JSON text, or -1.
func fieldValue(body, key string) int {
	i := strings.Index(body, `"`+key+`"`)
	if i < 0 {
		return -1
	}
	j := i + len(key) + 2
	for j < len(body) && (body[j] == ' ' || body[j] == '\n' || body[j] == '\t') {
		j++
	}
	if j >= len(body) || body[j] != ':' {
		return -1
	}
	j++
	for j < len(body) && (body[j] == ' ' || body[j] == '\n' || body[j] == '\t') {
		j++
	}
	if j >= len(body) {
		return -1
	}
	return j
}

// jsonStringField reads a complete string value of "key".
func jsonStringField(body, key string) (string, bool) {
	at := fieldValue(body, key)
	if at < 0 || body[at] != '"' {
		return "", false
	}
	for i := at + 1; i < len(body); i++ {
		if body[i] == '\\' {
			i++
			continue
		}
		if body[i] == '"' {
			var s string
			if json.Unmarshal([]byte(body[at:i+1]), &s) != nil || s == "" {
				return "", false
			}
			return s, true
		}
	}
	return "", false
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
