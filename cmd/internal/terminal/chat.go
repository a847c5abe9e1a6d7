package terminal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/qwenc/qwenc/cmd/internal/report"
	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/qwen"
)

// prog is the program whose chat this is: it names the notes and the
// history.
const prog = "qwenrun"

// Chat is qwenrun's chat at the terminal: a qwen.Conversation, whose
// settings the slash commands change, and what it shows of its replies.
type Chat struct {
	m    *qwen.Model
	info qwen.Info
	c    *qwen.Conversation
	show *thinkFilter
	o    ChatOptions
	// notes takes the notes and what commands print, apart from the
	// replies on stdout; dim greys the statistics there when it is a
	// terminal.
	notes io.Writer
	dim   bool
	// unanswered counts messages refused for lack of context; a script
	// piping messages learns of them from the exit status.
	unanswered int
	// penaltiesOff: repeat-last-n 0 turned the penalties off, which a
	// Params cannot say (its window's 0 is the default, 64); /set of a
	// penalty is refused until repeat-last-n turns them on.
	penaltiesOff bool
}

// ChatOptions are what a Chat shows of its replies.
type ChatOptions struct {
	// JSON replaces the streamed answer by one JSON object per turn.
	JSON bool
	// Verbose prints the statistics after every reply, not only at the
	// end.
	Verbose bool
	// HideThinking leaves the reasoning out of the streamed answer;
	// NoAnswer shows no answer at all (-n 0: not even its newline).
	HideThinking, NoAnswer bool
	// Load is the time the model took to load, for the statistics.
	Load time.Duration
	// PenaltiesOff: the command line's repeat-last-n 0 turned the
	// penalties off, and /set of one should not turn them on again.
	PenaltiesOff bool
}

// NewChat shows c's replies on stdout, and the rest on stderr; m is the
// model c talks to.
func NewChat(m *qwen.Model, c *qwen.Conversation, o ChatOptions) *Chat {
	var out io.Writer = os.Stdout
	if o.JSON || o.NoAnswer {
		out = io.Discard
	}
	return &Chat{m: m, info: m.Info(), c: c, o: o, notes: os.Stderr, dim: IsTerminal(os.Stderr), penaltiesOff: o.PenaltiesOff,
		show: newThinkFilter(out, o.HideThinking, IsTerminal(os.Stdout))}
}

// note prints one line about the chat itself, not part of a reply.
func (ch *Chat) note(format string, args ...any) {
	fmt.Fprintf(ch.notes, prog+": "+format+"\n", args...)
}

// fullNote says why a message gets no answer and what to do about it.
func (ch *Chat) fullNote() {
	ch.note("the conversation is full (%d of %d tokens, --ctx); /clear starts a new one", ch.c.Used(), ch.info.Context)
}

// format is the model's chat format: the chat starts only with one.
func (ch *Chat) format() *chat.Format { return ch.m.ChatFormat() }

// clear starts a new conversation with the system message given. The
// kept KV cache goes: a full conversation grew it to the whole context.
func (ch *Chat) clear(system string) {
	ch.m.ClearCache()
	ch.c.SetSystem(system)
}

// Turn adds a user message and streams the answer. An answer that ctx
// interrupts is no error: its result says so.
func (ch *Chat) Turn(ctx context.Context, text string) (qwen.Result, error) {
	ch.show.start()
	res, err := ch.c.Send(ctx, text, func(d qwen.Delta) { ch.show.write(d.Reasoning, d.Content) })
	if err != nil {
		return res, err
	}
	if err := ch.show.end(); err != nil {
		return res, fmt.Errorf("writing the answer: %w", err)
	}
	return res, nil
}

// summary writes the JSON object of a turn.
func (ch *Chat) summary(r qwen.Result) error {
	return report.WriteSummary(os.Stdout, r, ch.m.Detokenize(r.Generated), ch.o.Load)
}

// stats prints the statistics line of one reply, dimmed on a terminal.
func (ch *Chat) stats(r qwen.Result) {
	if ch.dim {
		fmt.Fprint(ch.notes, "\x1b[2m")
		defer fmt.Fprint(ch.notes, "\x1b[0m")
	}
	report.WriteStats(ch.notes, r, ch.o.Load)
}

// finalStats prints the statistics of the whole chat; a stop at the
// context was reported when it happened.
func (ch *Chat) finalStats() { report.WriteStats(ch.notes, ch.c.Total(), ch.o.Load) }

// errBye is /bye.
var errBye = errors.New("bye")
