package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"

	"github.com/qwenc/qwenc/cmd/internal/report"
	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
	"github.com/urfave/cli/v2"
)

// conversation is the terminal's chat: a qwen.Conversation, with the
// settings the flags and the commands change and what it shows of its
// replies.
type conversation struct {
	s     *setup
	c     *qwen.Conversation
	think bool
	// params are the sampling settings as given by the flags and /set;
	// seeds gives each turn its own seed from params.Seed, so that a chat
	// with --seed is reproducible whatever it sets.
	params    sampling.Params
	seeds     *rand.Rand
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
	total qwen.Result // accumulated over turns, for the final statistics
	// unanswered counts messages refused for lack of context; a script
	// piping messages learns of them from the exit status.
	unanswered int
}

func runChat(c *cli.Context, s *setup) error {
	if s.info.ChatTemplate == "" {
		return errors.New("this model has no chat template; use raw completion (-p without --chat)")
	}
	qc, err := s.m.NewConversation(c.String("system"))
	if err != nil {
		return err
	}
	conv := &conversation{s: s, c: qc, think: !c.Bool("no-think"), maxTokens: c.Int("max-tokens"), jsonOut: c.Bool("json"),
		verbose: c.Bool("verbose"), info: os.Stderr, dim: isTerminal(os.Stderr)}
	conv.setSampling(s.params)
	var out io.Writer = os.Stdout
	if conv.jsonOut || c.Int("max-tokens") == 0 {
		out = io.Discard // -n 0 has no answer, not even its newline
	}
	conv.show = newThinkFilter(out, c.Bool("hide-think"), s.stdoutTTY)
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
	if res.Stop == qwen.StopInterrupt {
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
	conv.note("the conversation is full (%d of %d tokens, --ctx); /clear starts a new one", conv.c.Used(), conv.s.info.Context)
}

// format is the model's chat format: runChat checked it has one.
func (conv *conversation) format() *chat.Format { return conv.s.m.ChatFormat() }

// clear starts a new conversation with the system message given. The
// kept KV cache goes: a full conversation grew it to the whole context.
func (conv *conversation) clear(system string) {
	conv.s.m.ClearCache()
	conv.c.SetSystem(system)
}

// setSampling replaces the sampling settings, and starts the turns'
// seeds again from the seed.
func (conv *conversation) setSampling(p sampling.Params) {
	conv.params = p
	conv.seeds = rand.New(rand.NewPCG(p.Seed, 0))
}

// turn adds a user message and streams the answer. An answer that ctx
// interrupts is no error: its result says so.
func (conv *conversation) turn(ctx context.Context, text string) (qwen.Result, error) {
	p := conv.params
	p.Seed = conv.seeds.Uint64()
	req := qwen.Request{NoThinking: !conv.think, Sampling: &p, JSONSchema: conv.s.schema, JSONObject: conv.s.object}
	conv.s.drafts.apply(&req)
	maxTokens(&req, conv.maxTokens)
	conv.show.start()
	res, err := conv.c.Send(ctx, text, req, func(d qwen.Delta) { conv.show.write(d.Reasoning, d.Content) })
	if errors.As(err, new(*qwen.PromptTooLongError)) {
		return res, err
	}
	if err != nil {
		return res, schemaError(err)
	}
	conv.show.end()
	conv.total.Merge(res)
	return res, nil
}

// load replaces the conversation by msgs and prefills them, so that the
// next message continues it. A conversation that leaves no room for a reply
// is refused and the current one stays.
func (conv *conversation) load(ctx context.Context, msgs []qwen.Message) (qwen.Result, error) {
	res, err := conv.c.Load(ctx, msgs, qwen.Request{NoThinking: !conv.think})
	if err == nil {
		conv.total.Merge(res)
	}
	return res, err
}

// stats prints the statistics line of one reply, dimmed on a terminal.
func (conv *conversation) stats(r qwen.Result) {
	if conv.dim {
		fmt.Fprint(conv.info, "\x1b[2m")
		defer fmt.Fprint(conv.info, "\x1b[0m")
	}
	report.WriteStats(conv.info, r, conv.s.loadTime)
}

// finalStats prints the statistics of the whole chat; a stop at the
// context was reported when it happened.
func (conv *conversation) finalStats() { report.WriteStats(conv.info, conv.total, conv.s.loadTime) }
