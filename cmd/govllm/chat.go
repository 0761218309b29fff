package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/govllm/govllm/engine"
	"github.com/govllm/govllm/tokenizer"
	"github.com/govllm/govllm/tokenizer/chat"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func newChatCmd() *cobra.Command {
	var (
		device, override string
		temperature      float64
		maxTokens        int
		noThinking       bool
	)
	cmd := &cobra.Command{
		Use:   "chat [MODEL]",
		Short: "Chat with a model in the terminal (streaming, with history; /reset, /exit)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := modelOrDefault(firstArg(args))
			if err != nil {
				return err
			}
			tok, err := loadTokenizer(dir)
			if err != nil {
				return err
			}
			tmpl, err := loadTemplate(dir, override)
			if err != nil {
				return err
			}
			m, err := loadModel(dir, device, false)
			if err != nil {
				return err
			}
			defer m.Close()
			eng, err := engine.New(m, tok, engine.Config{MaxNumSeqs: 1, KVCacheBytes: 256 << 20, EOSTokenIDs: eosIDs(dir, m.Config, tok)})
			if err != nil {
				return err
			}
			defer eng.Close()
			tty := false
			if f, ok := cmd.OutOrStdout().(*os.File); ok {
				tty = term.IsTerminal(int(f.Fd()))
			}
			var kwargs json.RawMessage
			if noThinking {
				kwargs = json.RawMessage(`{"enable_thinking": false}`)
			}
			c := &chatSession{eng: eng, tmpl: tmpl, tok: tok, kwargs: kwargs, tty: tty, out: cmd.OutOrStdout(),
				params: engine.SamplingParams{Temperature: temperature, TopP: 1}, maxTokens: maxTokens}
			return c.loop(cmd.InOrStdin())
		},
	}
	f := cmd.Flags()
	f.StringVar(&device, "device", "cpu", "backend device")
	f.StringVar(&override, "chat-template", "", "Jinja file that replaces the model's chat template")
	f.Float64Var(&temperature, "temperature", 0.7, "sampling temperature; 0 is greedy")
	f.IntVar(&maxTokens, "max-tokens", 1024, "tokens per reply at most")
	f.BoolVar(&noThinking, "no-thinking", false, "render the template with enable_thinking=false")
	return cmd
}

type chatSession struct {
	eng       *engine.Engine
	tmpl      *chat.Template
	tok       *tokenizer.Tokenizer
	kwargs    json.RawMessage
	tty       bool
	out       io.Writer
	params    engine.SamplingParams
	maxTokens int
	history   []map[string]string
}

func (c *chatSession) loop(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for {
		if c.tty {
			fmt.Fprint(c.out, "> ")
		}
		if !sc.Scan() {
			return sc.Err()
		}
		line := strings.TrimSpace(sc.Text())
		switch line {
		case "":
			continue
		case "/exit", "/quit":
			return nil
		case "/reset":
			c.history = nil
			continue
		}
		reply, err := c.turn(line)
		if err != nil {
			return err
		}
		c.history = append(c.history, map[string]string{"role": "user", "content": line}, map[string]string{"role": "assistant", "content": reply})
	}
}

// turn renders the conversation, streams the reply and returns its content.
func (c *chatSession) turn(user string) (string, error) {
	msgs, _ := json.Marshal(append(c.history, map[string]string{"role": "user", "content": user}))
	prompt, err := c.tmpl.Render(chat.Request{Messages: msgs, AddGenerationPrompt: true, Kwargs: c.kwargs})
	if err != nil {
		return "", err
	}
	ids := c.tok.Encode(prompt)
	ch, err := c.eng.Submit(context.Background(), engine.Request{Prompt: ids, Sampling: c.params,
		MaxTokens: min(c.maxTokens, c.eng.Capacity()-len(ids)-1)})
	if err != nil {
		return "", err
	}
	p := chat.NewParser(chat.ParserOptions{InReasoning: chat.PromptOpensReasoning(prompt), Reasoning: true})
	var content strings.Builder
	show := func(events []chat.Event) {
		for _, e := range events {
			switch e.Kind {
			case chat.Reasoning:
				if c.tty {
					fmt.Fprint(c.out, "\x1b[2m"+e.Text+"\x1b[0m")
				}
			case chat.Content:
				content.WriteString(e.Text)
				fmt.Fprint(c.out, e.Text)
			}
		}
	}
	for o := range ch {
		show(p.Push(o.Text))
		if o.Finished {
			show(p.Close())
			if o.Err != nil {
				return "", o.Err
			}
		}
	}
	fmt.Fprintln(c.out)
	return content.String(), nil
}
