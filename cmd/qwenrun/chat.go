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
	// full is set when an answer reached the context limit: the reply is
	// cut, so nothing more can be said until /clear.
	full bool
	// unanswered counts messages refused for lack of context; a script
	// piping messages learns of them from the exit status.
	unanswered int
}

// tooLongError is a message that would take the conversation past the
// context.
type tooLongError struct{ tokens, ctx int }

func (e *tooLongError) Error() string {
	return fmt.Sprintf("the conversation has %d tokens, more than the context of %d (--ctx)", e.tokens, e.ctx)
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
// "/clear" starts a new conversation. A message that finds no room in the
// context is refused with a note and the chat goes on; the end of input then
// gives an error, so scripts notice.
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
			if n := conv.unanswered; n > 0 {
				return fmt.Errorf("%d of the messages got no answer: the conversation was full (--ctx)", n)
			}
			return nil
		}
		switch strings.TrimSpace(line) {
		case "":
			continue
		case "/clear":
			if err := conv.clear(); err != nil {
				return err
			}
			fmt.Fprintln(os.Stderr, "qwenrun: a new conversation")
			continue
		}
		if conv.full {
			conv.unanswered++
			conv.fullNote()
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
		var tooLong *tooLongError
		switch {
		case errors.As(err, &tooLong):
			conv.unanswered++
			fmt.Fprintf(os.Stderr, "qwenrun: no answer: %v; /clear starts a new conversation\n", err)
		case err != nil:
			return err
		case conv.jsonOut:
			// One line per turn (JSON Lines), so a script can read the
			// answers of piped messages as they come.
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
		switch res.Stop {
		case runtime.StopInterrupt:
			printStats(os.Stderr, conv.s, res)
		case runtime.StopCtx:
			// The statistics come once, at the end of the chat.
			printCtxStop(os.Stderr, conv.s)
			conv.full = true
			conv.fullNote()
		}
	}
}

// fullNote says why a message gets no answer and what to do about it.
func (conv *conversation) fullNote() {
	fmt.Fprintf(os.Stderr, "qwenrun: the conversation is full (%d of %d tokens, --ctx); /clear starts a new one\n",
		conv.s.sess.Len(), conv.s.sess.Ctx())
}

// clear starts a new conversation. A fresh session rather than a rewind
// frees the KV cache, which a full conversation grew to the whole context.
func (conv *conversation) clear() error {
	sess, err := conv.s.m.NewSession(conv.s.sess.Ctx())
	if err != nil {
		return fmt.Errorf("/clear: %w", err)
	}
	conv.s.sess = sess
	keep := 0
	if len(conv.msgs) > 0 && conv.msgs[0].Role == "system" {
		keep = 1
	}
	conv.msgs = conv.msgs[:keep]
	conv.lastPrompt = conv.lastPrompt[:0]
	conv.full = false
	return nil
}

// turn adds a user message, prefills what changed and streams the answer.
func (conv *conversation) turn(ctx context.Context, text string, maxTokens int) (runtime.Result, error) {
	s := conv.s
	// The message joins the conversation only if it fits: a refused one
	// must not come back in the next turn's prompt.
	msgs := append(conv.msgs, chat.Message{Role: "user", Content: text})
	ids, err := encodeSegments(s, chat.Render(conv.family, msgs, true, conv.think))
	if err != nil {
		return runtime.Result{}, err
	}
	if len(ids) > s.sess.Ctx() {
		return runtime.Result{}, &tooLongError{tokens: len(ids), ctx: s.sess.Ctx()}
	}
	conv.msgs = msgs
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

// finalStats prints the statistics of the whole chat; a stop at the
// context was reported when it happened.
func (conv *conversation) finalStats() { printStatsLine(os.Stderr, conv.s, conv.total) }

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
