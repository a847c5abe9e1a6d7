package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/qwenc/qwenc/chat"
	"github.com/qwenc/qwenc/runtime"
	"github.com/qwenc/qwenc/runtime/sampling"
	"github.com/qwenc/qwenc/tokenizer"
	"github.com/urfave/cli/v2"
)

// conversation is a chat kept in one session: each turn re-renders the
// whole history and prefills only what differs from the cached tokens.
type conversation struct {
	s       *setup
	family  chat.Family
	think   bool
	msgs    []chat.Message
	sampler *sampling.Sampler
	show    *thinkFilter
	// jsonOut replaces the streamed answer by one JSON object per turn.
	jsonOut bool
	total   runtime.Result // accumulated over turns, for the final statistics
	// lastPrompt is the full token sequence of the last turn's prompt.
	lastPrompt []int32
}

func runChat(c *cli.Context, s *setup) error {
	if s.m.File.Header.ChatFamily == "" {
		return errors.New("this model has no chat template; use raw completion (-p without --chat)")
	}
	family, err := chat.ParseFamily(s.m.File.Header.ChatFamily)
	if err != nil {
		return err
	}
	conv := &conversation{s: s, family: family, think: !c.Bool("no-think"), sampler: sampling.New(s.m.Config.Vocab, s.params),
		jsonOut: c.Bool("json")}
	var out io.Writer = os.Stdout
	if conv.jsonOut {
		out = io.Discard
	}
	conv.show = newThinkFilter(s, out, c.Bool("hide-think"), s.stdoutTTY)
	if sys := c.String("system"); sys != "" {
		conv.msgs = append(conv.msgs, chat.Message{Role: "system", Content: sys})
	}
	maxTokens := c.Int("max-tokens")
	text, oneShot, err := promptText(c)
	if err != nil {
		return err
	}
	if oneShot {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		res, err := conv.turn(ctx, text, maxTokens)
		if err != nil {
			return err
		}
		if conv.jsonOut {
			if err := printJSON(os.Stdout, s, conv.lastPrompt, res); err != nil {
				return err
			}
		}
		printStats(os.Stderr, s, res)
		if res.Stop == runtime.StopInterrupt {
			return errInterrupted
		}
		return nil
	}
	return conv.interactive(os.Stdin, maxTokens)
}

// interactive reads one user message per line. Ctrl-C during an answer
// stops that answer; Ctrl-C or end of input at the prompt ends the chat.
func (conv *conversation) interactive(in io.Reader, maxTokens int) error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	tty := isTerminal(os.Stdin)
	for {
		if tty {
			fmt.Fprint(os.Stderr, "> ")
		}
		var line string
		var ok bool
		select {
		case line, ok = <-lines:
		case <-sig:
			fmt.Fprintln(os.Stderr)
			conv.finalStats()
			return errInterrupted
		}
		if !ok {
			conv.finalStats()
			return nil
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		interrupted := make(chan bool, 1)
		go func() {
			select {
			case <-sig:
				cancel()
				interrupted <- true
			case <-done:
				interrupted <- false
			}
		}()
		res, err := conv.turn(ctx, line, maxTokens)
		close(done)
		cancel()
		if err != nil {
			return err
		}
		// With --json each turn is one line on stdout (JSON Lines), so a
		// script can read the answers of piped messages as they come.
		if conv.jsonOut {
			if err := printJSON(os.Stdout, conv.s, conv.lastPrompt, res); err != nil {
				return fmt.Errorf("writing the JSON of a turn: %w", err)
			}
		}
		// A signal that arrived after the answer ended was taken by this
		// turn's watcher: it ends the chat, as at the prompt.
		if <-interrupted && res.Stop != runtime.StopInterrupt {
			conv.finalStats()
			return errInterrupted
		}
		if res.Stop == runtime.StopInterrupt || res.Stop == runtime.StopCtx {
			printStats(os.Stderr, conv.s, res)
		}
		if res.Stop == runtime.StopCtx {
			conv.finalStats()
			return nil
		}
	}
}

// turn adds a user message, prefills what changed and streams the answer.
func (conv *conversation) turn(ctx context.Context, text string, maxTokens int) (runtime.Result, error) {
	s := conv.s
	conv.msgs = append(conv.msgs, chat.Message{Role: "user", Content: text})
	ids, err := encodeSegments(s, chat.Render(conv.family, conv.msgs, true, conv.think))
	if err != nil {
		return runtime.Result{}, err
	}
	if len(ids) > s.sess.Ctx() {
		return runtime.Result{}, fmt.Errorf("the conversation has %d tokens, more than the context of %d (--ctx)", len(ids), s.sess.Ctx())
	}
	cached := make([]int, s.sess.Len())
	for i, id := range s.sess.Tokens() {
		cached[i] = int(id)
	}
	conv.lastPrompt = conv.lastPrompt[:0]
	for _, id := range ids {
		conv.lastPrompt = append(conv.lastPrompt, int32(id))
	}
	keep := chat.CommonPrefix(cached, ids)
	keep = min(keep, len(ids)-1) // at least one token must run to give logits
	s.sess.Rewind(keep)
	prompt := make([]int32, len(ids)-keep)
	for i, id := range ids[keep:] {
		prompt[i] = int32(id)
	}
	conv.show.start()
	res, err := s.sess.Generate(ctx, prompt, runtime.GenerateOptions{
		MaxTokens: maxTokens, Stop: s.stop, Sampler: conv.sampler, OnToken: conv.show.token,
	})
	conv.show.end()
	if err != nil {
		return res, err
	}
	gen := make([]int, len(res.Generated))
	for i, id := range res.Generated {
		gen[i] = int(id)
	}
	conv.msgs = append(conv.msgs, chat.Message{Role: "assistant", Content: s.m.Tokenizer.Decode(gen)})
	conv.total.PromptTokens += res.PromptTokens
	conv.total.PrefillTime += res.PrefillTime
	conv.total.Generated = append(conv.total.Generated, res.Generated...)
	conv.total.DecodeTime += res.DecodeTime
	conv.total.Stop = res.Stop
	return res, nil
}

func (conv *conversation) finalStats() { printStats(os.Stderr, conv.s, conv.total) }

// encodeSegments tokenizes a rendered conversation: markers become their
// added-token ids, and message text is encoded as plain text, so text that
// spells "<|im_end|>" cannot close a turn or open one.
func encodeSegments(s *setup, segs []chat.Segment) ([]int, error) {
	var ids []int
	for _, seg := range segs {
		if seg.Special {
			id, ok := s.m.Tokenizer.TokenID(seg.Text)
			if !ok {
				return nil, fmt.Errorf("the tokenizer has no token %q, which the chat template needs", seg.Text)
			}
			ids = append(ids, id)
			continue
		}
		ids = s.m.Tokenizer.AppendEncode(ids, seg.Text, false)
	}
	return ids, nil
}

// thinkFilter streams an answer, showing the text between <think> and
// </think> dimmed on a terminal, or not at all with --hide-think.
type thinkFilter struct {
	w           *bufio.Writer
	s           *setup
	hide, dim   bool
	open, close int
	inThink     bool
	dec         *tokenizer.StreamDecoder
	// skipNewlines drops the blank lines that follow a hidden thinking block.
	skipNewlines bool
}

func newThinkFilter(s *setup, w io.Writer, hide, tty bool) *thinkFilter {
	f := &thinkFilter{w: bufio.NewWriter(w), s: s, hide: hide, dim: tty, open: -1, close: -1}
	if id, ok := s.m.Tokenizer.TokenID(chat.ThinkOpen); ok {
		f.open = id
	}
	if id, ok := s.m.Tokenizer.TokenID(chat.ThinkClose); ok {
		f.close = id
	}
	return f
}

// start begins an answer.
func (f *thinkFilter) start() {
	f.dec = f.s.m.Tokenizer.NewStreamDecoder()
	f.inThink, f.skipNewlines = false, false
}

func (f *thinkFilter) token(id int32) {
	text := f.dec.Add(int(id))
	switch {
	case int(id) == f.open:
		f.inThink = true
		if !f.hide && f.dim {
			f.w.WriteString("\x1b[2m")
		}
	case int(id) == f.close:
		if !f.hide {
			f.w.WriteString(text)
			if f.dim {
				f.w.WriteString("\x1b[0m")
			}
		}
		f.inThink = false
		f.skipNewlines = f.hide
		f.w.Flush()
		return
	}
	if f.skipNewlines {
		text = strings.TrimLeft(text, "\n")
		f.skipNewlines = text == ""
	}
	if !(f.inThink && f.hide) {
		f.w.WriteString(text)
	}
	f.w.Flush()
}

func (f *thinkFilter) end() {
	rest := f.dec.Flush()
	if !(f.inThink && f.hide) {
		f.w.WriteString(rest)
	}
	if f.inThink && f.dim && !f.hide {
		f.w.WriteString("\x1b[0m")
	}
	f.w.WriteString("\n")
	f.w.Flush()
}
