package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/qwenc/qwenc/chat"
	"github.com/qwenc/qwenc/infer"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/sampling"
	"github.com/urfave/cli/v2"
)

// conversation is a chat kept in one session: each turn re-renders the
// whole history and prefills only what differs from the cached tokens.
type conversation struct {
	s      *setup
	family chat.Family
	// model names the model in the banner and /show: the file's base name.
	model string
	think bool
	// params are the sampling settings as given by the flags and /set; the
	// sampler is rebuilt from them when they change.
	params    sampling.Params
	sampler   *sampling.Sampler
	msgs      []chat.Message
	show      *thinkFilter
	maxTokens int
	// jsonOut replaces the streamed answer by one JSON object per turn.
	jsonOut bool
	// verbose prints the statistics after every reply, not only at the end.
	verbose bool
	// info takes the notes and what commands print, apart from the replies
	// on stdout; dim greys the statistics there when it is a terminal.
	info  io.Writer
	dim   bool
	total infer.Result // accumulated over turns, for the final statistics
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

// noRoomError is a conversation to load that leaves no room for another
// message and its reply.
type noRoomError struct{ tokens, ctx int }

func (e *noRoomError) Error() string {
	return fmt.Sprintf("the conversation has %d tokens, which leave no room for another message in the context of %d (--ctx)", e.tokens, e.ctx)
}

func runChat(c *cli.Context, s *setup) error {
	if s.m.File.Header.ChatFamily == "" {
		return errors.New("this model has no chat template; use raw completion (-p without --chat)")
	}
	family, err := chat.ParseFamily(s.m.File.Header.ChatFamily)
	if err != nil {
		return err
	}
	conv := &conversation{s: s, family: family, model: strings.TrimSuffix(filepath.Base(c.Args().First()), ".qbin"),
		think: !c.Bool("no-think"), params: s.params, sampler: sampling.New(s.m.Config.Vocab, s.params),
		maxTokens: c.Int("max-tokens"), jsonOut: c.Bool("json"), verbose: c.Bool("verbose"),
		info: os.Stderr, dim: isTerminal(os.Stderr)}
	var out io.Writer = os.Stdout
	if conv.jsonOut || c.Int("max-tokens") == 0 {
		out = io.Discard // -n 0 has no answer, not even its newline
	}
	conv.show = newThinkFilter(s, out, c.Bool("hide-think"), s.stdoutTTY)
	if sys := c.String("system"); sys != "" {
		conv.msgs = append(conv.msgs, chat.Message{Role: "system", Content: sys})
	}
	text, oneShot, err := promptText(c)
	if err != nil {
		return err
	}
	if oneShot {
		ctx, stop := cliutil.SignalContext(context.Background())
		defer stop()
		res, err := conv.turn(ctx, text)
		if err != nil {
			return err
		}
		if conv.jsonOut {
			if err := printJSON(os.Stdout, s, conv.lastPrompt, res); err != nil {
				return err
			}
		}
		printStats(os.Stderr, s, res)
		if res.Stop == infer.StopInterrupt {
			return context.Cause(ctx) // the signal, for the exit status
		}
		return nil
	}
	return conv.interactive()
}

// note prints one line about the chat itself, not part of a reply.
func (conv *conversation) note(format string, args ...any) {
	fmt.Fprintf(conv.info, "qwenrun: "+format+"\n", args...)
}

// fullNote says why a message gets no answer and what to do about it.
func (conv *conversation) fullNote() {
	conv.note("the conversation is full (%d of %d tokens, --ctx); /clear starts a new one", conv.s.sess.Len(), conv.s.sess.Ctx())
}

// system returns the system message, or "".
func (conv *conversation) system() string {
	if len(conv.msgs) > 0 && conv.msgs[0].Role == "system" {
		return conv.msgs[0].Content
	}
	return ""
}

// clear starts a new conversation with the same system message. A fresh
// session rather than a rewind frees the KV cache, which a full
// conversation grew to the whole context.
func (conv *conversation) clear() error {
	sess, err := conv.s.m.NewSessionKV(conv.s.sess.Ctx(), conv.s.sess.KV.Type())
	if err != nil {
		return fmt.Errorf("/clear: %w", err)
	}
	conv.s.sess = sess
	keep := 0
	if conv.system() != "" {
		keep = 1
	}
	conv.msgs = conv.msgs[:keep]
	conv.lastPrompt = conv.lastPrompt[:0]
	conv.full = false
	return nil
}

// setSampling replaces the sampling settings. The new sampler starts its
// random stream again from the seed, so a chat with --seed stays
// reproducible whatever it sets.
func (conv *conversation) setSampling(p sampling.Params) {
	conv.params = p
	conv.sampler = sampling.New(conv.s.m.Config.Vocab, p)
}

// encode renders and tokenizes msgs.
func (conv *conversation) encode(msgs []chat.Message, addGenerationPrompt bool) ([]int32, error) {
	return chat.Encode(conv.s.m.Tokenizer, chat.Render(conv.family, msgs, addGenerationPrompt, conv.think))
}

// turn adds a user message, prefills what changed and streams the answer.
func (conv *conversation) turn(ctx context.Context, text string) (infer.Result, error) {
	s := conv.s
	// The message joins the conversation only if it fits: a refused one
	// must not come back in the next turn's prompt.
	msgs := append(slices.Clip(conv.msgs), chat.Message{Role: "user", Content: text})
	ids, err := conv.encode(msgs, true)
	if err != nil {
		return infer.Result{}, err
	}
	if len(ids) > s.sess.Ctx() {
		return infer.Result{}, &tooLongError{tokens: len(ids), ctx: s.sess.Ctx()}
	}
	conv.msgs = msgs
	conv.lastPrompt = append(conv.lastPrompt[:0], ids...)
	conv.show.start()
	res, err := conv.generate(ctx, ids, conv.maxTokens, conv.show.token)
	conv.show.end()
	if err != nil {
		return res, err
	}
	conv.msgs = append(conv.msgs, chat.Message{Role: "assistant", Content: s.m.Tokenizer.Decode(res.Generated)})
	return res, nil
}

// load replaces the conversation by msgs and prefills them, so that the
// next message continues it. A conversation that leaves no room for a reply
// is refused and the current one stays.
func (conv *conversation) load(ctx context.Context, msgs []chat.Message) (infer.Result, error) {
	ids, err := conv.encode(msgs, false)
	if err != nil {
		return infer.Result{}, err
	}
	// Only what the next turn's prompt will share is prefilled: Qwen3 drops
	// the last answer's thinking once a new message follows it.
	next, err := conv.encode(append(slices.Clip(msgs), chat.Message{Role: "user"}), true)
	if err != nil {
		return infer.Result{}, err
	}
	if len(next) >= conv.s.sess.Ctx() {
		return infer.Result{}, &noRoomError{tokens: len(ids), ctx: conv.s.sess.Ctx()}
	}
	conv.msgs = msgs
	conv.lastPrompt = conv.lastPrompt[:0]
	conv.full = false
	return conv.generate(ctx, ids[:chat.CommonPrefix(ids, next)], 0, nil)
}

// generate makes the KV cache hold ids, running only what differs from
// the cached tokens, and then generates up to maxTokens tokens.
func (conv *conversation) generate(ctx context.Context, ids []int32, maxTokens int, onToken func(int32)) (infer.Result, error) {
	s := conv.s
	keep := chat.CommonPrefix(s.sess.Tokens(), ids)
	if maxTokens != 0 {
		keep = min(keep, len(ids)-1) // at least one token must run to give logits
	}
	s.sess.Rewind(keep)
	if keep == len(ids) {
		return infer.Result{Stop: infer.StopLength}, nil
	}
	res, err := s.sess.Generate(ctx, ids[keep:], infer.GenerateOptions{
		MaxTokens: maxTokens, Stop: s.stop, Sampler: conv.sampler, OnToken: onToken,
	})
	conv.total.PromptTokens += res.PromptTokens
	conv.total.PrefillTime += res.PrefillTime
	conv.total.Generated = append(conv.total.Generated, res.Generated...)
	conv.total.DecodeTime += res.DecodeTime
	conv.total.Stop = res.Stop
	return res, err
}

// stats prints the statistics line of one reply, dimmed on a terminal.
func (conv *conversation) stats(r infer.Result) {
	if conv.dim {
		fmt.Fprint(conv.info, "\x1b[2m")
		defer fmt.Fprint(conv.info, "\x1b[0m")
	}
	printStatsLine(conv.info, conv.s, r)
}

// finalStats prints the statistics of the whole chat; a stop at the
// context was reported when it happened.
func (conv *conversation) finalStats() { printStatsLine(conv.info, conv.s, conv.total) }
