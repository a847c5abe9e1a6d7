package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"

	"github.com/qwenc/qwenc/chat"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/sampling"
	"github.com/urfave/cli/v2"
)

// conversation is a chat: each turn sends the whole history, of which the
// model prefills only what its cache does not hold (package qwen keeps
// the conversation's KV cache between turns).
type conversation struct {
	s     *setup
	think bool
	// params are the sampling settings as given by the flags and /set;
	// seeds gives each turn its own seed from params.Seed, so that a chat
	// with --seed is reproducible whatever it sets.
	params    sampling.Params
	seeds     *rand.Rand
	msgs      []qwen.Message
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
	total reply // accumulated over turns, for the final statistics
	// used is the tokens of the conversation in its KV cache.
	used int
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
	if s.info.ChatTemplate == "" {
		return errors.New("this model has no chat template; use raw completion (-p without --chat)")
	}
	conv := &conversation{s: s, think: !c.Bool("no-think"), maxTokens: c.Int("max-tokens"), jsonOut: c.Bool("json"),
		verbose: c.Bool("verbose"), info: os.Stderr, dim: isTerminal(os.Stderr)}
	conv.setSampling(s.params)
	var out io.Writer = os.Stdout
	if conv.jsonOut || c.Int("max-tokens") == 0 {
		out = io.Discard // -n 0 has no answer, not even its newline
	}
	conv.show = newThinkFilter(out, c.Bool("hide-think"), s.stdoutTTY)
	if sys := c.String("system"); sys != "" {
		conv.msgs = append(conv.msgs, qwen.Message{Role: "system", Content: sys})
	}
	text, oneShot, err := promptText(c)
	if err != nil {
		return err
	}
	if !oneShot {
		return conv.interactive()
	}
	ctx, stop := cliutil.SignalContext(context.Background())
	defer stop()
	res, err := conv.turn(ctx, text)
	if err != nil {
		return err
	}
	if conv.jsonOut {
		if err := printJSON(os.Stdout, s, res); err != nil {
			return err
		}
	}
	printStats(os.Stderr, s, res)
	if res.stop == qwen.StopInterrupt {
		return context.Cause(ctx) // the signal, for the exit status
	}
	return nil
}

// note prints one line about the chat itself, not part of a reply.
func (conv *conversation) note(format string, args ...any) {
	fmt.Fprintf(conv.info, "qwenrun: "+format+"\n", args...)
}

// fullNote says why a message gets no answer and what to do about it.
func (conv *conversation) fullNote() {
	conv.note("the conversation is full (%d of %d tokens, --ctx); /clear starts a new one", conv.used, conv.s.info.Context)
}

// family is the model's chat template, which runChat checked.
func (conv *conversation) family() chat.Family {
	f, _ := chat.ParseFamily(conv.s.info.ChatTemplate)
	return f
}

// system returns the system message, or "".
func (conv *conversation) system() string {
	if len(conv.msgs) > 0 && conv.msgs[0].Role == "system" {
		return conv.msgs[0].Content
	}
	return ""
}

// clear starts a new conversation with the same system message. The
// kept KV cache goes: a full conversation grew it to the whole context.
func (conv *conversation) clear() {
	conv.s.m.ClearCache()
	keep := 0
	if conv.system() != "" {
		keep = 1
	}
	conv.msgs = conv.msgs[:keep]
	conv.used, conv.full = 0, false
}

// setSampling replaces the sampling settings, and starts the turns'
// seeds again from the seed.
func (conv *conversation) setSampling(p sampling.Params) {
	conv.params = p
	conv.seeds = rand.New(rand.NewPCG(p.Seed, 0))
}

// request is a turn's request for msgs.
func (conv *conversation) request(msgs []qwen.Message) qwen.Request {
	p := conv.params
	p.Seed = conv.seeds.Uint64()
	req := qwen.Request{Messages: msgs, NoThinking: !conv.think, Sampling: &p, JSONSchema: conv.s.schema, JSONObject: conv.s.object}
	conv.s.drafts.apply(&req)
	maxTokens(&req, conv.maxTokens)
	return req
}

// turn adds a user message and streams the answer. An answer that ctx
// interrupts is no error: its result says so.
func (conv *conversation) turn(ctx context.Context, text string) (reply, error) {
	// The message joins the conversation only if it fits: a refused one
	// must not come back in the next turn's prompt.
	msgs := append(slices.Clip(conv.msgs), qwen.Message{Role: "user", Content: text})
	st, err := conv.s.m.Start(ctx, conv.request(msgs))
	if tooLong, ok := errors.AsType[*qwen.PromptTooLongError](err); ok {
		return reply{}, &tooLongError{tokens: tooLong.Tokens, ctx: tooLong.Context}
	}
	if err != nil {
		return reply{}, schemaError(err)
	}
	conv.msgs = msgs
	res := reply{prompt: st.Prompt()}
	conv.show.start()
	for d := range st.Deltas() { // the only error is ctx's, which res.stop says
		res.add(d)
		conv.show.write(d.Reasoning, d.Content)
	}
	conv.show.end()
	conv.count(res)
	conv.msgs = append(conv.msgs, qwen.Message{Role: "assistant", Content: conv.s.m.Detokenize(res.generated)})
	return res, nil
}

// load replaces the conversation by msgs and prefills them, so that the
// next message continues it. A conversation that leaves no room for a reply
// is refused and the current one stays.
func (conv *conversation) load(ctx context.Context, msgs []qwen.Message) (reply, error) {
	m := conv.s.m
	next, err := m.Count(conv.request(append(slices.Clip(msgs), qwen.Message{Role: "user"})))
	if err != nil {
		return reply{}, err
	}
	if next >= conv.s.info.Context {
		n, _ := m.Count(conv.request(msgs))
		return reply{}, &noRoomError{tokens: n, ctx: conv.s.info.Context}
	}
	conv.msgs = msgs
	conv.full = false
	u, err := m.Prefill(ctx, conv.request(msgs))
	res := reply{stop: qwen.StopLength, usage: u}
	if ctx.Err() != nil {
		res.stop, err = qwen.StopInterrupt, nil
	}
	conv.count(res)
	return res, err
}

// count adds a reply's figures to the chat's.
func (conv *conversation) count(r reply) {
	t := &conv.total
	t.generated = append(t.generated, r.generated...)
	t.usage.PromptTokens += r.usage.PromptTokens
	t.usage.CachedTokens += r.usage.CachedTokens
	t.usage.Prefill += r.usage.Prefill
	t.usage.Total += r.usage.Total
	t.usage.Queued += r.usage.Queued
	t.usage.KVBytes = r.usage.KVBytes
	t.stop = r.stop
	conv.used = r.usage.KVTokens
}

// stats prints the statistics line of one reply, dimmed on a terminal.
func (conv *conversation) stats(r reply) {
	if conv.dim {
		fmt.Fprint(conv.info, "\x1b[2m")
		defer fmt.Fprint(conv.info, "\x1b[0m")
	}
	printStatsLine(conv.info, conv.s, r)
}

// finalStats prints the statistics of the whole chat; a stop at the
// context was reported when it happened.
func (conv *conversation) finalStats() { printStatsLine(conv.info, conv.s, conv.total) }
