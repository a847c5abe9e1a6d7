package terminal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/qwenc/qwenc/cmd/internal/report"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/qwen"
)

// Interactive chats until the input ends or the user leaves: it reads
// what the user types, runs the slash commands and sends the messages.
// Ctrl-C during an answer stops that answer. A message that finds no
// room in the context is refused with a note and the chat goes on;
// leaving then gives an error, so scripts notice. A signal that ends the
// chat is a cliutil.Interrupted error, for the exit status.
func (ch *Chat) Interactive() error {
	in := newConsole(ch.notes)
	defer in.close()
	if in.interactive() {
		// A person at a terminal: a banner greets them, and Ctrl-C at the
		// prompt asks before leaving.
		fmt.Fprintf(ch.notes, "%s, context %d tokens. /? for help, /bye or Ctrl-D to leave.\n", ch.info.Name, ch.info.Context)
	}
	return ch.leave(in, ch.run(in))
}

func (ch *Chat) run(in *console) error {
	// aborted is set by Ctrl-C at the prompt and cleared by any line, so
	// that only a second Ctrl-C in a row leaves.
	aborted := false
	for {
		text, block, err := in.read()
		switch {
		case errors.Is(err, errAborted):
			if aborted {
				return cliutil.InterruptedBy(os.Interrupt)
			}
			aborted = true
			ch.note("use /bye or Ctrl-D to leave; Ctrl-C again to quit")
			continue
		case err == io.EOF:
			if in.interactive() {
				fmt.Println() // the shell's prompt goes on a line of its own
			}
			return nil
		case err != nil:
			return err
		}
		aborted = false
		msg := text
		if !block {
			var cmd *command
			if msg, cmd, err = parseLine(text); err != nil {
				ch.note("%v", err)
				continue
			}
			if cmd != nil {
				if err := ch.do(in, cmd); err != nil {
					return err
				}
				continue
			}
		}
		if strings.TrimSpace(msg) == "" {
			continue
		}
		if err := ch.send(in, msg); err != nil {
			return err
		}
	}
}

// leave ends the chat that run ended with err, with the statistics of the
// whole chat for scripts (and for a person who asked with --verbose).
func (ch *Chat) leave(in *console, err error) error {
	if errors.Is(err, errBye) {
		err = nil
	}
	_, signalled := errors.AsType[cliutil.Interrupted](err)
	if err == nil || signalled {
		if !in.interactive() || ch.o.Verbose {
			ch.finalStats()
		}
	}
	if err == nil && ch.unanswered > 0 {
		return fmt.Errorf("%d of the messages got no answer: the conversation was full (--ctx)", ch.unanswered)
	}
	return err
}

// send sends a message and shows the reply.
func (ch *Chat) send(in *console, text string) error {
	if ch.c.Full() {
		ch.unanswered++
		ch.fullNote()
		return nil
	}
	var res qwen.Result
	var err error
	end := in.run(func(ctx context.Context) bool {
		res, err = ch.Turn(ctx, text)
		return res.Stop == qwen.StopInterrupt
	})
	var tooLong *qwen.PromptTooLongError
	switch {
	case errors.As(err, &tooLong):
		ch.unanswered++
		ch.note("no answer: the conversation has %d tokens, more than the context of %d (--ctx); /clear starts a new conversation", tooLong.Tokens, tooLong.Context)
	case err != nil:
		return err
	case ch.o.JSON:
		// One line per turn (JSON Lines), so a script can read the
		// answers of piped messages as they come.
		if err := ch.summary(res); err != nil {
			return fmt.Errorf("writing the JSON of a turn: %w", err)
		}
	case in.interactive():
		fmt.Println() // a blank line between the reply and the next prompt
	}
	if end != nil {
		return end
	}
	if err == nil && ch.o.Verbose {
		ch.stats(res)
	}
	if res.Stop == qwen.StopContext {
		// The statistics come at the end of the chat (or above, with
		// --verbose), not a second time here.
		report.WriteContextStop(ch.notes, ch.info.Context)
		ch.fullNote()
	}
	return nil
}
